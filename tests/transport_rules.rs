//! The edge's transport rules against recorded expectations: requests that break one rule of
//! the Streamable HTTP transport each (media types, protocol versions in the header and in
//! `_meta`, SEP-2243 `Mcp-Method` / `Mcp-Name`, parameters of the wrong type, methods the edge
//! does not offer) and requests that are valid in a way clients seldom send (a legacy request
//! with `Mcp-Method`, a per-request version before 2026-07-28). Every answer's status, media
//! type and bytes must be the ones in `tests/fixtures/transport_answers.json`.
//!
//! The fixture was first recorded from rmcp's Streamable HTTP transport (3.11), which the edge
//! ran behind its own methods until it owned the transport (ADR 0011), then reviewed; where
//! the edge answers differently on purpose the entry says why (`note`). Rerecord with
//! `TP_RECORD_TRANSPORT=1` only after reading the diff: a changed answer is a changed
//! protocol behaviour.

use serde_json::{Value, json};
use tp_test_support::McpHttp;

use crate::fleet::{Fleet, LEGACY, STATELESS};

const PLAIN: &str = "application/json, text/event-stream";
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/transport_answers.json"
);

/// The `_meta` of a well-formed 2026-07-28 request.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "rules", "version": "1.0.0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// One case: a name, extra headers (`accept`, `content-type` and the version header included
/// when set) and the body.
struct Case {
    name: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

fn case(name: &'static str, headers: &[(&'static str, &str)], body: Value) -> Case {
    raw_case(name, headers, serde_json::to_vec(&body).unwrap())
}

