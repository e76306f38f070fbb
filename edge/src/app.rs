//! The HTTP application: `/mcp` behind authentication, `/healthz` and `/readyz`, wrapped in
//! tracing, load shedding, a concurrency limit, a timeout and a body limit; `/metrics` on the
//! admin listener ([`admin_router`]).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{BoxError, Json, Router};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio::sync::Semaphore;
use tower::ServiceBuilder;

use crate::cache::{Identity, LookupError};
use crate::mcp::ask::StreamIds;
use crate::mcp::{Caller, McpHandler};
use crate::state::EdgeState;

/// The edge's router.
pub fn router(state: Arc<EdgeState>) -> Router {
    let mcp = &state.config.mcp;
    let mut config = StreamableHttpServerConfig::default()
        // In-flight requests are cancelled only when the drain time is up, not at SIGTERM.
        .with_cancellation_token(state.abort.child_token())
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_max_request_body_bytes(mcp.max_body_bytes);
    config = if mcp.allowed_hosts.iter().any(|h| h == "*") {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(mcp.allowed_hosts.clone())
    };
    if !mcp.allowed_origins.is_empty() {
        config = config.with_allowed_origins(mcp.allowed_origins.clone());
    }
    let handler_state = Arc::clone(&state);
    let service = StreamableHttpService::new(
        move || Ok(McpHandler::new(Arc::clone(&handler_state))),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let mcp_routes = Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            check_jsonrpc,
        ))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            authenticate,
        ));
    let timeout = state.config.request_timeout();
    let in_flight = Arc::new(Semaphore::new(state.config.mcp.max_in_flight));
    let max_body = state.config.mcp.max_body_bytes;
    Router::new()
        .merge(mcp_routes)
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(middleware_error))
                .timeout(timeout),
        )
        .layer(middleware::from_fn_with_state(max_body, limit_body))
        // Shedding sits outside the timeout, so a request holds its slot until it is answered
        // or timed out; health and metrics are never shed.
        .layer(middleware::from_fn_with_state(in_flight, shed_load))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// The admin listener's router: `/metrics` (never on the MCP listener, which clients reach),
/// `/healthz` and `/readyz`.
pub fn admin_router(state: Arc<EdgeState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_route))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// Bounds request bodies at `mcp.max_body_bytes`. A body declared larger is answered 413 after
/// the edge has read (and dropped) what the client is still sending — within 16× the limit and
/// 2 s — so the client reads the 413 instead of a connection reset by unread data. A body that
/// grows past the limit without declaring its length fails when it is read (413 as well).
async fn limit_body(State(max): State<usize>, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max as u64) {
        use futures::StreamExt as _;
        let mut body = request.into_body().into_data_stream();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        let mut drained = 0usize;
        while drained <= max.saturating_mul(16) {
            match tokio::time::timeout_at(deadline, body.next()).await {
                Ok(Some(Ok(chunk))) => drained += chunk.len(),
                _ => break,
            }
        }
        return json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body exceeds mcp.max_body_bytes",
        );
    }
    let (parts, body) = request.into_parts();
    let limited = Body::new(http_body_util::Limited::new(body, max));
    next.run(Request::from_parts(parts, limited)).await
}

/// Refuses a request with 503 + `Retry-After` when `mcp.max_in_flight` requests are already
/// being answered, instead of queueing it behind them.
async fn shed_load(
    State(in_flight): State<Arc<Semaphore>>,
    request: Request,
    next: Next,
) -> Response {
    let Ok(permit) = in_flight.try_acquire_owned() else {
        metrics::counter!("tp_edge_shed_total").increment(1);
        return overloaded();
    };
    let response = next.run(request).await;
    drop(permit);
    response
}

async fn middleware_error(error: BoxError) -> Response {
    if error.is::<tower::timeout::error::Elapsed>() {
        return json_error(StatusCode::GATEWAY_TIMEOUT, "request timed out");
    }
    tracing::error!(%error, "unhandled middleware error");
    json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
}

