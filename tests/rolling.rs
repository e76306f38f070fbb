//! Leaving the fleet without failing a request or losing its audit record, tested the way an
//! operator runs it: Debian's haproxy in front of two real edges, keep-alive clients of both
//! protocol generations calling through it without pause, three rolling restarts (SIGTERM,
//! wait, start again) and one `kill -9`. The clients keep what they saw — every call's request
//! id, when it was answered, and whether it succeeded — and the test compares that with the
//! control plane's audit trail: on rolling restarts 0 failed and 0 lost, and after `kill -9`
//! only the calls answered in the last audit period are missing. Each phase prints its figures.
//!
//! Also here, without a balancer: a stopping edge's `/readyz` and `Connection: close` during
//! its grace period, and audit records that outlive a stop while the control plane is away
//! (spilled to disk, then delivered exactly once by the next edge).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::process::Process;
use tp_test_support::services::{free_port, which};
use tp_test_support::{EdgeProcess, eventually};

use crate::fleet::{Fleet, LEGACY, STATELESS};

/// The grace period the edges here are given: longer than haproxy needs to see `/readyz`
/// fail (checks every 100 ms here, one failure marks the server down). The shipped files pair
/// 1 s checks with 5 s.
const GRACE_MS: u64 = 1000;

/// The audit period of the tests' edges (`[audit] flush_ms` in test-support).
const FLUSH_MS: u64 = 200;

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// haproxy in front of edges on fixed ports.
struct Balancer {
    /// Killed on drop.
    _process: Process,
    port: u16,
    /// haproxy's stats page (each server's state, as haproxy sees it).
    stats_port: u16,
    _dir: tempfile::TempDir,
}

