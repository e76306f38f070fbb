//! The one parse of each JSON-RPC body, and where the message goes from there: refused
//! (malformed, too large, a session that does not open, a breach of the transport's rules),
//! delivered (an answer to one of the edge's questions), or served by the edge's methods
//! ([`super::methods`], precomputed `tools/list` pages first).

use super::methods;
use super::*;
use crate::transport::rules;

/// Serves one `/mcp` request past authentication. Malformed JSON-RPC is answered with the
/// codes JSON-RPC 2.0 defines: `-32700` (HTTP 400) for a body that is not JSON, `-32600`
/// (HTTP 400) for JSON that is not one JSON-RPC message (batches included: MCP since
/// 2025-06-18 has none), and `-32602` for `tools/call` / `tools/list` parameters of the wrong
/// shape, or arguments and input responses beyond [`crate::mcp::bounds`]. A well-formed
/// message must then meet the transport's rules ([`rules::admit`]: versions, `_meta`,
/// SEP-2243 headers), which choose the generation it is served as.
pub(super) async fn serve_mcp_request(state: Arc<EdgeState>, request: Request) -> Response {
    if request.method() == axum::http::Method::GET
        && request
            .headers()
            .contains_key(&crate::transport::session::SESSION_ID)
        && state.config.mcp.session_ttl_secs > 0
    {
        return notification_stream(&state, request);
    }
    if request.method() != axum::http::Method::POST {
        return methods::method_not_allowed();
    }
    if let Err(refused) = rules::media(request.headers()) {
        return refused.into_response();
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) if tp_net::is_body_timeout(&error) => return body_timed_out(),
        Err(_) => {
            return refuse(
                Fault::BodyTooLarge,
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
        return jsonrpc_refusal(
            Fault::InvalidParams,
            id,
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
            if let Some(id) = parts.headers.get(&crate::transport::session::SESSION_ID)
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
                        return jsonrpc_refusal(
                            Fault::SessionNotFound,
                            id,
                            "session not found: it expired or belongs to another caller; initialize again",
                        );
                    }
                }
            }
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
            let message = match &request {
                None => rules::Message::Response,
                Some((id, method, params)) if id.is_null() => {
                    rules::Message::notification(method, params.as_ref())
                }
                Some((id, method, params)) => rules::Message::request(id, method, params.as_ref()),
            };
            match rules::admit(&parts.headers, message) {
                Ok(generation) => methods::dispatch(state, parts, request, generation).await,
                Err(refused) => {
                    metrics::counter!("tp_edge_requests_refused_total", "reason" => "transport")
                        .increment(1);
                    refused.into_response()
                }
            }
        }
        Err((fault, id, message)) => jsonrpc_refusal(fault, id, &message),
    }
}

/// A message refused before the transport: the fault, the id it answers, and why.
pub(super) type Refusal = (Fault, serde_json::Value, String);

