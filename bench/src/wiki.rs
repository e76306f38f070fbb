//! The wiki through the edge (issue 32, "Scale"): a stack of its own — control plane, the
//! wiki service, one edge — and two tenants. One tenant is bulk-loaded with memos until it
//! holds 5,000 pages (300 with `--quick`) while the other, small and quiet, is asked one
//! question at a time, 100 a second at most, in windows that alternate with the load: one
//! window with the loader held and the wiki idle, one with it running, until the load ends
//! (so that the host's own noise weighs on both sides alike); then the big tenant is asked.
//! Printed: the quiet tenant's query p50 and p99 with the load held and during it (the goal:
//! p99 within 1.5×), the big tenant's query p50 and p99 (goal: p50 ≤ 20 ms), and the ingest
//! rate at the start and at the end of the bulk load (goal: flat in the tenant's size). A full
//! run fails when the isolation or query goal is missed.

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
#[derive(Default)]
struct Asked {
    latencies: Vec<f64>,
    errors: u64,
    refused: u64,
    /// The first question refused, with the refusal.
    example: Option<String>,
}

impl Asked {
    /// Adds another window's figures (the latencies stay sorted).
    fn merge(&mut self, other: Asked) {
        self.latencies.extend(other.latencies);
        self.latencies.sort_by(f64::total_cmp);
        self.errors += other.errors;
        self.refused += other.refused;
        if self.example.is_none() {
            self.example = other.example;
        }
    }
}

