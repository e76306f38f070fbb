//! The 2025-xx handshake, `ping`, `logging/setLevel`, `server/discover`, the refusals of the
//! methods the edge does not offer, and methods no MCP version defines.

use super::*;

/// A method of [`parse_simple`]: answered from the edge's configuration alone.
pub(in crate::app) enum Simple {
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
pub(in crate::app) fn parse_simple(
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

/// An `initialize` the transport would take as it is: an allowed `Host`, both media types
/// accepted, a version with a handshake that the edge answers as asked (so no
/// negotiation), `MCP-Protocol-Version` absent or the same, `Mcp-Method` absent or
/// `initialize`, no `Mcp-Name` and no `_meta`.
fn parse_initialize(
    headers: &axum::http::HeaderMap,
    params: &serde_json::Map<String, serde_json::Value>,
    mcp: &crate::config::RawMcp,
) -> Option<Simple> {
    use crate::mcp::fast::{METHOD, NAME, PROTOCOL_VERSION};
    // The list's rules for Host and Accept (a plain legacy request passes them).
    let mut bare = axum::http::HeaderMap::new();
    for name in [header::HOST, header::ACCEPT] {
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
pub(in crate::app) async fn serve_simple(
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