impl Balancer {
    async fn start(edges: &[u16]) -> Balancer {
        let haproxy = which("haproxy").expect(
            "haproxy is not installed: scripts/prereqs.sh installs it (apt-get install haproxy)",
        );
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        // The Compose file's balancer, pointed at these edges, checking every 100 ms.
        let shipped = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/compose/haproxy.cfg"),
        )
        .unwrap();
        let mut config = String::new();
        let stats_port = free_port();
        for line in shipped.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with("server ") {
                continue;
            } else if trimmed == "bind :8080" {
                config.push_str(&format!("  bind 127.0.0.1:{port}\n"));
            } else if trimmed.starts_with("bind ") {
                // The stats page.
                config.push_str(&format!("  bind 127.0.0.1:{stats_port}\n"));
            } else if trimmed.starts_with("default-server ") {
                config.push_str(&line.replace("inter 1s", "inter 100ms"));
                config.push('\n');
                for (i, p) in edges.iter().enumerate() {
                    config.push_str(&format!("  server e{i} 127.0.0.1:{p} check\n"));
                }
            } else {
                config.push_str(line);
                config.push('\n');
            }
        }
        assert!(
            config.contains("inter 100ms") && config.contains("server e1"),
            "{config}"
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let check = std::process::Command::new(&haproxy)
            .args(["-c", "-f"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "haproxy -c: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let process = Process::spawn(
            &haproxy,
            &[
                "-db".to_owned(),
                "-f".to_owned(),
                path.display().to_string(),
            ],
            &dir.path().join("haproxy.log"),
            &[],
        );
        tp_test_support::services::wait_for_port(port, "haproxy").await;
        Balancer {
            _process: process,
            port,
            stats_port,
            _dir: dir,
        }
    }

    /// Waits until haproxy has edge `i` UP again (its stats page): only then may the other
    /// edge stop. The edge's own `/readyz` is not enough on a loaded machine, where haproxy's
    /// two passing checks may take longer than a fixed wait.
    async fn until_up(&self, i: usize) {
        let stats = format!("http://127.0.0.1:{}/stats;csv", self.stats_port);
        until_haproxy_up(&stats, &format!("e{i}"), Duration::from_secs(30)).await;
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// Waits until haproxy's stats page (`stats`, its CSV) shows `server` of the `edges` backend
/// UP.
pub(crate) async fn until_haproxy_up(stats: &str, server: &str, within: Duration) {
    let row = format!("edges,{server},");
    eventually(&format!("{server} UP in haproxy ({stats})"), within, || {
        let (stats, row) = (stats.to_owned(), row.clone());
        async move {
            let csv = reqwest::get(&stats).await.ok()?.text().await.ok()?;
            let line = csv.lines().find(|l| l.starts_with(&row))?;
            // The 18th field is the server's status: UP, DOWN, "UP 1/2" while rising…
            (line.split(',').nth(17) == Some("UP")).then_some(())
        }
    })
    .await;
}

/// What the clients saw of one call.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    ok: bool,
    /// When the answer arrived (Unix ms).
    at_ms: u64,
    why: String,
}

#[derive(Default)]
pub(crate) struct Ledger {
    calls: Mutex<BTreeMap<String, Seen>>,
    next: AtomicU64,
}

impl Ledger {
    pub(crate) fn failed(&self) -> Vec<(String, Seen)> {
        let calls = self.calls.lock().unwrap();
        calls
            .iter()
            .filter(|(_, s)| !s.ok)
            .map(|(id, s)| (id.clone(), s.clone()))
            .collect()
    }

    pub(crate) fn succeeded(&self) -> BTreeMap<String, u64> {
        let calls = self.calls.lock().unwrap();
        calls
            .iter()
            .filter(|(_, s)| s.ok)
            .map(|(id, s)| (id.clone(), s.at_ms))
            .collect()
    }
}

/// The tool the load calls and the string argument that carries each call's id: `echo`'s `text`
/// (the tests' world), `gmail`'s `query` (the demo world).
pub(crate) type Probe = (&'static str, &'static str);

/// `echo` with the id as its text.
pub(crate) const ECHO: Probe = ("echo", "text");

/// A keep-alive client of one protocol generation calling `probe` until `stop`, each call with
/// its own request id (prefixed `prefix`).
async fn client(
    addr: String,
    key: String,
    probe: Probe,
    version: &'static str,
    prefix: String,
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
) {
    let http = reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(30))
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let url = format!("http://{addr}/mcp");
    let stateless = version == STATELESS;
    let base = |request: reqwest::RequestBuilder| {
        request
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .header("authorization", format!("Bearer {key}"))
    };
    // The 2025-xx lifecycle: initialize, then every call in the session (sealed: any edge
    // serves it).
    let mut session = None;
    if !stateless {
        let reply = base(http.post(&url))
            .json(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "rolling", "version": "1"}}}),
            )
            .send()
            .await
            .expect("initialize");
        assert_eq!(reply.status(), 200);
        session = reply
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        assert!(session.is_some(), "no session id");
        let note = base(http.post(&url))
            .header("mcp-session-id", session.clone().unwrap())
            .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .expect("initialized");
        assert_eq!(note.status(), 202);
    }
    while !stop.load(Ordering::Relaxed) {
        let n = ledger.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("{prefix}-{n}");
        let (tool, field) = probe;
        let mut params = json!({"name": tool, "arguments": {field: id}});
        let mut request = base(http.post(&url)).header("x-request-id", &id);
        if stateless {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientInfo": {"name": "rolling", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            });
            request = request
                .header("mcp-method", "tools/call")
                .header("mcp-name", tool);
        } else {
            request = request.header("mcp-session-id", session.clone().unwrap());
        }
        let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params});
        let outcome = match request.json(&body).send().await {
            Err(error) => Err(format!("transport: {error}")),
            Ok(reply) => {
                let status = reply.status();
                let text = reply.text().await.unwrap_or_default();
                if status != 200 {
                    Err(format!("HTTP {status}: {text}"))
                } else {
                    let answer = text
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim)
                        .chain(std::iter::once(text.as_str()))
                        .filter_map(|t| serde_json::from_str::<Value>(t).ok())
                        .find(|m| m.get("id").is_some());
                    match answer {
                        Some(m)
                            if m["result"]["isError"] == false
                                || m["result"].is_object() && m["result"]["isError"].is_null() =>
                        {
                            Ok(())
                        }
                        Some(m) => Err(format!("answer: {m}")),
                        None => Err(format!("no answer in: {text}")),
                    }
                }
            }
        };
        let seen = Seen {
            ok: outcome.is_ok(),
            at_ms: now_ms(),
            why: outcome.err().unwrap_or_default(),
        };
        ledger.calls.lock().unwrap().insert(id, seen);
    }
}

