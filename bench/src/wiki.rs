//! The wiki through the edge (issue 32, "Scale"): a stack of its own — control plane, the
//! wiki service, one edge — and two tenants. One tenant is bulk-loaded with memos until it
//! holds 5,000 pages (300 with `--quick`) while the other, small and quiet, is asked one
//! question at a time, 100 a second at most; then the big tenant is asked. Printed: the quiet tenant's query p50
//! and p99 alone and during the bulk load (the goal: p99 within 1.5× of quiet), the big
//! tenant's query p50 and p99 (goal: p50 ≤ 20 ms), and the ingest rate at the start and at
//! the end of the bulk load (goal: flat in the tenant's size).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::admin::NewExecutor;
use tp_test_support::{ControlPlaneProcess, EdgeProcess, McpHttp, WikiProcess};

use crate::load::{LEGACY, Load, Run, Table, percentile, pin, rss_mib};

/// The memos, shared with the wiki's in-process scale benchmark.
#[path = "../../services/wiki/benches/support/memos.rs"]
mod memos;

use memos::{Memo, People};

fn memo(n: usize) -> Memo {
    memos::memo(n, People::Unique)
}

/// The quiet tenant's pace: a question every 10 ms at most (100 a second), a busy tenant's
/// traffic, not a loop that takes the whole core from the bulk load it is measured beside.
const PACE: Duration = Duration::from_millis(10);

/// The structured result of a `client_wiki` call, or why it failed.
async fn wiki_call(client: &McpHttp, arguments: Value) -> anyhow::Result<Value> {
    let reply = client.call("client_wiki", arguments).await;
    let result = reply.result();
    if reply.status != 200 || !reply.error().is_null() || result["isError"] != false {
        bail!("client_wiki failed ({}): {}", reply.status, reply.body);
    }
    Ok(result["structuredContent"].clone())
}

/// Pages an ingest created.
fn created(result: &Value) -> usize {
    result["pages"].as_array().map_or(0, |pages| {
        pages.iter().filter(|p| p["change"] == "created").count()
    })
}

/// Questions about what memos `range` say.
fn questions(range: std::ops::Range<usize>) -> Vec<String> {
    range
        .flat_map(|n| {
            let Memo {
                person, company, ..
            } = memo(n);
            [
                format!("Where did {person} review the quarter?"),
                format!("What revenue did {company} report?"),
            ]
        })
        .collect()
}

/// What [`ask`] saw: latencies in µs (sorted), failed calls, questions refused.
struct Asked {
    latencies: Vec<f64>,
    errors: u64,
    refused: u64,
    /// The first question refused, with the refusal.
    example: Option<String>,
}

/// Asks `questions` one at a time (round robin), one every [`PACE`] at most, until `count`
/// were asked or `until` says stop.
async fn ask(
    client: &McpHttp,
    questions: &[String],
    count: Option<usize>,
    until: Option<&AtomicBool>,
) -> Asked {
    let mut latencies = Vec::new();
    let (mut errors, mut refused) = (0, 0);
    let mut example = None;
    for question in questions.iter().cycle() {
        if count.is_some_and(|c| latencies.len() >= c)
            || until.is_some_and(|u| u.load(Ordering::Relaxed))
        {
            break;
        }
        let started = Instant::now();
        let outcome = wiki_call(
            client,
            json!({"action": "query", "question": question, "persist_output": false}),
        )
        .await;
        let took = started.elapsed();
        latencies.push(took.as_secs_f64() * 1e6);
        tokio::time::sleep(PACE.saturating_sub(took)).await;
        match outcome {
            Ok(answer) if answer["answered"] == true => {}
            Ok(answer) => {
                refused += 1;
                example.get_or_insert_with(|| format!("{question:?}: {}", answer["refusal"]));
            }
            Err(_) => errors += 1,
        }
    }
    latencies.sort_by(f64::total_cmp);
    Asked {
        latencies,
        errors,
        refused,
        example,
    }
}

fn load_of(asked: &Asked) -> Load {
    let (latencies, errors) = (&asked.latencies, asked.errors);
    let total: f64 = latencies.iter().sum();
    Load {
        rps: if total > 0.0 {
            latencies.len() as f64 / (total / 1e6)
        } else {
            0.0
        },
        p50_us: percentile(latencies, 50.0),
        p99_us: percentile(latencies, 99.0),
        errors,
        requests: latencies.len() as u64,
    }
}

