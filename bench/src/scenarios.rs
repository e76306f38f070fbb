//! The scenarios, one function each, in the order `tp-bench` runs them. Each adds rows (load
//! runs, with the baseline measured in the same run where there is one) and notes (figures
//! against the targets) to the table.

use std::time::{Duration, Instant};

use anyhow::bail;
use futures::StreamExt;
use serde_json::{Value, json};
use tp_proto::json::to_struct;
use tp_proto::pb;
use tp_test_support::{EdgeProcess, McpHttp, Process, free_port, wait_for_port};

use crate::load::{
    LEGACY, STATELESS, Script, Table, list_body, list_headers, percentile, pin, rss_mib, wrk,
};
use crate::world::{EDGE_TOML, World, one_at_a_time, touch_every_key, wait_synced};

/// The scenarios, by the names `--only` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Scenario {
    /// Warm `tools/list` (34 tools) against a bare server returning the same bytes, both
    /// protocol generations, 16 and 64 connections.
    WarmList,
    /// `tools/call` echo through the edge against the executor called directly.
    CallOverhead,
    /// A control-plane write until both edges serve it.
    Propagation,
    /// `tools/list` first pages of 34, 382 and 2,000 tools.
    CatalogueGrowth,
    /// Tool search (`capabilities {"query"}`) at 2,000 tools beside warm `tools/list` of the
    /// same tenant, sequential and paired.
    Search,
    /// Cold lookups: L1 and Redis miss (control plane), L1 miss and Redis hit.
    ColdPaths,
    /// Random access over every bulk tenant on a fresh edge, then every tenant resident.
    Scale,
    /// The wiki through the edge: a tenant bulk-loaded to 5,000 pages beside a quiet one
    /// (a stack of its own; [`crate::wiki`]).
    Wiki,
}

pub(crate) use crate::load::Run;

/// Runs `scenario`.
pub(crate) async fn run(
    scenario: Scenario,
    world: &mut World,
    run: Run,
    table: &mut Table,
) -> anyhow::Result<()> {
    match scenario {
        Scenario::WarmList => warm_list(world, run, table).await,
        Scenario::CallOverhead => call_overhead(world, run, table).await,
        Scenario::Propagation => propagation(world, run, table).await,
        Scenario::CatalogueGrowth => catalogue_growth(world, run, table).await,
        Scenario::Search => search(world, run, table).await,
        Scenario::ColdPaths => cold_paths(world, run, table).await,
        Scenario::Scale => scale(world, run, table).await,
        Scenario::Wiki => crate::wiki::run(run, table).await,
    }
}

/// Rounds of bare and edge load per warm `tools/list` row.
const ROUNDS: usize = 3;

/// Warm `tools/list`, 34 tools, against the bare server returning the same bytes.
async fn warm_list(world: &mut World, run: Run, table: &mut Table) -> anyhow::Result<()> {
    eprintln!("warm tools/list");
    let key = world.named_keys["c34"].clone();
    for version in [LEGACY, STATELESS] {
        let client = McpHttp::new(&world.edges[0].addr, Some(&key), version);
        let warm = client.request(1, "tools/list", json!({})).await;
        let tools = warm.result()["tools"].as_array().map_or(0, Vec::len);
        if tools != 34 {
            bail!("c34 lists {tools} tools, not 34: {}", warm.body);
        }
        let body_file = world.dir.path().join(format!("list-{version}.json"));
        std::fs::write(&body_file, warm.body.as_bytes())?;
        let port = free_port();
        let mut bare_process = Process::spawn(
            &std::env::current_exe()?,
            &[
                "bare".to_owned(),
                port.to_string(),
                body_file.display().to_string(),
            ],
            &world.dir.path().join("bare.log"),
            &[],
        );
        wait_for_port(port, "the bare server").await;
        pin(bare_process.pid().unwrap_or(0), 0);
        let body = list_body(version);
        for connections in [16, 64] {
            // Bare and edge alternate, ROUNDS times each, so both see the same moments of a
            // shared machine; the row is the round whose ratio is the median.
            let mut rounds = Vec::with_capacity(ROUNDS);
            for _ in 0..ROUNDS {
                let base = wrk(
                    world.dir.path(),
                    &format!("http://127.0.0.1:{port}/mcp"),
                    connections,
                    run.seconds,
                    &Script {
                        body: &body,
                        headers: list_headers(version, None),
                        keys: None,
                        random: false,
                    },
                );
                let edge = wrk(
                    world.dir.path(),
                    &world.edge_url(0),
                    connections,
                    run.seconds,
                    &Script {
                        body: &body,
                        headers: list_headers(version, Some(&key)),
                        keys: None,
                        random: false,
                    },
                );
                rounds.push((edge.rps / base.rps.max(1.0), base, edge));
            }
            rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
            let ratios: Vec<String> = rounds.iter().map(|r| format!("{:.2}×", r.0)).collect();
            let (_, base, edge) = &rounds[rounds.len() / 2];
            table.load(
                &format!("bare baseline, same bytes, {version}, {connections} conns"),
                base,
                None,
                None,
            );
            table.load(
                &format!("edge warm tools/list (34), {version}, {connections} conns"),
                edge,
                Some(base),
                Some(rss_mib(world.edges[0].process.pid().unwrap_or(0))),
            );
            table.notes.push(format!(
                "warm tools/list, {version}, {connections} conns: edge ÷ bare in {ROUNDS} alternating rounds {} (the row is the median round)",
                ratios.join(", ")
            ));
        }
        bare_process.kill9().await;
        table.notes.push(format!(
            "tools/list answer for 34 tools ({version}): {} bytes (target: edge ≥ 0.9× the bare server)",
            warm.body.len()
        ));
    }
    Ok(())
}

