//! The trust boundary, attacked as an attacker would, against real processes: each test
//! reproduces one attack of docs/reliability.md's threat model and checks that it is held.
//! (The wiki's attacks are in `trust_wiki.rs`; the fuzz of the MCP surface in `fuzz_mcp.rs`.)

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tp_proto::pb;
use tp_test_support::{ControlPlaneProcess, EdgeProcess, McpHttp, eventually};

use crate::fleet::{Fleet, LEGACY};

/// A fresh key for (tenant, role) and its id.
async fn issue(admin: &mut tp_client::Admin, tenant: &str, role: &str) -> (String, String) {
    let issued = admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: tenant.into(),
            role: role.into(),
            label: "trust".into(),
            ttl_seconds: 0,
        })
        .await
        .unwrap()
        .into_inner();
    (issued.key, issued.info.unwrap().id)
}

fn nested(levels: usize) -> Value {
    let mut value = json!("x");
    for _ in 0..levels {
        value = json!({ "a": value });
    }
    value
}

fn is_error_result(reply: &tp_test_support::HttpReply) -> bool {
    reply.result()["isError"] == true
}

fn text_of(reply: &tp_test_support::HttpReply) -> String {
    reply.result()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// T1. A key revoked while the edge could see it stays refused when the control plane goes
/// away — with and without Redis — and a key nobody revoked is trusted only for
/// `cache.identity_max_stale_secs` without the control plane.
#[tokio::test]
async fn t1_a_revoked_key_stays_refused_while_the_control_plane_is_unreachable() {
    let mut fleet = Fleet::start(0, "").await;
    let mut admin = fleet.cp.admin().await;
    let config = "[cache]\nidentity_max_stale_secs = 6\n";
    let without_redis = EdgeProcess::start(&fleet.cp, &[fleet.cp.url()], None, config).await;
    let with_redis = EdgeProcess::start(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&fleet.redis.url()),
        config,
    )
    .await;
    let (revoked, revoked_id) = issue(&mut admin, "qa", "collector").await;
    let (kept, _) = issue(&mut admin, "qa", "executor").await;
    let edges = [
        ("without Redis", &without_redis),
        ("with Redis", &with_redis),
    ];
    // Both keys are used (and cached) on both edges.
    for (_, edge) in edges {
        for key in [&revoked, &kept] {
            let client = McpHttp::new(&edge.addr, Some(key), LEGACY);
            assert_eq!(client.call("echo", json!({"text": "hi"})).await.status, 200);
        }
    }
    admin
        .tenants
        .revoke_api_key(pb::RevokeApiKeyRequest { id: revoked_id })
        .await
        .unwrap();
    for (name, edge) in edges {
        let client = McpHttp::new(&edge.addr, Some(&revoked), LEGACY);
        eventually(
            &format!("the revocation to reach the edge {name}"),
            Duration::from_secs(5),
            || async {
                (client.call("echo", json!({"text": "hi"})).await.status == 401).then_some(())
            },
        )
        .await;
    }
    // The control plane goes away.
    fleet.cp.process.kill9().await;
    let outage = Instant::now();
    for (name, edge) in edges {
        let refused = McpHttp::new(&edge.addr, Some(&revoked), LEGACY)
            .call("echo", json!({"text": "after the outage began"}))
            .await;
        assert_eq!(
            refused.status, 401,
            "{name}: the revoked key works again: {}",
            refused.body
        );
        let served = McpHttp::new(&edge.addr, Some(&kept), LEGACY)
            .call("echo", json!({"text": "still served"}))
            .await;
        assert_eq!(
            served.status, 200,
            "{name}: availability for keys nobody revoked: {}",
            served.body
        );
    }
    // Past identity_max_stale_secs without the control plane, no key is trusted any more.
    for (name, edge) in edges {
        let client = McpHttp::new(&edge.addr, Some(&kept), LEGACY);
        eventually(
            &format!("{name}: the unconfirmable key to be refused"),
            Duration::from_secs(15),
            || async {
                (client.call("echo", json!({"text": "x"})).await.status == 401).then_some(())
            },
        )
        .await;
    }
    println!(
        "T1 held: a revoked key was refused on both edges (with and without Redis) during a control-plane outage; an unrevoked key was served, then refused {:.1} s into the outage (identity_max_stale_secs 6)",
        outage.elapsed().as_secs_f64()
    );
}

