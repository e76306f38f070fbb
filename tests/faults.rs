//! Faults under load, with real processes and real kills on loopback: the control plane and
//! Redis killed (SIGKILL) while clients keep calling, a silent network path between an edge and
//! its control plane or Redis, and a control plane killed during a stream of writes. Each test
//! prints what it measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use tokio::task::JoinHandle;
use tp_proto::pb;
use tp_test_support::{ControlPlaneProcess, EdgeProcess, McpHttp, StallProxy, eventually};

use crate::fleet::{Fleet, LEGACY};

/// What a load run saw.
#[derive(Debug, Default)]
struct Tally {
    requests: u64,
    errors: u64,
    slowest: Duration,
    samples: Vec<String>,
}

/// Clients calling `tools/list` and `echo` in a loop until stopped; every answer is checked.
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<Tally>>,
}

impl Load {
    fn start(clients: &[McpHttp], expected: &[String], per_client: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for client in clients {
            for worker in 0..per_client {
                let (client, expected, stop) =
                    (client.clone(), expected.to_vec(), Arc::clone(&stop));
                tasks.push(tokio::spawn(async move {
                    let mut tally = Tally::default();
                    let mut i = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        i += 1;
                        let started = Instant::now();
                        let (ok, what) = if i.is_multiple_of(2) {
                            let reply = client.request(i, "tools/list", json!({})).await;
                            let names: Vec<String> = reply.result()["tools"]
                                .as_array()
                                .map(|tools| {
                                    tools
                                        .iter()
                                        .filter_map(|t| t["name"].as_str().map(str::to_owned))
                                        .collect()
                                })
                                .unwrap_or_default();
                            (reply.status == 200 && names == expected, reply.body)
                        } else {
                            let text = format!("worker {worker} call {i}");
                            let reply = client.call("echo", json!({"text": text})).await;
                            let ok = reply.status == 200
                                && reply.result()["isError"] == false
                                && reply.result()["structuredContent"]["arguments"]["text"] == text;
                            (ok, reply.body)
                        };
                        tally.slowest = tally.slowest.max(started.elapsed());
                        tally.requests += 1;
                        if !ok {
                            tally.errors += 1;
                            if tally.samples.len() < 3 {
                                tally.samples.push(what.chars().take(300).collect());
                            }
                        }
                    }
                    tally
                }));
            }
        }
        Load { stop, tasks }
    }

    async fn finish(self) -> Tally {
        self.stop.store(true, Ordering::SeqCst);
        let mut total = Tally::default();
        for task in self.tasks {
            let tally = task.await.expect("load task");
            total.requests += tally.requests;
            total.errors += tally.errors;
            total.slowest = total.slowest.max(tally.slowest);
            total.samples.extend(tally.samples);
        }
        total
    }
}

async fn set_apis(fleet: &Fleet, tenant: &str, apis: &[&str]) {
    let mut admin = fleet.cp.admin().await;
    let mut current = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: tenant.into() })
        .await
        .unwrap()
        .into_inner();
    current.connected_apis = Some(pb::ConnectedApis {
        providers: apis.iter().map(|a| (*a).to_owned()).collect(),
        ..Default::default()
    });
    admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest::replacing(current))
        .await
        .unwrap();
}