fn overloaded() -> Response {
    let mut response = json_error(StatusCode::SERVICE_UNAVAILABLE, "edge overloaded; retry");
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// Answers malformed JSON-RPC before the MCP transport sees it, with the codes JSON-RPC 2.0
/// defines: `-32700` (HTTP 400) for a body that is not JSON, `-32600` (HTTP 400) for JSON that
/// is not one JSON-RPC message (batches included: MCP since 2025-06-18 has none), and `-32602`
/// for `tools/call` / `tools/list` parameters of the wrong shape, or arguments and input
/// responses beyond [`crate::mcp::bounds`]. Without it the transport answers all of these 415
/// or -32601.
///
/// A warm `tools/list` is answered here from bytes precomputed per registry body (see
/// [`crate::mcp::fast`]) when `mcp.precomputed_lists` is on and the request is one the
/// transport would accept as it is.
async fn check_jsonrpc(
    State(state): State<Arc<EdgeState>>,
    request: Request,
    next: Next,
) -> Response {
    // Anything but JSON is the transport's to refuse (415).
    let is_json = is_json(request.headers());
    if request.method() == axum::http::Method::GET
        && request.headers().contains_key("mcp-session-id")
        && state.config.mcp.session_ttl_secs > 0
    {
        return notification_stream(&state, request, next).await;
    }
    if request.method() != axum::http::Method::POST || !is_json {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) if tp_net::is_body_timeout(&error) => return body_timed_out(),
        Err(_) => {
            return json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body exceeds mcp.max_body_bytes",
            );
        }
    };
    // Memory: what the parse and everything built from it will cost, counted before parsing;
    // a body of too many values is refused, and the cost comes out of the in-flight budget.
    let (values, cost) = crate::mcp::bounds::working_memory(&bytes);
    if values > state.config.mcp.max_json_values {
        metrics::counter!("tp_edge_requests_refused_total", "reason" => "values").increment(1);
        let id = crate::mcp::bounds::envelope_id(&bytes);
        let status = if id.is_null() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        };
        return jsonrpc_error(
            status,
            id,
            -32602,
            &format!(
                "invalid params: the request holds more than {} JSON values (mcp.max_json_values)",
                state.config.mcp.max_json_values
            ),
        );
    }
    let _working_memory = match parts.extensions.get::<InFlightBytes>() {
        Some(budget) => {
            let kib =
                u32::try_from(cost.saturating_sub(bytes.len()).div_ceil(1024)).unwrap_or(u32::MAX);
            match Arc::clone(&budget.0).try_acquire_many_owned(kib.max(1)) {
                Ok(permit) => Some(permit),
                Err(_) => {
                    metrics::counter!("tp_edge_shed_total", "reason" => "bytes").increment(1);
                    return overloaded();
                }
            }
        }
        None => None,
    };
    match inspect_jsonrpc(&bytes, state.config.mcp.max_argument_bytes) {
        Ok(Inspected::Answer(id, message)) => answer(&state, &parts, id, message).await,
        Ok(Inspected::Request(request)) => {
            let mut parts = parts;
            // A 2025-xx session id holds its session; one that does not open is 404.
            if let Some(id) = parts.headers.get("mcp-session-id")
                && state.config.mcp.session_ttl_secs > 0
            {
                let session = parts.extensions.get::<Caller>().and_then(|caller| {
                    state
                        .sessions
                        .open(&caller.0, id.to_str().unwrap_or_default())
                });
                match session {
                    Some(session) => {
                        parts.extensions.insert(session);
                    }
                    None => {
                        let id = request
                            .as_ref()
                            .map_or(serde_json::Value::Null, |(id, _, _)| id.clone());
                        return jsonrpc_error(
                            StatusCode::NOT_FOUND,
                            id,
                            -32001,
                            "session not found: it expired or belongs to another caller; initialize again",
                        );
                    }
                }
            }
            let new_session = match &request {
                Some((_, method, Some(params)))
                    if method == "initialize" && state.config.mcp.session_ttl_secs > 0 =>
                {
                    Some(crate::mcp::session::Session::from_initialize(
                        params
                            .get("protocolVersion")
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or_default(),
                        params
                            .get("capabilities")
                            .unwrap_or(&serde_json::Value::Null),
                    ))
                }
                _ => None,
            };
            if let (Some((_, method, params)), Some(log)) =
                (&request, crate::access::of(&parts.extensions))
            {
                let tool = params
                    .as_ref()
                    .filter(|_| method == "tools/call")
                    .and_then(|p| p.get("name"))
                    .and_then(serde_json::Value::as_str);
                log.rpc(method, tool);
            }
            if let Some((id, method, params)) = &request
                && method == "tools/list"
                && state.config.mcp.precomputed_lists
                && let Some(response) = fast_list(&state, &parts, id, params.as_ref()).await
            {
                return response;
            }
            // A tool call may put questions to a 2025-xx client on its SSE stream, under ids
            // of the edge's own (crate::mcp::ask).
            let ids = request
                .as_ref()
                .is_some_and(|(_, method, _)| method == "tools/call")
                .then(StreamIds::default);
            let caller = parts.extensions.get::<Caller>().cloned();
            if let Some(ids) = &ids {
                parts.extensions.insert(ids.clone());
            }
            let mut response = next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
            if let Some(ids) = ids
                && response
                    .headers()
                    .get(header::CONTENT_TYPE)
                    .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
            {
                let body = std::mem::take(response.body_mut());
                *response.body_mut() = crate::mcp::ask::rewrite_ids(body, ids);
            }
            if let (Some(session), Some(caller)) = (new_session, caller) {
                response = with_session_id(&state, response, &caller.0, &session).await;
            }
            // The transport answers a JSON-RPC message whose params do not fit its method's
            // type with 415 and plain text; the body was JSON, so that is invalid params.
            match request {
                Some((id, method, _))
                    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE =>
                {
                    let status = if id.is_null() {
                        StatusCode::BAD_REQUEST
                    } else {
                        StatusCode::OK
                    };
                    jsonrpc_error(status, id, -32602, &format!("invalid params for {method}"))
                }
                _ => response,
            }
        }
        Err((status, id, code, message)) => jsonrpc_error(status, id, code, &message),
    }
}

