//! The trust boundary of the edges, attacked against real processes (the second red-team
//! pass, issue 29): a revoked key on an edge that restarts in an outage, breakers primed by
//! one tenant, streams that take every connection, arguments whose parse outgrows their body,
//! secrets echoed in errors and logs, headers that say two things, rate limits without Redis,
//! the chart's defaults, and approvals claimed without being given. Each test reproduces one attack of docs/reliability.md's threat
//! model.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tp_proto::pb;
use tp_test_support::{EdgeProcess, McpHttp, eventually};

use crate::fleet::{Fleet, LEGACY, STATELESS};

fn is_error_result(reply: &tp_test_support::HttpReply) -> bool {
    reply.result()["isError"] == true
}

fn text_of(reply: &tp_test_support::HttpReply) -> String {
    reply.result()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A new tenant that sees the testing provider's tools, and a collector key for it.
pub(crate) async fn testing_tenant(fleet: &Fleet, id: &str) -> String {
    let mut admin = fleet.cp.admin().await;
    admin
        .tenants
        .create_tenant(pb::CreateTenantRequest {
            tenant: Some(pb::Tenant {
                id: id.into(),
                connected_apis: Some(pb::ConnectedApis {
                    providers: vec!["testing".into()],
                    all: false,
                }),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    tp_test_support::admin::issue_key(&mut admin, id, "collector").await
}

/// T21. Key K is used on edge A (its identity lands in Redis); A stops; K is revoked while no
/// edge on that Redis watches; the control plane dies; A starts again. A must not serve K
/// from the Redis copy: it has not seen the change stream since it started, so it answers
/// 503 until it can ask — and 401 once it can.
#[tokio::test]
async fn t21_a_revoked_key_does_not_come_back_from_redis_on_an_edge_that_restarts() {
    let mut fleet = Fleet::start(0, "").await;
    let mut admin = fleet.cp.admin().await;
    let issued = admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "qa".into(),
            role: "collector".into(),
            label: "revived".into(),
            ttl_seconds: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let key = issued.key;
    let mut a =
        EdgeProcess::start(&fleet.cp, &[fleet.cp.url()], Some(&fleet.redis.url()), "").await;
    let on_a = McpHttp::new(&a.addr, Some(&key), LEGACY);
    assert_eq!(on_a.call("echo", json!({"text": "hi"})).await.status, 200);
    a.process.terminate().await;
    // Edge B has no Redis: it refuses the revoked key, and nothing touches Redis's copy.
    let b = EdgeProcess::start(&fleet.cp, &[fleet.cp.url()], None, "").await;
    admin
        .tenants
        .revoke_api_key(pb::RevokeApiKeyRequest {
            id: issued.info.unwrap().id,
        })
        .await
        .unwrap();
    let on_b = McpHttp::new(&b.addr, Some(&key), LEGACY);
    assert_eq!(on_b.call("echo", json!({"text": "hi"})).await.status, 401);
    fleet.cp.process.kill9().await;
    let a2 = EdgeProcess::start(&fleet.cp, &[fleet.cp.url()], Some(&fleet.redis.url()), "").await;
    let on_a2 = McpHttp::new(&a2.addr, Some(&key), LEGACY);
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let reply = on_a2.call("echo", json!({"text": "revived?"})).await;
        assert_ne!(
            reply.status, 200,
            "a revoked key served from Redis: {}",
            reply.body
        );
        statuses.push(reply.status);
    }
    assert!(statuses.iter().all(|s| *s == 503), "{statuses:?}");
    fleet.cp.restart_same_port().await;
    eventually(
        "the key to be refused once the control plane is back",
        Duration::from_secs(15),
        || async { (on_a2.call("echo", json!({"text": "x"})).await.status == 401).then_some(()) },
    )
    .await;
    println!(
        "T21 held: a key revoked while its edge was stopped answered {statuses:?} on that edge restarted during a control-plane outage (never 200), then 401 once the control plane was back"
    );
}

/// T22. Six failures of `fail` by T1 and one by T2 must not open the breaker for T3, nor may
/// an attacker holding two tenants; timeouts count only against the caller's own breaker.
#[tokio::test]
async fn t22_one_or_two_tenants_cannot_prime_a_breaker_for_the_others() {
    let fleet = Fleet::start(1, "[executors]\nbreaker_failures = 5\n").await;
    let t1 = fleet.client(0, "globex", "collector", LEGACY);
    let t2 = fleet.client(0, "qa", "collector", LEGACY);
    let t3 = McpHttp::new(
        &fleet.edges[0].addr,
        Some(&testing_tenant(&fleet, "umbrella").await),
        LEGACY,
    );
    for _ in 0..6 {
        assert!(is_error_result(&t1.call("fail", json!({})).await));
    }
    assert!(is_error_result(&t2.call("fail", json!({})).await));
    let reply = t3.call("fail", json!({"succeed": true})).await;
    assert!(!is_error_result(&reply), "T3 refused: {}", text_of(&reply));
    // Both attacker tenants open their own breakers completely.
    for _ in 0..6 {
        let _ = t1.call("fail", json!({})).await;
        let _ = t2.call("fail", json!({})).await;
    }
    assert!(text_of(&t1.call("fail", json!({})).await).contains("circuit breaker open"));
    assert!(text_of(&t2.call("fail", json!({})).await).contains("circuit breaker open"));
    let reply = t3.call("fail", json!({"succeed": true})).await;
    assert!(
        !is_error_result(&reply),
        "two tenants opened the breaker for a third: {}",
        text_of(&reply)
    );
    // The breakers are visible per tool and per tenant.
    let (_, metrics) = fleet.edges[0].admin_get("/metrics").await;
    let open: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("tp_edge_tenant_breaker_state") && l.ends_with(" 2"))
        .collect();
    assert!(
        open.iter()
            .any(|l| l.contains("tenant=\"globex\"") && l.contains("tool=\"fail\"")),
        "{open:?}"
    );
    println!(
        "T22 held: 6 + 1 failures from two tenants, then both tenants' own breakers open: a third tenant's call of the same tool still ran; the open breakers: {open:?}"
    );
}

/// T23. One tenant's key opens 40 long-lived streams on an edge capped at 40 connections:
/// it gets its share and 429 beyond, another tenant is served, and a stream ends after
/// `mcp.max_stream_secs`.
#[tokio::test]
async fn t23_one_tenant_cannot_take_every_connection_of_an_edge_with_streams() {
    let fleet = Fleet::start(
        1,
        "[http]\nmax_connections = 40\n\n[mcp]\nmax_stream_secs = 3\n",
    )
    .await;
    let attacker = fleet.client(0, "qa", "collector", STATELESS);
    let listen = json!({"notifications": {"toolsListChanged": true}});
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..40 {
        let (status, stream) = attacker
            .stream(1, "subscriptions/listen", listen.clone())
            .await;
        match status {
            200 => held.push(stream),
            429 => refused += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(held.len(), 4, "a key holds mcp.max_streams_per_key streams");
    assert_eq!(refused, 36);
    // Another tenant is served at once.
    let victim = fleet.client(0, "acme", "collector", LEGACY);
    let started = Instant::now();
    assert!(!victim.list_names().await.is_empty());
    let waited = started.elapsed();
    // The streams end on their own (with the subscription's result).
    let ended_at = Instant::now();
    for stream in &mut held {
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            while stream.recv().await.is_some() {}
        })
        .await;
        assert!(ended.is_ok(), "a stream outlived mcp.max_stream_secs");
    }
    println!(
        "T23 held: one key's 40 subscriptions: {} opened, {refused} refused 429; another tenant's tools/list took {} ms; the streams ended {:.1} s later (max_stream_secs 3)",
        held.len(),
        waited.as_millis(),
        ended_at.elapsed().as_secs_f64()
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

/// T24. 72 concurrent calls of 0.79 MB arguments made of 40,000 distinct keys (what parses
/// into the most memory per byte): the edge's peak stays within its in-flight budget.
#[tokio::test]
async fn t24_arguments_that_parse_large_keep_the_edge_within_its_memory_budget() {
    let budget_mib = 64;
    let fleet = Fleet::start(
        1,
        &format!(
            "[mcp]\nmax_in_flight_bytes = {}\n",
            budget_mib * 1024 * 1024
        ),
    )
    .await;
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
    // `echo` answers with its arguments: the result costs as much again on the way back.
    let tool = "echo";
    let bodies: Vec<Vec<u8>> = (0..72)
        .map(|i| {
            let mut arguments = serde_json::Map::new();
            arguments.insert("text".into(), json!("x"));
            for k in 0..40_000 {
                arguments.insert(format!("k{i:02}_{k:06}_pad"), json!(k));
            }
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}}))
            .unwrap()
        })
        .collect();
    let size = bodies[0].len();
    let calls = bodies.into_iter().map(|body| {
        let client = client.clone();
        async move { client.raw(body, &headers).await }
    });
    let replies = futures::future::join_all(calls).await;
    let served = replies
        .iter()
        .filter(|r| r.status == 200 && r.result().is_object())
        .count();
    let shed = replies.iter().filter(|r| r.status == 503).count();
    let peak = peak_rss_kib(pid);
    assert_eq!(
        client.call("echo", json!({"text": "after"})).await.status,
        200
    );
    let grew_mib = (peak.saturating_sub(before)) as f64 / 1024.0;
    assert!(
        grew_mib <= budget_mib as f64 * 1.25,
        "peak grew by {grew_mib:.0} MiB against a budget of {budget_mib} MiB ({served} served, {shed} shed)"
    );
    assert!(served >= 1);
    // A connection's read buffer is bounded (64 KiB), and so is a request head (hyper checks
    // it when a read leaves the head incomplete, so one of 256 KiB is certain to be refused).
    let padding = "x".repeat(256 * 1024);
    let mut padded = headers.to_vec();
    padded.push(("x-padding", padding.as_str()));
    let long_head = client
        .raw(
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
                .unwrap(),
            &padded,
        )
        .await;
    assert_eq!(long_head.status, 431, "{}", long_head.body);
    println!(
        "T24 held: 72 concurrent calls of {:.2} MB / 40,000 distinct keys: {served} served, {shed} shed 503; edge peak RSS {:.0} → {:.0} MiB (+{grew_mib:.0} MiB, budget {budget_mib} MiB)",
        size as f64 / 1e6,
        before as f64 / 1024.0,
        peak as f64 / 1024.0
    );
}

/// T25. Neither a secret pasted as an argument's property name nor a credential in an MCP
/// executor's URL appears in what callers get or in the edge's log.
#[tokio::test]
async fn t25_secrets_in_property_names_and_executor_urls_reach_no_error_and_no_log() {
    let fleet = Fleet::start(1, "").await;
    let mut admin = fleet.cp.admin().await;
    // A strict tool: unknown properties refused.
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(pb::ToolSpec {
                name: "strict_echo".into(),
                description: "Echo with a closed schema".into(),
                category: "testing".into(),
                provider: "testing".into(),
                input_schema: tp_proto::json::to_struct(&json!({"type": "object",
                    "properties": {"text": {"type": "string"}}, "additionalProperties": false})),
                executor: "demo".into(),
                admission: Some(pb::Admission {
                    adr: "ADR-100".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    // An MCP server whose URL carries a token, unreachable.
    tp_test_support::admin::upsert_executor(
        &mut admin,
        tp_test_support::admin::NewExecutor::mcp(
            "leaky",
            "http://127.0.0.1:9/mcp?token=URL-SECRET-7731",
        ),
    )
    .await;
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(pb::ToolSpec {
                name: "leaky_tool".into(),
                description: "A tool on an unreachable MCP server".into(),
                category: "testing".into(),
                provider: "testing".into(),
                input_schema: tp_proto::json::to_struct(&json!({"type": "object"})),
                executor: "leaky".into(),
                admission: Some(pb::Admission {
                    adr: "ADR-100".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let client = fleet.client(0, "qa", "collector", LEGACY);
    eventually(
        "the tools to reach the edge",
        Duration::from_secs(5),
        || async {
            let names = client.list_names().await;
            (names.iter().any(|n| n == "strict_echo") && names.iter().any(|n| n == "leaky_tool"))
                .then_some(())
        },
    )
    .await;
    let refused = client
        .call(
            "strict_echo",
            json!({"text": "x", "sk-live-PROPERTY-SECRET-9921": "v", "nested": {"tok-SECRET-2": 1}}),
        )
        .await;
    assert_eq!(refused.error()["code"], -32602, "{}", refused.body);
    let failed = client.call("leaky_tool", json!({})).await;
    assert!(is_error_result(&failed), "{}", failed.body);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = fleet.edges[0].log();
    for secret in ["PROPERTY-SECRET", "SECRET-2", "URL-SECRET-7731"] {
        assert!(
            !refused.body.contains(secret),
            "{secret} in {}",
            refused.body
        );
        assert!(!failed.body.contains(secret), "{secret} in {}", failed.body);
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(secret)).collect();
        assert!(lines.is_empty(), "{secret} in the edge's log: {lines:?}");
    }
    assert!(
        log.contains("executor call failed"),
        "the failure is logged"
    );
    println!(
        "T25 held: a -32602 for two undeclared properties named neither ({}); an MCP executor's URL token absent from the answer and the log",
        refused.error()["message"]
    );
}

/// A raw HTTP/1.1 request to `addr`; the status line's code.
async fn raw_status(addr: &str, request: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(2).any(|w| w == b"\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
            .await
            .unwrap()
            .unwrap();
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8_lossy(&head)
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// T26. Two `Authorization` headers (which one did a proxy in front check?) are refused 400;
/// an absolute request target naming a foreign host is checked as the Host (403).
#[tokio::test]
async fn t26_headers_that_say_two_things_are_refused() {
    let fleet = Fleet::start(1, "").await;
    let addr = &fleet.edges[0].addr;
    let mine = fleet.key("qa", "collector");
    let other = fleet.key("acme", "collector");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let request = |target: &str, host: &str, auth: &str| {
        format!(
            "POST {target} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {LEGACY}\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let one = format!("Authorization: Bearer {mine}\r\n");
    let two = format!("Authorization: Bearer {mine}\r\nAuthorization: Bearer {other}\r\n");
    let cases = [
        (
            "one Authorization header",
            request("/mcp", "127.0.0.1", &one),
            200,
        ),
        (
            "two Authorization headers",
            request("/mcp", "127.0.0.1", &two),
            400,
        ),
        (
            "an absolute target naming a foreign host",
            request("http://evil.example/mcp", "127.0.0.1", &one),
            400,
        ),
        (
            "an absolute target and Host both foreign",
            request("http://evil.example/mcp", "evil.example", &one),
            403,
        ),
        (
            "an absolute target naming the edge",
            request("http://127.0.0.1/mcp", "127.0.0.1", &one),
            200,
        ),
    ];
    for (what, request, expected) in &cases {
        assert_eq!(raw_status(addr, request).await, *expected, "{what}");
    }
    println!(
        "T26 held: {} requests with two Authorization headers or a foreign absolute target refused (400/403); the same requests without the contradiction served",
        cases.len()
    );
}

/// T27. A tenant limited to 10 calls a minute, two edges on one Redis, Redis killed: the
/// fleet as a whole still allows about the limit (each edge half of it), not twice it; an edge
/// configured `closed` refuses every call of the tenant while Redis is down.
#[tokio::test]
async fn t27_rate_limits_hold_across_the_fleet_when_redis_dies() {
    let mut fleet = Fleet::start(2, "").await;
    let closed = EdgeProcess::start(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&fleet.redis.url()),
        "[cache]\nrate_limits_when_redis_down = \"closed\"\n",
    )
    .await;
    let key = testing_tenant(&fleet, "metered").await;
    let mut admin = fleet.cp.admin().await;
    admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest::changing(
            pb::Tenant {
                id: "metered".into(),
                rate_limit_per_minute: 10,
                ..Default::default()
            },
            &["rate_limit_per_minute"],
        ))
        .await
        .unwrap();
    let clients: Vec<McpHttp> = fleet
        .edges
        .iter()
        .chain([&closed])
        .map(|edge| McpHttp::new(&edge.addr, Some(&key), LEGACY))
        .collect();
    // Every edge has counted itself into the fleet (three edges: a window or two).
    for edge in fleet.edges.iter().chain([&closed]) {
        eventually(
            "the fleet size to be known",
            Duration::from_secs(20),
            || async {
                let (_, metrics) = edge.admin_get("/metrics").await;
                metrics
                    .lines()
                    .any(|l| l.starts_with("tp_edge_fleet_size") && l.ends_with(" 3"))
                    .then_some(())
            },
        )
        .await;
    }
    fleet.redis.kill9().await;
    crate::redis::clear_of_a_minute_end().await;
    let mut ok = [0; 3];
    for (i, client) in clients.iter().enumerate() {
        for _ in 0..8 {
            let reply = client.call("echo", json!({"text": "x"})).await;
            if reply.status == 200 && reply.error().is_null() {
                ok[i] += 1;
            } else {
                assert_eq!(reply.error()["code"], -32029, "{}", reply.body);
            }
        }
    }
    // Each sharing edge allows ceil(10 / 3) = 4; the closed one none.
    assert_eq!(ok, [4, 4, 0], "calls served per edge with Redis down");
    println!(
        "T27 held: limit 10/min, three edges, Redis killed: {} + {} calls served on the sharing edges, {} on the closed one (before: 8 + 8 + 8)",
        ok[0], ok[1], ok[2]
    );
}

/// T28. The chart's defaults, as an attacker inside the cluster meets them: no pod holds a
/// service-account token, Redis runs without privileges, every policy covers egress (the wiki
/// reaches public addresses only, Redis nowhere), and the edges answer their own names only.
#[tokio::test]
async fn t28_the_charts_defaults_give_a_foothold_nothing_to_use() {
    let manifests = crate::deploy::render_default_chart();
    let docs: Vec<Value> = manifests
        .split("\n---")
        .filter_map(|d| serde_yaml_ng::from_str::<Value>(d).ok())
        .filter(|d| d.is_object())
        .collect();
    let mut checked = 0;
    for doc in &docs {
        let kind = doc["kind"].as_str().unwrap_or_default();
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        match kind {
            "Deployment" => {
                let pod = &doc["spec"]["template"]["spec"];
                assert_eq!(pod["automountServiceAccountToken"], false, "{name}");
                for container in pod["containers"].as_array().unwrap() {
                    let security = &container["securityContext"];
                    assert_eq!(security["allowPrivilegeEscalation"], false, "{name}");
                    assert_eq!(security["readOnlyRootFilesystem"], true, "{name}");
                    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]), "{name}");
                    let image = container["image"].as_str().unwrap();
                    assert!(
                        image
                            .split('/')
                            .next()
                            .is_some_and(|r| r.contains('.') || r == "localhost"),
                        "{name}: {image} names no registry (it would come from a default one)"
                    );
                    for env in container["env"].as_array().into_iter().flatten() {
                        if env["name"] == "TOOLPLANE_EDGE_MCP__ALLOWED_HOSTS" {
                            assert!(!env["value"].as_str().unwrap().contains('*'), "{env}");
                        }
                    }
                }
                checked += 1;
            }
            "NetworkPolicy" => {
                let types = &doc["spec"]["policyTypes"];
                assert!(
                    types.as_array().unwrap().iter().any(|t| t == "Egress"),
                    "{name}: ingress only"
                );
                if name.ends_with("-wiki") {
                    let egress = doc["spec"]["egress"].to_string();
                    assert!(
                        egress.contains("169.254.0.0/16") && egress.contains("10.0.0.0/8"),
                        "the wiki may reach private or metadata addresses: {egress}"
                    );
                }
                if name.ends_with("-redis") {
                    let egress = doc["spec"]["egress"].to_string();
                    assert!(!egress.contains("ipBlock"), "Redis connects out: {egress}");
                }
                checked += 1;
            }
            _ => {}
        }
    }
    assert!(checked >= 8, "{checked}");
    println!(
        "T28 held: {checked} Deployments and NetworkPolicies of the default chart: no service-account tokens, no privileges, registries explicit, egress restricted, no wildcard host"
    );
}

/// T31. Approvals mid-call (ADR 0013), attacked over 2026-07-28 across two edges: an answer
/// nobody asked for (no sealed question) is asked again; a sealed question answered for other
/// arguments, or by another role, is -32602; nothing reaches the executor until the answer to
/// the edge's own question arrives, and then the call runs once, on the other edge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t31_an_approval_cannot_be_forged_moved_or_taken_by_another_role() {
    let fleet = Fleet::start(2, "").await;
    let mut admin = fleet.cp.admin().await;
    crate::approvals::set_approvals(&mut admin, vec![crate::approvals::rule()]).await;
    crate::approvals::wait_for_rule(&fleet).await;
    let before = crate::approvals::executor_calls(&fleet).await;
    let first = fleet.client(0, "qa", "collector", STATELESS);
    let second = fleet.client(1, "qa", "collector", STATELESS);
    let declares = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let yes = json!({"toolplane_approval": {"action": "accept", "content": {"approve": true}}});

    // An answer nobody asked for (no requestState): asked again, not forwarded.
    let forged = first
        .request(
            1,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "a"}, "inputResponses": yes, "_meta": declares}),
        )
        .await;
    assert_eq!(
        forged.result()["resultType"],
        "input_required",
        "{}",
        forged.body
    );

    // The state of a question about "a", answered, sent with other arguments: -32602.
    let asked = first
        .request(
            2,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "a"}, "_meta": declares}),
        )
        .await;
    let state = asked.result()["requestState"].as_str().unwrap().to_owned();
    let moved = second
        .request(
            3,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "b"}, "inputResponses": yes,
                   "requestState": state, "_meta": declares}),
        )
        .await;
    assert_eq!(moved.error()["code"], -32602, "{}", moved.body);
    // Another role cannot use it either.
    let executor_role = fleet.client(1, "qa", "executor", STATELESS);
    let other_role = executor_role
        .request(
            4,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "a"}, "inputResponses": yes,
                   "requestState": state, "_meta": declares}),
        )
        .await;
    assert_eq!(other_role.error()["code"], -32602, "{}", other_role.body);
    assert_eq!(crate::approvals::executor_calls(&fleet).await - before, 0.0);

    // Answered as asked, on the other edge: forwarded once.
    let done = second
        .request(
            5,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "a"}, "inputResponses": yes,
                   "requestState": state, "_meta": declares}),
        )
        .await;
    assert_eq!(
        done.result()["content"][0]["text"],
        "[qa/collector] a",
        "{}",
        done.body
    );
    assert_eq!(crate::approvals::executor_calls(&fleet).await - before, 1.0);
}

/// T32. Tool search (ADR 0014) as a way to learn what another tenant or role has: every tool
/// of the catalogue, searched by its exact name and by its description's words, by each of
/// eight (tenant, role) callers; a hidden tool never appears, the counts are the caller's, a
/// role never sees another role's actions, both edges and both protocol generations answer the
/// same, bad arguments are -32602.
#[tokio::test]
async fn t32_a_search_reveals_no_tool_the_caller_cannot_see() {
    crate::search::a_search_finds_only_the_callers_tools_alike_on_every_edge().await;
}
