//! The methods the edge serves itself, from the request [`check_jsonrpc`] parsed (no second
//! parse, no per-request rmcp service and its tasks): `tools/call`, answered as JSON — or as
//! SSE when the call sends the client something first (progress, log messages, questions), in
//! the order it was sent, the answer last — the `tools/list` pages that are not precomputed (a
//! cursor between page boundaries, or `mcp.precomputed_lists` off), the 2025-xx `initialize`
//! handshake, `ping`, `logging/setLevel`, `server/discover`, `subscriptions/listen`, the
//! refusals of the resource, prompt and completion methods the edge does not offer, and the
//! methods no MCP version defines.
//!
//! A request takes this path when the transport would take it as it is
//! ([`crate::mcp::fast::eligible_for`]); anything else (a browser `Origin`, weighted `Accept`,
//! `Mcp-Param-*` headers, a version the edge does not know) still goes through rmcp's
//! transport, which answers or refuses it. The answer's shape follows the protocol
//! generation exactly as rmcp's server does: 2026-07-28 results carry their cache hints and
//! may be input-required; earlier ones lose `resultType` and non-object structured output.

use rmcp::model::{
    CallToolRequestParams, ErrorCode, RequestId, RequestMetaObject, ServerJsonRpcMessage,
    ServerResult,
};

use futures::StreamExt as _;

use super::*;
use crate::mcp::fast::Generation;
use crate::mcp::{CallContext, Sink};

/// The JSON-RPC id as rmcp reads it (a string, or an integer within i64).
fn request_id(id: &serde_json::Value) -> Option<RequestId> {
    match id {
        serde_json::Value::String(id) => Some(RequestId::String(id.as_str().into())),
        serde_json::Value::Number(n) => Some(RequestId::Number(n.as_i64()?)),
        _ => None,
    }
}

/// An eligible `tools/list`: its id, `_meta`, cursor and generation; `None` leaves the request
/// to the transport.
pub(super) fn parse_list(
    headers: &axum::http::HeaderMap,
    id: &serde_json::Value,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
    mcp: &crate::config::RawMcp,
) -> Option<(RequestId, RequestMetaObject, Option<String>, Generation)> {
    if params.is_some_and(|p| p.keys().any(|k| k != "cursor" && k != "_meta")) {
        return None;
    }
    let generation = crate::mcp::fast::eligible(headers, params, mcp)?;
    let cursor = crate::mcp::fast::cursor(params)?.map(str::to_owned);
    let meta = match params.and_then(|p| p.get("_meta")) {
        None => RequestMetaObject::default(),
        Some(meta) => <RequestMetaObject as serde::Deserialize>::deserialize(meta).ok()?,
    };
    Some((request_id(id)?, meta, cursor, generation))
}

/// Serves one eligible `tools/list` that no precomputed page answers.
pub(super) async fn serve_list(
    state: Arc<EdgeState>,
    parts: &axum::http::request::Parts,
    id: RequestId,
    meta: RequestMetaObject,
    cursor: Option<String>,
    generation: Generation,
) -> Response {
    direct_requests(Method::List).increment(1);
    let ctx = CallContext {
        parts: Some(parts),
        meta: &meta,
        sink: Sink::Closed,
    };
    let result = McpHandler::new(state)
        .tools_list(cursor.as_deref(), &ctx)
        .await
        .map(ServerResult::ListToolsResult);
    json(&shape(result, id, generation), generation)
}

/// A method of [`parse_simple`]: answered from the edge's configuration alone.
pub(super) enum Simple {
    /// The 2025-xx handshake, with the `capabilities` the client declared (for its session).
    Initialize(Box<rmcp::model::InitializeRequestParams>, serde_json::Value),
    Ping,
    SetLevel,
    Discover,
    /// A method no MCP version defines.
    Unknown(String),
    /// A method of a capability the edge does not offer (resources, prompts, completions),
    /// with its refusal.
    NotOffered(rmcp::ErrorData),
}