/// Waits until `client` lists `tool` (or stops listing it); the time it took.
async fn until_listing(client: &McpHttp, tool: &str, present: bool) -> Duration {
    let started = Instant::now();
    eventually(
        &format!("{tool} listed = {present}"),
        Duration::from_secs(15),
        || async {
            let reply = client.request(1, "tools/list", json!({})).await;
            let listed = reply.result()["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|t| t["name"] == tool));
            (listed == present).then_some(())
        },
    )
    .await;
    started.elapsed()
}

#[tokio::test]
async fn control_plane_killed_under_load_warm_tenants_keep_working_and_edges_converge() {
    let mut fleet = Fleet::start(2, "").await;
    let expected = fleet.listing("qa", "collector").await;
    let clients: Vec<McpHttp> = (0..2)
        .map(|edge| fleet.client(edge, "qa", "collector", LEGACY))
        .collect();
    for client in &clients {
        assert_eq!(client.list_names().await, expected);
    }
    let load = Load::start(&clients, &expected, 2);
    tokio::time::sleep(Duration::from_millis(500)).await;
    fleet.cp.process.kill9().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // An edge started during the outage has never seen the change stream: a key it finds in
    // Redis may have been revoked while no edge was watching, so it answers 503 (retry)
    // rather than trust it, until the control plane is back.
    let fresh =
        EdgeProcess::start(&fleet.cp, &[fleet.cp.url()], Some(&fleet.redis.url()), "").await;
    let fresh_client = McpHttp::new(&fresh.addr, Some(fleet.key("qa", "collector")), LEGACY);
    let unconfirmed = fresh_client.request(1, "tools/list", json!({})).await;
    assert_eq!(
        unconfirmed.status, 503,
        "an edge that never synced must not serve a key from Redis: {}",
        unconfirmed.body
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // Back on the same address: the edges resume their watch streams from their revisions.
    fleet.cp.restart_same_port().await;
    let restarted = Instant::now();
    let tally = load.finish().await;
    assert_eq!(
        tally.errors, 0,
        "warm tenants must be served through the outage: {:?}",
        tally.samples
    );
    let fresh_served = eventually(
        "the fresh edge to serve once the control plane is back",
        Duration::from_secs(10),
        || async {
            (fresh_client
                .request(1, "tools/list", json!({}))
                .await
                .status
                == 200)
                .then(Instant::now)
        },
    )
    .await;
    assert_eq!(fresh_client.list_names().await, expected);
    // A change after the restart reaches all three edges, including the one that never saw
    // the control plane before.
    set_apis(&fleet, "qa", &["testing", "google"]).await;
    let mut slowest = Duration::ZERO;
    for client in clients.iter().chain([&fresh_client]) {
        slowest = slowest.max(until_listing(client, "gmail", true).await);
    }
    println!(
        "control plane SIGKILLed under load for ~3 s: {} requests on warm tenants (two edges), {} errors, slowest {:?}; \
         an edge started during the outage answered 503 until the control plane was back and served {:?} after its restart; \
         after the restart a change reached all edges in {:?} (restart to converged {:?})",
        tally.requests,
        tally.errors,
        tally.slowest,
        fresh_served.duration_since(restarted),
        slowest,
        restarted.elapsed()
    );
}

#[tokio::test]
async fn redis_killed_under_load_costs_no_request_and_recovers() {
    let mut fleet = Fleet::start(2, "").await;
    let expected = fleet.listing("qa", "collector").await;
    let clients: Vec<McpHttp> = (0..2)
        .map(|edge| fleet.client(edge, "qa", "collector", LEGACY))
        .collect();
    for client in &clients {
        assert_eq!(client.list_names().await, expected);
    }
    let load = Load::start(&clients, &expected, 2);
    tokio::time::sleep(Duration::from_millis(500)).await;
    fleet.redis.kill9().await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let (_, ready) = fleet.edges[0].get("/readyz").await;
    assert!(ready.contains("\"redis\":\"down\""), "{ready}");
    fleet.redis.restart().await;
    let restarted = Instant::now();
    eventually(
        "both edges see Redis again",
        Duration::from_secs(15),
        || async {
            let mut up = true;
            for edge in &fleet.edges {
                let (_, ready) = edge.get("/readyz").await;
                up &= ready.contains("\"redis\":\"up\"");
            }
            up.then_some(())
        },
    )
    .await;
    let recovered = restarted.elapsed();
    let tally = load.finish().await;
    assert_eq!(tally.errors, 0, "{:?}", tally.samples);
    println!(
        "Redis SIGKILLed under load for ~2 s: {} requests, {} errors, slowest {:?}; edges reported Redis up {recovered:?} after its restart",
        tally.requests, tally.errors, tally.slowest
    );
}

#[tokio::test]
async fn a_silent_path_to_the_control_plane_is_detected_by_heartbeat_and_healed() {
    let fleet = Fleet::start(0, "").await;
    let proxy = StallProxy::start(&fleet.cp.addr).await;
    // heartbeat 200 ms, dead after 1.5 s (EdgeProcess defaults).
    let edge = EdgeProcess::start(
        &fleet.cp,
        &[format!("http://{}", proxy.addr)],
        Some(&fleet.redis.url()),
        "",
    )
    .await;
    let client = McpHttp::new(&edge.addr, Some(fleet.key("qa", "collector")), LEGACY);
    let expected = fleet.listing("qa", "collector").await;
    assert_eq!(client.list_names().await, expected);
    let synced = |body: &str| body.contains("\"watch_synced\":true");
    eventually("the watch to sync", Duration::from_secs(10), || async {
        synced(&edge.get("/readyz").await.1).then_some(())
    })
    .await;

    proxy.stall();
    let stalled = Instant::now();
    eventually(
        "the edge to notice the silent stream",
        Duration::from_secs(10),
        || async { (!synced(&edge.get("/readyz").await.1)).then_some(()) },
    )
    .await;
    let detected = stalled.elapsed();
    // Warm tenants are served from the caches meanwhile.
    let load = Load::start(std::slice::from_ref(&client), &expected, 2);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let tally = load.finish().await;
    assert_eq!(tally.errors, 0, "{:?}", tally.samples);
    assert!(
        tally.slowest < Duration::from_secs(1),
        "warm requests must not wait on the silent path: slowest {:?}",
        tally.slowest
    );

    proxy.resume();
    let resumed = Instant::now();
    eventually(
        "the watch to sync again",
        Duration::from_secs(15),
        || async { synced(&edge.get("/readyz").await.1).then_some(()) },
    )
    .await;
    let reconnected = resumed.elapsed();
    set_apis(&fleet, "qa", &["testing", "google"]).await;
    let propagated = until_listing(&client, "gmail", true).await;
    println!(
        "silent control-plane path: detected after {detected:?} (dead_after_ms 1500), {} warm requests served meanwhile with {} errors, slowest {:?}; \
         reconnected {reconnected:?} after the path healed; the next change arrived in {propagated:?}",
        tally.requests, tally.errors, tally.slowest
    );
}

#[tokio::test]
async fn a_silent_path_to_redis_only_costs_the_redis_timeout() {
    let fleet = Fleet::start(0, "").await;
    let proxy = StallProxy::start(
        fleet
            .redis
            .url()
            .trim_start_matches("redis://")
            .trim_end_matches('/'),
    )
    .await;
    let edge = EdgeProcess::start(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&format!("redis://{}", proxy.addr)),
        "[cache]\nredis_timeout_ms = 250\n",
    )
    .await;
    let client = McpHttp::new(&edge.addr, Some(fleet.key("qa", "collector")), LEGACY);
    let expected = fleet.listing("qa", "collector").await;
    assert_eq!(client.list_names().await, expected);
    proxy.stall();
    let load = Load::start(std::slice::from_ref(&client), &expected, 2);
    // A tenant this edge has not cached yet: L2 times out, the control plane answers.
    let cold = McpHttp::new(&edge.addr, Some(fleet.key("initech", "collector")), LEGACY);
    let started = Instant::now();
    assert_eq!(
        cold.list_names().await,
        fleet.listing("initech", "collector").await
    );
    let cold_took = started.elapsed();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let tally = load.finish().await;
    assert_eq!(tally.errors, 0, "{:?}", tally.samples);
    assert!(
        tally.slowest < Duration::from_secs(2),
        "a silent Redis must not hold requests: slowest {:?}",
        tally.slowest
    );
    proxy.resume();
    println!(
        "silent Redis path: {} warm requests, {} errors, slowest {:?}; a cold tenant answered in {cold_took:?} (Redis timeout 250 ms, then the control plane)",
        tally.requests, tally.errors, tally.slowest
    );
}

fn change_revision(event: &pb::WatchEvent) -> Option<u64> {
    match &event.event {
        Some(pb::watch_event::Event::Change(change)) => Some(change.revision),
        _ => None,
    }
}

#[tokio::test]
async fn kill_9_during_a_stream_of_writes_loses_no_acknowledged_write_and_watchers_see_each_once() {
    let mut cp = ControlPlaneProcess::start(false).await;
    let start = cp
        .admin()
        .await
        .policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner()
        .revision;
    // A watcher that resumes from its last revision whenever its stream breaks.
    let addr = cp.url();
    let token = cp.edge_token();
    let stop = Arc::new(AtomicBool::new(false));
    let last_seen = Arc::new(AtomicU64::new(start));
    let watcher = {
        let (addr, token, stop) = (addr.clone(), token.clone(), Arc::clone(&stop));
        let last_seen = Arc::clone(&last_seen);
        tokio::spawn(async move {
            let mut seen: Vec<u64> = Vec::new();
            let mut reconnects = 0;
            while !stop.load(Ordering::SeqCst) {
                let Ok(mut client) = tp_client::Admin::connect(&addr, &token).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let since = seen.last().copied().unwrap_or(start);
                let Ok(stream) = client
                    .registry
                    .watch(pb::WatchRequest {
                        since_revision: since,
                        heartbeat_ms: 100,
                    })
                    .await
                else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                reconnects += 1;
                let mut stream = stream.into_inner();
                loop {
                    match tokio::time::timeout(Duration::from_millis(500), stream.next()).await {
                        Ok(Some(Ok(event))) => {
                            if let Some(revision) = change_revision(&event) {
                                seen.push(revision);
                                last_seen.store(revision, Ordering::SeqCst);
                            }
                        }
                        Ok(_) | Err(_) => break,
                    }
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                }
            }
            (seen, reconnects - 1)
        })
    };
    // The writer: one provider per write; a write counts once the control plane acknowledged it.
    let mut acknowledged = Vec::new();
    let mut admin = cp.admin().await;
    let writes_before_kill = 150;
    for i in 0..writes_before_kill {
        let id = format!("w{i:04}");
        let writer = {
            let mut catalog = admin.catalog.clone();
            let id = id.clone();
            tokio::spawn(async move {
                catalog
                    .upsert_provider(pb::UpsertProviderRequest {
                        provider: Some(pb::Provider {
                            id,
                            ..Default::default()
                        }),
                    })
                    .await
            })
        };
        if i == writes_before_kill - 1 {
            // Kill while the last write is in flight: it may or may not have committed, but
            // it was not acknowledged.
            cp.process.kill9().await;
        }
        if matches!(writer.await, Ok(Ok(_))) {
            acknowledged.push(id);
        }
    }
    cp.restart_same_port().await;
    admin = cp.admin().await;
    for i in writes_before_kill..writes_before_kill + 20 {
        let id = format!("w{i:04}");
        admin
            .catalog
            .upsert_provider(pb::UpsertProviderRequest {
                provider: Some(pb::Provider {
                    id: id.clone(),
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        acknowledged.push(id);
    }
    let head = admin
        .policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner()
        .revision;
    let stored: Vec<String> = admin
        .catalog
        .list_providers(pb::ListProvidersRequest {})
        .await
        .unwrap()
        .into_inner()
        .providers
        .into_iter()
        .map(|p| p.id)
        .collect();
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|id| !stored.contains(id))
        .collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    eventually(
        "the watcher to reach the head",
        Duration::from_secs(15),
        || async { (last_seen.load(Ordering::SeqCst) >= head).then_some(()) },
    )
    .await;
    // Anything after the head would be a duplicate or an invention: give it time to show.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let (seen, reconnects) = watcher.await.unwrap();
    let expected: Vec<u64> = (start + 1..=head).collect();
    assert_eq!(
        seen, expected,
        "the watcher sees every revision once, in order, across the kill"
    );
    let committed_unacknowledged =
        stored.iter().filter(|id| id.starts_with('w')).count() - acknowledged.len();
    println!(
        "kill -9 during {writes_before_kill} sequential writes: {} acknowledged, 0 lost ({committed_unacknowledged} committed without an acknowledgement); \
         revisions {}..={head} without gaps; the watcher saw each of {} changes once across {reconnects} reconnect(s)",
        acknowledged.len(),
        start + 1,
        seen.len()
    );
}

/// Revoked and expired keys are refused on every edge within a second.
#[tokio::test]
async fn revoked_and_expired_keys_are_refused_on_every_edge_within_a_second() {
    let fleet = Fleet::start(2, "").await;
    let mut admin = fleet.cp.admin().await;
    let mut worst = Duration::ZERO;
    let mut trials = Vec::new();
    for trial in 0..5 {
        // Revocation.
        let issued = admin
            .tenants
            .issue_api_key(pb::IssueApiKeyRequest {
                tenant: "qa".into(),
                role: "collector".into(),
                label: format!("revoke-{trial}"),
                ttl_seconds: 0,
            })
            .await
            .unwrap()
            .into_inner();
        let clients: Vec<McpHttp> = fleet
            .edges
            .iter()
            .map(|edge| McpHttp::new(&edge.addr, Some(&issued.key), LEGACY))
            .collect();
        for client in &clients {
            assert_eq!(client.request(1, "tools/list", json!({})).await.status, 200);
        }
        admin
            .tenants
            .revoke_api_key(pb::RevokeApiKeyRequest {
                id: issued.info.as_ref().unwrap().id.clone(),
            })
            .await
            .unwrap();
        let revoked = Instant::now();
        for client in &clients {
            refused_by(client).await;
        }
        let took = revoked.elapsed();
        worst = worst.max(took);
        trials.push(format!("revoked {took:?}"));
    }
    // Expiry: a key with a 2 s lifetime, warm on both edges, refused once it expires.
    let issued = admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "qa".into(),
            role: "collector".into(),
            label: "expiring".into(),
            ttl_seconds: 2,
        })
        .await
        .unwrap()
        .into_inner();
    let issued_at = Instant::now();
    let clients: Vec<McpHttp> = fleet
        .edges
        .iter()
        .map(|edge| McpHttp::new(&edge.addr, Some(&issued.key), LEGACY))
        .collect();
    for client in &clients {
        assert_eq!(client.request(1, "tools/list", json!({})).await.status, 200);
    }
    let expiry = issued_at + Duration::from_secs(2);
    tokio::time::sleep_until(expiry.into()).await;
    for client in &clients {
        refused_by(client).await;
    }
    let late = expiry.elapsed();
    trials.push(format!("expired, refused {late:?} after expiry"));
    worst = worst.max(late);
    assert!(
        worst < Duration::from_secs(1),
        "keys must be refused on every edge within 1 s: {trials:?}"
    );
    println!(
        "keys refused on both edges: {}; max {worst:?}",
        trials.join(", ")
    );
}

async fn refused_by(client: &McpHttp) {
    eventually("the key to be refused", Duration::from_secs(5), || async {
        let reply = client.request(1, "tools/list", json!({})).await;
        (reply.status == 401).then_some(())
    })
    .await;
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn threads(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Many calls, some slow past their deadline, some failing: the edge's memory and threads
/// settle instead of growing with the number of calls.
#[tokio::test]
async fn many_calls_with_timeouts_and_failures_do_not_grow_the_edge() {
    let fleet = Fleet::start(1, "[mcp]\nrequest_timeout_ms = 300\n").await;
    let pid = fleet.edges[0].process.pid().unwrap();
    let client = fleet.client(0, "qa", "collector", LEGACY);
    let calls: usize = std::env::var("TOOLPLANE_SOAK_CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let run = |count: usize| {
        let client = client.clone();
        async move {
            let results: Vec<(u16, bool)> = futures::stream::iter(0..count)
                .map(|i| {
                    let client = client.clone();
                    async move {
                        let reply = match i % 100 {
                            // Past the 300 ms deadline: answered at the deadline.
                            0 => client.call("sleep", json!({"ms": 1000})).await,
                            1 => client.call("fail", json!({})).await,
                            _ => {
                                client
                                    .call("echo", json!({"text": format!("call {i}")}))
                                    .await
                            }
                        };
                        let ok = reply.status == 200 && reply.result()["isError"] == false;
                        (reply.status, ok)
                    }
                })
                .buffer_unordered(16)
                .collect()
                .await;
            results
        }
    };

    let warmup = run(2_000).await;
    assert!(warmup.iter().filter(|(_, ok)| *ok).count() > 1_900);
    let (rss_before, threads_before) = (rss_kib(pid), threads(pid));
    let started = Instant::now();
    let results = run(calls).await;
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_after, threads_after) = (rss_kib(pid), threads(pid));
    let ok = results.iter().filter(|(_, ok)| *ok).count();
    let timed_out = results.iter().filter(|(status, _)| *status == 504).count();
    // 98 of every 100 calls succeed; the sleeper times out (504 or an isError result at the
    // deadline); `fail` is an isError result.
    assert!(ok >= calls * 98 / 100, "{ok} of {calls} calls succeeded");
    let growth = rss_after.saturating_sub(rss_before);
    assert!(
        growth < 32 * 1024,
        "edge RSS grew by {growth} KiB over {calls} calls ({rss_before} → {rss_after} KiB)"
    );
    assert!(
        threads_after <= threads_before + 2,
        "{threads_before} → {threads_after} threads"
    );
    println!(
        "{calls} calls in {took:?} ({:.0}/s, 16 at a time, debug build): {ok} ok, {timed_out} answered 504 at the 300 ms deadline; \
         edge RSS {rss_before} → {rss_after} KiB (+{growth}), threads {threads_before} → {threads_after}",
        calls as f64 / took.as_secs_f64()
    );
}

/// Issue 17 (graceful shutdown): SIGTERM stops the edge accepting connections, ends nothing in
/// flight, and answers the call it holds with the executor's result before it exits.
#[tokio::test]
async fn sigterm_finishes_calls_in_flight_and_accepts_nothing_new() {
    let mut fleet = Fleet::start(1, "").await;
    let client = fleet.client(0, "qa", "collector", LEGACY);
    let addr = fleet.edges[0].addr.clone();
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call("sleep", json!({"ms": 1500})).await }
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    let started = Instant::now();
    let pid = fleet.edges[0].process.pid().unwrap();
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    // New connections are refused while the call finishes.
    eventually("the listener to close", Duration::from_secs(5), || {
        let addr = addr.clone();
        async move {
            tokio::net::TcpStream::connect(&addr)
                .await
                .is_err()
                .then_some(())
        }
    })
    .await;
    assert!(
        !call.is_finished(),
        "the call is still running when the listener has closed"
    );
    let reply = call.await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.result()["isError"],
        false,
        "the call in flight is answered with its result: {}",
        reply.body
    );
    let status = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if fleet.edges[0].process.has_exited() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(status.is_ok(), "the edge exits once the call is answered");
    let log = fleet.edges[0].log();
    assert!(
        !log.contains("panicked") && !log.contains(" ERROR "),
        "{log}"
    );
    println!(
        "SIGTERM with a 1.5 s call in flight: the call answered, the edge exited {:.1} s after the signal",
        started.elapsed().as_secs_f64()
    );
}

/// A TCP front for an executor: drops the next `refuse` connections as soon as they are made
/// (the executor never sees them), forwards the others, and closes every forwarded connection
/// when `reset` is bumped.
async fn flaky_front(
    upstream: String,
    refuse: Arc<AtomicU64>,
    reset: tokio::sync::watch::Receiver<u64>,
) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            if refuse
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                drop(client);
                continue;
            }
            let upstream = upstream.clone();
            let mut reset = reset.clone();
            reset.borrow_and_update();
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await {
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = reset.changed() => {}
                    }
                }
            });
        }
    });
    addr
}

