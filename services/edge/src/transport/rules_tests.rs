//! Unit tests of the transport's rules (`super::rules`).
#![allow(clippy::too_many_lines, reason = "test code")]

use super::heads::Heads;
use super::hosts::{AllowedHosts, contradiction, host_allowed};
use super::rules::*;
use axum::http::{HeaderMap, StatusCode};
use serde_json::json;
use serde_json::{Map, Value};
use tp_proto::Fault;

use crate::error::Answering;

/// What the edge reads of a request with these headers (repeated names kept in order).
fn headers(pairs: &[(&'static str, &str)]) -> Heads {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(*name, value.parse().unwrap());
    }
    Heads::read(&map)
}

fn current_meta() -> Map<String, Value> {
    json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": CURRENT,
        "io.modelcontextprotocol/clientCapabilities": {}
    }})
    .as_object()
    .unwrap()
    .clone()
}

#[test]
fn media_types() {
    let plain = "application/json, text/event-stream";
    let ok = |accept: &str| {
        media(&headers(&[
            ("accept", accept),
            ("content-type", "application/json"),
        ]))
    };
    assert_eq!(ok(plain), Ok(()));
    assert_eq!(ok("application/json;q=0.5, text/event-stream;q=1"), Ok(()));
    assert_eq!(
        ok("application/json;q=1.0000, text/event-stream"),
        Ok(()),
        "a malformed weight is ignored"
    );
    assert!(matches!(
        ok("application/json, text/event-stream;q=0"),
        Err(Refused::Http(e)) if e.fault() == Fault::NotAcceptable
    ));
    assert!(matches!(
        ok("application/json, text/event-stream;q=0.000"),
        Err(Refused::Http(e)) if e.fault() == Fault::NotAcceptable
    ));
    assert!(matches!(
        ok("application/json"),
        Err(Refused::Http(e)) if e.fault() == Fault::NotAcceptable
    ));
    assert_eq!(
        ok(r#"application/json;x="a,b", text/event-stream"#),
        Ok(()),
        "a quoted comma splits nothing"
    );
    let text = media(&headers(&[
        ("accept", plain),
        ("content-type", "text/plain"),
    ]));
    assert!(matches!(
        text,
        Err(Refused::Http(e)) if e.fault() == Fault::UnsupportedMediaType
    ));
    let charset = media(&headers(&[
        ("accept", plain),
        ("content-type", "Application/JSON; charset=utf-8"),
    ]));
    assert_eq!(charset, Ok(()));
}

#[test]
fn generations_and_refusals() {
    let id = json!(1);
    let meta = current_meta();
    let request = |params| Message::request(&id, "tools/list", params);
    // Legacy: no header, or a known one; an unknown one is refused before JSON-RPC.
    assert_eq!(admit(&headers(&[]), request(None)), Ok(Generation::Legacy));
    assert_eq!(
        admit(
            &headers(&[("mcp-protocol-version", "2025-06-18")]),
            request(None)
        ),
        Ok(Generation::Legacy)
    );
    assert!(matches!(
        admit(
            &headers(&[("mcp-protocol-version", "1999-01-01")]),
            request(None)
        ),
        Err(Refused::Http(e)) if e.fault() == Fault::BadVersionHeader
    ));
    // Below 2026-07-28, Mcp-Method is not the transport's to check.
    assert_eq!(
        admit(
            &headers(&[("mcp-protocol-version", "2025-11-25"), ("mcp-method", "x")]),
            request(None)
        ),
        Ok(Generation::Legacy)
    );
    // 2026-07-28: header, _meta and Mcp-Method agree.
    let current = headers(&[
        ("mcp-protocol-version", CURRENT),
        ("mcp-method", "tools/list"),
    ]);
    assert_eq!(
        admit(&current, request(Some(&meta))),
        Ok(Generation::Stateless)
    );
    let code = |r: Result<Generation, Refused>| match r {
        Err(Refused::JsonRpc(_, error)) => (
            error.status(Answering::Request).as_u16(),
            error.jsonrpc_code(false),
        ),
        other => panic!("{other:?}"),
    };
    assert_eq!(code(admit(&current, request(None))), (400, -32602));
    assert_eq!(
        code(admit(
            &headers(&[("mcp-protocol-version", CURRENT)]),
            request(Some(&meta))
        )),
        (400, -32020)
    );
    assert_eq!(
        code(admit(&headers(&[]), request(Some(&meta)))),
        (400, -32020)
    );
    let two = headers(&[
        ("mcp-protocol-version", CURRENT),
        ("mcp-method", "tools/list"),
        ("mcp-method", "tools/list"),
    ]);
    assert_eq!(code(admit(&two, request(Some(&meta)))), (400, -32020));
    // Mcp-Name: literal or Base64, and must match the target.
    let mut call = meta.clone();
    call.insert("name".into(), json!("echo"));
    let named = |name: &str| {
        let h = headers(&[
            ("mcp-protocol-version", CURRENT),
            ("mcp-method", "tools/call"),
            ("mcp-name", name),
        ]);
        admit(&h, Message::request(&id, "tools/call", Some(&call)))
    };
    assert_eq!(named("echo"), Ok(Generation::Stateless));
    assert_eq!(named("=?base64?ZWNobw==?="), Ok(Generation::Stateless));
    assert_eq!(code(named("other")), (400, -32020));
    assert_eq!(code(named("=?base64?@@?=")), (400, -32020));
    // A version in _meta the edge does not know.
    let mut v999 = meta.clone();
    v999["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999");
    let h = headers(&[
        ("mcp-protocol-version", "v999"),
        ("mcp-method", "tools/list"),
    ]);
    assert_eq!(code(admit(&h, request(Some(&v999)))), (400, -32022));
    // Notifications need Mcp-Method at 2026-07-28, and nothing else.
    assert_eq!(
        code(admit(
            &headers(&[("mcp-protocol-version", CURRENT)]),
            Message::Notification("notifications/cancelled", None)
        )),
        (400, -32020)
    );
    assert_eq!(
        admit(&headers(&[]), Message::Response),
        Ok(Generation::Legacy)
    );
    // Two version headers are refused, whatever they say.
    let twice = headers(&[
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-protocol-version", "2025-11-25"),
    ]);
    assert!(matches!(
        admit(&twice, request(None)),
        Err(Refused::Http(e)) if e.fault() == Fault::BadVersionHeader
    ));
}

#[test]
fn initialize_checks_its_header_against_its_body() {
    let id = json!(2);
    let params = json!({"protocolVersion": "2025-11-25"})
        .as_object()
        .unwrap()
        .clone();
    let init = Message::request(&id, "initialize", Some(&params));
    assert_eq!(admit(&headers(&[]), init), Ok(Generation::Legacy));
    assert_eq!(
        admit(&headers(&[("mcp-protocol-version", "2025-11-25")]), init),
        Ok(Generation::Legacy)
    );
    assert!(matches!(
        admit(&headers(&[("mcp-protocol-version", "2025-06-18")]), init),
        Err(Refused::JsonRpc(_, e)) if e.status(Answering::Request) == StatusCode::BAD_REQUEST
    ));
}

#[test]
fn hosts() {
    let allowed = AllowedHosts::new(&[
        "localhost".to_owned(),
        " ::1".to_owned(),
        "edge.internal:9000".to_owned(),
        "not a host".to_owned(),
    ]);
    let path: axum::http::Uri = "/mcp".parse().unwrap();
    let ok = |host: &str| host_allowed(&headers(&[("host", host)]), &path, &allowed);
    assert!(ok("localhost") && ok("LOCALHOST:8080") && ok("[::1]:8080"));
    assert!(ok("edge.internal:9000"));
    assert!(!ok("edge.internal:9001") && !ok("edge.internal") && !ok("127.0.0.1"));
    assert!(!host_allowed(&Heads::default(), &path, &allowed));
    assert!(!ok("localhost:99999") && !ok("user@localhost") && !ok("[::1"));
    assert!(!ok("localhost:") && !ok(""));
    assert!(!ok("not a host"));
    assert!(host_allowed(
        &Heads::default(),
        &path,
        &AllowedHosts::new(&["*".to_owned()])
    ));
    // An absolute request target is the Host (RFC 9112 §3.2.2): checked as one.
    let absolute: axum::http::Uri = "http://evil.example/mcp".parse().unwrap();
    assert!(!host_allowed(
        &headers(&[("host", "localhost")]),
        &absolute,
        &allowed
    ));
    let own: axum::http::Uri = "http://localhost:8080/mcp".parse().unwrap();
    assert!(host_allowed(
        &headers(&[("host", "localhost:8080")]),
        &own,
        &allowed
    ));
}

#[test]
fn contradicting_headers_are_named() {
    let path: axum::http::Uri = "/mcp".parse().unwrap();
    assert_eq!(contradiction(&headers(&[("host", "a")]), &path), None);
    let two = headers(&[
        ("authorization", "Bearer a"),
        ("host", "a"),
        ("authorization", "Bearer b"),
    ]);
    assert_eq!(
        contradiction(&two, &path),
        Some("more than one Authorization header")
    );
    let absolute: axum::http::Uri = "http://evil.example/mcp".parse().unwrap();
    assert!(contradiction(&headers(&[("host", "localhost")]), &absolute).is_some());
    assert_eq!(
        contradiction(&headers(&[("host", "evil.example")]), &absolute),
        None
    );
}