/// Every method some MCP version defines (what rmcp parses into a request of its own).
const KNOWN_METHODS: &[&str] = &[
    "completion/complete",
    "initialize",
    "logging/setLevel",
    "ping",
    "prompts/get",
    "prompts/list",
    "resources/directory/read",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "resources/templates/list",
    "resources/unsubscribe",
    "server/discover",
    "skills/get",
    "skills/list",
    "subscriptions/listen",
    "tasks/cancel",
    "tasks/get",
    "tasks/update",
    "tools/call",
    "tools/list",
];

/// An eligible `initialize`, `ping`, `logging/setLevel`, `server/discover` or unknown method;
/// `None` leaves the request to the transport.
pub(super) fn parse_simple(
    headers: &axum::http::HeaderMap,
    id: &serde_json::Value,
    method: &str,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
    mcp: &crate::config::RawMcp,
) -> Option<(RequestId, Simple, Generation)> {
    let id = request_id(id)?;
    if method == "initialize" {
        let params = params?;
        return Some((
            id,
            parse_initialize(headers, params, mcp)?,
            Generation::Legacy,
        ));
    }
    // SEP-2243: at 2026-07-28 these methods name their target in `Mcp-Name` as well.
    let name = match method {
        "prompts/get" => Some(params?.get("name")?.as_str()?),
        "resources/read" | "resources/subscribe" => Some(params?.get("uri")?.as_str()?),
        _ => None,
    };
    let generation = crate::mcp::fast::eligible_for(headers, params, mcp, method, name)?;
    let simple = match method {
        "ping" => Simple::Ping,
        "logging/setLevel" => {
            // Deprecated for 2026-07-28 (SEP-2577), still sent by 2025-xx clients.
            #[allow(deprecated)]
            <rmcp::model::SetLevelRequestParams as serde::Deserialize>::deserialize(params?)
                .ok()?;
            Simple::SetLevel
        }
        "server/discover" if generation == Generation::Stateless => Simple::Discover,
        "resources/list" | "resources/templates/list" | "prompts/list" => {
            if let Some(params) = params {
                <rmcp::model::PaginatedRequestParams as serde::Deserialize>::deserialize(params)
                    .ok()?;
            }
            let capability = if method.starts_with("prompts/") {
                "prompts"
            } else {
                "resources"
            };
            Simple::NotOffered(crate::mcp::not_offered(method, capability))
        }
        "prompts/get" => {
            <rmcp::model::GetPromptRequestParams as serde::Deserialize>::deserialize(params?)
                .ok()?;
            Simple::NotOffered(crate::mcp::not_offered(method, "prompts"))
        }
        "completion/complete" => {
            <rmcp::model::CompleteRequestParams as serde::Deserialize>::deserialize(params?)
                .ok()?;
            Simple::NotOffered(crate::mcp::not_offered(method, "completions"))
        }
        "resources/read" => {
            let read = <rmcp::model::ReadResourceRequestParams as serde::Deserialize>::deserialize(
                params?,
            )
            .ok()?;
            Simple::NotOffered(crate::mcp::resource_not_found(&read.uri))
        }
        "resources/subscribe" => {
            <rmcp::model::SubscribeRequestParams as serde::Deserialize>::deserialize(params?)
                .ok()?;
            // Subscriptions to resources exist before 2026-07-28 only.
            Simple::NotOffered(match generation {
                Generation::Legacy => crate::mcp::not_offered(method, "resources"),
                Generation::Stateless => {
                    rmcp::ErrorData::method_not_found::<rmcp::model::SubscribeRequestMethod>()
                }
            })
        }
        method if !KNOWN_METHODS.contains(&method) && !method.starts_with("notifications/") => {
            Simple::Unknown(method.to_owned())
        }
        _ => return None,
    };
    Some((id, simple, generation))
}