fn jsonrpc_error(status: StatusCode, id: serde_json::Value, code: i64, message: &str) -> Response {
    (
        status,
        Json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})),
    )
        .into_response()
}

type Refusal = (StatusCode, serde_json::Value, i64, String);

/// `GET /mcp` with a session id (2025-xx): the standalone SSE stream on which the server sends
/// what is not an answer — here `notifications/tools/list_changed` whenever the caller's
/// tenant or the catalogue changes. Any edge serves it: every edge follows the change stream.
/// Without `text/event-stream` in `Accept`, or with a session id that does not open, the
/// transport's answer (405) or 404.
async fn notification_stream(state: &Arc<EdgeState>, request: Request, next: Next) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let accepts_sse = request
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"));
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        return next.run(request).await;
    };
    // The transport's Host/Origin rules: a browser (any Origin) or a foreign Host gets the
    // transport's answer, never this stream.
    if request.headers().contains_key(header::ORIGIN)
        || !crate::mcp::fast::host_allowed(request.headers(), &state.config.mcp.allowed_hosts)
    {
        return next.run(request).await;
    }
    let key = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|v| v.trim().to_owned());
    let id = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if state.sessions.open(&caller.0, id).is_none() {
        return jsonrpc_error(
            StatusCode::NOT_FOUND,
            serde_json::Value::Null,
            -32001,
            "session not found: it expired or belongs to another caller; initialize again",
        );
    }
    if !accepts_sse {
        return next.run(request).await;
    }
    let tenant = caller.0.tenant.clone();
    let notices = state.notices.subscribe();
    let watcher = Arc::clone(state);
    let events = futures::stream::unfold(
        (notices, tenant, watcher, key),
        |(mut notices, tenant, state, key)| async move {
            loop {
                let notice = tokio::select! {
                    () = state.shutdown.cancelled() => return None,
                    notice = notices.recv() => notice,
                };
                let changed = match notice {
                    Ok(notice) => notice.all || notice.tenants.iter().any(|t| t == &tenant),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => true,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                };
                // A change may be the key's revocation: the stream ends with the key.
                if let Some(key) = &key
                    && matches!(
                        state.caches.identity(key).await,
                        Err(LookupError::Unauthenticated | LookupError::NotFound)
                    )
                {
                    return None;
                }
                if changed {
                    let event = Event::default()
                        .data(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
                    return Some((
                        Ok::<_, std::convert::Infallible>(event),
                        (notices, tenant, state, key),
                    ));
                }
            }
        },
    );
    metrics::counter!("tp_edge_notification_streams_total").increment(1);
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Adds an `Mcp-Session-Id` holding `session` to a successful `initialize` answer.
async fn with_session_id(
    state: &EdgeState,
    response: Response,
    identity: &Identity,
    session: &crate::mcp::session::Session,
) -> Response {
    if response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1024 * 1024).await else {
        return json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
    };
    // An SSE answer carries the result in a `data:` line; a JSON one is the message itself.
    let succeeded = bytes.windows(9).any(|w| w == b"\"result\":");
    if succeeded && let Ok(value) = HeaderValue::from_str(&state.sessions.issue(identity, session))
    {
        parts.headers.insert("mcp-session-id", value);
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// Whether a request's body is JSON as the transport takes it: the media type's essence,
/// parameters aside.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
}

/// A request's id, method and params object.
type Call = (
    serde_json::Value,
    String,
    Option<serde_json::Map<String, serde_json::Value>>,
);

/// What a well-formed JSON-RPC message is.
enum Inspected {
    /// A request or notification worth passing on (`None`: a response the transport handles).
    Request(Option<Call>),
    /// A client's answer to one of the edge's questions (an id it issued).
    Answer(String, serde_json::Value),
}

/// A request's (id, method, params), or a response to a question of the edge's; client
/// structures are checked against [`crate::mcp::bounds`] with `max_argument_bytes`.
fn inspect_jsonrpc(bytes: &[u8], max_argument_bytes: usize) -> Result<Inspected, Refusal> {
    use serde_json::Value;
    let invalid = |message: &str| {
        (
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32600,
            message.to_owned(),
        )
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        (
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32700,
            format!("parse error: {e}"),
        )
    })?;
    let Value::Object(mut message) = value else {
        return Err(invalid(if value.is_array() {
            "invalid request: JSON-RPC batches are not supported"
        } else {
            "invalid request: not a JSON-RPC message"
        }));
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("invalid request: \"jsonrpc\" must be \"2.0\""));
    }
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
        return Err(invalid(
            "invalid request: \"id\" must be a string or a number",
        ));
    }
    let Some(method) = message.get("method") else {
        // A response to a server request: to one of the edge's questions, or for the
        // transport (which refuses it: a stateless edge has no other).
        if let Value::String(id) = &id
            && id.starts_with(crate::mcp::ask::ID_PREFIX)
        {
            return Ok(Inspected::Answer(id.clone(), Value::Object(message)));
        }
        return Ok(Inspected::Request(None));
    };
    let Some(method) = method.as_str() else {
        return Err(invalid("invalid request: \"method\" must be a string"));
    };
    let params = message.get("params");
    let bad_params = |text: &str| {
        Err((
            StatusCode::OK,
            id.clone(),
            -32602,
            format!("invalid params: {text}"),
        ))
    };
    match method {
        "tools/call" => {
            let Some(Value::Object(params)) = params else {
                return bad_params("tools/call needs params {name, arguments}");
            };
            if !params.get("name").is_some_and(Value::is_string) {
                return bad_params("params.name must be a string");
            }
            match params.get("arguments") {
                None | Some(Value::Null) => {}
                Some(arguments @ Value::Object(_)) => {
                    if let Err(message) =
                        crate::mcp::bounds::check("arguments", arguments, max_argument_bytes)
                    {
                        return bad_params(&message);
                    }
                }
                Some(_) => return bad_params("params.arguments must be an object"),
            }
            // The client's answers of an input-required round trip reach the executor too.
            match params.get("inputResponses") {
                None | Some(Value::Null) => {}
                Some(responses @ Value::Object(_)) => {
                    if let Err(message) =
                        crate::mcp::bounds::check("inputResponses", responses, max_argument_bytes)
                    {
                        return bad_params(&message);
                    }
                }
                Some(_) => return bad_params("params.inputResponses must be an object"),
            }
        }
        "tools/list" => {
            if let Some(params) = params
                && !params.is_object()
                && !params.is_null()
            {
                return bad_params("params must be an object");
            }
        }
        _ => {}
    }
    let method = method.to_owned();
    let params = match message.remove("params") {
        Some(Value::Object(params)) => Some(params),
        _ => None,
    };
    Ok(Inspected::Request(Some((id, method, params))))
}

