//! A call's life cut short: `notifications/cancelled` from the client stops the work where it
//! runs — on the edge that holds the call even when the notification lands on another edge
//! (through Redis), in the gRPC executor (its stream is reset and the demo executor's `sleep`
//! stops), and behind an MCP upstream (which is sent `notifications/cancelled` in turn). Only
//! the caller that made a call can cancel it; the cancelled call gets no answer and is audited
//! as `tool_error` / `cancelled`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::{EdgeProcess, McpHttp, eventually};

use crate::fleet::{Fleet, LEGACY, STATELESS};

/// A raw POST of `body` to `addr`'s /mcp with `key`, the protocol headers of `version` and
/// optionally a session id; (status, body).
async fn post(
    addr: &str,
    key: &str,
    version: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, String, reqwest::header::HeaderMap) {
    let mut request = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .header("authorization", format!("Bearer {key}"))
        .timeout(Duration::from_secs(20));
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    if version == STATELESS
        && let Some(method) = body["method"].as_str()
    {
        request = request.header("mcp-method", method);
        if let Some(name) = body["params"]["name"].as_str() {
            request = request.header("mcp-name", name);
        }
    }
    let reply = request.json(&body).send().await.unwrap();
    let status = reply.status().as_u16();
    let headers = reply.headers().clone();
    (status, reply.text().await.unwrap(), headers)
}

fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "lifecycle", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

