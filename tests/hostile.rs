//! Hostile input against a real edge: a table of bad HTTP requests, each answered with the
//! status and JSON-RPC code documented in docs/reliability.md, then thousands of seeded random
//! requests. The edge must answer every one with a clear error (or a result), never panic, and
//! stay up.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};
use tp_test_support::McpHttp;

use crate::fleet::{Fleet, LEGACY, STATELESS};
use crate::rng::Rng;

/// `case → (status, JSON-RPC code or "—")` from the table in docs/reliability.md.
fn documented() -> BTreeMap<String, (u16, String)> {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reliability.md"),
    )
    .unwrap();
    doc.lines()
        .skip_while(|l| !l.starts_with("## Hostile HTTP requests"))
        .filter(|l| l.starts_with("| "))
        .skip(1)
        .take_while(|l| l.starts_with("| "))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            (
                cells[1].to_owned(),
                (
                    cells[2].parse().unwrap_or_else(|_| panic!("{row}")),
                    cells[3].trim_matches('`').to_owned(),
                ),
            )
        })
        .collect()
}

struct Case {
    name: &'static str,
    version: &'static str,
    /// Headers replacing (or, with an empty value, removing) the client's defaults.
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

fn rpc(method: &str, params: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
        .unwrap()
}

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn cases() -> Vec<Case> {
    let call = |name: &str, arguments: Value| {
        rpc("tools/call", json!({"name": name, "arguments": arguments}))
    };
    let meta = json!({"io.modelcontextprotocol/protocolVersion": STATELESS,
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let case = |name, version, headers: Vec<(&'static str, &str)>, body: Vec<u8>| Case {
        name,
        version,
        headers: headers
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect(),
        body,
    };
    vec![
        case("body over the limit", LEGACY, vec![], call("echo", json!({"text": "x".repeat(70_000)}))),
        case("wrong Content-Type", LEGACY, vec![("content-type", "text/plain")], rpc("tools/list", json!({}))),
        case("no Content-Type", LEGACY, vec![("content-type", "")], rpc("tools/list", json!({}))),
        case("no Accept", LEGACY, vec![("accept", "")], rpc("tools/list", json!({}))),
        case("Accept without event-stream", LEGACY, vec![("accept", "application/json")], rpc("tools/list", json!({}))),
        case("malformed JSON", LEGACY, vec![], b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\":".to_vec()),
        case("not UTF-8", LEGACY, vec![], vec![0xff, 0xfe, 0x00, 0x7b]),
        case("empty body", LEGACY, vec![], Vec::new()),
        case("JSON scalar", LEGACY, vec![], b"42".to_vec()),
        case("batch array", LEGACY, vec![], format!("[{},{}]",
            String::from_utf8(rpc("tools/list", json!({}))).unwrap(),
            String::from_utf8(rpc("tools/list", json!({}))).unwrap()).into_bytes()),
        case("jsonrpc 1.0", LEGACY, vec![], br#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#.to_vec()),
        case("id is an object", LEGACY, vec![], br#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#.to_vec()),
        case("unknown method", LEGACY, vec![], rpc("tools/destroy", json!({}))),
        // A proxy that reads the first `method` must not see another request than the edge.
        case("a repeated method key", LEGACY, vec![], br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"echo"}}"#.to_vec()),
        case("deep nesting (25,000 levels)", LEGACY, vec![], format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":{}}}}}}}"#,
            nested(25_000)).into_bytes()),
        case("deep nesting in arguments (100 levels)", LEGACY, vec![], format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"x","extra":{}}}}}}}"#,
            nested(100)).into_bytes()),
        case("huge string argument (60 KB)", LEGACY, vec![], call("echo", json!({"text": "y".repeat(60_000)}))),
        case("tools/call without params", LEGACY, vec![], br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#.to_vec()),
        case("arguments not an object", LEGACY, vec![], call("echo", json!("text"))),
        case("tool name of 10,000 characters", LEGACY, vec![], call(&"a".repeat(10_000), json!({}))),
        case("garbage cursor", LEGACY, vec![], rpc("tools/list", json!({"cursor": "../../etc/passwd"}))),
        case("unknown protocol version", LEGACY, vec![("mcp-protocol-version", "1999-01-01")], rpc("tools/list", json!({}))),
        case("Mcp-Method differs from the body", STATELESS, vec![("mcp-method", "tools/list")],
            rpc("tools/call", json!({"name": "echo", "arguments": {"text": "x"}, "_meta": meta}))),
        case("Mcp-Name differs from the body", STATELESS, vec![("mcp-method", "tools/call"), ("mcp-name", "fail")],
            rpc("tools/call", json!({"name": "echo", "arguments": {"text": "x"}, "_meta": meta}))),
        case("2026-07-28 request without Mcp-Method", STATELESS, vec![("mcp-method", "")],
            rpc("tools/list", json!({"_meta": meta}))),
        case("Authorization not a bearer token", LEGACY, vec![("authorization", "Basic dXNlcjpwYXNz")], rpc("tools/list", json!({}))),
        case("unknown API key", LEGACY, vec![("authorization", "Bearer tpk_not-a-real-key")], rpc("tools/list", json!({}))),
        case("foreign Host", LEGACY, vec![("host", "evil.example")], rpc("tools/list", json!({}))),
    ]
}

/// The JSON-RPC error code of a reply, or "—".
fn code_of(body: &str, messages: &[Value]) -> String {
    let from_messages = messages
        .iter()
        .rev()
        .find_map(|m| m["error"]["code"].as_i64());
    let from_body = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["code"].as_i64());
    from_messages
        .or(from_body)
        .map_or_else(|| "—".to_owned(), |c| c.to_string())
}

