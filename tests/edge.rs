//! The edge end to end: control plane + two edges + Redis + the demo executor, all real
//! processes over real sockets.

use std::time::{Duration, Instant};

use serde_json::json;
use tp_proto::pb;
use tp_test_support::{EdgeProcess, McpHttp, eventually};

use crate::fleet::{Fleet, LEGACY, ROLES, STATELESS, TENANTS};

#[tokio::test]
async fn every_tenant_and_role_sees_exactly_its_registry_and_nothing_else() {
    let fleet = Fleet::start(2, "").await;
    let catalogue = fleet.catalogue().await;
    let mut probes = 0;
    for tenant in TENANTS {
        for role in ROLES {
            let expected = fleet.expected(tenant, role).await;
            let listing = fleet.listing(tenant, role).await;
            for edge in 0..2 {
                for version in [LEGACY, STATELESS] {
                    let client = fleet.client(edge, tenant, role, version);
                    assert_eq!(
                        client.list_names().await,
                        listing,
                        "{tenant}/{role} on edge {edge} ({version})"
                    );
                }
            }
            // Every catalogue tool: visible ones run or fail validation; hidden ones fail
            // exactly like a tool that does not exist.
            let client = fleet.client(probes % 2, tenant, role, LEGACY);
            for name in catalogue.iter().map(String::as_str).chain(["no_such_tool"]) {
                probes += 1;
                let reply = client.call(name, json!({})).await;
                assert_eq!(reply.status, 200, "{}", reply.body);
                if expected.iter().any(|e| e == name) {
                    let response = reply.response();
                    let invalid_args = response["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("invalid arguments"));
                    assert!(
                        response["result"].is_object() || invalid_args,
                        "{tenant}/{role} {name}: {}",
                        reply.body
                    );
                } else {
                    assert_eq!(
                        reply.error(),
                        &json!({"code": -32602, "message": format!("unknown tool: {name}")}),
                        "{tenant}/{role} {name} must look unknown"
                    );
                }
            }
        }
    }
    println!(
        "isolation: {} (tenant, role) pairs, {probes} call probes, 0 leaks",
        TENANTS.len() * ROLES.len()
    );
}

#[tokio::test]
async fn polymorphic_actions_and_arguments_are_checked_before_forwarding() {
    let fleet = Fleet::start(1, "").await;
    let executor = fleet.client(0, "acme", "executor", LEGACY);
    // The executor role's client_wiki schema offers `query` and `synonyms` (without `set`).
    let reply = executor.request(1, "tools/list", json!({})).await;
    let wiki = reply.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "client_wiki")
        .unwrap()
        .clone();
    assert_eq!(
        wiki["inputSchema"]["properties"]["action"]["enum"],
        json!(["query", "synonyms"])
    );
    let forbidden = executor.call("client_wiki", json!({"action": "ingest", "source": {"type": "text", "text": "x", "source_label": "y"}})).await;
    let nonexistent = executor
        .call("client_wiki", json!({"action": "explode"}))
        .await;
    assert_eq!(forbidden.error()["code"], -32602);
    assert_eq!(
        forbidden.error()["message"]
            .as_str()
            .unwrap()
            .replace("\"ingest\"", "X"),
        nonexistent.error()["message"]
            .as_str()
            .unwrap()
            .replace("\"explode\"", "X"),
        "a forbidden action looks like a nonexistent one"
    );
    let bad = fleet
        .client(0, "globex", "collector", LEGACY)
        .call("google_ads", json!({"customer_id": 5}))
        .await;
    assert_eq!(bad.error()["code"], -32602);
    assert!(
        bad.error()["message"]
            .as_str()
            .unwrap()
            .contains("/customer_id"),
        "{}",
        bad.body
    );
    assert_eq!(bad.error()["data"]["errors"][0]["path"], "/customer_id");
    let good = fleet
        .client(0, "globex", "collector", LEGACY)
        .call("google_ads", json!({"customer_id": "123-456-7890"}))
        .await;
    assert_eq!(good.result()["isError"], false);
    assert!(
        good.result()["structuredContent"]["data"]["campaigns"].is_array(),
        "{}",
        good.body
    );
}

#[tokio::test]
async fn pagination_is_stable_and_bad_cursors_are_invalid_params() {
    let fleet = Fleet::start(1, "[mcp]\npage_size = 4\n").await;
    // Every tool in tools/list (globex's 34 would be progressive under the default `auto`).
    fleet
        .set_disclosure(
            "globex",
            pb::Disclosure {
                mode: pb::DisclosureMode::Full as i32,
                ..Default::default()
            },
        )
        .await;
    let client = fleet.client(0, "globex", "collector", LEGACY);
    eventually(
        "globex to be listed in full",
        Duration::from_secs(5),
        || async { (client.list_names().await.len() > 10).then_some(()) },
    )
    .await;
    let names = client.list_names().await;
    assert_eq!(names, fleet.expected("globex", "collector").await);
    let first = client.request(1, "tools/list", json!({})).await;
    assert_eq!(first.result()["tools"].as_array().unwrap().len(), 4);
    let again = client.request(2, "tools/list", json!({})).await;
    assert_eq!(
        first.result()["nextCursor"],
        again.result()["nextCursor"],
        "cursors are deterministic"
    );
    for cursor in ["garbage", "c1.!!", "c1.Li4vLi4v"] {
        let reply = client
            .request(3, "tools/list", json!({"cursor": cursor}))
            .await;
        assert_eq!(reply.error()["code"], -32602, "{cursor}: {}", reply.body);
    }
}