/// `tools/call` echo: through the edge vs the executor directly (sequential calls). The
/// executor moves to core 1 for both, so the edge has core 0 to itself, as it would with
/// executors on other hosts; the added latency is then the edge's work and one more hop.
async fn call_overhead(world: &mut World, run: Run, table: &mut Table) -> anyhow::Result<()> {
    eprintln!("tools/call overhead");
    let executor_pid = world.executor.process.pid().unwrap_or(0);
    pin(executor_pid, 1);
    let calls = if run.quick { 500 } else { 2_000 };
    let bench_client = McpHttp::new(
        &world.edges[0].addr,
        Some(&world.named_keys["bench"]),
        LEGACY,
    );
    let mut direct_client = pb::executor_client::ExecutorClient::new(
        tonic::transport::Endpoint::from_shared(world.executor.url())?
            .tcp_nodelay(true)
            .connect()
            .await?,
    );
    // Executors take only signed calls: sign each one with the key the edges use, as they do.
    let key = tp_proto::invoke_auth::ExecutorKey::parse(&tp_test_support::executor_key().0)
        .map_err(anyhow::Error::msg)?;
    // Paired: each call through the edge is followed by one straight to the executor, so
    // both samples see the same moments of a shared machine.
    let mut through = Vec::with_capacity(calls);
    let mut direct = Vec::with_capacity(calls);
    for i in 0..calls + 100 {
        let t = Instant::now();
        let reply = bench_client
            .call("echo", json!({"text": format!("call {i}")}))
            .await;
        if reply.result()["isError"] != false {
            bail!("echo through the edge failed: {}", reply.body);
        }
        if i >= 100 {
            through.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let t = Instant::now();
        let mut request = tonic::Request::new(pb::InvokeRequest {
            tool: "echo".into(),
            arguments: to_struct(&json!({"text": format!("call {i}")})),
            tenant: "bench".into(),
            role: "collector".into(),
            request_id: format!("r{i}"),
            deadline_ms: u64::MAX / 2,
            ..Default::default()
        });
        key.sign_request("Invoke", &mut request);
        let mut stream = direct_client.invoke(request).await?.into_inner();
        while let Some(event) = stream.next().await {
            if matches!(event?.event, Some(pb::invoke_event::Event::Result(_))) {
                break;
            }
        }
        if i >= 100 {
            direct.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    through.sort_by(f64::total_cmp);
    direct.sort_by(f64::total_cmp);
    let (tp50, tp99, dp50, dp99) = (
        percentile(&through, 50.0),
        percentile(&through, 99.0),
        percentile(&direct, 50.0),
        percentile(&direct, 99.0),
    );
    pin(executor_pid, 0);
    table.notes.push(format!(
        "tools/call echo, {calls} sequential pairs of calls, one through the edge then one straight to the executor (executor on core 1, edge on core 0): through the edge p50 {tp50:.0} µs p99 {tp99:.0} µs; executor directly p50 {dp50:.0} µs p99 {dp99:.0} µs; added by the edge p50 {:.0} µs, p99 {:.0} µs (target: added p50 ≤ 150 µs)",
        tp50 - dp50,
        tp99 - dp99
    ));
    Ok(())
}

/// Propagation: control-plane write → both edges serve the change.
async fn propagation(world: &mut World, run: Run, table: &mut Table) -> anyhow::Result<()> {
    eprintln!("propagation");
    let writes = if run.quick { 50 } else { 200 };
    let prop: Vec<McpHttp> = (0..2)
        .map(|i| {
            McpHttp::new(
                &world.edges[i].addr,
                Some(&world.named_keys["prop"]),
                LEGACY,
            )
        })
        .collect();
    let mut lags = Vec::with_capacity(writes);
    let mut writer = world.cp.admin().await;
    let mut tenant = writer
        .tenants
        .get_tenant(pb::GetTenantRequest { id: "prop".into() })
        .await?
        .into_inner();
    for i in 0..writes {
        let with_hubspot = i % 2 == 0;
        tenant.connected_apis = Some(pb::ConnectedApis {
            providers: if with_hubspot {
                vec!["google".into(), "hubspot".into()]
            } else {
                vec!["google".into()]
            },
            ..Default::default()
        });
        let t = Instant::now();
        tenant = writer
            .tenants
            .update_tenant(pb::UpdateTenantRequest::replacing(tenant.clone()))
            .await?
            .into_inner();
        for client in &prop {
            loop {
                let reply = client.request(1, "tools/list", json!({})).await;
                let has = reply.body.contains("\"hubspot_crm\"");
                if has == with_hubspot {
                    break;
                }
                if t.elapsed() > Duration::from_secs(10) {
                    bail!("write {i} did not reach an edge in 10 s");
                }
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
        }
        lags.push(t.elapsed().as_secs_f64() * 1e3);
    }
    lags.sort_by(f64::total_cmp);
    table.notes.push(format!(
        "propagation, {writes} writes (connected_apis toggled), until both edges list the change: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 ≤ 100 ms)",
        percentile(&lags, 50.0),
        percentile(&lags, 99.0),
        lags.last().copied().unwrap_or(0.0)
    ));
    Ok(())
}

/// Catalogue growth: the first page of 34, 382 and 2,000 tools.
async fn catalogue_growth(world: &mut World, run: Run, table: &mut Table) -> anyhow::Result<()> {
    eprintln!("catalogue growth");
    for (tenant, tools) in [("c34", 34), ("c382", 382), ("c2000", 2000)] {
        let key = &world.named_keys[tenant];
        let client = McpHttp::new(&world.edges[0].addr, Some(key), LEGACY);
        let names = client.list_names().await;
        let first = client.request(1, "tools/list", json!({})).await;
        let load = wrk(
            world.dir.path(),
            &world.edge_url(0),
            16,
            run.seconds,
            &Script {
                body: &list_body(LEGACY),
                headers: list_headers(LEGACY, Some(key)),
                keys: None,
                random: false,
            },
        );
        table.load(
            &format!(
                "tools/list first page, {} tools ({} bytes)",
                names.len().max(tools),
                first.body.len()
            ),
            &load,
            None,
            Some(rss_mib(world.edges[0].process.pid().unwrap_or(0))),
        );
    }
    Ok(())
}

/// Tool search at 2,000 tools: the first query (which builds the tenant's index), then
/// sequential pairs of one search and one warm `tools/list` (first page) of the same tenant on
/// the same edge, so both see the same moments of a shared machine.
async fn search(world: &mut World, run: Run, table: &mut Table) -> anyhow::Result<()> {
    eprintln!("tool search");
    const QUERIES: [&str; 8] = [
        "search the bulk2 tool 0420 records",
        "send an email to a customer",
        "query google ads campaigns",
        "fetch a web page",
        "ask the wiki a question",
        "records of bulk1 tool 0007",
        "create a calendar event",
        "run a report of sessions in analytics",
    ];
    let client = McpHttp::new(
        &world.edges[0].addr,
        Some(&world.named_keys["c2000"]),
        LEGACY,
    );
    let t = Instant::now();
    let first = client
        .call("capabilities", json!({"query": QUERIES[0]}))
        .await;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    let total = &first.result()["structuredContent"]["total_tools"];
    if total.as_u64() != Some(2000) {
        bail!("c2000 searches {total} tools, not 2,000: {}", first.body);
    }
    let pairs = if run.quick { 200 } else { 2_000 };
    let (mut searches, mut lists) = search_pairs(&client, &QUERIES, pairs).await?;
    searches.sort_by(f64::total_cmp);
    lists.sort_by(f64::total_cmp);
    let (sp50, sp99, lp50, lp99) = (
        percentile(&searches, 50.0),
        percentile(&searches, 99.0),
        percentile(&lists, 50.0),
        percentile(&lists, 99.0),
    );
    table.notes.push(format!(
        "tool search at 2,000 tools, {pairs} sequential pairs: capabilities {{query}} p50 {sp50:.0} µs p99 {sp99:.0} µs; warm tools/list (first page) of the same tenant p50 {lp50:.0} µs p99 {lp99:.0} µs; search ÷ list p50 {:.2}×; first search (builds the index) {first_ms:.1} ms (target: search p50 ≤ 2 ms: {})",
        sp50 / lp50.max(1.0),
        if sp50 <= 2_000.0 { "met" } else { "NOT met" }
    ));
    Ok(())
}

/// `pairs` sequential pairs (after 50 to warm up) of one search (the queries in turn) and one
/// warm `tools/list`: the microseconds of each.
async fn search_pairs(
    client: &McpHttp,
    queries: &[&str],
    pairs: usize,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let mut searches = Vec::with_capacity(pairs);
    let mut lists = Vec::with_capacity(pairs);
    for i in 0..pairs + 50 {
        let t = Instant::now();
        let reply = client
            .call("capabilities", json!({"query": queries[i % queries.len()]}))
            .await;
        let elapsed = t.elapsed().as_secs_f64() * 1e6;
        if reply.result()["structuredContent"]["matches"]
            .as_array()
            .is_none_or(Vec::is_empty)
        {
            bail!("a search found nothing: {}", reply.body);
        }
        let t = Instant::now();
        let list = client.request(1, "tools/list", json!({})).await;
        let list_elapsed = t.elapsed().as_secs_f64() * 1e6;
        if list.result()["tools"].as_array().is_none_or(Vec::is_empty) {
            bail!("tools/list failed: {}", list.body);
        }
        if i >= 50 {
            searches.push(elapsed);
            lists.push(list_elapsed);
        }
    }
    Ok((searches, lists))
}

/// Cold paths, over the bulk tenants' keys in turn: Redis filled through an edge whose L1
/// holds one entry (every lookup reaches the control plane), then read back through it.
async fn cold_paths(world: &mut World, run: Run, table: &mut Table) -> anyhow::Result<()> {
    eprintln!("cold paths");
    let prewarm = EdgeProcess::start(
        &world.cp,
        &[world.cp.url()],
        Some(&world.redis.url()),
        "[cache]\nl1_registries = 1\nl1_identities = 1\n[mcp]\nmax_in_flight = 100000\n",
    )
    .await;
    pin(prewarm.process.pid().unwrap_or(0), 0);
    wait_synced(&prewarm).await?;
    let keys = world.bulk_keys()?;
    // One at a time first, on an edge without Redis: each lookup misses L1 (one entry) and
    // asks the control plane (identity, then registry) — the latency of a cold resolve.
    let sample = &keys[..keys.len().min(500)];
    let mut no_redis = EdgeProcess::start(
        &world.cp,
        &[world.cp.url()],
        None,
        "[cache]\nl1_registries = 1\nl1_identities = 1\n",
    )
    .await;
    pin(no_redis.process.pid().unwrap_or(0), 0);
    wait_synced(&no_redis).await?;
    let resolved = one_at_a_time(&no_redis.addr, sample).await;
    table.load(
        "cold resolve, one at a time: L1 miss → control plane (no Redis)",
        &resolved,
        None,
        Some(rss_mib(no_redis.process.pid().unwrap_or(0))),
    );
    no_redis.process.kill9().await;
    // Every key once, 16 at a time: each lookup misses L1 (one entry) and Redis (empty), so
    // the control plane resolves it and Redis keeps it.
    let filled = touch_every_key(&prewarm.addr, &keys, 16).await;
    world.redis_filled = true;
    table.load(
        "cold: L1 and Redis miss → control plane (each key once, 16 at a time)",
        &filled,
        None,
        Some(rss_mib(prewarm.process.pid().unwrap_or(0))),
    );
    let from_redis = one_at_a_time(&prewarm.addr, sample).await;
    table.load(
        "cold resolve, one at a time: L1 miss → Redis hit",
        &from_redis,
        None,
        Some(rss_mib(prewarm.process.pid().unwrap_or(0))),
    );
    let body = list_body(LEGACY);
    let l2 = wrk(
        world.dir.path(),
        &format!("http://{}/mcp", prewarm.addr),
        16,
        run.seconds,
        &rotate(world, &body, false),
    );
    table.load(
        "cold: L1 miss → Redis hit (L1 holds 1 entry; 16 conns)",
        &l2,
        None,
        Some(rss_mib(prewarm.process.pid().unwrap_or(0))),
    );
    table.notes.push(
        "cold paths: targets p50 ≤ 2 ms from the control plane and ≤ 1 ms from Redis, read on the \
         one-at-a-time rows; the 16-connection rows add queueing on the one server core \
         (edge, control plane and Redis share it), so their p50 is about 16 ÷ req/s"
            .to_owned(),
    );
    Ok(())
}

/// `tools/list` (`body`) with the bulk tenants' keys, in turn or at random.
fn rotate<'a>(world: &'a World, body: &'a str, random: bool) -> Script<'a> {
    Script {
        body,
        headers: list_headers(LEGACY, None),
        keys: Some(&world.keys_file),
        random,
    }
}

/// Scale: every bulk tenant's registry in Redis, random access on a fresh edge; then every
/// tenant once more, and what the edge's caches hold.
async fn scale(world: &mut World, run: Run, table: &mut Table) -> anyhow::Result<()> {
    eprintln!("scale");
    if !world.redis_filled {
        let keys = world.bulk_keys()?;
        touch_every_key(&world.edges[1].addr, &keys, 16).await;
        world.redis_filled = true;
    }
    let fresh = EdgeProcess::start(
        &world.cp,
        &[world.cp.url()],
        Some(&world.redis.url()),
        EDGE_TOML,
    )
    .await;
    pin(fresh.process.pid().unwrap_or(0), 0);
    let synced_in = wait_synced(&fresh).await?;
    if synced_in > Duration::from_secs(10) {
        bail!(
            "scale: a fresh edge took {:.1} s to catch up with the log (target ≤ 10 s): the replay of the import's keys is slow again",
            synced_in.as_secs_f64()
        );
    }
    table.notes.push(format!(
        "scale: a fresh edge (Redis holding every bulk tenant's identity) replayed the log from \
         its first revision, the import's {} keys included, and reported itself synced {:.1} s \
         after it was ready",
        world.tenants,
        synced_in.as_secs_f64()
    ));
    let fresh_rss = rss_mib(fresh.process.pid().unwrap_or(0));
    let body = list_body(LEGACY);
    let scale = wrk(
        world.dir.path(),
        &format!("http://{}/mcp", fresh.addr),
        16,
        run.seconds * 2,
        &rotate(world, &body, true),
    );
    let (_, metrics) = fresh.admin_get("/metrics").await;
    let lookups = |level: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| {
                l.starts_with("tp_edge_cache_lookups_total")
                    && l.contains("kind=\"registry\"")
                    && l.contains(&format!("level=\"{level}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
            + 0.0 // an empty float sum is -0.0
    };
    let (l1, l2_hits, l3) = (lookups("l1"), lookups("l2"), lookups("l3"));
    if l1 + l2_hits + l3 == 0.0 {
        let sample: Vec<&str> = metrics
            .lines()
            .filter(|l| l.contains("cache_lookups") && !l.starts_with('#'))
            .collect();
        table.notes.push(format!(
            "(no registry lookups counted; metrics sample: {sample:?})"
        ));
    }
    let total = (l1 + l2_hits + l3).max(1.0);
    let scale_rss = rss_mib(fresh.process.pid().unwrap_or(0));
    let tenants = world.tenants;
    table.load(
        &format!("scale: {tenants} tenants in Redis, random keys, fresh edge"),
        &scale,
        None,
        Some(scale_rss),
    );
    table.notes.push(format!(
        "scale: registry lookups L1 {:.1} %, Redis {:.1} %, control plane {:.1} %; edge RSS {scale_rss:.1} MiB after {} requests over {tenants} tenants (target ≤ 100 MiB)",
        100.0 * l1 / total,
        100.0 * l2_hits / total,
        100.0 * l3 / total,
        scale.requests,
    ));

    // Every tenant resident: each key once more on the same edge, then what the caches hold.
    let resident = touch_every_key(&fresh.addr, &world.bulk_keys()?, 16).await;
    let resident_rss = rss_mib(fresh.process.pid().unwrap_or(0));
    let (_, ready) = fresh.get("/readyz").await;
    let ready: Value = serde_json::from_str(&ready).unwrap_or_default();
    let held = ready["cache"]["registries"].as_u64().unwrap_or(0);
    table.load(
        &format!("resident: every one of {tenants} tenants once more"),
        &resident,
        None,
        Some(resident_rss),
    );
    table.notes.push(format!(
        "resident: the edge's in-process cache holds {held} registries and {} identities; edge RSS {resident_rss:.1} MiB, {fresh_rss:.1} MiB when it started: {:.2} KiB per resident tenant",
        ready["cache"]["identities"].as_u64().unwrap_or(0),
        (resident_rss - fresh_rss) * 1024.0 / (held.max(1) as f64)
    ));
    Ok(())
}