/// An `initialize` the transport would take as it is: no `Origin`, an allowed `Host`, both
/// media types accepted, a version with a handshake that the edge answers as asked (so no
/// negotiation), `MCP-Protocol-Version` absent or the same, `Mcp-Method` absent or
/// `initialize`, no `Mcp-Name` and no `_meta`.
fn parse_initialize(
    headers: &axum::http::HeaderMap,
    params: &serde_json::Map<String, serde_json::Value>,
    mcp: &crate::config::RawMcp,
) -> Option<Simple> {
    use crate::mcp::fast::{METHOD, NAME, PROTOCOL_VERSION};
    // The list's rules for Origin, Host and Accept (a plain legacy request passes them).
    let mut bare = axum::http::HeaderMap::new();
    for name in [header::HOST, header::ORIGIN, header::ACCEPT] {
        for value in headers.get_all(&name) {
            bare.append(name.clone(), value.clone());
        }
    }
    crate::mcp::fast::eligible(&bare, None, mcp)?;
    if params.contains_key("_meta") || headers.contains_key(&NAME) {
        return None;
    }
    let version = params.get("protocolVersion")?.as_str()?;
    if !["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"].contains(&version) {
        return None;
    }
    let mut declared = headers.get_all(&PROTOCOL_VERSION).iter();
    match (declared.next(), declared.next()) {
        (None, _) => {}
        (Some(header), None) if header.as_bytes() == version.as_bytes() => {}
        _ => return None,
    }
    let mut methods = headers.get_all(&METHOD).iter();
    match (methods.next(), methods.next()) {
        (None, _) => {}
        (Some(header), None) if header.as_bytes() == b"initialize" => {}
        _ => return None,
    }
    let capabilities = params.get("capabilities").cloned().unwrap_or_default();
    let typed =
        <rmcp::model::InitializeRequestParams as serde::Deserialize>::deserialize(params).ok()?;
    Some(Simple::Initialize(Box::new(typed), capabilities))
}

/// Serves one method of [`Simple`].
pub(super) async fn serve_simple(
    state: &Arc<EdgeState>,
    parts: &axum::http::request::Parts,
    id: RequestId,
    simple: Simple,
    generation: Generation,
) -> Response {
    use rmcp::ServerHandler as _;
    let handler = McpHandler::new(Arc::clone(state));
    direct_requests(match &simple {
        Simple::Initialize(..) => Method::Initialize,
        Simple::Ping => Method::Ping,
        Simple::SetLevel => Method::SetLevel,
        Simple::Discover => Method::Discover,
        Simple::Unknown(_) => Method::Unknown,
        Simple::NotOffered(_) => Method::NotOffered,
    })
    .increment(1);
    let result = match simple {
        Simple::Initialize(params, capabilities) => {
            let mut info = handler.get_info();
            info.protocol_version = params.protocol_version.clone();
            let mut response = json(
                &shape(Ok(ServerResult::InitializeResult(info)), id, generation),
                generation,
            );
            // A 2025-xx session id holds what the client declared (ADR 0005).
            if state.config.mcp.session_ttl_secs > 0
                && let Some(caller) = parts.extensions.get::<Caller>()
            {
                let session = crate::mcp::session::Session::from_initialize(
                    params.protocol_version.as_str(),
                    &capabilities,
                );
                if let Ok(value) = HeaderValue::from_str(&state.sessions.issue(&caller.0, &session))
                {
                    response
                        .headers_mut()
                        .insert(crate::mcp::fast::SESSION_ID, value);
                }
            }
            return response;
        }
        Simple::Ping if generation == Generation::Legacy => Ok(ServerResult::empty(())),
        Simple::Ping => Err(rmcp::ErrorData::method_not_found::<
            rmcp::model::PingRequestMethod,
        >()),
        // Stateless: there is no session to keep a level in; log messages of a call are
        // relayed as they come (crate::mcp::relay).
        Simple::SetLevel => Ok(ServerResult::empty(())),
        Simple::Discover => Ok(ServerResult::DiscoverResult(
            rmcp::model::DiscoverResult::from_server_info(
                rmcp::model::ProtocolVersion::KNOWN_VERSIONS.to_vec(),
                handler.get_info(),
            ),
        )),
        Simple::Unknown(method) => Err(rmcp::ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            method,
            None,
        )),
        Simple::NotOffered(refusal) => Err(refusal),
    };
    json(&shape(result, id, generation), generation)
}

