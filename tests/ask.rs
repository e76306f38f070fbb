//! Executors that need the client mid-call, across two edges sharing Redis:
//! - a 2025-11-25 caller is asked on its call's SSE stream under an id of the edge's own, and
//!   its answer, POSTed to the *other* edge, reaches the waiting call; answers from another
//!   tenant, to unknown ids, or refusals are handled as documented;
//! - a 2026-07-28 caller gets an input-required result whose `requestState` the other edge
//!   verifies (same key, derived from the shared edge token) and refuses for another tenant,
//!   other arguments, or a changed state.

use std::time::Duration;

use serde_json::{Value, json};
use tp_proto::json::to_struct;
use tp_proto::pb;

use crate::fleet::{Fleet, LEGACY, STATELESS};

async fn register(fleet: &Fleet, name: &str) {
    let mut admin = fleet.cp.admin().await;
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(pb::ToolSpec {
                name: name.into(),
                description: format!("Asks the client: {name}"),
                category: "testing".into(),
                provider: "testing".into(),
                input_schema: to_struct(&json!({"type": "object"})),
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
}

/// Waits until the edge lists `tool` (the registration reaches it by push).
async fn wait_until_listed(client: &tp_test_support::McpHttp, tool: &str) {
    tp_test_support::eventually(
        &format!("{tool} to be listed"),
        Duration::from_secs(10),
        || async move {
            client
                .list_names()
                .await
                .iter()
                .any(|n| n == tool)
                .then_some(())
        },
    )
    .await;
}

/// Headers of a 2025-11-25 POST with `key`.
fn legacy_headers(key: &str) -> Vec<(&'static str, &str)> {
    let bearer: &'static str = Box::leak(format!("Bearer {key}").into_boxed_str());
    vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", LEGACY),
        ("authorization", bearer),
    ]
}

/// Waits for the next message on a stream.
async fn next(stream: &mut tokio::sync::mpsc::UnboundedReceiver<Value>) -> Value {
    tokio::time::timeout(Duration::from_secs(15), stream.recv())
        .await
        .expect("a message within 15 s")
        .expect("the stream is open")
}

fn answer(id: &Value, result: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_client_is_asked_on_its_stream_and_may_answer_any_edge() {
    let fleet = Fleet::start(2, "").await;
    register(&fleet, "test_elicitation").await;
    register(&fleet, "test_sampling").await;
    let asking = fleet.client(0, "qa", "collector", LEGACY);
    let other_edge = fleet.client(1, "qa", "collector", LEGACY);
    wait_until_listed(&asking, "test_elicitation").await;
    wait_until_listed(&other_edge, "test_elicitation").await;

    let (status, mut stream) = asking
        .stream(
            1,
            "tools/call",
            json!({"name": "test_elicitation", "arguments": {"message": "Who are you?"}}),
        )
        .await;
    assert_eq!(status, 200);
    let question = next(&mut stream).await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["message"], "Who are you?");
    let id = question["id"].clone();
    assert!(
        id.as_str()
            .is_some_and(|id| id.starts_with("tp-") && id.len() == 35),
        "the edge's own id: {id}"
    );

    // Another tenant cannot answer it; an unknown id finds nothing; both are 400 with the same
    // JSON-RPC error.
    let stranger = fleet.client(1, "acme", "collector", LEGACY);
    let refused = stranger
        .raw(
            answer(
                &id,
                json!({"action": "accept", "content": {"username": "mallory"}}),
            ),
            &legacy_headers(fleet.key("acme", "collector")),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(refused.error()["code"], -32600);
    let unknown = other_edge
        .raw(
            answer(&json!("tp-00000000000000000000000000000000"), json!({})),
            &legacy_headers(fleet.key("qa", "collector")),
        )
        .await;
    assert_eq!(unknown.status, 400);
    assert_eq!(unknown.error()["message"], refused.error()["message"]);

    // The caller answers on the other edge: 202, and the call finishes on the first.
    let accepted = other_edge
        .raw(
            answer(
                &id,
                json!({"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}),
            ),
            &legacy_headers(fleet.key("qa", "collector")),
        )
        .await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let result = next(&mut stream).await;
    assert_eq!(result["id"], 1, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("ada") && !text.contains("mallory"), "{text}");
    assert_ne!(result["result"]["isError"], true);

    // Answered once: a second answer finds nothing.
    let again = other_edge
        .raw(
            answer(&id, json!({"action": "accept", "content": {}})),
            &legacy_headers(fleet.key("qa", "collector")),
        )
        .await;
    assert_eq!(again.status, 400);

    // A client whose session says it cannot elicit is not asked.
    let init = asking
        .request(
            9,
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": {"roots": {}},
                   "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await;
    let session = init.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let mut headers = legacy_headers(fleet.key("qa", "collector"));
    headers.push(("mcp-session-id", session.as_str()));
    let call = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
        "params": {"name": "test_elicitation", "arguments": {"message": "x"}}}))
    .unwrap();
    let refused = asking.raw(call, &headers).await;
    assert_eq!(refused.result()["isError"], true, "{}", refused.body);
    assert!(refused.body.contains("did not declare"), "{}", refused.body);

    // A client that refuses (a JSON-RPC error) gets an error result, not a hang.
    let (_, mut stream) = asking
        .stream(
            2,
            "tools/call",
            json!({"name": "test_sampling", "arguments": {"prompt": "hi"}}),
        )
        .await;
    let question = next(&mut stream).await;
    assert_eq!(question["method"], "sampling/createMessage");
    let refusal = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": question["id"],
        "error": {"code": -32601, "message": "sampling is not supported"}}))
    .unwrap();
    let sent = asking
        .raw(refusal, &legacy_headers(fleet.key("qa", "collector")))
        .await;
    assert_eq!(sent.status, 202);
    let result = next(&mut stream).await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert!(
        result["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("sampling is not supported")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_state_is_honoured_by_every_edge_and_only_for_its_call() {
    let fleet = Fleet::start(2, "").await;
    let tool = "test_input_required_result_request_state";
    register(&fleet, tool).await;
    let first = fleet.client(0, "qa", "collector", STATELESS);
    let second = fleet.client(1, "qa", "collector", STATELESS);
    wait_until_listed(&first, tool).await;
    wait_until_listed(&second, tool).await;

    // A client that did not declare elicitation is not asked for it.
    let undeclared = first.call(tool, json!({"topic": "a"})).await;
    assert_eq!(undeclared.result()["isError"], true, "{}", undeclared.body);
    assert!(undeclared.body.contains("did not declare"));

    let declares = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let round1 = first
        .request(
            1,
            "tools/call",
            json!({"name": tool, "arguments": {"topic": "a"}, "_meta": declares}),
        )
        .await;
    let result = round1.result().clone();
    assert_eq!(result["resultType"], "input_required", "{}", round1.body);
    assert_eq!(
        result["inputRequests"]["confirm"]["method"],
        "elicitation/create"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    let responses = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let retry = |arguments: Value, state: &str| {
        json!({"name": tool, "arguments": arguments, "inputResponses": responses,
               "requestState": state, "_meta": declares})
    };

    // The other edge completes it.
    let done = second
        .request(2, "tools/call", retry(json!({"topic": "a"}), &state))
        .await;
    assert_eq!(done.result()["resultType"], "complete", "{}", done.body);
    assert!(
        done.result()["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("state-ok")
    );

    // Other arguments, another role, a changed state: -32602, and the executor never runs.
    let executor_role = fleet.client(1, "qa", "executor", STATELESS);
    wait_until_listed(&executor_role, tool).await;
    let other_role = executor_role
        .request(3, "tools/call", retry(json!({"topic": "a"}), &state))
        .await;
    assert_eq!(other_role.error()["code"], -32602, "{}", other_role.body);
    let other_arguments = second
        .request(3, "tools/call", retry(json!({"topic": "b"}), &state))
        .await;
    assert_eq!(
        other_arguments.error()["code"],
        -32602,
        "{}",
        other_arguments.body
    );
    let mut changed = state.clone();
    changed.insert(10, 'x');
    let tampered = second
        .request(4, "tools/call", retry(json!({"topic": "a"}), &changed))
        .await;
    assert_eq!(tampered.error()["code"], -32602);
    let too_long = second
        .request(
            5,
            "tools/call",
            retry(json!({"topic": "a"}), &"a".repeat(70_000)),
        )
        .await;
    assert_eq!(too_long.error()["code"], -32602);

    // A legacy caller of the same tool is asked on its stream instead.
    let legacy = fleet.client(0, "qa", "collector", LEGACY);
    let (_, mut stream) = legacy
        .stream(6, "tools/call", json!({"name": tool, "arguments": {}}))
        .await;
    let question = next(&mut stream).await;
    assert_eq!(question["method"], "elicitation/create");
    let sent = legacy
        .raw(
            answer(
                &question["id"],
                json!({"action": "accept", "content": {"ok": true}}),
            ),
            &legacy_headers(fleet.key("qa", "collector")),
        )
        .await;
    assert_eq!(sent.status, 202);
    let result = next(&mut stream).await;
    assert!(
        result["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("state-ok"),
        "{result}"
    );
}