async fn send(client: &McpHttp, key: &str, case: &Case) -> (u16, String, String) {
    let bearer = format!("Bearer {key}");
    let mut headers: Vec<(&str, String)> = vec![
        ("content-type", "application/json".into()),
        ("accept", "application/json, text/event-stream".into()),
        ("mcp-protocol-version", case.version.into()),
        ("authorization", bearer),
    ];
    if case.version == STATELESS {
        headers.push(("mcp-method", "tools/call".into()));
        headers.push(("mcp-name", "echo".into()));
    }
    for (name, value) in &case.headers {
        headers.retain(|(n, _)| n != name);
        if !value.is_empty() {
            headers.push((name, value.clone()));
        }
    }
    let borrowed: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let reply = client.raw(case.body.clone(), &borrowed).await;
    let code = code_of(&reply.body, &reply.messages);
    (reply.status, code, reply.body)
}

#[tokio::test]
async fn hostile_http_requests_get_their_documented_answers_and_the_edge_stays_up() {
    let mut fleet = Fleet::start(1, "[mcp]\nmax_body_bytes = 65536\n").await;
    let key = fleet.key("qa", "collector").to_owned();
    let client = fleet.client(0, "qa", "collector", LEGACY);
    let table = documented();
    let cases = cases();
    let mut rows = Vec::new();
    let mut wrong = Vec::new();
    for case in &cases {
        let (status, code, body) = send(&client, &key, case).await;
        rows.push(format!("{:<42} {status} {code}", case.name));
        let Some(expected) = table.get(case.name) else {
            wrong.push(format!(
                "{}: got {status} {code}, not in docs/reliability.md — {}",
                case.name,
                body.chars().take(200).collect::<String>()
            ));
            continue;
        };
        if (status, &code) != (expected.0, &expected.1) {
            wrong.push(format!(
                "{}: got {status} {code}, documented {} {} — {}",
                case.name,
                expected.0,
                expected.1,
                body.chars().take(200).collect::<String>()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(
        table.len(),
        cases.len(),
        "docs/reliability.md and the test list the same cases"
    );
    // Still up, still correct.
    let (status, _) = fleet.edges[0].get("/healthz").await;
    assert_eq!(status, 200);
    let ok = client.call("echo", json!({"text": "still here"})).await;
    assert_eq!(ok.result()["isError"], false, "{}", ok.body);
    assert!(
        !fleet.edges[0].log().contains("panicked"),
        "{}",
        fleet.edges[0].log()
    );
    assert!(!fleet.edges[0].process.has_exited());
    println!(
        "{} hostile requests, each with its documented answer:\n  {}",
        rows.len(),
        rows.join("\n  ")
    );
}

/// Random requests, seeded: structured JSON-RPC with random methods, names, cursors and
/// arguments; random JSON; random bytes. Every reply is a documented status with a body the
/// client can read, no input panics the edge, and afterwards it still answers correctly.
#[tokio::test]
async fn seeded_random_requests_never_panic_the_edge() {
    let fleet = Fleet::start(1, "").await;
    let key = fleet.key("qa", "collector").to_owned();
    let catalogue = fleet.catalogue().await;
    let client = fleet.client(0, "qa", "collector", LEGACY);
    let seed = std::env::var("TOOLPLANE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_u64);
    let count: usize = std::env::var("TOOLPLANE_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let mut rng = Rng(seed | 1);
    let methods = [
        "tools/list",
        "tools/call",
        "initialize",
        "ping",
        "server/discover",
        "resources/list",
        "prompts/get",
        "notifications/initialized",
        "completion/complete",
        "logging/setLevel",
        "subscriptions/listen",
        "",
    ];
    let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
    for i in 0..count {
        let body: Vec<u8> = match rng.below(10) {
            0 => (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
            1 => serde_json::to_vec(&rng.value(0)).unwrap(),
            _ => {
                let method = *rng.pick(&methods);
                let name = if rng.below(3) == 0 {
                    rng.string()
                } else {
                    rng.pick(&catalogue).clone()
                };
                let mut params = json!({"name": name, "arguments": rng.value(1)});
                if rng.below(4) == 0 {
                    params["cursor"] = json!(rng.string());
                }
                if rng.below(5) == 0 {
                    params = rng.value(0);
                }
                let id = match rng.below(4) {
                    0 => json!(rng.string()),
                    1 => Value::Null,
                    _ => json!(i),
                };
                serde_json::to_vec(
                    &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
                )
                .unwrap()
            }
        };
        let reply = client
            .raw(
                body.clone(),
                &[
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("mcp-protocol-version", LEGACY),
                    ("authorization", &format!("Bearer {key}")),
                ],
            )
            .await;
        assert!(
            matches!(reply.status, 200 | 202 | 400),
            "seed {seed} input #{i} {:?}: status {} {}",
            String::from_utf8_lossy(&body),
            reply.status,
            reply.body
        );
        if reply.status == 200 {
            assert!(
                !reply.messages.is_empty(),
                "seed {seed} input #{i}: a 200 carries a JSON-RPC message: {}",
                reply.body
            );
        }
        *by_status.entry(reply.status).or_default() += 1;
    }
    let ok = client
        .call("echo", json!({"text": "after the storm"}))
        .await;
    assert_eq!(ok.result()["isError"], false, "{}", ok.body);
    let log = fleet.edges[0].log();
    assert!(!log.contains("panicked"), "{log}");
    println!("seed {seed:#x}: {count} random requests, 0 panics, answers by status {by_status:?}");
}