/// Runs the scenario.
pub(crate) async fn run(run: Run, table: &mut Table) -> anyhow::Result<()> {
    let target_pages = if run.quick { 300 } else { 5_000 };
    eprintln!("wiki through the edge: bulk load to {target_pages} pages beside a quiet tenant");
    let cp = ControlPlaneProcess::start(true).await;
    let wiki = WikiProcess::start().await;
    let mut admin = cp.admin().await;
    tp_test_support::admin::upsert_executor(
        &mut admin,
        NewExecutor {
            timeout_ms: 60_000,
            max_concurrency: 64,
            ..NewExecutor::grpc("wiki", wiki.url())
        },
    )
    .await;
    let mut keys = Vec::new();
    for tenant in ["wiki-bulk", "wiki-quiet"] {
        admin
            .tenants
            .create_tenant(pb::CreateTenantRequest {
                tenant: Some(pb::Tenant {
                    id: tenant.into(),
                    connected_apis: Some(pb::ConnectedApis::default()),
                    ..Default::default()
                }),
            })
            .await
            .with_context(|| format!("creating {tenant}"))?;
        keys.push(tp_test_support::admin::issue_key(&mut admin, tenant, "collector").await);
    }
    let edge = EdgeProcess::start(&cp, &[cp.url()], None, "").await;
    for pid in [cp.process.pid(), wiki.process.pid(), edge.process.pid()] {
        pin(pid.unwrap_or(0), 0);
    }
    let bulk = McpHttp::new(&edge.addr, Some(&keys[0]), LEGACY);
    let quiet = McpHttp::new(&edge.addr, Some(&keys[1]), LEGACY);

    // The quiet tenant: 40 memos of its own, then asked alone.
    const QUIET_BASE: usize = 100_000;
    for n in QUIET_BASE..QUIET_BASE + 40 {
        let Memo { label, text, .. } = memo(n);
        wiki_call(
            &quiet,
            json!({"action": "ingest", "source": {"type": "text", "text": text, "source_label": label}}),
        )
        .await?;
    }
    let quiet_questions = questions(QUIET_BASE..QUIET_BASE + 40);
    let samples = if run.quick { 40 } else { 1_000 };
    let alone = ask(&quiet, &quiet_questions, Some(samples), None).await;

    // The bulk load, with the quiet tenant asked meanwhile.
    let done = Arc::new(AtomicBool::new(false));
    let loader = {
        let done = Arc::clone(&done);
        let bulk = McpHttp::new(&edge.addr, Some(&keys[0]), LEGACY);
        tokio::spawn(async move {
            let mut pages = 0;
            let mut timings: Vec<(usize, Duration)> = Vec::new();
            let mut n = 0;
            let outcome = async {
                while pages < target_pages {
                    let Memo { label, text, .. } = memo(n);
                    let started = Instant::now();
                    let result = wiki_call(
                        &bulk,
                        json!({"action": "ingest", "source": {"type": "text", "text": text, "source_label": label}}),
                    )
                    .await?;
                    timings.push((pages, started.elapsed()));
                    pages += created(&result);
                    n += 1;
                }
                anyhow::Ok(())
            }
            .await;
            done.store(true, Ordering::Relaxed);
            outcome.map(|()| (n, pages, timings))
        })
    };
    let during = ask(&quiet, &quiet_questions, None, Some(&done)).await;
    let (documents, pages, timings) = loader.await??;

    // The big tenant, asked.
    let big_questions = questions(0..documents.min(500));
    let big = ask(&bulk, &big_questions, Some(samples), None).await;

    let tenth = (timings.len() / 10).max(1);
    let rate = |part: &[(usize, Duration)]| {
        let spent: f64 = part.iter().map(|(_, d)| d.as_secs_f64()).sum();
        part.len() as f64 / spent.max(1e-9)
    };
    let first = rate(&timings[..tenth]);
    let last = rate(&timings[timings.len() - tenth..]);
    let alone_load = load_of(&alone);
    let during_load = load_of(&during);
    let big_load = load_of(&big);
    let rss = Some(rss_mib(edge.process.pid().unwrap_or(0)));
    table.load(
        "wiki query, quiet tenant (40 memos)",
        &alone_load,
        None,
        rss,
    );
    table.load(
        "wiki query, quiet tenant, during the bulk load",
        &during_load,
        Some(&alone_load),
        rss,
    );
    table.load(
        &format!("wiki query, {pages}-page tenant"),
        &big_load,
        Some(&alone_load),
        rss,
    );
    table.notes.push(format!(
        "wiki: bulk load of {documents} memos to {pages} pages through the edge, {:.1} documents/s over the first tenth and {:.1} over the last ({:.2}x); the quiet tenant's query p99 {:.1} ms during it against {:.1} ms alone ({:.2}x, goal ≤ 1.5x; {} queries during the load); the {pages}-page tenant's query p50 {:.1} ms, p99 {:.1} ms (goal p50 ≤ 20 ms)",
        first,
        last,
        last / first.max(1e-9),
        during_load.p99_us / 1e3,
        alone_load.p99_us / 1e3,
        during_load.p99_us / alone_load.p99_us.max(1e-9),
        during.latencies.len(),
        big_load.p50_us / 1e3,
        big_load.p99_us / 1e3,
    ));
    let refused = alone.refused + during.refused + big.refused;
    if refused > 0 {
        table.notes.push(format!(
            "wiki: {refused} of {} questions refused (each asks what one memo says), e.g. {}",
            alone.latencies.len() + during.latencies.len() + big.latencies.len(),
            [&alone, &during, &big]
                .iter()
                .find_map(|a| a.example.clone())
                .unwrap_or_default()
        ));
    }
    Ok(())
}
