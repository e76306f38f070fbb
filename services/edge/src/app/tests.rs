//! The edge's HTTP behaviour in memory: [`super::service`] over an [`EdgeState`] whose control
//! plane is a table ([`Table`], a [`Directory`]), driven with `oneshot` — no process, no
//! socket. The process-level suites (`tests/`) still run the binaries against the real control
//! plane, Redis and the official clients; these pin the router's own rules, fast.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures::StreamExt as _;
use futures::future::BoxFuture;
use serde_json::Value;
use tonic::Status;
use tower::ServiceExt as _;
use tp_proto::pb;

use super::*;
use crate::control::Directory;

const KEY: &str = "tpk_0000000000000000000000000000000000000000000000000000000000000001";
const OTHER_KEY: &str = "tpk_0000000000000000000000000000000000000000000000000000000000000002";
const UNKNOWN_KEY: &str = "tpk_00000000000000000000000000000000000000000000000000000000000000ff";

/// The control plane as a table: keys → identities, (tenant, role) → registries; it counts
/// what it is asked and can be taken down.
#[derive(Debug, Default)]
struct Table {
    keys: Mutex<HashMap<String, pb::Identity>>,
    registries: Mutex<HashMap<(String, String), pb::ResolvedRegistry>>,
    resolves: AtomicUsize,
    authentications: AtomicUsize,
    down: AtomicBool,
}

impl Directory for Table {
    fn resource(&self) -> &str {
        ""
    }

    fn reachable(&self) -> bool {
        !self.down.load(Ordering::SeqCst)
    }

    fn authenticate<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<pb::Identity, Status>> {
        Box::pin(async move {
            self.authentications.fetch_add(1, Ordering::SeqCst);
            if self.down.load(Ordering::SeqCst) {
                return Err(Status::unavailable("down"));
            }
            self.keys
                .lock()
                .unwrap()
                .get(key)
                .cloned()
                .ok_or_else(|| Status::unauthenticated("unknown key"))
        })
    }

    fn resolve<'a>(
        &'a self,
        tenant: &'a str,
        role: &'a str,
    ) -> BoxFuture<'a, Result<pb::ResolvedRegistry, Status>> {
        Box::pin(async move {
            self.resolves.fetch_add(1, Ordering::SeqCst);
            if self.down.load(Ordering::SeqCst) {
                return Err(Status::unavailable("down"));
            }
            self.registries
                .lock()
                .unwrap()
                .get(&(tenant.to_owned(), role.to_owned()))
                .cloned()
                .ok_or_else(|| Status::not_found("no such tenant"))
        })
    }
}

fn tool(name: &str) -> pb::ResolvedTool {
    pb::ResolvedTool {
        name: name.into(),
        description: format!("{name} does one thing"),
        input_schema: tp_proto::json::to_struct(&json!({
            "type": "object",
            "properties": {"q": {"type": "string", "maxLength": 16}},
            "required": ["q"],
            "additionalProperties": false
        })),
        executor: "nowhere".into(),
        ..Default::default()
    }
}

/// Tenant `acme`: role `collector` sees `search` and `fetch`, role `viewer` sees `search`.
fn table() -> Arc<Table> {
    let table = Table::default();
    for (key, role, tools) in [
        (KEY, "collector", &["fetch", "search"][..]),
        (OTHER_KEY, "viewer", &["search"][..]),
    ] {
        table.keys.lock().unwrap().insert(
            key.to_owned(),
            pb::Identity {
                tenant: "acme".into(),
                role: role.into(),
                key_id: format!("key-{role}"),
                revision: 1,
                ..Default::default()
            },
        );
        table.registries.lock().unwrap().insert(
            ("acme".to_owned(), role.to_owned()),
            pb::ResolvedRegistry {
                tenant: "acme".into(),
                role: role.into(),
                revision: 1,
                tools: tools.iter().map(|t| tool(t)).collect(),
                ..Default::default()
            },
        );
    }
    Arc::new(table)
}

fn edge(table: &Arc<Table>, settings: Value) -> (Arc<EdgeState>, EdgeService) {
    use figment::providers::Serialized;
    let figment = crate::config::figment(None)
        .merge(Serialized::default(
            "edge_token",
            "an-edge-token-long-enough",
        ))
        .merge(Serialized::globals(settings));
    let config = crate::config::load(figment).unwrap();
    let directory: Arc<dyn Directory> = table.clone();
    let state = EdgeState::assemble(config, directory, None);
    // What the watch does once it has caught up with the change stream.
    state.versions.set_synced(true);
    (Arc::clone(&state), service(state))
}