/// Retries: a call whose executor could not be reached, or whose connection failed under it
/// before anything came back, is sent again once when the tool is idempotent (a repeat is
/// harmless), and never when it is not (the caller hears that the tool is unavailable or may
/// have run, and decides). Counted in `tp_edge_executor_retries_total`.
#[tokio::test]
async fn an_unreachable_executor_is_retried_once_for_idempotent_tools_only() {
    let fleet = Fleet::start(0, "").await;
    let refuse = Arc::new(AtomicU64::new(0));
    let (reset, resets) = tokio::sync::watch::channel(0u64);
    let front = flaky_front(fleet.executor.addr.clone(), Arc::clone(&refuse), resets).await;
    let mut admin = fleet.cp.admin().await;
    tp_test_support::admin::upsert_executor(
        &mut admin,
        tp_test_support::admin::NewExecutor {
            timeout_ms: 5_000,
            max_concurrency: 8,
            ..tp_test_support::admin::NewExecutor::grpc("demo", format!("http://{front}"))
        },
    )
    .await;
    let edge = EdgeProcess::start(&fleet.cp, &[fleet.cp.url()], None, "").await;
    let client = McpHttp::new(&edge.addr, Some(fleet.key("qa", "collector")), LEGACY);
    let retries = || async {
        let (_, text) = edge.admin_get("/metrics").await;
        text.lines()
            .filter(|l| l.starts_with("tp_edge_executor_retries_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    // Warm: the edge knows the registry; its channel to the executor has not connected yet.
    assert!(client.list_names().await.contains(&"echo".to_owned()));
    // The channel's first connection is refused: echo (idempotent) is retried on a new one and
    // answered.
    let before = retries().await;
    refuse.store(1, Ordering::SeqCst);
    let echo = client.call("echo", json!({"text": "again"})).await;
    assert_eq!(
        echo.result()["isError"],
        false,
        "{}\n{}",
        echo.body,
        edge.log()
    );
    assert_eq!(refuse.load(Ordering::SeqCst), 0, "the refusal was used");
    assert_eq!(retries().await - before, 1.0, "one retry");
    // sleep is not idempotent: not retried; the caller is told it is unavailable.
    reset.send_modify(|n| *n += 1);
    // Long enough for the edge to see the connection close (on a loaded machine too): a call
    // sent on a connection that dies under it is not "unreachable" (it may have run).
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    refuse.store(1, Ordering::SeqCst);
    let sleep = client.call("sleep", json!({"ms": 10})).await;
    assert_eq!(sleep.result()["isError"], true, "{}", sleep.body);
    // Refused before the call was sent ("unavailable") or the connection failed under it
    // ("may or may not have run"): which one depends on when the edge's client sees the drop.
    assert!(
        sleep.body.contains("unavailable") || sleep.body.contains("may or may not have run"),
        "{}",
        sleep.body
    );
    assert_eq!(
        retries().await - before,
        1.0,
        "no retry of a non-idempotent call"
    );
    println!(
        "retries: an idempotent call retried once after a refused connection and answered; a non-idempotent one not retried"
    );
}