/// Asks `questions` one at a time (round robin from `first`), one every [`PACE`] at most,
/// until `count` were asked or `until` says stop.
async fn ask(
    client: &McpHttp,
    questions: &[String],
    first: usize,
    count: Option<usize>,
    until: Option<&AtomicBool>,
) -> Asked {
    let mut asked = Asked::default();
    for question in questions
        .iter()
        .cycle()
        .skip(first % questions.len().max(1))
    {
        if count.is_some_and(|c| asked.latencies.len() >= c)
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
        asked.latencies.push(took.as_secs_f64() * 1e6);
        tokio::time::sleep(PACE.saturating_sub(took)).await;
        match outcome {
            Ok(answer) if answer["answered"] == true => {}
            Ok(answer) => {
                asked.refused += 1;
                asked
                    .example
                    .get_or_insert_with(|| format!("{question:?}: {}", answer["refusal"]));
            }
            Err(_) => asked.errors += 1,
        }
    }
    asked.latencies.sort_by(f64::total_cmp);
    asked
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

/// The bulk loader's turn: the loader holds it for each ingest, the measurer for each window
/// alone, so that a window alone opens only once the ingest in flight has ended. Tokio's
/// mutex is fair: each side waits at most one turn of the other.
type Turn = Arc<tokio::sync::Mutex<()>>;

/// What the bulk load did: memos sent, pages they made, and each ingest's page count before
/// it and its time.
struct Loaded {
    documents: usize,
    pages: usize,
    timings: Vec<(usize, Duration)>,
}

/// Loads memos into the bulk tenant until it holds `target_pages`, one ingest per turn.
fn spawn_loader(
    bulk: McpHttp,
    target_pages: usize,
    turn: Turn,
    done: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<anyhow::Result<Loaded>> {
    tokio::spawn(async move {
        let mut loaded = Loaded {
            documents: 0,
            pages: 0,
            timings: Vec::new(),
        };
        let outcome = async {
            while loaded.pages < target_pages {
                let _turn = turn.lock().await;
                let Memo { label, text, .. } = memo(loaded.documents);
                let started = Instant::now();
                let result = wiki_call(
                    &bulk,
                    json!({"action": "ingest", "source": {"type": "text", "text": text, "source_label": label}}),
                )
                .await?;
                loaded.timings.push((loaded.pages, started.elapsed()));
                loaded.pages += created(&result);
                loaded.documents += 1;
            }
            anyhow::Ok(())
        }
        .await;
        done.store(true, Ordering::Relaxed);
        outcome.map(|()| loaded)
    })
}

/// A process's CPU time so far (user and system, all threads), in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name, in parentheses, may hold spaces: count fields after its end.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    field(11) + field(12)
}

/// Waits until `pid` is idle — at most one clock tick of CPU in 100 ms — so that work the
/// last ingest left behind (an index merge, say) does not run in a window meant to be alone.
/// False when it was still busy after three seconds.
async fn settled(pid: u32) -> bool {
    for _ in 0..30 {
        let before = cpu_ticks(pid);
        tokio::time::sleep(Duration::from_millis(100)).await;
        if cpu_ticks(pid).saturating_sub(before) <= 1 {
            return true;
        }
    }
    false
}

/// The quiet tenant's questions in windows that alternate with the bulk load: one window with
/// the loader held (and the wiki idle), one with it running, until the load ends. Both sides
/// see the same host, so CPU steal and other tenants of the machine weigh on both alike.
struct Interleaved {
    alone: Asked,
    during: Asked,
    windows: usize,
    /// Windows alone that opened while the wiki was still busy after three seconds.
    unsettled: usize,
}

async fn interleaved(
    quiet: &McpHttp,
    questions: &[String],
    window: usize,
    turn: &Turn,
    done: &AtomicBool,
    wiki_pid: u32,
) -> Interleaved {
    let mut measured = Interleaved {
        alone: Asked::default(),
        during: Asked::default(),
        windows: 0,
        unsettled: 0,
    };
    let mut next = 0;
    while !done.load(Ordering::Relaxed) {
        let held = turn.lock().await;
        if done.load(Ordering::Relaxed) {
            break;
        }
        measured.unsettled += usize::from(!settled(wiki_pid).await);
        measured
            .alone
            .merge(ask(quiet, questions, next, Some(window), None).await);
        drop(held);
        measured
            .during
            .merge(ask(quiet, questions, next, Some(window), Some(done)).await);
        next += window;
        measured.windows += 1;
    }
    measured
}

/// The stack: a control plane, the wiki, one edge (all pinned to core 0), and a collector key
/// for each of the two tenants.
struct Stack {
    /// Kept so that the control plane runs as long as the stack.
    _cp: ControlPlaneProcess,
    wiki: WikiProcess,
    edge: EdgeProcess,
    bulk_key: String,
    quiet_key: String,
}

async fn stack() -> anyhow::Result<Stack> {
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
    let quiet_key = keys.pop().context("quiet key")?;
    let bulk_key = keys.pop().context("bulk key")?;
    Ok(Stack {
        _cp: cp,
        wiki,
        edge,
        bulk_key,
        quiet_key,
    })
}

/// The goal: the quiet tenant's query p99 during the bulk load within this factor of alone.
const ISOLATION_GOAL: f64 = 1.5;

/// Runs the scenario.
pub(crate) async fn run(run: Run, table: &mut Table) -> anyhow::Result<()> {
    let target_pages = if run.quick { 300 } else { 5_000 };
    eprintln!("wiki through the edge: bulk load to {target_pages} pages beside a quiet tenant");
    let stack = stack().await?;
    let quiet = McpHttp::new(&stack.edge.addr, Some(&stack.quiet_key), LEGACY);

    // The quiet tenant: 40 memos of its own.
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

    // The bulk load, with the quiet tenant asked in alternating windows.
    let done = Arc::new(AtomicBool::new(false));
    let turn = Turn::default();
    let loader = spawn_loader(
        McpHttp::new(&stack.edge.addr, Some(&stack.bulk_key), LEGACY),
        target_pages,
        Arc::clone(&turn),
        Arc::clone(&done),
    );
    let window = if run.quick { 20 } else { 50 };
    let wiki_pid = stack.wiki.process.pid().unwrap_or(0);
    let measured = interleaved(&quiet, &quiet_questions, window, &turn, &done, wiki_pid).await;
    let loaded = loader.await??;

    // The big tenant, asked.
    let bulk = McpHttp::new(&stack.edge.addr, Some(&stack.bulk_key), LEGACY);
    let big_questions = questions(0..loaded.documents.min(500));
    let samples = if run.quick { 40 } else { 1_000 };
    let big = ask(&bulk, &big_questions, 0, Some(samples), None).await;
    report(run, table, &stack, &measured, &loaded, &big);
    Ok(())
}

/// The rows and the note; a missed isolation or query goal is recorded in full runs.
fn report(
    run: Run,
    table: &mut Table,
    stack: &Stack,
    measured: &Interleaved,
    loaded: &Loaded,
    big: &Asked,
) {
    let timings = &loaded.timings;
    let tenth = (timings.len() / 10).max(1);
    let rate = |part: &[(usize, Duration)]| {
        let spent: f64 = part.iter().map(|(_, d)| d.as_secs_f64()).sum();
        part.len() as f64 / spent.max(1e-9)
    };
    let first = rate(&timings[..tenth]);
    let last = rate(&timings[timings.len() - tenth..]);
    let (alone, during) = (load_of(&measured.alone), load_of(&measured.during));
    let big_load = load_of(big);
    let rss = Some(rss_mib(stack.edge.process.pid().unwrap_or(0)));
    let pages = loaded.pages;
    table.load(
        "wiki query, quiet tenant (40 memos), load held",
        &alone,
        None,
        rss,
    );
    table.load(
        "wiki query, quiet tenant, during the bulk load",
        &during,
        Some(&alone),
        rss,
    );
    table.load(
        &format!("wiki query, {pages}-page tenant"),
        &big_load,
        Some(&alone),
        rss,
    );
    let isolation = during.p99_us / alone.p99_us.max(1e-9);
    table.notes.push(format!(
        "wiki: bulk load of {} memos to {pages} pages through the edge, {first:.1} documents/s over the first tenth and {last:.1} over the last ({:.2}x); the quiet tenant's query p99 {:.1} ms during it against {:.1} ms with the load held ({isolation:.2}x, goal ≤ {ISOLATION_GOAL}x; p50 {:.2}x; {} windows of {} questions each way, {} opened before the wiki was idle); the {pages}-page tenant's query p50 {:.1} ms, p99 {:.1} ms (goal p50 ≤ 20 ms)",
        loaded.documents,
        last / first.max(1e-9),
        during.p99_us / 1e3,
        alone.p99_us / 1e3,
        during.p50_us / alone.p50_us.max(1e-9),
        measured.windows,
        measured.alone.latencies.len() / measured.windows.max(1),
        measured.unsettled,
        big_load.p50_us / 1e3,
        big_load.p99_us / 1e3,
    ));
    if !run.quick && isolation > ISOLATION_GOAL {
        table.missed.push(format!(
            "wiki isolation {isolation:.2}x > {ISOLATION_GOAL}x"
        ));
    }
    if !run.quick && big_load.p50_us > 20_000.0 {
        table.missed.push(format!(
            "wiki query p50 {:.1} ms > 20 ms at {pages} pages",
            big_load.p50_us / 1e3
        ));
    }
    let refused = measured.alone.refused + measured.during.refused + big.refused;
    if refused > 0 {
        let asked =
            measured.alone.latencies.len() + measured.during.latencies.len() + big.latencies.len();
        table.notes.push(format!(
            "wiki: {refused} of {asked} questions refused (each asks what one memo says), e.g. {}",
            [&measured.alone, &measured.during, big]
                .iter()
                .find_map(|a| a.example.clone())
                .unwrap_or_default()
        ));
    }
}
