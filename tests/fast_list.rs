//! Precomputed `tools/list` pages (`mcp.precomputed_lists`, answered early in the edge's one
//! request pipeline: `services/edge/src/app/methods/list.rs`) against the per-request paginator: two
//! edges on one control plane and Redis, one with precomputed pages and one without, must
//! answer every request — every page of every (tenant, role) in both protocol generations, and
//! a table of requests the precomputed pages must leave alone — with the same status, content
//! type and bytes. The fast edge's counter shows which requests it answered from its pages.
//! (`tests/direct_call.rs` compares the per-request answer with rmcp's transport.)

use serde_json::{Value, json};
use tp_test_support::{EdgeProcess, McpHttp};

use crate::fleet::{Fleet, LEGACY, ROLES, STATELESS, TENANTS};

const TOML: &str = "[mcp]\npage_size = 4\n";

/// A named request (headers, body) and whether the fast path should answer it.
type Case = (&'static str, Vec<(&'static str, String)>, Vec<u8>, bool);

async fn fast_count(edge: &EdgeProcess) -> u64 {
    let (_, metrics) = edge.admin_get("/metrics").await;
    metrics
        .lines()
        .filter(|l| l.starts_with("tp_edge_list_precomputed_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Sends the same raw request to both edges; returns (status, content type, body) of each.
async fn both(
    fast: &McpHttp,
    slow: &McpHttp,
    body: &[u8],
    headers: &[(&str, &str)],
) -> [(u16, String, String); 2] {
    let mut out = Vec::new();
    for client in [fast, slow] {
        let reply = client.raw(body.to_vec(), headers).await;
        let content_type = reply.content_type();
        out.push((reply.status, content_type, reply.body));
    }
    [out[0].clone(), out[1].clone()]
}

fn headers_for(version: &str, key: &str) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("accept", "application/json, text/event-stream".to_owned()),
        ("mcp-protocol-version", version.to_owned()),
        ("authorization", format!("Bearer {key}")),
    ];
    if version == STATELESS {
        headers.push(("mcp-method", "tools/list".to_owned()));
    }
    headers
}

fn list_body(version: &str, id: Value, cursor: Option<&str>) -> Vec<u8> {
    let mut params = json!({});
    if let Some(cursor) = cursor {
        params["cursor"] = json!(cursor);
    }
    if version == STATELESS {
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": STATELESS,
                                 "io.modelcontextprotocol/clientCapabilities": {}});
    }
    serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precomputed_lists_answer_the_transports_bytes_and_leave_the_rest_to_it() {
    let fleet = Fleet::start(1, TOML).await;
    let slow_edge = EdgeProcess::start(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&fleet.redis.url()),
        &format!("{TOML}precomputed_lists = false\n"),
    )
    .await;
    let fast_edge = &fleet.edges[0];
    let client = |addr: &str| McpHttp::new(addr, None, LEGACY);
    let (fast, slow) = (client(&fast_edge.addr), client(&slow_edge.addr));

    // Every page of every registry, both generations, string and number ids.
    let before = fast_count(fast_edge).await;
    let mut pages = 0u64;
    for tenant in TENANTS {
        for role in ROLES {
            let key = fleet.key(tenant, role);
            for version in [LEGACY, STATELESS] {
                let owned = headers_for(version, key);
                let headers: Vec<(&str, &str)> =
                    owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let mut cursor: Option<String> = None;
                let mut seen = 0;
                loop {
                    let id = if pages.is_multiple_of(2) {
                        json!(pages)
                    } else {
                        json!(format!("req-{pages}"))
                    };
                    let body = list_body(version, id, cursor.as_deref());
                    let [f, s] = both(&fast, &slow, &body, &headers).await;
                    assert_eq!(f, s, "{tenant}/{role} {version} page after {cursor:?}");
                    assert_eq!(f.0, 200, "{}", f.2);
                    pages += 1;
                    let answer: Value = serde_json::from_str(&f.2).unwrap();
                    seen += answer["result"]["tools"].as_array().unwrap().len();
                    match answer["result"]["nextCursor"].as_str() {
                        Some(next) => cursor = Some(next.to_owned()),
                        None => break,
                    }
                }
                assert_eq!(
                    seen,
                    fleet.listing(tenant, role).await.len(),
                    "{tenant}/{role} {version}"
                );
            }
        }
    }
    let taken = fast_count(fast_edge).await - before;
    assert_eq!(taken, pages, "the fast edge answered every page itself");
    eprintln!("{pages} pages answered byte-for-byte alike by both paths");

    // Requests the fast path must leave to the transport, or answer exactly as it would.
    let key = fleet.key("acme", "collector");
    let legacy = headers_for(LEGACY, key);
    let stateless = headers_for(STATELESS, key);
    let with = |base: &[(&'static str, String)], changes: &[(&'static str, &str)]| {
        let mut headers: Vec<(&'static str, String)> = base
            .iter()
            .filter(|(k, _)| !changes.iter().any(|(c, _)| c == k))
            .cloned()
            .collect();
        for (name, value) in changes {
            if !value.is_empty() {
                headers.push((name, (*value).to_owned()));
            }
        }
        headers
    };
    let plain = list_body(LEGACY, json!(1), None);
    let meta = list_body(STATELESS, json!(1), None);
    let not_a_boundary = {
        use base64::Engine as _;
        format!(
            "c1.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("a")
        )
    };
    let raw = |value: Value| serde_json::to_vec(&value).unwrap();
    // A session id from the fast edge's initialize: both edges share the fleet secret.
    let init = fast
        .with_key(Some(key))
        .request(
            9,
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await;
    let session = init.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let mut changed_session = session.clone();
    changed_session.insert(8, 'Q');
    let cases: Vec<Case> = vec![
        (
            "no version header",
            with(&legacy, &[("mcp-protocol-version", "")]),
            plain.clone(),
            true,
        ),
        (
            "2025-03-26",
            with(&legacy, &[("mcp-protocol-version", "2025-03-26")]),
            plain.clone(),
            true,
        ),
        (
            "2025-06-18",
            with(&legacy, &[("mcp-protocol-version", "2025-06-18")]),
            plain.clone(),
            true,
        ),
        (
            "2024-11-05",
            with(&legacy, &[("mcp-protocol-version", "2024-11-05")]),
            plain.clone(),
            true,
        ),
        (
            "unknown version",
            with(&legacy, &[("mcp-protocol-version", "1999-01-01")]),
            plain.clone(),
            false,
        ),
        (
            "allowed Host with port",
            with(&legacy, &[("host", "localhost:1")]),
            plain.clone(),
            true,
        ),
        (
            "foreign Host",
            with(&legacy, &[("host", "evil.example.com")]),
            plain.clone(),
            false,
        ),
        (
            "an Origin",
            with(&legacy, &[("origin", "http://127.0.0.1")]),
            plain.clone(),
            false,
        ),
        (
            "foreign Origin",
            with(&legacy, &[("origin", "http://evil.example.com")]),
            plain.clone(),
            false,
        ),
        (
            "Accept without event-stream",
            with(&legacy, &[("accept", "application/json")]),
            plain.clone(),
            false,
        ),
        (
            "Accept with parameters",
            with(
                &legacy,
                &[("accept", "application/json;q=0.9, text/event-stream;q=0.5")],
            ),
            plain.clone(),
            true,
        ),
        (
            "Accept refusing event-stream with q=0",
            with(
                &legacy,
                &[("accept", "application/json, text/event-stream;q=0")],
            ),
            plain.clone(),
            false,
        ),
        (
            "Content-Type with charset",
            with(
                &legacy,
                &[("content-type", "application/json; charset=utf-8")],
            ),
            plain.clone(),
            true,
        ),
        (
            "Content-Type application/jsonx",
            with(&legacy, &[("content-type", "application/jsonx")]),
            plain.clone(),
            false,
        ),
        (
            "negative id",
            legacy.clone(),
            list_body(LEGACY, json!(-5), None),
            true,
        ),
        (
            "id with quotes",
            legacy.clone(),
            list_body(LEGACY, json!("a\"b\\c"), None),
            true,
        ),
        (
            "fractional id",
            legacy.clone(),
            list_body(LEGACY, json!(1.5), None),
            false,
        ),
        (
            "id past i64",
            legacy.clone(),
            list_body(LEGACY, json!(u64::MAX), None),
            false,
        ),
        (
            "null id",
            legacy.clone(),
            list_body(LEGACY, Value::Null, None),
            false,
        ),
        (
            "no id (notification)",
            legacy.clone(),
            raw(json!({"jsonrpc": "2.0", "method": "tools/list"})),
            false,
        ),
        (
            "no params",
            legacy.clone(),
            raw(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})),
            true,
        ),
        (
            "null params",
            legacy.clone(),
            raw(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": null})),
            true,
        ),
        (
            "extra params key",
            legacy.clone(),
            raw(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"x": 1}})),
            false,
        ),
        (
            "null cursor",
            legacy.clone(),
            raw(
                json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": null}}),
            ),
            true,
        ),
        (
            "numeric cursor",
            legacy.clone(),
            raw(
                json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": 5}}),
            ),
            false,
        ),
        (
            "garbage cursor",
            legacy.clone(),
            list_body(LEGACY, json!(1), Some("garbage")),
            false,
        ),
        (
            "cursor off a page boundary",
            legacy.clone(),
            list_body(LEGACY, json!(1), Some(&not_a_boundary)),
            false,
        ),
        (
            "legacy header, per-request version",
            legacy.clone(),
            meta.clone(),
            false,
        ),
        (
            "2026-07-28 without Mcp-Method",
            with(&stateless, &[("mcp-method", "")]),
            meta.clone(),
            false,
        ),
        (
            "2026-07-28 with a wrong Mcp-Method",
            with(&stateless, &[("mcp-method", "tools/call")]),
            meta.clone(),
            false,
        ),
        (
            "2026-07-28 with Mcp-Name",
            with(&stateless, &[("mcp-name", "gmail")]),
            meta.clone(),
            true,
        ),
        (
            "2026-07-28 header, no _meta",
            stateless.clone(),
            plain.clone(),
            false,
        ),
        (
            "2026-07-28 _meta without capabilities",
            stateless.clone(),
            raw(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
                       "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS}}})),
            false,
        ),
        (
            "2026-07-28 malformed capabilities",
            stateless.clone(),
            raw(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
                       "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS,
                                            "io.modelcontextprotocol/clientCapabilities": 5}}})),
            false,
        ),
        (
            "2026-07-28 with clientInfo and a log level",
            stateless.clone(),
            raw(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
                       "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS,
                                            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
                                            "io.modelcontextprotocol/clientInfo": {"name": "x", "version": "1"},
                                            "io.modelcontextprotocol/logLevel": "debug"}}})),
            true,
        ),
        (
            "no Authorization",
            with(&legacy, &[("authorization", "")]),
            plain.clone(),
            false,
        ),
        (
            "wrong key",
            with(&legacy, &[("authorization", "Bearer tpk_0000")]),
            plain.clone(),
            false,
        ),
        (
            "a session id from initialize",
            with(&legacy, &[("mcp-session-id", session.as_str())]),
            plain.clone(),
            true,
        ),
        (
            "a changed session id",
            with(&legacy, &[("mcp-session-id", changed_session.as_str())]),
            plain.clone(),
            false,
        ),
    ];
    let mut left = 0;
    for (name, headers, body, taken) in cases {
        let borrowed: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let before = fast_count(fast_edge).await;
        let [f, s] = both(&fast, &slow, &body, &borrowed).await;
        assert_eq!(f, s, "{name}: the fast edge answered differently");
        let took = fast_count(fast_edge).await - before;
        assert_eq!(
            took,
            u64::from(taken),
            "{name}: fast path taken {took} times, expected {taken} ({} {})",
            f.0,
            f.2
        );
        if !taken {
            left += 1;
        }
    }
    eprintln!("{left} unusual requests not answered from precomputed pages, each answered alike");
}