fn post(key: Option<&str>) -> axum::http::request::Builder {
    let mut builder = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header(header::HOST, "127.0.0.1:8080")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(key) = key {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    builder
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Value,
}

async fn send(service: &EdgeService, request: Request) -> Answer {
    let response = service.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
        // An SSE answer: the JSON-RPC message is on its `data:` line.
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .next_back()
            .unwrap_or(Value::Null)
    });
    Answer {
        status,
        headers,
        body,
    }
}

async fn rpc(service: &EdgeService, key: Option<&str>, message: Value) -> Answer {
    let body = message.to_string();
    let request = post(key).body(Body::from(body)).unwrap();
    send(service, request).await
}

fn names(answer: &Answer) -> Vec<String> {
    answer.body["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {}", answer.body))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn list() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
}

#[tokio::test]
async fn each_role_lists_its_own_tools_and_a_warm_list_asks_nothing() {
    let table = table();
    let (_state, service) = edge(&table, json!({}));
    let cold = rpc(&service, Some(KEY), list()).await;
    assert_eq!(cold.status, StatusCode::OK, "{}", cold.body);
    assert_eq!(names(&cold), ["fetch", "search"]);
    assert_eq!(table.resolves.load(Ordering::SeqCst), 1);
    // The second is served from the in-process cache, byte-for-byte the same answer.
    let warm = rpc(&service, Some(KEY), list()).await;
    assert_eq!(warm.body, cold.body);
    assert_eq!(table.resolves.load(Ordering::SeqCst), 1);
    assert_eq!(table.authentications.load(Ordering::SeqCst), 1);
    let viewer = rpc(&service, Some(OTHER_KEY), list()).await;
    assert_eq!(names(&viewer), ["search"]);
}

#[tokio::test]
async fn a_tool_outside_the_role_fails_exactly_like_one_that_does_not_exist() {
    let table = table();
    let (_state, service) = edge(&table, json!({}));
    let call = |name: &str| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": name, "arguments": {"q": "x"}}})
    };
    let hidden = rpc(&service, Some(OTHER_KEY), call("fetch")).await;
    let missing = rpc(&service, Some(OTHER_KEY), call("no_such_tool")).await;
    assert_eq!(hidden.body["error"]["code"], -32602, "{}", hidden.body);
    assert_eq!(missing.body["error"]["code"], -32602);
    assert_eq!(
        hidden.body["error"]["message"]
            .as_str()
            .unwrap()
            .replace("fetch", "X"),
        missing.body["error"]["message"]
            .as_str()
            .unwrap()
            .replace("no_such_tool", "X"),
    );
    // Arguments are validated before anything is forwarded: an unknown key is refused.
    let extra = rpc(
        &service,
        Some(KEY),
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
               "params": {"name": "search", "arguments": {"q": "x", "sneaky": true}}}),
    )
    .await;
    assert_eq!(extra.body["error"]["code"], -32602, "{}", extra.body);
    // The refusal says what is wrong without repeating a property name the schema does not
    // declare (it may be a secret pasted in the wrong place).
    assert!(!extra.body.to_string().contains("sneaky"), "{}", extra.body);
    assert!(
        extra
            .body
            .to_string()
            .contains("1 property the schema does not allow"),
        "{}",
        extra.body
    );
}

#[tokio::test]
async fn credentials_are_checked_before_anything_else() {
    let table = table();
    let (_state, service) = edge(&table, json!({}));
    let none = rpc(&service, None, list()).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    assert!(none.headers.contains_key(header::WWW_AUTHENTICATE));
    let unknown = rpc(&service, Some(UNKNOWN_KEY), list()).await;
    assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);
    assert_eq!(unknown.body["error"], "invalid_token");
    // A refused key is remembered for a while: asking again does not reach the control plane.
    let asked = table.authentications.load(Ordering::SeqCst);
    let again = rpc(&service, Some(UNKNOWN_KEY), list()).await;
    assert_eq!(again.status, StatusCode::UNAUTHORIZED);
    assert_eq!(table.authentications.load(Ordering::SeqCst), asked);
    assert_eq!(table.resolves.load(Ordering::SeqCst), 0);
}