/// Runs four clients (two per protocol generation) through `addr` while `during` runs.
pub(crate) async fn under_load<F: std::future::Future<Output = ()>>(
    addr: &str,
    key: &str,
    probe: Probe,
    prefix: &str,
    during: F,
) -> Arc<Ledger> {
    let ledger = Arc::new(Ledger::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for (i, version) in [LEGACY, STATELESS, LEGACY, STATELESS]
        .into_iter()
        .enumerate()
    {
        clients.push(tokio::spawn(client(
            addr.to_owned(),
            key.to_owned(),
            probe,
            version,
            format!("{prefix}{i}"),
            Arc::clone(&ledger),
            Arc::clone(&stop),
        )));
    }
    // Warm up: every client has a connection before anything stops.
    tokio::time::sleep(Duration::from_millis(500)).await;
    during.await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    ledger
}

/// Every audit record of `tenant` since `since_ms`: request id → how many times stored.
async fn trail(fleet: &Fleet, tenant: &str, since_ms: u64) -> BTreeMap<String, u32> {
    trail_of(&mut fleet.cp.admin().await, tenant, since_ms).await
}

/// [`trail`] from any control plane.
pub(crate) async fn trail_of(
    admin: &mut tp_client::Admin,
    tenant: &str,
    since_ms: u64,
) -> BTreeMap<String, u32> {
    let mut counts = BTreeMap::new();
    let mut page_token = String::new();
    loop {
        let page = admin
            .audit
            .list_audit_records(pb::ListAuditRecordsRequest {
                tenant: tenant.into(),
                since_ms,
                page_size: 1000,
                page_token: page_token.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        for record in page.records {
            *counts.entry(record.request_id).or_insert(0) += 1;
        }
        if page.next_page_token.is_empty() {
            return counts;
        }
        page_token = page.next_page_token;
    }
}

/// The trail once it stops growing (no new record for two seconds).
async fn settled_trail(fleet: &Fleet, tenant: &str, since_ms: u64) -> BTreeMap<String, u32> {
    settled_trail_of(&mut fleet.cp.admin().await, tenant, since_ms).await
}

/// [`settled_trail`] from any control plane.
pub(crate) async fn settled_trail_of(
    admin: &mut tp_client::Admin,
    tenant: &str,
    since_ms: u64,
) -> BTreeMap<String, u32> {
    let mut last = trail_of(admin, tenant, since_ms).await;
    let mut stable_since = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    while stable_since.elapsed() < Duration::from_secs(2) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = trail_of(admin, tenant, since_ms).await;
        if now.values().sum::<u32>() != last.values().sum::<u32>() {
            stable_since = Instant::now();
        }
        last = now;
    }
    last
}

async fn edge_at(fleet: &Fleet, port: u16, spill: &Path) -> EdgeProcess {
    EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&fleet.redis.url()),
        &format!("[shutdown]\ngrace_ms = {GRACE_MS}\n"),
        &[
            ("TOOLPLANE_EDGE_LISTEN", format!("127.0.0.1:{port}")),
            (
                "TOOLPLANE_EDGE_AUDIT__SPILL_DIR",
                spill.display().to_string(),
            ),
        ],
    )
    .await
}