/// `GET /mcp` with a session id (2025-xx): the standalone SSE stream on which the server sends
/// what is not an answer — here `notifications/tools/list_changed` whenever the caller's
/// tenant or the catalogue changes. Any edge serves it: every edge follows the change stream.
/// With a session id that does not open, 404; without `text/event-stream` in `Accept`, or
/// from a browser (any `Origin`: a cross-site page must not hold a caller's stream), 405 as
/// any other GET.
pub(super) fn notification_stream(state: &Arc<EdgeState>, request: Request) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        return methods::method_not_allowed();
    };
    if request.headers().contains_key(header::ORIGIN) {
        return methods::method_not_allowed();
    }
    let key = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(tp_proto::keys::bearer)
        .map(str::to_owned);
    let id = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if state.sessions.open(&caller.0, id).is_none() {
        return jsonrpc_refusal(
            Fault::SessionNotFound,
            serde_json::Value::Null,
            "session not found: it expired or belongs to another caller; initialize again",
        );
    }
    if !rules::accepts_sse(request.headers()) {
        return methods::method_not_allowed();
    }
    // The stream holds a slot of its key's and its tenant's stream limits while it is open,
    // and ends after mcp.max_stream_secs.
    let slot = match state.streams.open(&caller.0.tenant, &caller.0.key_id) {
        Ok(slot) => slot,
        Err(refusal) => return refuse(Fault::TooManyStreams, &refusal.to_string()),
    };
    let lifetime = tokio::time::sleep(state.streams.lifetime);
    let tenant = caller.0.tenant.clone();
    let role = caller.0.role.clone();
    let notices = state.notices.subscribe();
    let watcher = Arc::clone(state);
    let events = futures::stream::unfold(
        (notices, tenant, role, watcher, key, None),
        |(mut notices, tenant, role, state, key, mut seen)| async move {
            if seen.is_none() {
                crate::mcp::listing_changed(&state, &tenant, &role, &mut seen).await;
            }
            loop {
                let notice = tokio::select! {
                    () = state.shutdown.cancelled() => return None,
                    notice = notices.recv() => notice,
                };
                let relevant = match notice {
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
                // Only a change of what this caller lists is announced (a tool registered
                // that it cannot see must not tell it something exists).
                if relevant && crate::mcp::listing_changed(&state, &tenant, &role, &mut seen).await
                {
                    let event = Event::default()
                        .data(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
                    return Some((
                        Ok::<_, std::convert::Infallible>(event),
                        (notices, tenant, role, state, key, seen),
                    ));
                }
            }
        },
    );
    let events = futures::StreamExt::map(
        futures::StreamExt::take_until(events, lifetime),
        move |event| {
            let _held = &slot;
            event
        },
    );
    metrics::counter!("tp_edge_notification_streams_total").increment(1);
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// A request's id, method and params object.
pub(super) type Call = (
    serde_json::Value,
    String,
    Option<serde_json::Map<String, serde_json::Value>>,
);

/// What a well-formed JSON-RPC message is.
pub(super) enum Inspected {
    /// A request or notification worth passing on (`None`: a response the transport handles).
    Request(Option<Call>),
    /// A client's answer to one of the edge's questions (an id it issued).
    Answer(String, serde_json::Value),
}

/// A request's (id, method, params), or a response to a question of the edge's; client
/// structures are checked against [`crate::mcp::bounds`] with `max_argument_bytes`.
pub(super) fn inspect_jsonrpc(
    bytes: &[u8],
    max_argument_bytes: usize,
) -> Result<Inspected, Refusal> {
    use serde_json::Value;
    let invalid = |message: &str| (Fault::InvalidRequest, Value::Null, message.to_owned());
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| (Fault::ParseError, Value::Null, format!("parse error: {e}")))?;
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
    // A request's id is a string or a number; a notification has none (`"id": null` is
    // neither, and would make the two indistinguishable).
    let null_id = matches!(message.get("id"), Some(Value::Null)) && message.contains_key("method");
    if null_id || !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
        return Err(invalid(
            "invalid request: \"id\" must be a string or a number",
        ));
    }
    let Some(method) = message.get("method") else {
        // A response to a server request: to one of the edge's questions, or for the
        // transport (which refuses it: a stateless edge has no other).
        if let Value::String(id) = &id
            && id.starts_with(crate::transport::questions::ID_PREFIX)
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
            Fault::InvalidParams,
            id.clone(),
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
pub(super) async fn answer(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    id: String,
    message: serde_json::Value,
) -> Response {
    use crate::transport::questions::Refused;
    let Some(caller) = parts.extensions.get::<Caller>() else {
        return unauthorized(
            state.config.oauth.as_ref(),
            true,
            "missing Authorization: Bearer <api key>",
        );
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
            jsonrpc_refusal(
                Fault::InvalidRequest,
                serde_json::Value::String(id),
                "no question with this id is waiting for this caller (answered, timed out or never asked)",
            )
        }
    }
}

/// A warm `tools/list` from precomputed bytes, or `None` to serve it from the registry
/// (which also reports every error: a registry that cannot be loaded, a bad cursor, ...).
pub(super) async fn fast_list(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    id: &serde_json::Value,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
    generation: crate::transport::pages::Generation,
) -> Option<Response> {
    let caller = parts.extensions.get::<Caller>()?;
    let registry = state
        .caches
        .registry(&caller.0.tenant, &caller.0.role)
        .await
        .ok()?;
    // Only a first page, or one at a cursor: other params are the method's to read.
    if params.is_some_and(|p| p.keys().any(|k| k != "cursor" && k != "_meta")) {
        return None;
    }
    let cursor = crate::transport::pages::cursor(params)?;
    let id = crate::transport::pages::id_bytes(id)?;
    let response = precomputed_list(state, id, cursor, generation, &caller.0, &registry)?;
    if let Some(log) = crate::access::of(&parts.extensions) {
        log.outcome("ok");
    }
    Some(response)
}

/// The answer to a `tools/list` of `identity`, admitted as `generation`, from `registry`'s
/// precomputed pages: the first page, or one that starts at a `cursor` this edge issued. `id`
/// is the request's id as JSON (`transport::pages::id_bytes`).
pub(super) fn precomputed_list(
    state: &EdgeState,
    id: axum::body::Bytes,
    cursor: Option<&str>,
    generation: crate::transport::pages::Generation,
    identity: &Identity,
    registry: &crate::registry::Registry,
) -> Option<Response> {
    let response =
        crate::transport::pages::answer(registry.pages(generation, &state.config.mcp), cursor, id)?;
    crate::mcp::count_request("tools/list", &identity.tenant, "ok", None);
    precomputed_counter().increment(1);
    Some(response)
}

pub(super) fn precomputed_counter() -> &'static metrics::Counter {
    static COUNTER: std::sync::OnceLock<metrics::Counter> = std::sync::OnceLock::new();
    COUNTER.get_or_init(|| metrics::counter!("tp_edge_list_precomputed_total"))
}