/// The scheme of `Authorization` is case-insensitive (RFC 9110 §11.1): `bearer KEY` and
/// `BEARER KEY` are the same credential as `Bearer KEY`, on the cold path and the warm one;
/// another scheme is refused as malformed.
#[tokio::test]
async fn the_bearer_scheme_is_read_in_any_case() {
    let table = table();
    let (_state, service) = edge(&table, json!({}));
    let with = |authorization: String| {
        post(None)
            .header(header::AUTHORIZATION, authorization)
            .body(Body::from(list().to_string()))
            .unwrap()
    };
    let cold = send(&service, with(format!("bearer {KEY}"))).await;
    assert_eq!(cold.status, StatusCode::OK, "{}", cold.body);
    let warm = send(&service, with(format!("BEARER  {KEY} "))).await;
    assert_eq!(warm.status, StatusCode::OK, "{}", warm.body);
    assert_eq!(names(&cold), names(&warm));
    let basic = send(&service, with("Basic dXNlcjpwYXNz".to_owned())).await;
    assert_eq!(basic.status, StatusCode::UNAUTHORIZED, "{}", basic.body);
}

#[tokio::test]
async fn a_revoked_key_stops_working_when_the_change_arrives() {
    let table = table();
    let (state, service) = edge(&table, json!({}));
    assert_eq!(
        rpc(&service, Some(KEY), list()).await.status,
        StatusCode::OK
    );
    table.keys.lock().unwrap().remove(KEY);
    // Until the change arrives the cached identity stands (the watch is the invalidation).
    assert_eq!(
        rpc(&service, Some(KEY), list()).await.status,
        StatusCode::OK
    );
    state.versions.apply(&pb::Change {
        revision: 2,
        items: vec![pb::ChangeItem {
            kind: pb::ObjectKind::ApiKey as i32,
            key: "key-collector".into(),
            op: pb::ChangeOp::Delete as i32,
            tenant: "acme".into(),
            verb: "delete".into(),
        }],
        ..Default::default()
    });
    let revoked = rpc(&service, Some(KEY), list()).await;
    assert_eq!(revoked.status, StatusCode::UNAUTHORIZED, "{}", revoked.body);
    // The other key of the tenant is untouched.
    assert_eq!(
        rpc(&service, Some(OTHER_KEY), list()).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn malformed_messages_get_json_rpc_errors_and_reach_nothing() {
    let table = table();
    let (_state, service) = edge(&table, json!({}));
    let raw = |body: &'static str| post(Some(KEY)).body(Body::from(body)).unwrap();
    let not_json = send(&service, raw("{\"jsonrpc\": ")).await;
    assert_eq!(not_json.status, StatusCode::BAD_REQUEST);
    assert_eq!(not_json.body["error"]["code"], -32700);
    let batch = send(
        &service,
        raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
    )
    .await;
    assert_eq!(batch.body["error"]["code"], -32600);
    let version = send(&service, raw(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#)).await;
    assert_eq!(version.body["error"]["code"], -32600);
    let params = send(
        &service,
        raw(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}"#),
    )
    .await;
    assert_eq!(params.body["error"]["code"], -32602);
    assert_eq!(params.body["id"], 3);
    // A null id is neither a request's nor a notification's.
    let null_id = send(
        &service,
        raw(r#"{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}"#),
    )
    .await;
    assert_eq!(null_id.status, StatusCode::BAD_REQUEST);
    assert_eq!(null_id.body["error"]["code"], -32600);
    // A notification is accepted and dropped; a response to no question is refused.
    let notification = send(
        &service,
        raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
    )
    .await;
    assert_eq!(notification.status, StatusCode::ACCEPTED);
    let response = send(&service, raw(r#"{"jsonrpc":"2.0","id":9,"result":{}}"#)).await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    assert_eq!(response.body["error"]["code"], -32600);
    // None of them cost a registry lookup.
    assert_eq!(table.resolves.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn limits_are_enforced_with_their_statuses() {
    let table = table();
    let (_state, service) = edge(
        &table,
        json!({"mcp": {"max_body_bytes": 4096, "max_json_values": 100}}),
    );
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"search","arguments":{{"q":"{}"}}}}}}"#,
        "x".repeat(5000)
    );
    let too_large = send(&service, post(Some(KEY)).body(Body::from(big)).unwrap()).await;
    assert_eq!(too_large.status, StatusCode::PAYLOAD_TOO_LARGE);
    let many: Vec<u32> = (0..200).collect();
    let values = rpc(
        &service,
        Some(KEY),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "search", "arguments": {"q": "x", "n": many}}}),
    )
    .await;
    assert_eq!(values.body["error"]["code"], -32602, "{}", values.body);
    assert!(
        values.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_json_values")
    );
    // A browser page of another site cannot call the edge.
    let foreign = send(
        &service,
        post(Some(KEY))
            .header(header::ORIGIN, "https://evil.example")
            .body(Body::from(list().to_string()))
            .unwrap(),
    )
    .await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);
    // Nor a name the edge is not reached by (DNS rebinding), whatever the method.
    for method in ["POST", "GET"] {
        let mut request = post(Some(KEY))
            .method(method)
            .body(Body::from(list().to_string()))
            .unwrap();
        request.headers_mut().insert(
            header::HOST,
            HeaderValue::from_static("attacker.example:8080"),
        );
        let rebound = send(&service, request).await;
        assert_eq!(rebound.status, StatusCode::FORBIDDEN, "{method}");
        assert!(
            rebound.body["error"]
                .as_str()
                .is_some_and(|e| e.contains("mcp.allowed_hosts")),
            "{}",
            rebound.body
        );
    }
}