/// Waits until haproxy would send to the edge on `port` again (it answers `/readyz` 200, and
/// two checks have passed).
async fn until_ready(edge: &EdgeProcess) {
    eventually(
        "the restarted edge ready",
        Duration::from_secs(15),
        || async { (edge.get("/readyz").await.0 == 200).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
}

/// Compares what the clients saw with the trail: (lost, duplicated, extra) request ids.
pub(crate) fn compare(
    seen: &BTreeMap<String, u64>,
    trail: &BTreeMap<String, u32>,
    prefix: &str,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let lost = seen
        .keys()
        .filter(|id| !trail.contains_key(*id))
        .cloned()
        .collect();
    let duplicated = trail
        .iter()
        .filter(|(id, n)| id.starts_with(prefix) && **n > 1)
        .map(|(id, _)| id.clone())
        .collect();
    let extra = trail
        .keys()
        .filter(|id| id.starts_with(prefix) && !seen.contains_key(*id))
        .cloned()
        .collect();
    (lost, duplicated, extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rolling_restarts_behind_haproxy_fail_nothing_and_lose_no_audit_record() {
    let fleet = Fleet::start(0, "").await;
    let spill = tempfile::tempdir().unwrap();
    let ports = [free_port(), free_port()];
    let mut edges = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        edges.push(edge_at(&fleet, *port, &spill.path().join(format!("e{i}"))).await);
    }
    let balancer = Balancer::start(&ports).await;
    for edge in &edges {
        until_ready(edge).await;
    }
    let key = fleet.key("qa", "collector").to_owned();

    // Phase 1: three rounds of rolling restarts under load.
    let since = now_ms();
    let edges = Arc::new(tokio::sync::Mutex::new(edges));
    let rolling = {
        let edges = Arc::clone(&edges);
        let fleet = &fleet;
        let balancer = &balancer;
        let spill = spill.path().to_owned();
        async move {
            for round in 0..3 {
                for i in 0..2 {
                    let mut edges = edges.lock().await;
                    let began = Instant::now();
                    let status = edges[i].process.terminate().await;
                    assert!(
                        status.is_some_and(|s| s.success()),
                        "round {round}: edge {i} did not stop cleanly ({status:?}): {}",
                        edges[i].log()
                    );
                    let stopped_in = began.elapsed();
                    assert!(
                        stopped_in >= Duration::from_millis(GRACE_MS),
                        "the edge left before its grace period ended ({stopped_in:?})"
                    );
                    edges[i] = edge_at(fleet, ports[i], &spill.join(format!("e{i}"))).await;
                    until_ready(&edges[i]).await;
                    balancer.until_up(i).await;
                    eprintln!("round {round}: edge {i} restarted (stopped in {stopped_in:?})");
                }
            }
        }
    };
    let ledger = under_load(&balancer.addr(), &key, ECHO, "roll", rolling).await;
    let failed = ledger.failed();
    let seen = ledger.succeeded();
    let trail_after = settled_trail(&fleet, "qa", since).await;
    let (lost, duplicated, extra) = compare(&seen, &trail_after, "roll");
    println!(
        "rolling restarts (3 rounds x 2 edges, haproxy, keep-alive clients on 2025-11-25 and 2026-07-28): {} calls, {} failed, {} audit records lost, {} duplicated",
        seen.len() + failed.len(),
        failed.len(),
        lost.len(),
        duplicated.len()
    );
    assert!(
        seen.len() > 200,
        "too few calls to mean anything: {}",
        seen.len()
    );
    assert!(
        failed.is_empty(),
        "failed calls: {:#?}",
        &failed[..failed.len().min(10)]
    );
    assert!(
        lost.is_empty(),
        "audit records lost: {:?}",
        &lost[..lost.len().min(10)]
    );
    assert!(duplicated.is_empty(), "stored twice: {duplicated:?}");
    assert!(
        extra.is_empty(),
        "records of calls never answered: {extra:?}"
    );

    // Phase 2: kill -9 of one edge under load, then it comes back with the same spill folder.
    let since = now_ms();
    let killed_at = Arc::new(AtomicU64::new(0));
    let crash = {
        let edges = Arc::clone(&edges);
        let fleet = &fleet;
        let spill = spill.path().to_owned();
        let killed_at = Arc::clone(&killed_at);
        async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let mut edges = edges.lock().await;
            killed_at.store(now_ms(), Ordering::Relaxed);
            edges[0].process.kill9().await;
            tokio::time::sleep(Duration::from_millis(1000)).await;
            edges[0] = edge_at(fleet, ports[0], &spill.join("e0")).await;
            until_ready(&edges[0]).await;
        }
    };
    let ledger = under_load(&balancer.addr(), &key, ECHO, "kill", crash).await;
    let failed = ledger.failed();
    let seen = ledger.succeeded();
    let trail_after = settled_trail(&fleet, "qa", since).await;
    let (lost, duplicated, extra) = compare(&seen, &trail_after, "kill");
    let killed_at = killed_at.load(Ordering::Relaxed);
    println!(
        "kill -9 of one edge of two under load: {} calls, {} failed, {} audit records lost (the bound: calls answered in the last audit period, {FLUSH_MS} ms), {} duplicated",
        seen.len() + failed.len(),
        failed.len(),
        lost.len(),
        duplicated.len()
    );
    for (id, seen) in &failed {
        eprintln!(
            "failed at kill -9: {id} at {} ms: {}",
            seen.at_ms as i64 - killed_at as i64,
            seen.why
        );
    }
    // What may be missing is what was answered since the killed edge's last audit tick (and
    // the batch being written at that moment): nothing older.
    let window = 2 * FLUSH_MS + 150;
    let old: Vec<(&String, i64)> = lost
        .iter()
        .map(|id| (id, seen[id] as i64 - killed_at as i64))
        .filter(|(_, offset)| *offset < -(window as i64))
        .collect();
    assert!(
        old.is_empty(),
        "records lost that were answered long before the kill (ms before it): {old:?}"
    );
    assert!(duplicated.is_empty(), "stored twice: {duplicated:?}");
    assert!(
        extra.is_empty(),
        "records of calls never answered: {extra:?}"
    );
    assert!(
        failed.len() <= 8,
        "more calls failed at the kill than were in flight: {}",
        failed.len()
    );
    drop(balancer);
}

#[tokio::test]
async fn a_stopping_edge_is_unready_and_closes_connections_for_its_grace_period() {
    let fleet = Fleet::start(0, "").await;
    let spill = tempfile::tempdir().unwrap();
    let mut edge = EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        None,
        "[shutdown]\ngrace_ms = 3000\n",
        &[(
            "TOOLPLANE_EDGE_AUDIT__SPILL_DIR",
            spill.path().display().to_string(),
        )],
    )
    .await;
    // Ready once it has synced with the control plane.
    until_ready(&edge).await;
    // A keep-alive connection open before the stop.
    let http = reqwest::Client::new();
    let url = format!("http://{}/mcp", edge.addr);
    let key = fleet.key("qa", "collector").to_owned();
    let call = |n: u32| {
        http.post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", LEGACY)
            .header("authorization", format!("Bearer {key}"))
            .json(&json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}}}))
            .send()
    };
    let before = call(1).await.unwrap();
    assert_eq!(before.status(), 200);
    assert!(before.headers().get("connection").is_none());
    let pid = edge.process.pid().unwrap();
    let signalled = Instant::now();
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let (status, body) = eventually("readyz 503", Duration::from_secs(2), || async {
        let (status, body) = edge.get("/readyz").await;
        (status == 503).then_some((status, body))
    })
    .await;
    let ready: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, &ready["stopping"]), (503, &json!(true)), "{body}");
    // Still serving, and telling the client to reconnect (elsewhere) for its next request.
    let during = call(2).await.unwrap();
    assert_eq!(during.status(), 200);
    assert_eq!(
        during
            .headers()
            .get("connection")
            .map(|v| v.to_str().unwrap()),
        Some("close")
    );
    // After the grace period it exits by itself, and its calls are in the trail.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !edge.process.has_exited() {
        assert!(Instant::now() < deadline, "still running: {}", edge.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        signalled.elapsed() >= Duration::from_millis(3000),
        "left {:?} after SIGTERM, before its grace period ended",
        signalled.elapsed()
    );
    let records = trail(&fleet, "qa", 0).await;
    assert_eq!(records.values().sum::<u32>(), 2, "{records:?}");
}