/// Resources and prompts are not offered (the capabilities say so): asking for them is
/// method-not-found with a sentence, not the bare method name, on every version.
async fn no_resources_or_prompts(client: &McpHttp, version: &str) {
    for (method, params) in [
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("prompts/list", json!({})),
        ("prompts/get", json!({"name": "summarise"})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": "b"}}),
        ),
    ] {
        let reply = client.request(7, method, params).await;
        let message = reply.error()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            reply.error()["code"] == -32601
                && message.starts_with(&format!("method not found: {method}"))
                && message.contains("tools only"),
            "{version} {method}: {}",
            reply.body
        );
    }
    let read = client
        .request(9, "resources/read", json!({"uri": "file:///etc/passwd"}))
        .await;
    // -32002 until 2025-11-25; 2026-07-28 folds it into invalid params.
    let code = if version == STATELESS { -32602 } else { -32002 };
    assert_eq!(read.error()["code"], code, "{version}: {}", read.body);
    assert!(
        read.error()["message"]
            .as_str()
            .is_some_and(|m| m.contains("resource not found")),
        "{version}: {}",
        read.body
    );
}

#[tokio::test]
async fn every_protocol_version_lists_and_calls() {
    let fleet = Fleet::start(1, "").await;
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let client = fleet.client(0, "acme", "collector", version);
        let init = client
            .request(1, "initialize", json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
            .await;
        assert_eq!(init.result()["protocolVersion"], version, "{}", init.body);
        assert!(
            init.headers.get("mcp-session-id").is_some(),
            "a session id that holds the session"
        );
        assert_eq!(
            client.list_names().await,
            fleet.expected("acme", "collector").await
        );
        let call = client.call("gmail", json!({"query": "from:cfo"})).await;
        assert_eq!(call.result()["isError"], false, "{version}: {}", call.body);
        // Cache hints are 2026-07-28's; earlier versions do not define them.
        let list = client.request(2, "tools/list", json!({})).await;
        assert!(
            list.result().get("ttlMs").is_none() && list.result().get("cacheScope").is_none(),
            "{version}: {}",
            list.body
        );
        no_resources_or_prompts(&client, version).await;
    }
    // 2026-07-28: no initialize, server/discover, per-request metadata, cache hints.
    let client = fleet.client(0, "acme", "collector", STATELESS);
    let discover = client.request(1, "server/discover", json!({})).await;
    assert!(
        discover.result()["supportedVersions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == STATELESS),
        "{}",
        discover.body
    );
    let list = client.request(2, "tools/list", json!({})).await;
    assert_eq!(list.result()["cacheScope"], "private");
    assert!(list.result()["ttlMs"].as_u64().unwrap() > 0);
    no_resources_or_prompts(&client, STATELESS).await;
    let call = client.call("gmail", json!({"query": "from:cfo"})).await;
    assert_eq!(call.result()["isError"], false, "{}", call.body);
    // The Mcp-Name header must match the body.
    let key = fleet.key("acme", "collector");
    let auth = format!("Bearer {key}");
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "gmail", "arguments": {"query": "x"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}}});
    let mismatch = client
        .raw(
            serde_json::to_vec(&body).unwrap(),
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", STATELESS),
                ("mcp-method", "tools/call"),
                ("mcp-name", "google_ads"),
                ("authorization", &auth),
            ],
        )
        .await;
    assert_eq!(mismatch.error()["code"], -32020, "{}", mismatch.body);
}

