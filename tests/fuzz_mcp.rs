//! A seeded, structure-aware fuzz of the edge's MCP surface (proptest strategies, no
//! shrinking): well-formed-looking MCP requests of every method and protocol version, with the
//! headers each version uses (sometimes wrong), `_meta`, cursors, session ids, input responses
//! and request states, arguments nested around the protocol-buffer limit and strings from the
//! corners of Unicode, sent to a real edge. Every answer must be a documented status with a
//! readable body; no tool outside the caller's registry may ever answer; the edge must not
//! panic and must still answer correctly afterwards.
//!
//! `TOOLPLANE_FUZZ_SEED` and `TOOLPLANE_FUZZ_CASES` (default 4000) vary it; the run stops
//! early after `TOOLPLANE_FUZZ_SECONDS` (default 90).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

use crate::fleet::Fleet;

const VERSIONS: [&str; 6] = [
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
    "2024-11-05",
    "1999-01-01",
];

fn odd_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{0,12}",
        "\\PC{0,24}",
        Just("İİİ KKK ß ﬁ \u{200b}\u{202e}evil\u{0}".to_owned()),
        Just("../../etc/passwd".to_owned()),
        Just("x".repeat(5000)),
        Just("=?base64?aGVsbG8=?=".to_owned()),
        "[\\x00-\\x1f\"\\\\]{1,8}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        Just(json!(u64::MAX)),
        Just(json!(1e308)),
        Just(json!(-0.0)),
        odd_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(40, 200, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(odd_string(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A chain of `levels` objects around `leaf` (to probe the depth limit exactly).
fn nested(levels: usize, leaf: Value) -> Value {
    (0..levels).fold(leaf, |value, _| json!({ "n": value }))
}

/// What an HTTP client can put in a header value (visible ASCII and spaces).
fn header_safe(value: &str) -> bool {
    value.bytes().all(|b| (0x20..0x7f).contains(&b))
}

#[derive(Debug, Clone)]
struct Case {
    version: &'static str,
    headers_right: bool,
    session: Option<String>,
    body: Value,
    method: String,
    tool: Option<String>,
}

fn case(tools: Vec<String>) -> impl Strategy<Value = Case> {
    let method = prop_oneof![
        4 => Just("tools/call".to_owned()),
        2 => Just("tools/list".to_owned()),
        1 => Just("initialize".to_owned()),
        1 => Just("ping".to_owned()),
        1 => Just("server/discover".to_owned()),
        1 => Just("notifications/initialized".to_owned()),
        1 => Just("resources/list".to_owned()),
        1 => Just("logging/setLevel".to_owned()),
        1 => odd_string(),
    ];
    let tool = prop_oneof![
        3 => proptest::sample::select(tools),
        1 => proptest::sample::select(vec![
            "capabilities".to_owned(), "tool_schema".to_owned(), "dispatch".to_owned(),
            "dispatch_parallel".to_owned(),
        ]),
        1 => odd_string(),
    ];
    let arguments = prop_oneof![
        3 => json_value(),
        1 => (25usize..36).prop_map(|d| nested(d, json!("deep"))),
        1 => (json_value(), odd_string()).prop_map(|(v, t)| json!({"tool": t, "arguments": v})),
        1 => json_value().prop_map(|v| json!({"calls": [{"tool": "echo", "arguments": v}], "timeout_ms": 50})),
    ];
    let id = prop_oneof![
        any::<u32>().prop_map(|n| json!(n)),
        odd_string().prop_map(Value::String),
        Just(Value::Null),
        Just(json!(1.5)),
        Just(json!({"id": 1})),
    ];
    (
        proptest::sample::select(VERSIONS.to_vec()),
        any::<bool>(),
        proptest::option::weighted(0.1, odd_string()),
        method,
        tool,
        arguments,
        id,
        proptest::option::weighted(0.2, json_value()),
        proptest::option::weighted(0.1, (25usize..36).prop_map(|d| nested(d, json!(1)))),
        proptest::option::weighted(0.1, odd_string()),
        proptest::option::weighted(0.2, odd_string()),
        any::<bool>(),
    )
        .prop_map(
            |(version, headers_right, session, method, tool, arguments, id, meta_extra, responses, state, cursor, with_meta)| {
                let mut params = json!({});
                let mut tool_name = None;
                if method == "tools/call" {
                    params = json!({"name": tool.clone(), "arguments": arguments});
                    tool_name = Some(tool);
                    if let Some(responses) = responses {
                        params["inputResponses"] = json!({"r": responses});
                    }
                    if let Some(state) = state {
                        params["requestState"] = json!(state);
                    }
                } else if method == "tools/list" {
                    if let Some(cursor) = cursor {
                        params["cursor"] = json!(cursor);
                    }
                } else if method == "initialize" {
                    params = json!({"protocolVersion": version, "capabilities": meta_extra.clone().unwrap_or(json!({})),
                        "clientInfo": {"name": "fuzz", "version": "1"}});
                }
                if with_meta || version >= "2026-07-28" {
                    params["_meta"] = json!({
                        "io.modelcontextprotocol/protocolVersion": version,
                        "io.modelcontextprotocol/clientCapabilities": meta_extra.unwrap_or(json!({})),
                        "progressToken": "p1",
                    });
                }
                let mut body = json!({"jsonrpc": "2.0", "method": method, "params": params});
                if !method.starts_with("notifications/") {
                    body["id"] = id;
                }
                Case { version, headers_right, session, body, method, tool: tool_name }
            },
        )
}

#[tokio::test]
async fn a_structure_aware_fuzz_of_the_mcp_surface_finds_no_panic_and_no_leak() {
    let mut fleet = Fleet::start(1, "").await;
    let key = fleet.key("qa", "executor").to_owned();
    let visible: std::collections::BTreeSet<String> =
        fleet.expected("qa", "executor").await.into_iter().collect();
    let mut tools = fleet.catalogue().await;
    tools.push("client_wiki".into());
    let seed: u64 = std::env::var("TOOLPLANE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7F_55ED);
    let cases: u32 = std::env::var("TOOLPLANE_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000);
    let budget = Duration::from_secs(
        std::env::var("TOOLPLANE_FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(90),
    );
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let strategy = case(tools);
    let client = fleet.client(0, "qa", "executor", "2025-11-25");
    let started = Instant::now();
    let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
    let mut hidden_probes = 0;
    let mut sent = 0;
    for i in 0..cases {
        if started.elapsed() > budget {
            break;
        }
        let case = strategy.new_tree(&mut runner).unwrap().current();
        let body = serde_json::to_vec(&case.body).unwrap();
        let auth = format!("Bearer {key}");
        let mut headers: Vec<(&str, String)> = vec![
            ("content-type", "application/json".into()),
            ("accept", "application/json, text/event-stream".into()),
            ("authorization", auth),
        ];
        if case.version != "2024-11-05" {
            headers.push(("mcp-protocol-version", case.version.into()));
        }
        if case.version >= "2026-07-28" {
            let method = if case.headers_right {
                case.method.clone()
            } else {
                "tools/lisst".into()
            };
            if header_safe(&method) {
                headers.push(("mcp-method", method));
            }
            if let Some(tool) = &case.tool {
                let name = if case.headers_right {
                    tool.clone()
                } else {
                    format!("{tool}x")
                };
                if header_safe(&name) {
                    headers.push(("mcp-name", name));
                }
            }
        }
        if let Some(session) = &case.session
            && header_safe(session)
        {
            headers.push(("mcp-session-id", session.clone()));
        }
        let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let reply = client.raw(body.clone(), &refs).await;
        sent += 1;
        assert!(
            matches!(reply.status, 200 | 202 | 400 | 404 | 406 | 413 | 415 | 503),
            "seed {seed} case #{i}: status {} for {}: {}",
            reply.status,
            String::from_utf8_lossy(&body),
            reply.body
        );
        if matches!(reply.status, 200) {
            assert!(
                !reply.messages.is_empty(),
                "seed {seed} case #{i}: a 200 carries a JSON-RPC message: {}",
                reply.body
            );
        }
        // Isolation: a tool outside the caller's registry never answers with a result.
        if let Some(tool) = &case.tool
            && !visible.contains(tool)
            && !tp_registry::META_TOOLS.contains(&tool.as_str())
        {
            hidden_probes += 1;
            let result = reply.messages.iter().find(|m| m.get("result").is_some());
            assert!(
                result.is_none(),
                "seed {seed} case #{i}: {tool} is not in qa/executor's registry, yet: {}",
                reply.body
            );
        }
        *by_status.entry(reply.status).or_default() += 1;
    }
    let ok = client.call("echo", json!({"text": "after the fuzz"})).await;
    assert_eq!(ok.result()["isError"], false, "{}", ok.body);
    let log = fleet.edges[0].log();
    assert!(!log.contains("panicked"), "{log}");
    assert!(!fleet.edges[0].process.has_exited());
    println!(
        "seed {seed:#x}: {sent} structure-aware MCP requests in {:.0} s, 0 panics, {hidden_probes} aimed at tools outside the registry all refused; answers by status {by_status:?}",
        started.elapsed().as_secs_f64()
    );
}