#[tokio::test]
async fn with_the_control_plane_down_a_cold_caller_gets_a_retryable_error_and_a_warm_one_is_served()
{
    let table = table();
    let (_state, service) = edge(&table, json!({}));
    assert_eq!(
        rpc(&service, Some(KEY), list()).await.status,
        StatusCode::OK
    );
    table.down.store(true, Ordering::SeqCst);
    // Warm: key and registry cached at the current revision.
    let warm = rpc(&service, Some(KEY), list()).await;
    assert_eq!(names(&warm), ["fetch", "search"]);
    // Cold: nothing cached for this key, and nobody to ask.
    let cold = rpc(&service, Some(OTHER_KEY), list()).await;
    assert_eq!(
        cold.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        cold.body
    );
}

#[tokio::test]
async fn initialize_answers_and_pages_follow_the_page_size() {
    let table = table();
    let (_state, service) = edge(&table, json!({"mcp": {"page_size": 1}}));
    let init = rpc(
        &service,
        Some(KEY),
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "oneshot", "version": "1"}}}),
    )
    .await;
    assert_eq!(init.status, StatusCode::OK, "{}", init.body);
    assert_eq!(init.body["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init.body["result"]["serverInfo"]["name"], "toolplane-edge");
    let first = rpc(&service, Some(KEY), list()).await;
    assert_eq!(names(&first), ["fetch"]);
    let cursor = first.body["result"]["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = rpc(
        &service,
        Some(KEY),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": cursor}}),
    )
    .await;
    assert_eq!(names(&second), ["search"]);
    assert!(second.body["result"].get("nextCursor").is_none());
    let bad = rpc(
        &service,
        Some(KEY),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "forged"}}),
    )
    .await;
    assert_eq!(bad.body["error"]["code"], -32602, "{}", bad.body);
}

#[tokio::test]
async fn every_mcp_request_is_shed_and_timed_out_by_the_same_stack_warm_or_not() {
    let table = table();
    let (_state, service) = edge(
        &table,
        json!({"mcp": {"max_in_flight": 1, "request_timeout_ms": 300}}),
    );
    // Warm the caches: the next tools/list would be answered from precomputed pages.
    assert_eq!(
        rpc(&service, Some(KEY), list()).await.status,
        StatusCode::OK
    );
    // A warm tools/list whose body never finishes arriving holds the one slot...
    let body = list().to_string();
    let stalled = Body::from_stream(
        futures::stream::once(async {
            Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"{\"jsonrpc\""))
        })
        .chain(futures::stream::pending()),
    );
    let slow = post(Some(KEY))
        .header(header::CONTENT_LENGTH, body.len())
        .body(stalled)
        .unwrap();
    let slow = tokio::spawn({
        let service = service.clone();
        async move { send(&service, slow).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    // ...so another is refused at once, with a hint to retry.
    let shed = rpc(&service, Some(KEY), list()).await;
    assert_eq!(
        shed.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        shed.body
    );
    assert_eq!(shed.headers[header::RETRY_AFTER], "1");
    // The stalled one is answered when the request timeout is up, and frees the slot.
    let timed_out = slow.await.unwrap();
    assert_eq!(
        timed_out.status,
        StatusCode::GATEWAY_TIMEOUT,
        "{}",
        timed_out.body
    );
    assert_eq!(
        rpc(&service, Some(KEY), list()).await.status,
        StatusCode::OK
    );
    // Health checks are never shed.
    let health = Request::builder()
        .uri("/healthz")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&service, health).await.status, StatusCode::OK);
}