#[tokio::test]
async fn progress_logs_and_content_types_are_relayed() {
    let fleet = Fleet::start(1, "").await;
    let client = fleet.client(0, "qa", "collector", LEGACY);
    let reply = client
        .request(1, "tools/call", json!({"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "p1"}}))
        .await;
    assert!(
        reply.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let progress: Vec<f64> = reply
        .notifications()
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .map(|n| n["params"]["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, vec![0.0, 50.0, 100.0], "{}", reply.body);
    assert_eq!(reply.result()["isError"], false);
    let logs = client.call("test_tool_with_logging", json!({})).await;
    assert_eq!(
        logs.notifications()
            .iter()
            .filter(|n| n["method"] == "notifications/message")
            .count(),
        3,
        "{}",
        logs.body
    );
    // 2026-07-28: log messages only when the request names a level, and only at or above it.
    let stateless = fleet.client(0, "qa", "collector", STATELESS);
    let count_logs = |reply: &tp_test_support::HttpReply| {
        reply
            .notifications()
            .iter()
            .filter(|n| n["method"] == "notifications/message")
            .count()
    };
    let silent = stateless.call("test_tool_with_logging", json!({})).await;
    assert_eq!(silent.result()["isError"], false, "{}", silent.body);
    assert_eq!(
        count_logs(&silent),
        0,
        "no logLevel, no logs: {}",
        silent.body
    );
    for (level, expected) in [("debug", 3), ("info", 3), ("warning", 0)] {
        let reply = stateless
            .request(
                7,
                "tools/call",
                json!({"name": "test_tool_with_logging", "arguments": {},
                       "_meta": {"io.modelcontextprotocol/logLevel": level}}),
            )
            .await;
        assert_eq!(count_logs(&reply), expected, "{level}: {}", reply.body);
    }
    let mixed = client.call("test_multiple_content_types", json!({})).await;
    let types: Vec<&str> = mixed.result()["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, vec!["text", "image", "resource"]);
    let failed = client.call("fail", json!({})).await;
    assert_eq!(
        failed.result()["isError"],
        true,
        "executor failures are tool errors: {}",
        failed.body
    );
    // The executor's own words for an internal failure stay in the edge's log.
    let text = failed.result()["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("internal error (reference") && !text.contains("always fails"),
        "{text}"
    );
}

#[tokio::test]
async fn keys_are_checked_and_revocation_reaches_every_edge() {
    let fleet = Fleet::start(2, "").await;
    let anonymous = McpHttp::new(&fleet.edges[0].addr, None, LEGACY);
    let missing = anonymous.request(1, "tools/list", json!({})).await;
    assert_eq!(missing.status, 401);
    assert!(
        missing.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer realm=\"toolplane\"")
    );
    for bad in [
        "tpk_nope",
        &format!("tpk_{}", "0".repeat(64)),
        "not even a key",
    ] {
        let reply = anonymous
            .with_key(Some(bad))
            .request(1, "tools/list", json!({}))
            .await;
        assert_eq!(reply.status, 401, "{bad}");
    }
    let mut admin = fleet.cp.admin().await;
    let issued = admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "acme".into(),
            role: "executor".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let clients: Vec<McpHttp> = fleet
        .edges
        .iter()
        .map(|e| McpHttp::new(&e.addr, Some(&issued.key), LEGACY))
        .collect();
    for client in &clients {
        assert_eq!(client.request(1, "tools/list", json!({})).await.status, 200);
    }
    let revoked_at = Instant::now();
    admin
        .tenants
        .revoke_api_key(pb::RevokeApiKeyRequest {
            id: issued.info.unwrap().id,
        })
        .await
        .unwrap();
    let mut slowest = Duration::ZERO;
    for client in &clients {
        eventually(
            "revocation to reach the edge",
            Duration::from_secs(1),
            || async {
                (client.request(1, "tools/list", json!({})).await.status == 401).then_some(())
            },
        )
        .await;
        slowest = slowest.max(revoked_at.elapsed());
    }
    println!("revocation refused on both edges after {slowest:?}");
}

/// A 2026-07-28 `subscriptions/listen` stream of a key that is revoked ends, with the
/// subscription's result, on the next change it hears: a revoked caller hears nothing more.
#[tokio::test]
async fn a_listen_stream_ends_when_its_key_is_revoked() {
    let fleet = Fleet::start(1, "").await;
    let mut admin = fleet.cp.admin().await;
    let issued = admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "acme".into(),
            role: "collector".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let (status, mut stream) = McpHttp::new(&fleet.edges[0].addr, Some(&issued.key), STATELESS)
        .stream(
            1,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        )
        .await;
    assert_eq!(status, 200);
    let acknowledged = tokio::time::timeout(Duration::from_secs(5), stream.recv())
        .await
        .expect("the acknowledgement within 5 s")
        .expect("an acknowledgement");
    assert_eq!(
        acknowledged["method"], "notifications/subscriptions/acknowledged",
        "{acknowledged}"
    );
    admin
        .tenants
        .revoke_api_key(pb::RevokeApiKeyRequest {
            id: issued.info.unwrap().id,
        })
        .await
        .unwrap();
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        let mut rest = Vec::new();
        while let Some(message) = stream.recv().await {
            rest.push(message);
        }
        rest
    })
    .await
    .expect("the stream of a revoked key ends within 5 s");
    assert!(
        rest.iter()
            .all(|m| m["method"] != "notifications/tools/list_changed"),
        "a revoked key heard a change: {rest:?}"
    );
    assert!(
        rest.last().is_some_and(|m| m.get("result").is_some()),
        "the stream ends with the subscription's result: {rest:?}"
    );
}

#[tokio::test]
async fn a_connected_apis_change_reaches_both_edges_within_a_second() {
    let fleet = Fleet::start(2, "").await;
    let clients: Vec<McpHttp> = (0..2)
        .map(|e| fleet.client(e, "acme", "collector", LEGACY))
        .collect();
    for client in &clients {
        assert!(
            !client
                .list_names()
                .await
                .contains(&"aws_textract".to_owned())
        );
    }
    // 2026-07-28 listeners: acme's on both edges, and globex's, which must hear nothing.
    let listen = json!({"notifications": {"toolsListChanged": true}});
    let mut acme_streams = Vec::new();
    for edge in 0..2 {
        let (status, stream) = fleet
            .client(edge, "acme", "collector", STATELESS)
            .stream(1, "subscriptions/listen", listen.clone())
            .await;
        assert_eq!(status, 200);
        acme_streams.push(stream);
    }
    let (status, mut globex_stream) = fleet
        .client(0, "globex", "collector", STATELESS)
        .stream(1, "subscriptions/listen", listen.clone())
        .await;
    assert_eq!(status, 200);
    let mut admin = fleet.cp.admin().await;
    let mut tenant = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: "acme".into() })
        .await
        .unwrap()
        .into_inner();
    tenant.connected_apis = Some(pb::ConnectedApis {
        providers: vec!["google".into(), "hubspot".into(), "aws".into()],
        ..Default::default()
    });
    let changed_at = Instant::now();
    admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest::replacing(tenant))
        .await
        .unwrap();
    let mut latencies = Vec::new();
    for client in &clients {
        eventually(
            "the change to reach the edge",
            Duration::from_secs(1),
            || async {
                client
                    .list_names()
                    .await
                    .contains(&"aws_textract".to_owned())
                    .then_some(())
            },
        )
        .await;
        latencies.push(changed_at.elapsed());
    }
    assert_eq!(
        clients[0].list_names().await,
        fleet.expected("acme", "collector").await
    );
    let is_list_changed = |m: &serde_json::Value| m["method"] == "notifications/tools/list_changed";
    for (edge, stream) in acme_streams.iter_mut().enumerate() {
        let heard = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(message) = stream.recv().await {
                if is_list_changed(&message) {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(heard, Ok(true), "acme's listener on edge {edge}");
    }
    while let Ok(Some(message)) =
        tokio::time::timeout(Duration::from_millis(300), globex_stream.recv()).await
    {
        assert!(
            !is_list_changed(&message),
            "globex heard acme's change: {message}"
        );
    }
    println!(
        "propagation: connected_apis change visible on edge 1 after {:?}, edge 2 after {:?}",
        latencies[0], latencies[1]
    );
}

#[tokio::test]
async fn warm_tenants_survive_a_control_plane_outage_and_a_new_edge_waits_for_it() {
    let mut fleet = Fleet::start(2, "").await;
    let warm: Vec<McpHttp> = (0..2)
        .map(|e| fleet.client(e, "acme", "collector", LEGACY))
        .collect();
    let expected = fleet.expected("acme", "collector").await;
    for client in &warm {
        assert_eq!(client.list_names().await, expected);
    }
    fleet.cp.process.kill9().await;
    let mut errors = 0;
    for round in 0..20 {
        for client in &warm {
            if client.list_names().await != expected {
                errors += 1;
            }
            let call = client
                .call("gmail", json!({"query": format!("round {round}")}))
                .await;
            if call.result()["isError"] != false {
                errors += 1;
            }
        }
    }
    assert_eq!(
        errors, 0,
        "warm tenants are served while the control plane is down"
    );
    let (status, body) = fleet.edges[0].get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"degraded\":true"), "{body}");
    // A new edge, started during the outage, has not seen the change stream: it does not
    // trust a key from Redis (it may have been revoked while no edge watched) and says so with
    // 503 and Retry-After, until the control plane is back.
    let fresh =
        EdgeProcess::start(&fleet.cp, &[fleet.cp.url()], Some(&fleet.redis.url()), "").await;
    let client = McpHttp::new(&fresh.addr, Some(fleet.key("acme", "collector")), LEGACY);
    let reply = client.request(1, "tools/list", json!({})).await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert!(reply.headers.contains_key("retry-after"));
    fleet.cp.restart_same_port().await;
    eventually(
        "the fresh edge to serve",
        Duration::from_secs(10),
        || async { (client.request(1, "tools/list", json!({})).await.status == 200).then_some(()) },
    )
    .await;
    assert_eq!(
        client.list_names().await,
        expected,
        "fresh edge log:\n{}",
        fresh.log()
    );
    println!(
        "control plane down: 80 requests on warm edges, {errors} errors; a fresh edge answered 503 until the control plane was back, then served"
    );
}

#[tokio::test]
async fn redis_down_still_serves_and_recovers() {
    let mut fleet = Fleet::start(1, "").await;
    let client = fleet.client(0, "globex", "executor", LEGACY);
    let expected = fleet.listing("globex", "executor").await;
    assert_eq!(client.list_names().await, expected);
    fleet.redis.kill9().await;
    let mut errors = 0;
    for _ in 0..20 {
        if client.list_names().await != expected {
            errors += 1;
        }
    }
    // A tenant this edge has not seen yet comes from the control plane.
    let other = fleet.client(0, "initech", "collector", LEGACY);
    assert_eq!(
        other.list_names().await,
        fleet.listing("initech", "collector").await
    );
    assert_eq!(errors, 0);
    let (_, ready) = fleet.edges[0].get("/readyz").await;
    assert!(ready.contains("\"redis\":\"down\""), "{ready}");
    fleet.redis.restart().await;
    eventually(
        "readiness to report redis up",
        Duration::from_secs(10),
        || async {
            let (_, ready) = fleet.edges[0].get("/readyz").await;
            let _ = fleet.client(0, "qa", "executor", LEGACY).list_names().await;
            ready.contains("\"redis\":\"up\"").then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_dead_executor_opens_the_breaker_and_recovery_closes_it() {
    let mut fleet = Fleet::start(
        1,
        "[executors]\nbreaker_failures = 3\nbreaker_cooldown_ms = 300\n",
    )
    .await;
    let client = fleet.client(0, "qa", "collector", LEGACY);
    assert_eq!(
        client.call("echo", json!({"text": "hi"})).await.result()["isError"],
        false
    );
    fleet.executor.kill9().await;
    let mut messages = Vec::new();
    for _ in 0..6 {
        let started = Instant::now();
        let reply = client.call("echo", json!({"text": "hi"})).await;
        assert_eq!(reply.result()["isError"], true, "{}", reply.body);
        messages.push((
            reply.result()["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned(),
            started.elapsed(),
        ));
    }
    let open: Vec<_> = messages
        .iter()
        .filter(|(m, _)| m.contains("circuit breaker open"))
        .collect();
    assert!(!open.is_empty(), "{messages:?}");
    assert!(
        open.iter()
            .all(|(_, took)| *took < Duration::from_millis(100)),
        "open breakers fail fast: {messages:?}"
    );
    fleet.executor.restart().await;
    eventually(
        "the breaker to close after recovery",
        Duration::from_secs(10),
        || async {
            (client.call("echo", json!({"text": "back"})).await.result()["isError"] == false)
                .then_some(())
        },
    )
    .await;
    // Slow calls respect the deadline of the executor (5 s) without holding others.
    let slow = client.call("sleep", json!({"ms": 200})).await;
    assert_eq!(slow.result()["isError"], false);
}

#[tokio::test]
async fn usage_reaches_the_control_plane_and_metrics_are_exposed() {
    let fleet = Fleet::start(1, "").await;
    let client = fleet.client(0, "qa", "executor", LEGACY);
    for i in 0..5 {
        client.call("echo", json!({"text": format!("{i}")})).await;
    }
    let mut admin = fleet.cp.admin().await;
    let usage = eventually("usage to be reported", Duration::from_secs(5), || {
        let mut audit = admin.audit.clone();
        async move {
            let usage = audit
                .get_usage(pb::GetUsageRequest {
                    tenant: "qa".into(),
                })
                .await
                .ok()?
                .into_inner();
            usage
                .tools
                .into_iter()
                .find(|t| t.tool == "echo" && t.calls >= 5)
        }
    })
    .await;
    assert_eq!(usage.errors, 0);
    let _ = &mut admin;
    let (status, metrics) = fleet.edges[0].admin_get("/metrics").await;
    assert_eq!(status, 200);
    for name in [
        "tp_edge_mcp_requests_total",
        "tp_edge_cache_lookups_total",
        "tp_edge_executor_calls_total",
        "tp_edge_watch_revision",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
    // Each call counted once, by its outcome (the handles are kept, not looked up per call).
    let calls = |outcome: &str| -> f64 {
        metrics
            .lines()
            .filter(|line| {
                line.starts_with("tp_edge_mcp_requests_total{")
                    && line.contains("method=\"tools/call\"")
                    && line.contains(&format!("outcome=\"{outcome}\""))
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert_eq!(calls("ok"), 5.0, "{metrics}");
    assert_eq!(calls("tool_error") + calls("rejected"), 0.0, "{metrics}");
}

#[tokio::test]
async fn http_limits_host_and_origin_checks_are_enforced() {
    let fleet = Fleet::start(
        1,
        "[mcp]\nmax_body_bytes = 65536\nrequest_timeout_ms = 1000\nallowed_origins = [\"https://app.example\"]\nmax_in_flight = 2\n",
    )
    .await;
    let client = fleet.client(0, "qa", "collector", LEGACY);
    let key = format!("Bearer {}", fleet.key("qa", "collector"));
    let base = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", LEGACY),
        ("authorization", key.as_str()),
    ];
    let body = |text: &str| {
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}}))
        .unwrap()
    };
    // Just under the body limit works; over it is 413 and nothing is called.
    let under = client.raw(body(&"x".repeat(60_000)), &base).await;
    assert_eq!(under.status, 200, "{}", under.body);
    assert_eq!(under.result()["isError"], false);
    let over = client.raw(body(&"x".repeat(70_000)), &base).await;
    assert_eq!(over.status, 413, "{}", over.body);
    // DNS rebinding: a foreign Host is refused; so is a browser Origin not on the list.
    let mut with_host = base.to_vec();
    with_host.push(("host", "evil.example:80"));
    assert_eq!(client.raw(body("x"), &with_host).await.status, 403);
    let mut with_origin = base.to_vec();
    with_origin.push(("origin", "https://evil.example"));
    assert_eq!(client.raw(body("x"), &with_origin).await.status, 403);
    let mut allowed_origin = base.to_vec();
    allowed_origin.push(("origin", "https://app.example"));
    assert_eq!(client.raw(body("x"), &allowed_origin).await.status, 200);
    // A call slower than the request timeout ends at the timeout, not when the tool finishes.
    let started = Instant::now();
    let slow = client.call("sleep", json!({"ms": 5000})).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "took {took:?}: {}",
        slow.body
    );
    let timed_out = slow.status == 504 || slow.result()["isError"] == true;
    assert!(timed_out, "{} {}", slow.status, slow.body);
    println!(
        "a 5 s call against a 1 s request timeout ended after {took:?} ({})",
        slow.status
    );
    // Past max_in_flight (2), requests are shed with 503 + Retry-After instead of queueing.
    let sleepers: Vec<_> = (0..3)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.call("sleep", json!({"ms": 800})).await })
        })
        .collect();
    let mut answered = 0;
    let mut shed = 0;
    for sleeper in sleepers {
        let reply = sleeper.await.unwrap();
        match reply.status {
            200 => answered += 1,
            503 => {
                assert!(
                    reply.headers.get("retry-after").is_some(),
                    "{:?}",
                    reply.headers
                );
                shed += 1;
            }
            other => panic!("unexpected status {other}: {}", reply.body),
        }
    }
    assert_eq!(
        (answered, shed),
        (2, 1),
        "three concurrent calls, two slots"
    );
}