/// A request to `/mcp` with a method other than POST (and not a 2025-xx session's GET stream),
/// when the transport would not refuse its `Host` or `Origin` first: 405, `Allow: POST` (a
/// stateless edge keeps no stream to resume and no session to delete).
pub(super) fn method_not_allowed(
    headers: &axum::http::HeaderMap,
    mcp: &crate::config::RawMcp,
) -> Option<Response> {
    if headers.contains_key(header::ORIGIN)
        || !crate::mcp::fast::host_allowed(headers, &mcp.allowed_hosts)
    {
        return None;
    }
    direct_requests(Method::NotAllowed).increment(1);
    Some(
        (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, HeaderValue::from_static("POST"))],
            "Method Not Allowed",
        )
            .into_response(),
    )
}

/// A notification (no id) or a response to no question of the edge's, as the transport would
/// take it: a notification is accepted (202) and dropped — a stateless edge has no session for
/// `notifications/initialized` or `notifications/cancelled` to act on — and a response is
/// refused (400: there is no request of this server's for it to answer).
pub(super) fn one_way(
    headers: &axum::http::HeaderMap,
    request: Option<&super::Call>,
    mcp: &crate::config::RawMcp,
) -> Option<Response> {
    match request {
        Some((id, method, params)) if id.is_null() => {
            crate::mcp::fast::eligible_for(headers, params.as_ref(), mcp, method, None)?;
            direct_requests(Method::Notification).increment(1);
            Some(StatusCode::ACCEPTED.into_response())
        }
        None => {
            let generation = crate::mcp::fast::eligible_for(headers, None, mcp, "", None)?;
            direct_requests(Method::Response).increment(1);
            let refusal = ServerJsonRpcMessage::error(
                rmcp::ErrorData::invalid_request(
                    "stateless server does not accept JSON-RPC responses",
                    None,
                ),
                None,
            );
            let mut response = json(&refusal, generation);
            *response.status_mut() = StatusCode::BAD_REQUEST;
            Some(response)
        }
        Some(_) => None,
    }
}

/// An eligible 2026-07-28 `subscriptions/listen`: its id and the notifications it asks for.
pub(super) fn parse_listen(
    headers: &axum::http::HeaderMap,
    id: &serde_json::Value,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
    mcp: &crate::config::RawMcp,
) -> Option<(RequestId, rmcp::model::SubscriptionFilter)> {
    let generation =
        crate::mcp::fast::eligible_for(headers, params, mcp, "subscriptions/listen", None)?;
    if generation != Generation::Stateless {
        return None;
    }
    let params =
        <rmcp::model::SubscriptionsListenRequestParams as serde::Deserialize>::deserialize(params?)
            .ok()?;
    Some((request_id(id)?, params.notifications))
}