/// A client's answer to a question the edge put on a call's stream: 202 when it reached the
/// waiting call (on this edge or another), 400 with a JSON-RPC error otherwise.
async fn answer(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    id: String,
    message: serde_json::Value,
) -> Response {
    use crate::mcp::ask::Refused;
    let Some(caller) = parts.extensions.get::<Caller>() else {
        return unauthorized("missing Authorization: Bearer <api key>");
    };
    match state
        .questions
        .answer(&id, &caller.0.tenant, &caller.0.role, message)
        .await
    {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        // Unknown and someone else's get the same answer, so an id's existence does not leak
        // across callers.
        Err(Refused::Unknown | Refused::NotYours) => {
            metrics::counter!("tp_edge_answers_refused_total").increment(1);
            jsonrpc_error(
                StatusCode::BAD_REQUEST,
                serde_json::Value::String(id),
                -32600,
                "no question with this id is waiting for this caller (answered, timed out or never asked)",
            )
        }
    }
}

/// A warm `tools/list` from precomputed bytes, or `None` to leave the request to the transport
/// (which also reports every error: a registry that cannot be loaded, a bad cursor, ...).
async fn fast_list(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    id: &serde_json::Value,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Option<Response> {
    let caller = parts.extensions.get::<Caller>()?;
    let registry = state
        .caches
        .registry(&caller.0.tenant, &caller.0.role)
        .await
        .ok()?;
    let response = precomputed_list(state, parts, id, params, &caller.0, &registry)?;
    if let Some(log) = crate::access::of(&parts.extensions) {
        log.outcome("ok");
    }
    Some(response)
}

/// The answer to a `tools/list` of `identity` from `registry`'s precomputed pages, when the
/// request is one the transport would take as it is.
fn precomputed_list(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    id: &serde_json::Value,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
    identity: &Identity,
    registry: &crate::registry::Registry,
) -> Option<Response> {
    use crate::mcp::fast;
    let started = std::time::Instant::now();
    if params.is_some_and(|p| p.keys().any(|k| k != "cursor" && k != "_meta")) {
        return None;
    }
    let generation = fast::eligible(&parts.headers, params, &state.config.mcp)?;
    let cursor = fast::cursor(params)?;
    let id = fast::id_bytes(id)?;
    let response = fast::answer(registry.pages(generation, &state.config.mcp), cursor, id)?;
    crate::mcp::count_request("tools/list", &identity.tenant, "ok", started);
    precomputed_counter().increment(1);
    Some(response)
}

fn precomputed_counter() -> &'static metrics::Counter {
    static COUNTER: std::sync::OnceLock<metrics::Counter> = std::sync::OnceLock::new();
    COUNTER.get_or_init(|| metrics::counter!("tp_edge_list_precomputed_total"))
}