/// Session ids hold their session: issued at `initialize`, honoured by every edge (the two
/// edges share nothing but the fleet secret), refused with 404 when changed, another key's, or
/// past their lifetime; requests without one are still served.
#[tokio::test]
async fn session_ids_hold_the_session_and_work_on_every_edge() {
    let fleet = Fleet::start(2, "[mcp]\nsession_ttl_secs = 2\n").await;
    let key = fleet.key("acme", "collector");
    let first = fleet.client(0, "acme", "collector", LEGACY);
    let init = first
        .request(
            1,
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": {"sampling": {}},
                   "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await;
    let session = init
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_owned();
    let auth = format!("Bearer {key}");
    let list = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#.to_vec();
    let headers = |session: &str| {
        vec![
            ("content-type", "application/json".to_owned()),
            ("accept", "application/json, text/event-stream".to_owned()),
            ("mcp-protocol-version", LEGACY.to_owned()),
            ("authorization", auth.clone()),
            ("mcp-session-id", session.to_owned()),
        ]
    };
    let send = |edge: usize, session: String| {
        let client = fleet.client(edge, "acme", "collector", LEGACY);
        let headers = headers(&session);
        let body = list.clone();
        async move {
            let borrowed: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            client.raw(body, &borrowed).await
        }
    };
    // Both edges honour it (the second never saw the initialize).
    for edge in [0, 1] {
        let reply = send(edge, session.clone()).await;
        assert_eq!(reply.status, 200, "edge {edge}: {}", reply.body);
        assert!(
            reply.result()["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty())
        );
    }
    // Changed: 404, on both edges, and on the warm path as well as through the transport.
    let mut changed = session.clone();
    changed.insert(12, 'A');
    for edge in [0, 1] {
        let reply = send(edge, changed.clone()).await;
        assert_eq!(reply.status, 404, "{}", reply.body);
        assert_eq!(reply.error()["code"], -32001);
    }
    // Another key of the same tenant and role cannot use it.
    let mut admin = fleet.cp.admin().await;
    let issued = admin
        .tenants
        .issue_api_key(tp_proto::pb::IssueApiKeyRequest {
            tenant: "acme".into(),
            role: "collector".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let other_key = issued.key.clone();
    let other = fleet.client(1, "acme", "collector", LEGACY);
    let mut other_headers = headers(&session);
    other_headers[3].1 = format!("Bearer {other_key}");
    let borrowed: Vec<(&str, &str)> = other_headers
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .collect();
    let reply = other.raw(list.clone(), &borrowed).await;
    assert_eq!(reply.status, 404, "{}", reply.body);
    // Without a session id the request is served.
    assert!(
        !other
            .with_key(Some(&other_key))
            .list_names()
            .await
            .is_empty()
    );
    // The session's standalone stream (GET) carries list_changed when the tenant changes, on
    // an edge that never saw the initialize.
    let (mut notifications, head) = open_get_stream(&fleet.edges[1].addr, key, &session).await;
    fleet
        .set_disclosure(
            "acme",
            pb::Disclosure {
                mode: pb::DisclosureMode::Progressive as i32,
                ..Default::default()
            },
        )
        .await;
    let seen = tokio::time::timeout(Duration::from_secs(5), async {
        let mut text = head;
        let mut buffer = [0u8; 4096];
        loop {
            use tokio::io::AsyncReadExt as _;
            let n = notifications.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the stream ended: {text}");
            text.push_str(&String::from_utf8_lossy(&buffer[..n]));
            if text.contains("notifications/tools/list_changed") {
                return text;
            }
        }
    })
    .await
    .expect("list_changed within 5 s");
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(
        seen.to_ascii_lowercase()
            .contains("content-type: text/event-stream")
    );
    // Past its lifetime: 404.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let reply = send(1, session.clone()).await;
    assert_eq!(reply.status, 404, "{}", reply.body);
    // A stream ends when its key is revoked.
    let other_client = fleet
        .client(0, "acme", "collector", LEGACY)
        .with_key(Some(&other_key));
    let other_init = other_client
        .request(
            1,
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await;
    let other_session = other_init.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let (mut revoked, head) =
        open_get_stream(&fleet.edges[0].addr, &other_key, &other_session).await;
    admin
        .tenants
        .revoke_api_key(pb::RevokeApiKeyRequest {
            id: issued.info.unwrap().id,
        })
        .await
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        let mut text = head;
        let mut buffer = [0u8; 4096];
        loop {
            use tokio::io::AsyncReadExt as _;
            let n = revoked.read(&mut buffer).await.unwrap_or(0);
            text.push_str(&String::from_utf8_lossy(&buffer[..n]));
            // The chunked body's last chunk, or the socket closed.
            if n == 0 || text.contains("\r\n0\r\n\r\n") {
                return text;
            }
        }
    })
    .await
    .expect("the stream of a revoked key ends within 5 s");
    assert!(ended.starts_with("HTTP/1.1 200"), "{ended}");
    // An open stream does not hold up a graceful shutdown.
    let mut fleet = fleet;
    let started = Instant::now();
    let status = fleet.edges[1].process.terminate().await;
    assert!(
        status.is_some_and(|s| s.success()),
        "the edge exits on SIGTERM with a notification stream open: {status:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(notifications);
}

/// A raw `GET /mcp` with a session id; the open socket, positioned before the response.
/// Returns once the response's head has arrived (the edge has opened the stream and listens
/// for changes), with what was read of it.
pub(crate) async fn open_get_stream(
    addr: &str,
    key: &str,
    session: &str,
) -> (tokio::net::TcpStream, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nAuthorization: Bearer {key}\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: {LEGACY}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = String::new();
    let mut buffer = [0u8; 4096];
    while !head.contains("\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
            .await
            .expect("the stream's head within 5 s")
            .unwrap();
        assert!(n > 0, "the stream closed before its head: {head}");
        head.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    (stream, head)
}

/// Issue 19.5: one INFO line per request (request id, tenant, role, tool, action, outcome,
/// duration), client mistakes never at WARN, JSON logs on request, a missing Authorization
/// header counted as refused, and a hidden action refused exactly like one that does not exist.
#[tokio::test]
async fn every_request_is_one_info_line_and_client_mistakes_are_not_warnings() {
    let fleet = Fleet::start(1, "[log]\nformat = \"json\"\n").await;
    let collector = fleet.client(0, "acme", "collector", LEGACY);
    let executor = fleet.client(0, "acme", "executor", LEGACY);
    assert!(!collector.list_names().await.is_empty());
    let unknown = collector.call("no_such_tool", json!({})).await;
    assert_eq!(unknown.error()["code"], -32602, "{}", unknown.body);
    let hidden = executor
        .call(
            "client_wiki",
            json!({"action": "ingest", "source": {"type": "text", "text": "x"}}),
        )
        .await;
    let missing = executor
        .call(
            "client_wiki",
            json!({"action": "frobnicate", "source": {"type": "text", "text": "x"}}),
        )
        .await;
    let message = |reply: &tp_test_support::HttpReply, action: &str| {
        reply.error()["message"]
            .as_str()
            .unwrap_or_default()
            .replace(action, "ACTION")
    };
    assert_eq!(
        (hidden.error()["code"].clone(), message(&hidden, "ingest")),
        (
            missing.error()["code"].clone(),
            message(&missing, "frobnicate")
        ),
        "a hidden action is refused like a nonexistent one:\n{}\n{}",
        hidden.body,
        missing.body
    );
    let body =
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).unwrap();
    let anonymous = collector
        .raw(
            body.clone(),
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", LEGACY),
            ],
        )
        .await;
    assert_eq!(anonymous.status, 401);
    let auth = format!("Bearer {}", fleet.key("acme", "collector"));
    let traced = collector
        .raw(
            body,
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", LEGACY),
                ("authorization", &auth),
                ("x-request-id", "trace-abc-123"),
            ],
        )
        .await;
    assert_eq!(traced.status, 200, "{}", traced.body);
    assert_eq!(
        traced.headers.get("x-request-id").map(|v| v.as_bytes()),
        Some(&b"trace-abc-123"[..]),
        "{:?}",
        traced.headers
    );

    let edge = &fleet.edges[0];
    let lines: Vec<serde_json::Value> = eventually(
        "the last request's line",
        Duration::from_secs(10),
        || async {
            let lines: Vec<serde_json::Value> = edge
                .log()
                .lines()
                .map(|l| {
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))
                })
                .collect();
            lines
                .iter()
                .any(|l| l["fields"]["request_id"] == "trace-abc-123")
                .then_some(lines)
        },
    )
    .await;
    let requests: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "request")
        .map(|l| &l["fields"])
        .collect();
    let find = |pred: &dyn Fn(&serde_json::Value) -> bool| -> &serde_json::Value {
        requests
            .iter()
            .copied()
            .find(|f| pred(f))
            .unwrap_or_else(|| panic!("no such request line in {requests:#?}"))
    };
    let line = find(&|f| f["tool"] == "no_such_tool");
    assert_eq!(
        (
            &line["tenant"],
            &line["role"],
            &line["rpc"],
            &line["outcome"]
        ),
        (
            &json!("acme"),
            &json!("collector"),
            &json!("tools/call"),
            &json!("error -32602")
        ),
        "{line}"
    );
    assert!(
        line["duration_ms"].is_u64()
            && line["request_id"].as_str().is_some_and(|id| id.len() == 16),
        "{line}"
    );
    let line = find(&|f| f["action"] == "ingest");
    assert_eq!(
        (&line["role"], &line["tool"], &line["outcome"]),
        (
            &json!("executor"),
            &json!("client_wiki"),
            &json!("error -32602")
        ),
        "the refused call's action is logged: {line}"
    );
    let line = find(&|f| f["status"] == 401);
    assert_eq!(line["outcome"], "unauthorized", "{line}");
    let line = find(&|f| f["request_id"] == "trace-abc-123");
    assert_eq!(
        (&line["rpc"], &line["outcome"]),
        (&json!("tools/list"), &json!("ok")),
        "{line}"
    );
    // Six requests above, plus the list_names pages: a line each, none of them a warning.
    assert!(requests.len() >= 6, "{requests:#?}");
    let loud: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["level"] == "WARN" || l["level"] == "ERROR")
        .collect();
    assert!(
        loud.is_empty(),
        "client mistakes logged as warnings: {loud:#?}"
    );
    let (_, metrics) = edge.admin_get("/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("tp_edge_auth_refused_total{reason=\"missing\"} ")),
        "{metrics}"
    );
    // Latencies are histograms (aggregatable across edges), per JSON-RPC method.
    for needle in [
        "tp_edge_request_seconds_bucket{rpc=\"tools/call\",le=\"0.005\"}",
        "tp_edge_request_seconds_bucket{rpc=\"none\",le=\"+Inf\"}",
        "tp_edge_tool_call_seconds_bucket{le=",
    ] {
        assert!(metrics.contains(needle), "{needle} missing:\n{metrics}");
    }
    println!(
        "{} request lines, 0 warnings; a hidden action and a missing one get the same error",
        requests.len()
    );
}