fn raw_case(name: &'static str, headers: &[(&'static str, &str)], body: Vec<u8>) -> Case {
    let mut all: Vec<(&'static str, String)> = vec![];
    if !headers.iter().any(|(k, _)| *k == "accept") {
        all.push(("accept", PLAIN.to_owned()));
    }
    if !headers.iter().any(|(k, _)| *k == "content-type") {
        all.push(("content-type", "application/json".to_owned()));
    }
    all.extend(headers.iter().map(|(k, v)| (*k, (*v).to_owned())));
    Case {
        name,
        headers: all,
        body,
    }
}

/// A 2026-07-28 request of `method` with `params` (its `_meta` added) and `Mcp-Method`.
fn current(
    name: &'static str,
    method: &str,
    mut params: Value,
    extra: &[(&'static str, &str)],
) -> Case {
    params["_meta"] = meta();
    let mut headers = vec![("mcp-protocol-version", STATELESS), ("mcp-method", method)];
    headers.extend_from_slice(extra);
    case(
        name,
        &headers,
        json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}),
    )
}

fn cases() -> Vec<Case> {
    let v = ("mcp-protocol-version", STATELESS);
    let legacy = ("mcp-protocol-version", LEGACY);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let mut without_caps = meta();
    without_caps
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let mut old_meta = meta();
    old_meta["io.modelcontextprotocol/protocolVersion"] = json!(LEGACY);
    let mut v999 = meta();
    v999["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    vec![
        // Media types.
        case(
            "accept json only",
            &[("accept", "application/json")],
            list.clone(),
        ),
        case(
            "accept sse only",
            &[("accept", "text/event-stream")],
            list.clone(),
        ),
        case(
            "accept sse at q=0",
            &[("accept", "application/json, text/event-stream;q=0")],
            list.clone(),
        ),
        case(
            "accept malformed weight",
            &[("accept", "application/json;q=2.0000, text/event-stream")],
            list.clone(),
        ),
        case(
            "accept weighted",
            &[("accept", "application/json;q=0.5, text/event-stream;q=1")],
            list.clone(),
        ),
        case(
            "content type text",
            &[("content-type", "text/plain")],
            list.clone(),
        ),
        // The version header.
        case(
            "unknown version header",
            &[("mcp-protocol-version", "1999-01-01")],
            list.clone(),
        ),
        case("legacy version header", &[legacy], list.clone()),
        case(
            "legacy request with Mcp-Method",
            &[legacy, ("mcp-method", "tools/list")],
            list.clone(),
        ),
        case(
            "legacy request with a wrong Mcp-Method",
            &[legacy, ("mcp-method", "prompts/list")],
            list.clone(),
        ),
        case(
            "initialize header differs from body",
            &[("mcp-protocol-version", "2025-06-18")],
            json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {},
                "clientInfo": {"name": "rules", "version": "1"}}}),
        ),
        case(
            "initialize with a wrong Mcp-Method at 2026",
            &[v, ("mcp-method", "tools/list")],
            json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
                "protocolVersion": STATELESS, "capabilities": {},
                "clientInfo": {"name": "rules", "version": "1"}}}),
        ),
        case(
            "initialize without protocolVersion",
            &[v, ("mcp-method", "initialize")],
            json!({"jsonrpc": "2.0", "id": 500, "method": "initialize", "params": {"_meta": meta()}}),
        ),
        // `_meta` against the header.
        case(
            "discover without _meta",
            &[v, ("mcp-method", "server/discover")],
            json!({"jsonrpc": "2.0", "id": 101, "method": "server/discover", "params": {}}),
        ),
        case(
            "discover without capabilities",
            &[v, ("mcp-method", "server/discover")],
            json!({"jsonrpc": "2.0", "id": 104, "method": "server/discover", "params": {"_meta": without_caps}}),
        ),
        case(
            "discover at v999",
            &[
                ("mcp-protocol-version", "v999.0.0"),
                ("mcp-method", "server/discover"),
            ],
            json!({"jsonrpc": "2.0", "id": 301, "method": "server/discover", "params": {"_meta": v999.clone()}}),
        ),
        case(
            "discover header 2026, _meta v999",
            &[v, ("mcp-method", "server/discover")],
            json!({"jsonrpc": "2.0", "id": 302, "method": "server/discover", "params": {"_meta": v999.clone()}}),
        ),
        case(
            "tools/list at 2026 without _meta",
            &[v, ("mcp-method", "tools/list")],
            list.clone(),
        ),
        case(
            "tools/list _meta 2026 without header",
            &[],
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta()}}),
        ),
        case(
            "tools/list header 2026, _meta legacy",
            &[v, ("mcp-method", "tools/list")],
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": old_meta.clone()}}),
        ),
        case(
            "tools/list per-request legacy version",
            &[legacy],
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": old_meta.clone()}}),
        ),
        case(
            "tools/list at 2026 without capabilities",
            &[v, ("mcp-method", "tools/list")],
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": without_caps.clone()}}),
        ),
        // SEP-2243 headers.
        current(
            "tools/list without Mcp-Method",
            "tools/list",
            json!({}),
            &[],
        )
        .without("mcp-method"),
        current("tools/list Mcp-Method other", "tools/list", json!({}), &[])
            .replace("mcp-method", "prompts/list"),
        current(
            "tools/list Mcp-Method upper case",
            "tools/list",
            json!({}),
            &[],
        )
        .replace("mcp-method", "TOOLS/LIST"),
        current(
            "tools/list two Mcp-Method",
            "tools/list",
            json!({}),
            &[("mcp-method", "tools/list")],
        ),
        current(
            "tools/call without Mcp-Name",
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
            &[],
        ),
        current(
            "tools/call wrong Mcp-Name",
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
            &[("mcp-name", "wrong_tool_name")],
        ),
        current(
            "tools/call Mcp-Name bad Base64",
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
            &[("mcp-name", "=?base64?@@@?=")],
        ),
        current(
            "tools/call Mcp-Method tasks/get",
            "tools/call",
            json!({"name": "greet", "arguments": {}}),
            &[("mcp-name", "greet")],
        )
        .replace("mcp-method", "tasks/get"),
        case(
            "notification at 2026 without Mcp-Method",
            &[v],
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
        ),
        case(
            "legacy notification with Mcp-Method",
            &[legacy, ("mcp-method", "notifications/initialized")],
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ),
        case(
            "response at 2026",
            &[v],
            json!({"jsonrpc": "2.0", "id": 9, "result": {}}),
        ),
        // Methods and their parameters.
        current(
            "setLevel at 2026 without level",
            "logging/setLevel",
            json!({}),
            &[],
        ),
        case(
            "setLevel with an unknown level",
            &[legacy],
            json!({"jsonrpc": "2.0", "id": 4, "method": "logging/setLevel", "params": {"level": "loud"}}),
        ),
        current(
            "resources/subscribe at 2026 without uri",
            "resources/subscribe",
            json!({}),
            &[],
        ),
        current(
            "resources/unsubscribe at 2026 without uri",
            "resources/unsubscribe",
            json!({}),
            &[],
        ),
        current(
            "resources/unsubscribe at 2026",
            "resources/unsubscribe",
            json!({"uri": "file:///a"}),
            &[("mcp-name", "file:///a")],
        ),
        case(
            "resources/unsubscribe legacy",
            &[legacy],
            json!({"jsonrpc": "2.0", "id": 5, "method": "resources/unsubscribe", "params": {"uri": "file:///a"}}),
        ),
        current(
            "tasks/get",
            "tasks/get",
            json!({"taskId": "gate-test"}),
            &[("mcp-name", "gate-test")],
        ),
        current(
            "tasks/update",
            "tasks/update",
            json!({"taskId": "gate-test", "inputResponses": {}}),
            &[("mcp-name", "gate-test")],
        ),
        current(
            "tasks/cancel",
            "tasks/cancel",
            json!({"taskId": "gate-test"}),
            &[("mcp-name", "gate-test")],
        ),
        case(
            "tasks/get legacy",
            &[legacy],
            json!({"jsonrpc": "2.0", "id": 6, "method": "tasks/get", "params": {"taskId": "t"}}),
        ),
        current("skills/list", "skills/list", json!({}), &[]),
        case(
            "skills/list legacy",
            &[legacy],
            json!({"jsonrpc": "2.0", "id": 6, "method": "skills/list"}),
        ),
        case(
            "completion with bad params",
            &[legacy],
            json!({"jsonrpc": "2.0", "id": 6, "method": "completion/complete", "params": {"ref": 3}}),
        ),
        case(
            "tools/call with a wrong _meta type",
            &[legacy],
            json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "echo", "arguments": {}, "_meta": 3}}),
        ),
        case(
            "tools/list with a numeric cursor",
            &[legacy],
            json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"cursor": 3}}),
        ),
        current(
            "subscriptions/listen without notifications",
            "subscriptions/listen",
            json!({}),
            &[],
        ),
        case(
            "subscriptions/listen legacy",
            &[legacy],
            json!({"jsonrpc": "2.0", "id": 8, "method": "subscriptions/listen", "params": {"notifications": {}}}),
        ),
    ]
}