/// Serves one `subscriptions/listen` (2026-07-28): an SSE stream that opens with the
/// acknowledgement of what the edge accepted (of `notifications/tools/list_changed`, all it
/// offers), carries a `notifications/tools/list_changed` for every change that may alter the
/// caller's tools, and ends — with the subscription's result — when the edge shuts down (the
/// client subscribes again on another replica), or when the client leaves.
pub(super) fn serve_listen(
    state: &Arc<EdgeState>,
    parts: &axum::http::request::Parts,
    id: RequestId,
    requested: rmcp::model::SubscriptionFilter,
) -> Response {
    use rmcp::ServerHandler as _;
    use rmcp::model::{
        GetMeta as _, ServerNotification, SubscriptionsAcknowledgedNotification,
        SubscriptionsAcknowledgedNotificationParams, SubscriptionsListenResult,
        ToolListChangedNotification,
    };
    let Some(caller) = parts.extensions.get::<Caller>() else {
        return refuse(
            Fault::Internal,
            "request reached the MCP handler unauthenticated",
        );
    };
    direct_requests(Method::Listen).increment(1);
    let handler = McpHandler::new(Arc::clone(state));
    let info = handler.get_info();
    let candidate = handler
        .accepted_subscription_filter(&requested)
        .unwrap_or_default();
    let advertised = requested.supported_by(&info.capabilities);
    let accepted = requested.intersection(&candidate).intersection(&advertised);
    let tagged = |mut notification: ServerNotification| {
        notification.get_meta_mut().set_subscription_id(id.clone());
        ServerJsonRpcMessage::notification(notification)
    };
    let acknowledged = tagged(ServerNotification::SubscriptionsAcknowledgedNotification(
        SubscriptionsAcknowledgedNotification::new(
            SubscriptionsAcknowledgedNotificationParams::new(accepted.clone()),
        ),
    ));
    let changes = if accepted.tools_list_changed == Some(true) {
        crate::mcp::list_changes(Arc::clone(state), caller.0.tenant.clone()).boxed()
    } else {
        let stopping = state.shutdown.clone();
        futures::stream::once(async move { stopping.cancelled_owned().await })
            .filter_map(|()| async { None })
            .boxed()
    };
    let changed_id = id.clone();
    let changed = changes.map(move |()| {
        let mut notification =
            ServerNotification::ToolListChangedNotification(ToolListChangedNotification {
                method: Default::default(),
                extensions: Default::default(),
            });
        notification
            .get_meta_mut()
            .set_subscription_id(changed_id.clone());
        ServerJsonRpcMessage::notification(notification)
    });
    let mut result = SubscriptionsListenResult::complete(id.clone());
    result.meta.set_server_info(info.server_info);
    let completed = shape(
        Ok(ServerResult::SubscriptionsListenResult(result)),
        id,
        Generation::Stateless,
    );
    let stream = futures::stream::iter([acknowledged])
        .chain(changed)
        .chain(futures::stream::iter([completed]));
    crate::transport::sse::response(stream, None, state.abort.clone())
}

/// The params of an eligible `tools/call`, typed; `None` leaves the request to the transport.
pub(super) fn parse_call(
    headers: &axum::http::HeaderMap,
    id: &serde_json::Value,
    params: &serde_json::Map<String, serde_json::Value>,
    mcp: &crate::config::RawMcp,
) -> Option<(RequestId, CallToolRequestParams, Generation)> {
    let name = params.get("name").and_then(serde_json::Value::as_str)?;
    let generation =
        crate::mcp::fast::eligible_for(headers, Some(params), mcp, "tools/call", Some(name))?;
    let id = request_id(id)?;
    let params = <CallToolRequestParams as serde::Deserialize>::deserialize(params).ok()?;
    Some((id, params, generation))
}