#[tokio::test]
async fn audit_records_outlive_a_stop_while_the_control_plane_is_away_and_are_stored_once() {
    let mut fleet = Fleet::start(0, "").await;
    let spill = tempfile::tempdir().unwrap();
    async fn start(fleet: &Fleet, spill: &Path) -> EdgeProcess {
        EdgeProcess::start_with_env(
            &fleet.cp,
            &[fleet.cp.url()],
            Some(&fleet.redis.url()),
            "",
            &[(
                "TOOLPLANE_EDGE_AUDIT__SPILL_DIR",
                spill.display().to_string(),
            )],
        )
        .await
    }
    let mut edge = start(&fleet, spill.path()).await;
    let client =
        tp_test_support::McpHttp::new(&edge.addr, Some(fleet.key("qa", "collector")), LEGACY);
    // The registry is cached before the control plane goes away.
    assert_eq!(
        client.call("echo", json!({"text": "warm"})).await.status,
        200
    );
    eventually(
        "the first record stored",
        Duration::from_secs(10),
        || async { (trail(&fleet, "qa", 0).await.len() == 1).then_some(()) },
    )
    .await;
    // The control plane stops; 20 calls are answered from the cache; then the edge stops.
    fleet.cp.process.kill9().await;
    let mut ids = BTreeSet::new();
    for n in 0..20 {
        let reply = client
            .call("echo", json!({"text": format!("away-{n}")}))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.result()["isError"], json!(false), "{}", reply.body);
        ids.insert(
            reply
                .headers
                .get("x-request-id")
                .map(|v| v.to_str().unwrap().to_owned())
                .expect("x-request-id"),
        );
    }
    let status = edge.process.terminate().await;
    assert!(status.is_some_and(|s| s.success()), "{}", edge.log());
    assert!(
        edge.log().contains("wait in the spill file"),
        "{}",
        edge.log()
    );
    let spilled: u64 = std::fs::read_dir(spill.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(spilled > 0, "nothing on disk");
    // The control plane is back; a new edge with the same folder delivers them, once.
    fleet.cp.restart_same_port().await;
    let edge2 = start(&fleet, spill.path()).await;
    let records = eventually("21 records", Duration::from_secs(15), || async {
        let records = trail(&fleet, "qa", 0).await;
        (records.values().sum::<u32>() >= 21).then_some(records)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(3 * FLUSH_MS)).await;
    let records_later = trail(&fleet, "qa", 0).await;
    assert_eq!(records, records_later);
    assert_eq!(records.values().sum::<u32>(), 21, "{records:?}");
    for id in &ids {
        assert_eq!(records.get(id), Some(&1), "{id} in {records:?}");
    }
    let files: Vec<u64> = std::fs::read_dir(spill.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    assert_eq!(
        files,
        vec![0],
        "the adopted file deleted, the new one empty"
    );
    drop(edge2);
}