/// The edge's HTTP service: a warm `tools/list` — key and registry in the in-process cache, a
/// request the transport would take as it is — is answered before the router, its layers and
/// the MCP transport; every other request goes through the [`router`].
#[derive(Clone)]
pub struct EdgeService {
    state: Arc<EdgeState>,
    router: Router,
    /// Request-body bytes in flight, in KiB (`mcp.max_in_flight_bytes`).
    in_flight_bytes: Arc<Semaphore>,
}

impl std::fmt::Debug for EdgeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeService").finish_non_exhaustive()
    }
}

/// The edge's service over `state` (see [`EdgeService`]).
pub fn service(state: Arc<EdgeState>) -> EdgeService {
    let kib = (state.config.mcp.max_in_flight_bytes / 1024).max(1);
    EdgeService {
        router: router(Arc::clone(&state)),
        in_flight_bytes: Arc::new(Semaphore::new(kib)),
        state,
    }
}

/// The in-flight budget (KiB), for the parts of the request path that learn a request's full
/// cost only once its body has arrived.
#[derive(Clone)]
struct InFlightBytes(Arc<Semaphore>);

/// Whether a request's `Origin` is allowed: none at all always is (non-browser clients); one
/// must be listed in `mcp.allowed_origins`, or — when that list is empty — be the edge's own
/// origin (its authority is the request's `Host`, which the Host check has allowed): a page of
/// another site can never make a browser call the edge.
fn origin_allowed(headers: &axum::http::HeaderMap, allowed: &[String]) -> bool {
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let origin = match (origins.next(), origins.next()) {
        (None, _) => return true,
        (Some(origin), None) => origin,
        (Some(_), Some(_)) => return false,
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if !allowed.is_empty() {
        return allowed.iter().any(|a| a == "*" || a == origin);
    }
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    matches!((authority, host), (Some(authority), Some(host)) if authority.eq_ignore_ascii_case(host))
}

/// The KiB of the in-flight budget a request takes: its declared length, or the body limit
/// when it declares none (a streamed body may be that long).
fn body_cost_kib(
    headers: &axum::http::HeaderMap,
    method: &axum::http::Method,
    max_body: usize,
) -> u32 {
    if *method == axum::http::Method::GET
        || *method == axum::http::Method::HEAD
        || *method == axum::http::Method::DELETE
    {
        return 0;
    }
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(max_body as u64, |declared| declared.min(max_body as u64));
    u32::try_from(length.div_ceil(1024)).unwrap_or(u32::MAX)
}

/// The answer for a body that did not arrive in time.
pub(crate) fn body_timed_out() -> Response {
    json_error(
        StatusCode::REQUEST_TIMEOUT,
        "the request body did not arrive in time (http.body_read_timeout_ms)",
    )
}

impl<B> tower::Service<Request<B>> for EdgeService
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let request = request.map(Body::new);
        let state = Arc::clone(&self.state);
        let router = self.router.clone();
        let in_flight_bytes = Arc::clone(&self.in_flight_bytes);
        // Outermost: every request is logged (crate::access), including refused ones and those
        // the warm path answers.
        Box::pin(async move {
            Ok(crate::access::around(request, move |request| {
                serve(state, router, in_flight_bytes, request)
            })
            .await)
        })
    }
}