/// Serves one eligible `tools/call` (see the module).
pub(super) async fn serve_call(
    state: Arc<EdgeState>,
    parts: axum::http::request::Parts,
    id: RequestId,
    mut params: CallToolRequestParams,
    generation: Generation,
) -> Response {
    direct_requests(Method::Call).increment(1);
    let meta = params.meta.take().unwrap_or_default();
    let (sink, mut messages) = tokio::sync::mpsc::unbounded_channel();
    let handler = McpHandler::new(Arc::clone(&state));
    let work = async move {
        let ctx = CallContext {
            parts: Some(&parts),
            meta: &meta,
            sink: Sink::Stream(sink),
        };
        let result = handler.tools_call(params, &ctx).await;
        shape(result.map(ServerResult::from), id, generation)
    };
    let mut work = Box::pin(work);
    // What the call sends first decides the answer's form: its answer (JSON), or a message
    // before it (SSE). Messages already queued go first.
    let first = tokio::select! {
        biased;
        Some(message) = messages.recv() => message,
        answer = &mut work => match messages.try_recv() {
            Err(_) => return json(&answer, generation),
            Ok(message) => {
                let rest = tokio_stream::wrappers::UnboundedReceiverStream::new(messages);
                let stream = futures::stream::iter([message])
                    .chain(rest)
                    .chain(futures::stream::iter([answer]));
                return crate::transport::sse::response(stream, None, state.abort.clone());
            }
        },
        () = state.abort.cancelled() => return refuse(Fault::Unavailable, "the edge is shutting down"),
    };
    let (last, answered) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let _ = last.send(work.await);
    });
    let rest = tokio_stream::wrappers::UnboundedReceiverStream::new(messages);
    let stream = futures::stream::iter([first])
        .chain(rest)
        .chain(futures::stream::once(answered).filter_map(|answer| async move { answer.ok() }));
    crate::transport::sse::response(stream, Some(task.abort_handle()), state.abort.clone())
}

/// The JSON-RPC answer to a request, shaped for the protocol generation as rmcp's server
/// shapes it.
fn shape(
    result: Result<ServerResult, rmcp::ErrorData>,
    id: RequestId,
    generation: Generation,
) -> ServerJsonRpcMessage {
    let current = generation == Generation::Stateless;
    match result {
        Ok(mut result) => {
            if matches!(result, ServerResult::InputRequiredResult(_)) && !current {
                return ServerJsonRpcMessage::error(
                    rmcp::ErrorData::invalid_request(
                        "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                        None,
                    ),
                    Some(id),
                );
            }
            if current {
                result.fill_missing_cache_hints();
            } else {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
            }
            ServerJsonRpcMessage::response(result, id)
        }
        Err(mut error) => {
            if current && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            ServerJsonRpcMessage::error(error, Some(id))
        }
    }
}

/// The answer as one JSON body. At 2026-07-28 a few errors have an HTTP status of their own
/// (the protocol's: 400 for a version, capability or header the request got wrong, 404 for
/// an unknown method); earlier versions answer every JSON-RPC error with 200.
fn json(message: &ServerJsonRpcMessage, generation: Generation) -> Response {
    let status = match message {
        ServerJsonRpcMessage::Error(error) if generation == Generation::Stateless => {
            match error.error.code {
                ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
                | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
                | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
                ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
                _ => StatusCode::OK,
            }
        }
        _ => StatusCode::OK,
    };
    match serde_json::to_vec(message) {
        Ok(body) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(_) => refuse(Fault::Internal, "internal error"),
    }
}

/// The methods of [`direct_requests`].
#[derive(Clone, Copy)]
enum Method {
    List = 0,
    Call = 1,
    Initialize = 2,
    Ping = 3,
    SetLevel = 4,
    Discover = 5,
    Unknown = 6,
    Notification = 7,
    Response = 8,
    NotAllowed = 9,
    Listen = 10,
    NotOffered = 11,
}

/// `tp_edge_direct_requests_total{method}`: requests the edge's path served (the rest went
/// through rmcp's transport; precomputed `tools/list` pages are counted apart).
fn direct_requests(method: Method) -> &'static metrics::Counter {
    static COUNTERS: std::sync::OnceLock<[metrics::Counter; 12]> = std::sync::OnceLock::new();
    &COUNTERS.get_or_init(|| {
        [
            "tools/list",
            "tools/call",
            "initialize",
            "ping",
            "logging/setLevel",
            "server/discover",
            "unknown",
            "notification",
            "response",
            "not_allowed",
            "subscriptions/listen",
            "not_offered",
        ]
        .map(|method| metrics::counter!("tp_edge_direct_requests_total", "method" => method))
    })[method as usize]
}