/// An edge over `table` and the shared cache `shared` (the in-process stand-in for Redis).
fn edge_with_cache(table: &Arc<Table>, shared: &Arc<crate::shared::Shared>) -> EdgeService {
    use figment::providers::Serialized;
    let figment = crate::config::figment(None).merge(Serialized::default(
        "edge_token",
        "an-edge-token-long-enough",
    ));
    let config = crate::config::load(figment).unwrap();
    let directory: Arc<dyn Directory> = table.clone();
    let state = EdgeState::assemble(config, directory, Some(Arc::clone(shared)));
    state.versions.set_synced(true);
    service(state)
}

#[tokio::test]
async fn a_second_edge_serves_from_the_shared_cache_without_asking_the_control_plane() {
    let table = table();
    let shared = crate::shared::Shared::memory("tp-test");
    let first = edge_with_cache(&table, &shared);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let answer = rpc(&first, Some(KEY), list.clone()).await;
    assert_eq!(names(&answer), ["fetch", "search"]);
    let (resolves, authentications) = (
        table.resolves.load(Ordering::SeqCst),
        table.authentications.load(Ordering::SeqCst),
    );
    assert_eq!((resolves, authentications), (1, 1));
    // Another edge (an empty in-process cache of its own) finds key and registry in L2.
    let second = edge_with_cache(&table, &shared);
    let answer = rpc(&second, Some(KEY), list.clone()).await;
    assert_eq!(names(&answer), ["fetch", "search"]);
    assert_eq!(table.resolves.load(Ordering::SeqCst), 1, "registry from L2");
    assert_eq!(
        table.authentications.load(Ordering::SeqCst),
        1,
        "identity from L2"
    );
    // L2 keeps what each role sees apart.
    let answer = rpc(&second, Some(OTHER_KEY), list).await;
    assert_eq!(names(&answer), ["search"]);
}

#[tokio::test]
async fn with_the_shared_cache_down_the_edge_serves_from_the_control_plane_and_says_so() {
    let table = table();
    let shared = crate::shared::Shared::memory("tp-test");
    shared.set_down(true);
    let edge = edge_with_cache(&table, &shared);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let answer = rpc(&edge, Some(KEY), list.clone()).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(names(&answer), ["fetch", "search"]);
    assert_eq!(table.resolves.load(Ordering::SeqCst), 1);
    assert!(
        !shared.healthy(),
        "a failed command marks the cache unhealthy"
    );
    let ready = send(
        &edge,
        Request::builder()
            .uri("/readyz")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(ready.body["redis"], "down", "{}", ready.body);
    assert_eq!(ready.body["degraded"], true, "{}", ready.body);
    // Back up: the next miss is written to L2 again, and a second edge reads it there.
    shared.set_down(false);
    let other = edge_with_cache(&table, &shared);
    rpc(&other, Some(OTHER_KEY), list.clone()).await;
    let resolves = table.resolves.load(Ordering::SeqCst);
    let third = edge_with_cache(&table, &shared);
    let answer = rpc(&third, Some(OTHER_KEY), list).await;
    assert_eq!(names(&answer), ["search"]);
    assert_eq!(table.resolves.load(Ordering::SeqCst), resolves);
}

/// The answer's future lives in every open connection's in-flight slot, idle or not
/// (`tp_net::Handler`): a large local held across an `.await` on the request path would cost
/// every connection that much. Bounded in the test build, whose futures are larger than the
/// release build's.
#[tokio::test]
async fn the_answers_future_held_by_every_connection_stays_small() {
    let table = Arc::new(Table::default());
    let (_state, service) = edge(&table, json!({}));
    let request = Request::builder().uri("/mcp").body(Body::empty()).unwrap();
    let future = service.answer(request);
    let size = std::mem::size_of_val(&future);
    eprintln!("the answer's future: {size} bytes");
    assert!(
        size <= 5 * 1024,
        "{size} bytes held by every open connection"
    );
}