/// T2. One tenant cannot open an executor's breaker for the others, nor take its concurrency:
/// inputs executors cannot decode never leave the edge, failures count against the caller's
/// own breaker, and a tenant's calls hold at most its share of the executor's slots.
#[tokio::test]
async fn t2_one_tenant_cannot_open_a_breaker_or_take_every_slot_of_an_executor() {
    let fleet = Fleet::start(
        1,
        "[executors]\nbreaker_failures = 3\nbreaker_cooldown_ms = 30000\n",
    )
    .await;
    // globex sees every tool (ADR-039: no connected_apis); qa the testing provider's.
    let attacker = fleet.client(0, "globex", "collector", LEGACY);
    let victim = fleet.client(0, "qa", "collector", LEGACY);
    let mut tried = 0;
    // Structures the executor's protobuf decoder cannot take: refused at the edge, -32602.
    for depth in [31, 40, 64] {
        for params in [
            json!({"name": "echo", "arguments": {"text": "x", "deep": nested(depth)}}),
            json!({"name": "echo", "arguments": {"text": "x"}, "inputResponses": {"r": nested(depth)}}),
        ] {
            let reply = attacker.request(1, "tools/call", params).await;
            assert_eq!(
                reply.error()["code"],
                -32602,
                "depth {depth}: {}",
                reply.body
            );
            tried += 1;
        }
    }
    // Failing calls open the attacker's own breaker only.
    let mut own_open = false;
    for _ in 0..10 {
        let reply = attacker.call("fail", json!({})).await;
        assert!(is_error_result(&reply), "{}", reply.body);
        own_open |= text_of(&reply).contains("circuit breaker open");
        tried += 1;
    }
    assert!(own_open, "the attacker's failures open its own breaker");
    // The same tool, with input it can run, keeps working for everyone else — interleaved
    // with more of the attacker's failures.
    for _ in 0..5 {
        let reply = victim.call("fail", json!({"succeed": true})).await;
        assert!(
            !is_error_result(&reply),
            "another tenant still reaches the executor: {}",
            text_of(&reply)
        );
        let _ = attacker.call("fail", json!({})).await;
        tried += 1;
    }
    // Errors the caller causes never count: the wiki refuses an object key outside the
    // tenant's folder every time, and keeps answering (no breaker opens).
    for _ in 0..6 {
        let reply = attacker
            .call(
                "client_wiki",
                json!({"action": "ingest", "source": {"type": "r2", "r2_key": "../../etc/passwd"}}),
            )
            .await;
        let text = text_of(&reply);
        assert!(
            text.contains("refused the call") && text.contains("r2_key"),
            "{text}"
        );
        tried += 1;
    }
    // Concurrency: the demo executor has 64 slots; the attacker's 80 slow calls hold its 50 %
    // share (32) and queue the rest on their own tenant's share, so the victim gets a slot.
    let slow: Vec<_> = (0..80)
        .map(|_| {
            let attacker = attacker.clone();
            tokio::spawn(async move { attacker.call("sleep", json!({"ms": 3000})).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let reply = victim.call("echo", json!({"text": "my turn"})).await;
    let waited = started.elapsed();
    assert!(!is_error_result(&reply), "{}", reply.body);
    assert!(
        waited < Duration::from_millis(2000),
        "the victim waited {waited:?} behind the attacker's calls"
    );
    for call in slow {
        let _ = call.await;
    }
    println!(
        "T2 held: {tried} attacker calls (undecodable depths, executor failures, refused inputs) left every other tenant's calls reaching the executor; with 80 of the attacker's slow calls (more than the executor's 64 slots) in flight the victim's call took {:.0} ms",
        waited.as_secs_f64() * 1000.0
    );
}

fn now_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// A gRPC Executor client of `addr`.
async fn executor_client(
    addr: &str,
) -> pb::executor_client::ExecutorClient<tonic::transport::Channel> {
    pb::executor_client::ExecutorClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

fn invoke(tenant: &str) -> pb::InvokeRequest {
    pb::InvokeRequest {
        tool: "client_wiki".into(),
        action: "query".into(),
        arguments: tp_proto::json::to_struct(&json!({"action": "query", "question": "secrets?"})),
        tenant: tenant.into(),
        role: "executor".into(),
        request_id: "trust".into(),
        deadline_ms: 4_102_444_800_000,
        ..Default::default()
    }
}

/// T3. Executors serve only the fleet's edges: unsigned, forged, tampered, replayed (late, or
/// at once) and past-deadline calls are refused, on `Invoke` and `PurgeTenant`, by the wiki and
/// the demo executor; an emptied key file refuses everything.
#[tokio::test]
async fn t3_executors_refuse_calls_the_fleet_did_not_sign() {
    let fleet = Fleet::start(0, "").await;
    let (key_text, _) = tp_test_support::executor_key();
    let key = tp_proto::invoke_auth::ExecutorKey::parse(key_text).unwrap();
    let forged = tp_proto::invoke_auth::ExecutorKey::generate();
    let mut refused = 0;
    for addr in [&fleet.wiki.addr, &fleet.executor.addr] {
        let mut client = executor_client(addr).await;
        let attempts: Vec<(&str, tonic::Request<pb::InvokeRequest>)> = vec![
            ("unsigned", tonic::Request::new(invoke("acme"))),
            ("another key", {
                let mut request = tonic::Request::new(invoke("acme"));
                forged.sign_request("Invoke", &mut request);
                request
            }),
            ("signed for another tenant", {
                let signature = key.sign("Invoke", &invoke("globex"));
                let mut request = tonic::Request::new(invoke("acme"));
                request
                    .metadata_mut()
                    .insert("x-toolplane-signature", signature.parse().unwrap());
                request
            }),
            ("replayed an hour later", {
                let an_hour_ago = u64::try_from(
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_millis(),
                )
                .unwrap()
                    - 3_600_000;
                let signature = key.sign_at("Invoke", &invoke("acme"), an_hour_ago);
                let mut request = tonic::Request::new(invoke("acme"));
                request
                    .metadata_mut()
                    .insert("x-toolplane-signature", signature.parse().unwrap());
                request
            }),
            ("signed for another method", {
                let signature = key.sign("PurgeTenant", &invoke("acme"));
                let mut request = tonic::Request::new(invoke("acme"));
                request
                    .metadata_mut()
                    .insert("x-toolplane-signature", signature.parse().unwrap());
                request
            }),
        ];
        for (what, request) in attempts {
            let status = client
                .invoke(request)
                .await
                .err()
                .unwrap_or_else(|| panic!("{addr}: a call {what} was served"));
            assert_eq!(
                status.code(),
                tonic::Code::Unauthenticated,
                "{what}: {status:?}"
            );
            refused += 1;
        }
        let status = client
            .purge_tenant(pb::PurgeTenantRequest {
                tenant: "acme".into(),
                tenant_uid: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
        refused += 1;
        // The same call, signed, is served: the check is not refusing everything.
        let mut signed = tonic::Request::new(invoke("acme"));
        key.sign_request("Invoke", &mut signed);
        let replay = signed.metadata().clone();
        assert!(client.invoke(signed).await.is_ok(), "{addr}: a signed call");
        // Captured and sent again, exactly as it was: refused (the executor remembers it).
        let mut replayed = tonic::Request::new(invoke("acme"));
        *replayed.metadata_mut() = replay;
        let status = client.invoke(replayed).await.unwrap_err();
        assert_eq!(
            status.code(),
            tonic::Code::Unauthenticated,
            "{addr}: replay"
        );
        assert!(status.message().contains("replay"), "{}", status.message());
        refused += 1;
        // Signed now, but for a deadline that has passed (the key's holder was revoked since,
        // say): refused, whatever the signature's time window.
        let past = pb::InvokeRequest {
            deadline_ms: now_ms() - 10_000,
            ..invoke("acme")
        };
        let mut late = tonic::Request::new(past);
        key.sign_request("Invoke", &mut late);
        let status = client.invoke(late).await.unwrap_err();
        assert_eq!(
            status.code(),
            tonic::Code::Unauthenticated,
            "{addr}: past deadline"
        );
        refused += 1;
    }
    // An executor whose key file is emptied (the operator took the key away) refuses every
    // call, instead of keeping the last keys.
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("executor-keys");
    std::fs::write(&keys, key.encode()).unwrap();
    let emptied = tp_test_support::ExecutorProcess::start_with_args(vec![
        "--auth-key-file".into(),
        keys.display().to_string(),
    ])
    .await;
    let mut client = executor_client(&emptied.addr).await;
    let mut signed = tonic::Request::new(invoke("acme"));
    key.sign_request("Invoke", &mut signed);
    assert!(client.invoke(signed).await.is_ok());
    std::fs::write(&keys, "# no key: refuse everything\n").unwrap();
    eventually(
        "the emptied key file to refuse calls",
        Duration::from_secs(5),
        || {
            let mut client = client.clone();
            let key = key.clone();
            async move {
                let mut signed = tonic::Request::new(invoke("acme"));
                key.sign_request("Invoke", &mut signed);
                client
                    .invoke(signed)
                    .await
                    .err()
                    .filter(|s| s.code() == tonic::Code::Unauthenticated)
                    .map(|_| ())
            }
        },
    )
    .await;
    refused += 1;
    println!(
        "T3 held: {refused} unsigned, forged, tampered, late, replayed, past-deadline or misdirected executor calls refused (UNAUTHENTICATED) by the wiki and the demo executor, and every call by an executor whose key file was emptied; signed calls served"
    );
}

/// Reads until the peer closes (or 30 s): how long the connection stayed open.
async fn held_for(mut stream: tokio::net::TcpStream, opened: Instant) -> Duration {
    let mut buf = [0u8; 1024];
    let deadline = opened + Duration::from_secs(30);
    loop {
        match tokio::time::timeout_at(deadline.into(), stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) | Err(_) => return opened.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// T4. Clients without a key cannot hold connections: slow heads, slow bodies and idle
/// connections are cut within the configured deadlines on the edge (warm `tools/list` path
/// included) and the control plane, and past the connection cap new connections are closed at
/// once instead of exhausting file descriptors.
#[tokio::test]
async fn t4_slow_and_idle_clients_are_cut_and_the_connection_cap_holds() {
    let fleet = Fleet::start(0, "").await;
    let edge = EdgeProcess::start(
        &fleet.cp,
        &[fleet.cp.url()],
        None,
        "[http]\nmax_connections = 64\nheader_read_timeout_ms = 1000\nbody_read_timeout_ms = 1000\n",
    )
    .await;
    let key = fleet.key("qa", "collector").to_owned();
    let warm = McpHttp::new(&edge.addr, Some(&key), LEGACY);
    assert!(!warm.list_names().await.is_empty());
    let pid = edge.process.pid().unwrap();
    let baseline_fds = open_fds(pid);
    // 300 connections, each sending half a request head and nothing more.
    let mut slow = Vec::new();
    for _ in 0..300 {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(&edge.addr).await {
            let _ = stream
                .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .await;
            slow.push((stream, Instant::now()));
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let peak_fds = open_fds(pid);
    assert!(
        peak_fds <= baseline_fds + 64 + 8,
        "the cap holds: {peak_fds} descriptors open (baseline {baseline_fds}, cap 64)"
    );
    let held: Vec<Duration> = futures::future::join_all(
        slow.into_iter()
            .map(|(stream, opened)| held_for(stream, opened)),
    )
    .await;
    let longest = held.iter().max().copied().unwrap_or_default();
    assert!(
        longest < Duration::from_secs(5),
        "a slow head held its connection {longest:?}"
    );
    // A slow body, on the warm tools/list path: the head is complete, the body never is.
    let mut stream = tokio::net::TcpStream::connect(&edge.addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {LEGACY}\r\nContent-Length: 60\r\n\r\n{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut answer = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body_cut = started.elapsed();
    // Past the attack, clients are served again.
    assert!(!warm.list_names().await.is_empty());
    // The control plane: connections that never send the HTTP/2 preface are cut too.
    let cp_dir = tempfile::tempdir().unwrap();
    let cp = ControlPlaneProcess::start_with_env(
        cp_dir.path(),
        Vec::new(),
        vec![
            ("TOOLPLANE_CP_GRPC__HANDSHAKE_TIMEOUT_MS", "1000".into()),
            ("TOOLPLANE_CP_GRPC__MAX_CONNECTIONS", "32".into()),
        ],
    )
    .await;
    let mut idle = Vec::new();
    for _ in 0..100 {
        if let Ok(stream) = tokio::net::TcpStream::connect(&cp.addr).await {
            idle.push((stream, Instant::now()));
        }
    }
    let cp_held: Vec<Duration> =
        futures::future::join_all(idle.into_iter().map(|(s, o)| held_for(s, o))).await;
    let cp_longest = cp_held.iter().max().copied().unwrap_or_default();
    assert!(cp_longest < Duration::from_secs(5), "{cp_longest:?}");
    let mut admin = cp.admin().await;
    assert!(
        admin
            .policy
            .get_policy(pb::GetPolicyRequest {})
            .await
            .is_ok()
    );
    println!(
        "T4 held: 300 slow heads on the edge held their connections at most {:.1} s (header_read_timeout 1 s), {peak_fds} descriptors at the peak (cap 64); a slow body answered 408 after {:.1} s; 100 silent connections to the control plane held at most {:.1} s (handshake timeout 1 s)",
        longest.as_secs_f64(),
        body_cut.as_secs_f64(),
        cp_longest.as_secs_f64()
    );
}

/// Peak resident memory of a process (VmHWM), KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// T5. Large arguments cannot make the edge spend memory out of proportion: arguments over
/// `mcp.max_argument_bytes` and bodies of too many JSON values are refused before anything is
/// built from them, and the working memory of requests in flight is bounded as a whole.
#[tokio::test]
async fn t5_maximum_size_calls_keep_the_edge_within_its_memory_budget() {
    let fleet = Fleet::start(1, "").await;
    let edge = &fleet.edges[0];
    let client = fleet.client(0, "qa", "collector", LEGACY);
    let pid = edge.process.pid().unwrap();
    assert_eq!(
        client.call("echo", json!({"text": "warm"})).await.status,
        200
    );
    let before = peak_rss_kib(pid);
    let key = format!("Bearer {}", fleet.key("qa", "collector"));
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", LEGACY),
        ("authorization", key.as_str()),
    ];
    // Just under 4 MiB (mcp.max_body_bytes) each: half the calls one long string, half an array
    // of small numbers (the worst case for a JSON parser).
    let bodies: Vec<Vec<u8>> = (0..24)
        .map(|i| {
            let arguments = if i % 2 == 0 {
                json!({"text": "x".repeat(4_000_000)})
            } else {
                json!({"text": "x", "pad": vec![0u8; 1_900_000]})
            };
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": "echo", "arguments": arguments}}))
            .unwrap()
        })
        .collect();
    assert!(bodies.iter().all(|b| b.len() < 4 * 1024 * 1024));
    let calls = bodies.into_iter().map(|body| {
        let client = client.clone();
        async move { client.raw(body, &headers).await }
    });
    let replies = futures::future::join_all(calls).await;
    let mut refused = 0;
    let mut shed = 0;
    for reply in &replies {
        match reply.status {
            200 => {
                assert_eq!(
                    reply.error()["code"],
                    -32602,
                    "{}",
                    &reply.body[..reply.body.len().min(300)]
                );
                let message = reply.error()["message"].as_str().unwrap_or_default();
                assert!(
                    message.contains("max_argument_bytes") || message.contains("max_json_values"),
                    "{message}"
                );
                refused += 1;
            }
            503 => shed += 1,
            other => panic!(
                "unexpected status {other}: {}",
                &reply.body[..reply.body.len().min(300)]
            ),
        }
    }
    let peak = peak_rss_kib(pid);
    // The largest calls the limits let through — 90,000 values in 0.6 MiB of arguments, each
    // forwarded to the executor — 24 at once: the in-flight budget admits what it can hold.
    let big: Vec<Vec<u8>> = (0..24)
        .map(|i| {
            serde_json::to_vec(
                &json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x", "pad": vec![7u8; 90_000]}}}),
            )
            .unwrap()
        })
        .collect();
    let calls = big.into_iter().map(|body| {
        let client = client.clone();
        async move { client.raw(body, &headers).await }
    });
    let replies = futures::future::join_all(calls).await;
    let served = replies
        .iter()
        .filter(|r| r.status == 200 && r.result()["isError"] == false)
        .count();
    let big_shed = replies.iter().filter(|r| r.status == 503).count();
    // On a loaded machine the executor may not answer some of them within the tool's
    // timeout: that is an answer too (a tool error saying so), never a hang or a 5xx.
    let timed_out = replies
        .iter()
        .filter(|r| {
            r.status == 200
                && r.result()["isError"] == true
                && r.result()["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("echo did not answer within"))
        })
        .count();
    // An executor's answer the budget cannot hold while the others are in flight is refused
    // as a tool error naming `mcp.max_in_flight_bytes` (the result shed, not the request).
    let result_shed = replies
        .iter()
        .filter(|r| {
            r.status == 200
                && r.result()["isError"] == true
                && r.result()["content"][0]["text"].as_str().is_some_and(|t| {
                    t.contains("result is too large for this edge to relay right now")
                })
        })
        .count();
    let others: Vec<String> = replies
        .iter()
        .filter(|r| !(r.status == 200 && r.result()["isError"] == false) && r.status != 503)
        .map(|r| format!("{} {}", r.status, &r.body[..r.body.len().min(200)]))
        .collect();
    assert_eq!(
        served + big_shed + timed_out + result_shed,
        24,
        "every call served, shed (before or after the executor) or timed out; the others: {others:?}"
    );
    assert!(served >= 1, "the budget admits the largest allowed call");
    let peak_big = peak_rss_kib(pid);
    // The edge stays up and serves.
    assert_eq!(
        client.call("echo", json!({"text": "after"})).await.status,
        200
    );
    assert!(
        peak_big < before + 1024 * 1024,
        "maximum-size calls raised the peak from {before} KiB to {peak_big} KiB"
    );
    println!(
        "T5 held: 24 concurrent 4 MiB calls: {refused} refused -32602 before forwarding, {shed} shed; edge peak RSS {:.0} MiB → {:.0} MiB. 24 concurrent calls of 90,000 values (the most allowed): {served} forwarded, {big_shed} shed 503 by the in-flight budget, {result_shed} results shed, {timed_out} timed out; peak RSS {:.0} MiB",
        before as f64 / 1024.0,
        peak as f64 / 1024.0,
        peak_big as f64 / 1024.0
    );
}

/// T6. Schema patterns cannot freeze the edge: patterns a linear-time engine cannot run are
/// refused when the tool is registered, and a pattern that backtracks exponentially elsewhere
/// validates in linear time here while other tenants are served.
#[tokio::test]
async fn t6_schema_patterns_run_in_linear_time_or_are_refused() {
    let fleet = Fleet::start(1, "").await;
    let mut admin = fleet.cp.admin().await;
    let spec = |name: &str, pattern: &str| pb::ToolSpec {
        name: name.into(),
        description: "pattern test".into(),
        category: "testing".into(),
        provider: "testing".into(),
        input_schema: tp_proto::json::to_struct(&json!({"type": "object",
            "properties": {"text": {"type": "string", "pattern": pattern}}, "required": ["text"]})),
        executor: "demo".into(),
        admission: Some(pb::Admission {
            adr: "ADR-100".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    for pattern in ["(?=a)a", "(a)\\1", "(?<!b)a"] {
        let status = admin
            .catalog
            .register_tool(pb::RegisterToolRequest {
                tool: Some(spec("backtracking", pattern)),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{pattern}");
        assert!(
            status.message().contains("linear-time"),
            "{}",
            status.message()
        );
    }
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(spec("evil_regex", "^(a|aa)+$")),
        })
        .await
        .unwrap();
    let attacker = fleet.client(0, "qa", "collector", LEGACY);
    eventually(
        "the tool to reach the edge",
        Duration::from_secs(5),
        || async {
            attacker
                .list_names()
                .await
                .iter()
                .any(|n| n == "evil_regex")
                .then_some(())
        },
    )
    .await;
    // 2^n paths for a backtracking engine; linear here.
    let evil = format!("{}b", "a".repeat(30_000));
    let started = Instant::now();
    let calls = (0..8).map(|_| {
        let attacker = attacker.clone();
        let evil = evil.clone();
        async move { attacker.call("evil_regex", json!({"text": evil})).await }
    });
    let other = fleet.client(0, "acme", "collector", LEGACY);
    let (replies, listed) = tokio::join!(futures::future::join_all(calls), async {
        let started = Instant::now();
        let names = other.list_names().await;
        (names, started.elapsed())
    });
    let took = started.elapsed();
    for reply in &replies {
        assert_eq!(reply.error()["code"], -32602, "{}", reply.body);
        assert!(!reply.body.contains(&evil), "the value is not echoed");
    }
    assert!(!listed.0.is_empty());
    assert!(took < Duration::from_secs(10), "{took:?}");
    println!(
        "T6 held: 3 non-linear patterns refused at registration; 8 concurrent calls against ^(a|aa)+$ with 30,001 characters validated in {:.0} ms in all; another tenant's tools/list meanwhile took {:.0} ms",
        took.as_secs_f64() * 1000.0,
        listed.1.as_secs_f64() * 1000.0
    );
}

/// T8. An admin cannot read an edge's environment through an MCP executor's `credential_env`:
/// only `TOOLPLANE_CRED_…` variables are ever sent, and nothing is sent for the others.
#[tokio::test]
async fn t8_credential_env_cannot_read_the_edges_environment() {
    use tokio::net::TcpListener;
    let fleet = Fleet::start(0, "").await;
    // A server that records what reaches it.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let recorder = std::sync::Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let recorder = std::sync::Arc::clone(&recorder);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let n = stream.read(&mut buf).await.unwrap_or(0);
                recorder
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
                let _ = stream
                    .write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    let mut admin = fleet.cp.admin().await;
    let secret = "edge-secret-the-admin-wants-3f9a";
    let allowed = "upstream-credential-7c21";
    for (name, env) in [
        ("leaky", "TRUST_EDGE_SECRET"),
        ("proper", "TOOLPLANE_CRED_TRUST_UPSTREAM"),
    ] {
        admin
            .executors
            .upsert_executor(pb::UpsertExecutorRequest {
                update_mask: None,
                executor: Some(pb::ExecutorInfo {
                    name: name.into(),
                    endpoint: format!("http://{addr}/mcp"),
                    protocol: pb::ExecutorProtocol::Mcp as i32,
                    timeout_ms: 3000,
                    max_concurrency: 4,
                    tool_prefix: format!("{name}_"),
                    credential_env: env.into(),
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        admin
            .catalog
            .register_tool(pb::RegisterToolRequest {
                tool: Some(pb::ToolSpec {
                    name: format!("{name}_tool"),
                    description: "credential test".into(),
                    category: "testing".into(),
                    provider: "testing".into(),
                    input_schema: tp_proto::json::to_struct(&json!({"type": "object"})),
                    executor: name.into(),
                    admission: Some(pb::Admission {
                        adr: "ADR-100".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
    }
    let edge = EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        None,
        "",
        &[
            ("TRUST_EDGE_SECRET", secret.into()),
            ("TOOLPLANE_CRED_TRUST_UPSTREAM", allowed.into()),
        ],
    )
    .await;
    let client = McpHttp::new(&edge.addr, Some(fleet.key("qa", "collector")), LEGACY);
    let leaky = client.call("leaky_tool", json!({})).await;
    assert!(is_error_result(&leaky), "{}", leaky.body);
    assert!(!leaky.body.contains("TRUST_EDGE_SECRET") && !leaky.body.contains(secret));
    let proper = client.call("proper_tool", json!({})).await;
    assert!(
        is_error_result(&proper),
        "the recorder answers 500: {}",
        proper.body
    );
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.contains(allowed),
        "a prefixed credential is sent: {seen}"
    );
    assert!(
        !seen.contains(secret),
        "an unprefixed variable never leaves the edge"
    );
    assert!(
        edge.log().contains("TRUST_EDGE_SECRET") && edge.log().contains("TOOLPLANE_CRED_"),
        "the operator is told why"
    );
    println!(
        "T8 held: an executor naming an unprefixed variable got nothing (the edge refused before connecting); a TOOLPLANE_CRED_ variable reached its upstream"
    );
}

/// Runs `toolplanectl` against a control plane with a file argument.
fn ctl(cp: &ControlPlaneProcess, args: &[&str]) -> std::process::Output {
    std::process::Command::new(tp_test_support::binary("toolplanectl"))
        .args(["--addr", &cp.url(), "--token", &cp.admin_token()])
        .args(args)
        .output()
        .unwrap()
}

/// T9. Definitions with unknown or misspelt fields, case variants of existing names, names that
/// differ from one only in separators (`google-ads`, `google.ads` beside `google_ads`) and names
/// that are paths are refused with the field named, and change nothing.
#[tokio::test]
async fn t9_misspelt_definitions_and_lookalike_names_are_refused() {
    let cp = ControlPlaneProcess::start(true).await;
    let mut admin = cp.admin().await;
    let before = admin
        .policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner()
        .revision;
    let dir = tempfile::tempdir().unwrap();
    let mut refused = 0;
    for (what, definition, needle) in [
        (
            "a misspelt provider would make a platform tool visible to everyone",
            json!({"name": "crm_lookup", "description": "d", "category": "crm", "provder": "salesforce",
                   "input_schema": {"type": "object"}, "executor": "demo", "rols": ["executor"],
                   "admission": {"owner": "x", "scope": "y"}}),
            "`provder`",
        ),
        (
            "a misspelt schema keyword would validate nothing",
            json!({"name": "crm_lookup", "description": "d", "category": "crm", "provider": "salesforce",
                   "input_schema": {"type": "object", "properties": {"q": {"type": "string", "maxLenght": 3}}},
                   "executor": "demo", "admission": {"owner": "x", "scope": "y"}}),
            "maxLenght",
        ),
        (
            "a case variant of gmail",
            json!({"name": "GMAIL", "description": "d", "category": "google", "provider": "google",
                   "input_schema": {"type": "object"}, "executor": "demo", "admission": {"owner": "x", "scope": "y"}}),
            "letter case",
        ),
        (
            "a name that is a path",
            json!({"name": "..", "description": "d", "category": "x", "input_schema": {"type": "object"},
                   "executor": "demo", "admission": {"owner": "x", "scope": "y"}}),
            "letter or a digit",
        ),
        (
            "google-ads beside google_ads",
            json!({"name": "google-ads", "description": "d", "category": "google", "provider": "google",
                   "input_schema": {"type": "object"}, "executor": "demo", "admission": {"owner": "x", "scope": "y"}}),
            "separators",
        ),
        (
            "google.ads beside google_ads",
            json!({"name": "google.ads", "description": "d", "category": "google", "provider": "google",
                   "input_schema": {"type": "object"}, "executor": "demo", "admission": {"owner": "x", "scope": "y"}}),
            "separators",
        ),
        (
            "Web-Fetch beside web_fetch",
            json!({"name": "Web-Fetch", "description": "d", "category": "web",
                   "input_schema": {"type": "object"}, "executor": "demo", "admission": {"owner": "x", "scope": "y"}}),
            "separators",
        ),
    ] {
        let file = dir.path().join("tool.json");
        std::fs::write(&file, definition.to_string()).unwrap();
        let output = ctl(&cp, &["tools", "register", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{what}: registered");
        assert!(stderr.contains(needle), "{what}: {stderr}");
        refused += 1;
    }
    let after = admin
        .policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner()
        .revision;
    assert_eq!(before, after, "nothing changed");
    println!(
        "T9 held: {refused} definitions refused (unknown field, unknown schema keyword, case variant, path-like name, look-alikes with other separators), each naming the culprit; the catalogue unchanged"
    );
}

/// T13. What callers can learn and reach beyond their tools: argument values are not echoed
/// into errors or logs, foreign browser origins are refused, executor addresses and transport
/// errors stay in the edge's log, `/metrics` is not on the MCP listener, and the control
/// plane's files are its owner's only.
#[tokio::test]
async fn t13_no_values_addresses_or_metrics_leak_to_callers() {
    use std::os::unix::fs::PermissionsExt as _;
    let mut fleet = Fleet::start(1, "").await;
    let client = fleet.client(0, "qa", "collector", LEGACY);
    let secret = "SECRET-VALUE-9d2e41";
    let reply = client
        .request(
            1,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": [secret]}}),
        )
        .await;
    assert_eq!(reply.error()["code"], -32602, "{}", reply.body);
    assert!(!reply.body.contains(secret), "echoed: {}", reply.body);
    // Origins: a page of another site cannot make a browser call the edge.
    let key = format!("Bearer {}", fleet.key("qa", "collector"));
    let body =
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).unwrap();
    let foreign = client
        .raw(
            body,
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", LEGACY),
                ("authorization", key.as_str()),
                ("origin", "https://evil.example"),
            ],
        )
        .await;
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    // /metrics only on the admin listener.
    let (status, text) = fleet.edges[0].get("/metrics").await;
    assert!(
        status != 200 && !text.contains("tp_edge_"),
        "{status}: {text}"
    );
    let (status, text) = fleet.edges[0].admin_get("/metrics").await;
    assert!(status == 200 && text.contains("tp_edge_"), "{status}");
    // The executor dies: callers learn the tool is unavailable, not where or why.
    fleet.executor.kill9().await;
    let down = client.call("echo", json!({"text": "hi"})).await;
    let text = text_of(&down);
    assert!(is_error_result(&down));
    for internal in [
        "127.0.0.1",
        "transport",
        "tcp connect",
        "demo",
        &fleet.executor.addr,
    ] {
        assert!(!text.contains(internal), "{internal:?} in {text}");
    }
    assert!(text.contains("reference"), "{text}");
    // Values never reach the edge's log.
    assert!(!fleet.edges[0].log().contains(secret));
    // Files.
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&fleet.cp.data_dir), 0o700);
    assert_eq!(mode(&fleet.cp.data_dir.join("control-plane.db")), 0o600);
    assert_eq!(mode(&fleet.wiki.dir.path().join("data")), 0o700);
    println!(
        "T13 held: values not echoed or logged, a foreign Origin refused, /metrics only on the admin listener, a dead executor reported without its address, data 0700/0600"
    );
}