impl Case {
    fn without(mut self, header: &str) -> Case {
        self.headers.retain(|(k, _)| *k != header);
        self
    }

    fn replace(mut self, header: &'static str, value: &str) -> Case {
        self.headers.retain(|(k, _)| *k != header);
        self.headers.push((header, value.to_owned()));
        self
    }
}

/// A body as a diff shows it: its first 300 characters.
fn short(body: &Value) -> String {
    body.as_str()
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_answers_transport_rule_breaches_as_recorded() {
    let fleet = Fleet::start(1, "").await;
    let edge = &fleet.edges[0];
    let key = fleet.key("qa", "collector").to_owned();
    let client = McpHttp::new(&edge.addr, None, LEGACY);
    let record = std::env::var_os("TP_RECORD_TRANSPORT").is_some();
    let expected: Vec<Value> = match std::fs::read(FIXTURE) {
        Ok(bytes) => serde_json::from_slice(&bytes).expect("the fixture is JSON"),
        Err(_) if record => vec![],
        Err(error) => panic!("read {FIXTURE}: {error}"),
    };
    let notes: std::collections::HashMap<String, Value> = expected
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?.to_owned(), e.get("note")?.clone())))
        .collect();
    let mut answers = vec![];
    for case in cases() {
        let auth = format!("Bearer {key}");
        let mut headers: Vec<(&str, &str)> =
            case.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        headers.push(("authorization", &auth));
        let reply = client.raw(case.body.clone(), &headers).await;
        let content_type = reply.content_type();
        let mut entry = json!({
            "name": case.name,
            "status": reply.status,
            "content_type": content_type,
            "body": reply.body,
        });
        if let Some(note) = notes.get(case.name) {
            entry["note"] = note.clone();
        }
        answers.push(entry);
    }
    if record {
        let mut text = serde_json::to_string_pretty(&answers).unwrap();
        text.push('\n');
        std::fs::write(FIXTURE, text).unwrap();
        return;
    }
    assert_eq!(
        answers.len(),
        expected.len(),
        "cases and fixture differ in number"
    );
    let mut differ = vec![];
    for (got, want) in answers.iter().zip(&expected) {
        if got != want {
            differ.push(format!(
                "{}:\n  recorded: {} {} {}\n  answered: {} {} {}",
                want["name"],
                want["status"],
                want["content_type"],
                short(&want["body"]),
                got["status"],
                got["content_type"],
                short(&got["body"])
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