/// Everything [`EdgeService`] does inside the access log.
async fn serve(
    state: Arc<EdgeState>,
    router: Router,
    in_flight_bytes: Arc<Semaphore>,
    request: Request,
) -> Response {
    use tower::ServiceExt as _;
    if request.uri().path().starts_with("/mcp") {
        // DNS rebinding and cross-site requests: a browser Origin must be listed.
        if !origin_allowed(request.headers(), &state.config.mcp.allowed_origins) {
            metrics::counter!("tp_edge_origin_refused_total").increment(1);
            return json_error(
                StatusCode::FORBIDDEN,
                "Origin not allowed: only the edge's own origin or one listed in mcp.allowed_origins",
            );
        }
    }
    // Memory: the bytes of request bodies being read and processed are bounded as a
    // whole, not only the number of requests.
    let cost = body_cost_kib(
        request.headers(),
        request.method(),
        state.config.mcp.max_body_bytes,
    );
    let _budget = if cost == 0 {
        None
    } else {
        match Arc::clone(&in_flight_bytes).try_acquire_many_owned(cost) {
            Ok(permit) => Some(permit),
            Err(_) => {
                metrics::counter!("tp_edge_shed_total", "reason" => "bytes").increment(1);
                return overloaded();
            }
        }
    };
    let request = match warm_list(&state, request).await {
        Ok(response) => return response,
        Err(mut request) => {
            request
                .extensions_mut()
                .insert(InFlightBytes(Arc::clone(&in_flight_bytes)));
            request
        }
    };
    match router.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// Largest body the warm path reads (a `tools/list` request is a few hundred bytes).
const WARM_BODY_LIMIT: u64 = 4096;

/// Whether a body may be a `tools/list` request (a cheap scan before any parsing).
fn mentions_tools_list(bytes: &[u8]) -> bool {
    const NEEDLE: &[u8] = b"\"tools/list\"";
    bytes.windows(NEEDLE.len()).any(|w| w == NEEDLE)
}

/// The warm answer to a body that mentions `tools/list`: key and registry from the in-process
/// cache, the request one the transport would take as it is.
async fn warm_answer(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    bytes: &[u8],
) -> Option<Response> {
    let key = parts
        .headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?
        .trim();
    let identity = state.caches.identity_l1(key).await?;
    if let Some(id) = parts.headers.get("mcp-session-id")
        && state.config.mcp.session_ttl_secs > 0
    {
        // A session id that does not open is the router's to refuse (404).
        state
            .sessions
            .open(&identity, id.to_str().unwrap_or_default())?;
    }
    let Ok(Inspected::Request(Some((id, method, params)))) =
        inspect_jsonrpc(bytes, state.config.mcp.max_argument_bytes)
    else {
        return None;
    };
    if method != "tools/list" {
        return None;
    }
    let registry = state
        .caches
        .registry_l1(&identity.tenant, &identity.role)
        .await?;
    let response = precomputed_list(state, parts, &id, params.as_ref(), &identity, &registry)?;
    if let Some(log) = crate::access::of(&parts.extensions) {
        log.caller(&identity.tenant, &identity.role);
        log.rpc("tools/list", None);
        log.outcome("ok");
    }
    Some(response)
}

/// Answers a warm `tools/list` with no I/O beyond the request, or hands the request back
/// unchanged (its body re-assembled) for the router.
async fn warm_list(state: &EdgeState, request: Request) -> Result<Response, Request> {
    let headers = request.headers();
    let limit = WARM_BODY_LIMIT.min(state.config.mcp.max_body_bytes as u64);
    let small_json_post = request.method() == axum::http::Method::POST
        && request.uri().path() == "/mcp"
        && state.config.mcp.precomputed_lists
        && headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|length| length <= limit)
        && is_json(headers);
    if !small_json_post {
        return Err(request);
    }
    if !headers
        .get(header::AUTHORIZATION)
        .is_some_and(|v| v.as_bytes().starts_with(b"Bearer "))
    {
        return Err(request);
    }
    let (parts, body) = request.into_parts();
    let bytes = match http_body_util::BodyExt::collect(http_body_util::Limited::new(
        body,
        usize::try_from(limit).unwrap_or(usize::MAX),
    ))
    .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(error) if tp_net::is_body_timeout(error.as_ref()) => return Ok(body_timed_out()),
        Err(_) => {
            return Ok(json_error(
                StatusCode::BAD_REQUEST,
                "the request body could not be read in full",
            ));
        }
    };
    // Anything but a tools/list goes on before the key is hashed or the body parsed.
    let answer = if mentions_tools_list(&bytes) {
        warm_answer(state, &parts, &bytes).await
    } else {
        None
    };
    match answer {
        Some(response) => Ok(response),
        None => Err(Request::from_parts(parts, Body::from(bytes))),
    }
}