/// A deprecated tool tells its callers when it goes away: every result carries the notice in
/// `_meta` (through `tools/call` and `dispatch`, on both protocol generations), its listing
/// says so, and reactivating it ends the notice.
#[tokio::test]
async fn a_deprecated_tool_announces_its_sunset_in_every_result() {
    let fleet = Fleet::start(1, "").await;
    let clients = [
        fleet.client(0, "qa", "collector", LEGACY),
        fleet.client(0, "qa", "collector", STATELESS),
    ];
    for client in &clients {
        let reply = client.call("echo", json!({"text": "before"})).await;
        assert_eq!(reply.result()["isError"], false, "{}", reply.body);
        assert!(
            reply.result().get("_meta").is_none(),
            "an active tool carries no notice: {}",
            reply.body
        );
    }
    let mut admin = fleet.cp.admin().await;
    admin
        .catalog
        .deprecate_tool(pb::DeprecateToolRequest {
            name: "echo".into(),
            sunset_date: "2027-03-31".into(),
        })
        .await
        .unwrap();
    let notice = json!({
        "sunset": "2027-03-31",
        "message": "echo is deprecated and will be removed after 2027-03-31",
    });
    for client in &clients {
        eventually(
            "the deprecation to reach the edge",
            Duration::from_secs(5),
            || async {
                let reply = client.call("echo", json!({"text": "during"})).await;
                (reply.result()["_meta"]["toolplane/deprecation"] == notice).then_some(())
            },
        )
        .await;
        let reply = client.call("echo", json!({"text": "during"})).await;
        // Still a normal result.
        assert_eq!(reply.result()["isError"], false, "{}", reply.body);
        assert_eq!(
            reply.result()["content"][0]["text"],
            "[qa/collector] during",
            "{}",
            reply.body
        );
        let listed = client.request(7, "tools/list", json!({})).await;
        let echo = listed.result()["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == "echo"))
            .unwrap_or_else(|| panic!("echo listed: {}", listed.body))
            .clone();
        assert!(
            echo["description"]
                .as_str()
                .unwrap()
                .contains("Deprecated: removed after 2027-03-31"),
            "{echo}"
        );
    }
    admin
        .catalog
        .reactivate_tool(pb::ReactivateToolRequest {
            name: "echo".into(),
        })
        .await
        .unwrap();
    eventually("the notice to end", Duration::from_secs(5), || async {
        let reply = clients[0].call("echo", json!({"text": "after"})).await;
        (reply.result()["isError"] == false && reply.result().get("_meta").is_none()).then_some(())
    })
    .await;
}