fn sleep_call(id: u64, tool: &str, ms: u64, version: &str) -> Value {
    let mut params = json!({"name": tool, "arguments": {"ms": ms}});
    if version == STATELESS {
        params["_meta"] = stateless_meta();
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

fn cancel(id: u64, version: &str) -> Value {
    let mut params = json!({"requestId": id, "reason": "the user pressed stop"});
    if version == STATELESS {
        params["_meta"] = stateless_meta();
    }
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
}

/// A 2025-11-25 session on `addr`: its id.
async fn session(addr: &str, key: &str) -> String {
    let (status, body, headers) = post(
        addr,
        key,
        LEGACY,
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "lifecycle", "version": "1"}}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    headers["mcp-session-id"].to_str().unwrap().to_owned()
}

/// How many times the demo executor logged a cancelled sleep.
fn cancelled_sleeps(fleet: &Fleet) -> usize {
    fleet
        .executor
        .process
        .log_text()
        .matches("sleep cancelled by the caller")
        .count()
}

/// The audit records of `tenant` with error code `cancelled`.
async fn cancelled_records(fleet: &Fleet, tenant: &str) -> usize {
    let mut admin = fleet.cp.admin().await;
    admin
        .audit
        .list_audit_records(pb::ListAuditRecordsRequest {
            tenant: tenant.into(),
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .records
        .iter()
        .filter(|r| r.error_code == "cancelled")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cancels_its_own_call_on_any_edge_and_the_executor_stops() {
    let fleet = Fleet::start(2, "").await;
    let key = fleet.key("qa", "collector").to_owned();
    let other_key = fleet.key("qa", "executor").to_owned();
    let (a, b) = (fleet.edges[0].addr.clone(), fleet.edges[1].addr.clone());

    // A 2025-11-25 session: the call runs on edge A, the cancellation lands on edge B.
    let sid = session(&a, &key).await;
    let started = Instant::now();
    let call = tokio::spawn({
        let (a, key, sid) = (a.clone(), key.clone(), sid.clone());
        async move {
            post(
                &a,
                &key,
                LEGACY,
                Some(&sid),
                sleep_call(42, "sleep", 8000, LEGACY),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Someone else's key cannot use the session, nor cancel the call without it.
    let (status, body, _) = post(&b, &other_key, LEGACY, Some(&sid), cancel(42, LEGACY)).await;
    assert_eq!(status, 404, "{body}");
    let (status, body, _) = post(&b, &other_key, STATELESS, None, cancel(42, STATELESS)).await;
    assert_eq!(status, 202, "{body}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!call.is_finished(), "a foreign key cancelled the call");
    let (status, body, _) = post(&b, &key, LEGACY, Some(&sid), cancel(42, LEGACY)).await;
    assert_eq!(status, 202, "{body}");
    let (status, body, _) = call.await.unwrap();
    let took = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert!(
        took < Duration::from_secs(4),
        "the call ran on for {took:?}"
    );
    assert!(
        !body.contains("\"result\"") && !body.contains("\"error\""),
        "a cancelled call is not answered: {body}"
    );
    eventually(
        "the executor to stop the sleep",
        Duration::from_secs(5),
        || async { (cancelled_sleeps(&fleet) == 1).then_some(()) },
    )
    .await;

    // A 2026-07-28 call (no session) cancelled on the edge that runs it.
    let started = Instant::now();
    let call = tokio::spawn({
        let (a, key) = (a.clone(), key.clone());
        async move {
            post(
                &a,
                &key,
                STATELESS,
                None,
                sleep_call(7, "sleep", 8000, STATELESS),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, body, _) = post(&a, &key, STATELESS, None, cancel(7, STATELESS)).await;
    assert_eq!(status, 202, "{body}");
    let (_, body, _) = call.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(4));
    assert!(!body.contains("\"result\""), "{body}");
    eventually(
        "the executor to stop the second sleep",
        Duration::from_secs(5),
        || async { (cancelled_sleeps(&fleet) == 2).then_some(()) },
    )
    .await;

    // A call that is not cancelled runs to its end; cancelling an id that is not running
    // (finished, or never was) is accepted and changes nothing.
    let (status, body, _) = post(&a, &key, STATELESS, None, cancel(999, STATELESS)).await;
    assert_eq!(status, 202, "{body}");
    let (_, body, _) = post(
        &a,
        &key,
        STATELESS,
        None,
        sleep_call(8, "sleep", 200, STATELESS),
    )
    .await;
    assert!(body.contains("slept 200 ms"), "{body}");

    // Both cancelled calls are in the audit trail as such.
    eventually(
        "two cancelled calls audited",
        Duration::from_secs(10),
        || async { (cancelled_records(&fleet, "qa").await == 2).then_some(()) },
    )
    .await;
    println!(
        "cancelled: a 2025-11-25 call on edge A from edge B and a 2026-07-28 call, each answered nothing and stopped at the executor; a foreign key's cancellation ignored"
    );
}

/// Through an MCP upstream (another Toolplane edge, 2026-07-28): the caller's cancellation
/// reaches the upstream as `notifications/cancelled`, which stops its executor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_reaches_the_executor_behind_an_mcp_upstream() {
    let fleet = Fleet::start(1, "").await;
    let upstream_key = fleet.key("qa", "collector").to_owned();
    let mut admin = fleet.cp.admin().await;
    admin
        .executors
        .upsert_executor(pb::UpsertExecutorRequest {
            update_mask: None,
            executor: Some(pb::ExecutorInfo {
                name: "downstream".into(),
                endpoint: format!("http://{}/mcp", fleet.edges[0].addr),
                protocol: pb::ExecutorProtocol::Mcp as i32,
                timeout_ms: 20_000,
                max_concurrency: 16,
                tool_prefix: "qa_".into(),
                credential_env: "TOOLPLANE_CRED_TEST_UPSTREAM".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let output = tokio::process::Command::new(tp_test_support::binary("toolplanectl"))
        .args([
            "--addr",
            &fleet.cp.url(),
            "--token",
            &fleet.cp.admin_token(),
        ])
        .args([
            "executors",
            "import",
            "downstream",
            "--only",
            "sleep",
            "--adr",
            "ADR-100",
            "--register",
        ])
        .env("TOOLPLANE_UPSTREAM_CREDENTIAL", &upstream_key)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let edge = EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&fleet.redis.url()),
        "",
        &[(
            "TOOLPLANE_CRED_TEST_UPSTREAM",
            format!("Bearer {upstream_key}"),
        )],
    )
    .await;
    let acme = fleet.key("acme", "collector").to_owned();
    let client = McpHttp::new(&edge.addr, Some(&acme), LEGACY);
    eventually("qa_sleep listed", Duration::from_secs(10), || async {
        client
            .list_names()
            .await
            .iter()
            .any(|n| n == "qa_sleep")
            .then_some(())
    })
    .await;
    let started = Instant::now();
    let call = tokio::spawn({
        let (addr, acme) = (edge.addr.clone(), acme.clone());
        async move {
            post(
                &addr,
                &acme,
                STATELESS,
                None,
                sleep_call(5, "qa_sleep", 8000, STATELESS),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (status, body, _) = post(&edge.addr, &acme, STATELESS, None, cancel(5, STATELESS)).await;
    assert_eq!(status, 202, "{body}");
    let (_, body, _) = call.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(4), "{body}");
    eventually(
        "the executor behind the upstream to stop",
        Duration::from_secs(5),
        || async { (cancelled_sleeps(&fleet) == 1).then_some(()) },
    )
    .await;
    println!(
        "cancelled through an MCP upstream: the downstream executor stopped after {:?}",
        started.elapsed()
    );
}