fn json_error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

fn unauthorized(description: &str) -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        Json(json!({ "error": "unauthorized", "error_description": description })),
    )
        .into_response();
    let challenge = format!(
        "Bearer realm=\"toolplane\", error=\"invalid_token\", error_description=\"{description}\""
    );
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// A 401, counted in `tp_edge_auth_refused_total` by reason (`missing`, `malformed`, `invalid`).
fn refused(reason: &'static str, description: &str) -> Response {
    metrics::counter!("tp_edge_auth_refused_total", "reason" => reason).increment(1);
    unauthorized(description)
}

async fn authenticate(
    State(state): State<Arc<EdgeState>>,
    mut request: Request<Body>,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().map(str::to_owned));
    let identity = match header {
        None => match &state.config.anonymous {
            Some((tenant, role)) => Arc::new(Identity {
                tenant: tenant.clone(),
                role: role.clone(),
                key_id: String::new(),
                expires_at: 0,
                revision: u64::MAX,
                confirmed_at_ms: 0,
            }),
            None => {
                return refused("missing", "missing Authorization: Bearer <api key>");
            }
        },
        Some(Err(_)) => {
            return refused("malformed", "the Authorization header is not valid text");
        }
        Some(Ok(value)) => {
            let Some(key) = value.strip_prefix("Bearer ").map(str::trim) else {
                return refused("malformed", "Authorization must be \"Bearer <api key>\"");
            };
            match state.caches.identity(key).await {
                Ok(identity) => identity,
                Err(LookupError::Unauthenticated | LookupError::NotFound) => {
                    return refused("invalid", "invalid, revoked or expired API key");
                }
                Err(LookupError::Unavailable(_)) => {
                    let mut response = json_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "cannot verify the API key right now; retry",
                    );
                    response
                        .headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
                    return response;
                }
            }
        }
    };
    let span = tracing::Span::current();
    span.record("tenant", identity.tenant.as_str());
    span.record("role", identity.role.as_str());
    if let Some(log) = crate::access::of(request.extensions()) {
        log.caller(&identity.tenant, &identity.role);
    }
    request.extensions_mut().insert(Caller(identity));
    next.run(request).await
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<Arc<EdgeState>>) -> Response {
    let synced = state.versions.synced();
    let control_plane = state.control.reachable();
    let redis = state.shared.as_ref().map(|s| s.healthy());
    let (registries, identities) = state.caches.sizes();
    // Ready when a registry can be served from somewhere: the control plane, or Redis.
    let ready = control_plane || redis == Some(true) || registries > 0;
    let degraded = !synced || redis == Some(false);
    let body = json!({
        "ready": ready,
        "degraded": degraded,
        "control_plane": { "reachable": control_plane, "watch_synced": synced, "revision": state.versions.head() },
        "redis": match redis { None => "not configured", Some(true) => "up", Some(false) => "down" },
        "cache": { "registries": registries, "identities": identities },
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

async fn metrics_route(State(state): State<Arc<EdgeState>>) -> Response {
    match &state.metrics {
        Some(handle) => {
            let (registries, identities) = state.caches.sizes();
            metrics::gauge!("tp_edge_l1_registries").set(registries as f64);
            metrics::gauge!("tp_edge_l1_identities").set(identities as f64);
            (
                [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                handle.render(),
            )
                .into_response()
        }
        None => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics recorder not installed",
        ),
    }
}
