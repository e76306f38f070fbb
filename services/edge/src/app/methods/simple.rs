//! The 2025-xx handshake, `ping`, `logging/setLevel`, `server/discover`, the refusals of the
//! methods the edge does not offer (resources, prompts, completions, tasks, skills), and
//! methods no MCP version defines.

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
    NotOffered(Error),
}

/// Params of `method` as `T` (`Err`: why they do not fit).
fn typed<T: serde::de::DeserializeOwned>(
    method: &str,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<T, String> {
    let params = params.ok_or_else(|| format!("{method} needs params"))?;
    T::deserialize(params).map_err(|e| e.to_string())
}

/// `-32601` for `method`, with its name as the message (as rmcp answers it).
fn not_found(method: &str) -> Simple {
    Simple::NotOffered(Error::new(Fault::MethodNotFound, method.to_owned()))
}

/// The `Simple` method of a request the transport's rules admitted as `generation`; `Err`
/// says why its params do not fit the method.
pub(in crate::app) fn parse_simple(
    method: &str,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
    generation: Generation,
) -> Result<Simple, String> {
    Ok(match method {
        // Removed at 2026-07-28 (SEP-2575): 404 and -32601, unless it is a whole handshake,
        // which a client falling back to an earlier version may send.
        "logging/setLevel" if generation == Generation::Stateless => not_found(method),
        "initialize"
            if generation == Generation::Stateless
                && typed::<rmcp::model::InitializeRequestParams>(method, params).is_err() =>
        {
            not_found(method)
        }
        "initialize" => {
            let typed: rmcp::model::InitializeRequestParams = typed(method, params)?;
            let capabilities = params
                .and_then(|p| p.get("capabilities"))
                .cloned()
                .unwrap_or_default();
            Simple::Initialize(Box::new(typed), capabilities)
        }
        "ping" => Simple::Ping,
        "logging/setLevel" => {
            // Deprecated for 2026-07-28 (SEP-2577), still sent by 2025-xx clients.
            #[allow(deprecated)]
            let _: rmcp::model::SetLevelRequestParams = typed(method, params)?;
            Simple::SetLevel
        }
        "server/discover" => Simple::Discover,
        method => not_offered(method, params, generation)?,
    })
}

/// The refusal of a method of a capability the edge does not offer (resources, prompts,
/// completions, tasks, skills), once its params fit it; or a method no version defines.
fn not_offered(
    method: &str,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
    generation: Generation,
) -> Result<Simple, String> {
    Ok(match method {
        "resources/list" | "resources/templates/list" | "prompts/list" => {
            if let Some(params) = params {
                <rmcp::model::PaginatedRequestParams as serde::Deserialize>::deserialize(params)
                    .map_err(|e| e.to_string())?;
            }
            let capability = if method.starts_with("prompts/") {
                "prompts"
            } else {
                "resources"
            };
            Simple::NotOffered(Error::not_offered(method, capability))
        }
        "prompts/get" => {
            let _: rmcp::model::GetPromptRequestParams = typed(method, params)?;
            Simple::NotOffered(Error::not_offered(method, "prompts"))
        }
        "completion/complete" => {
            let _: rmcp::model::CompleteRequestParams = typed(method, params)?;
            Simple::NotOffered(Error::not_offered(method, "completions"))
        }
        "resources/read" => {
            let read: rmcp::model::ReadResourceRequestParams = typed(method, params)?;
            Simple::NotOffered(Error::resource_not_found(&read.uri))
        }
        // Resource subscriptions exist before 2026-07-28 only.
        "resources/subscribe" | "resources/unsubscribe" if generation == Generation::Stateless => {
            not_found(method)
        }
        "resources/subscribe" | "resources/unsubscribe" => {
            let _: rmcp::model::SubscribeRequestParams = typed(method, params)?;
            // The edge offers no resources to subscribe to.
            if method == "resources/subscribe" {
                Simple::NotOffered(Error::not_offered(method, "resources"))
            } else {
                not_found(method)
            }
        }
        // Legacy clients have no subscriptions/listen; the edge declares neither the tasks
        // nor the skills extension.
        "subscriptions/listen"
        | "tasks/get"
        | "tasks/update"
        | "tasks/cancel"
        | "skills/list"
        | "skills/get"
        | "resources/directory/read" => not_found(method),
        method => Simple::Unknown(method.to_owned()),
    })
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
            // A version without a handshake (or unknown) is answered with the newest one
            // that has one: the client decides whether it speaks it.
            let info = match handler.negotiate_initialize(&params) {
                Ok(info) => info,
                // rmcp refuses only when no version it knows has a handshake.
                Err(_) => {
                    let error =
                        Error::unsupported_protocol_version(params.protocol_version.as_str());
                    return json(shape(Err(error), id, Generation::Legacy));
                }
            };
            let version = info.protocol_version.clone();
            // The handshake is answered in the shape of the version it agrees on.
            let mut response = json(shape(
                Ok(ServerResult::InitializeResult(info)),
                id,
                Generation::Legacy,
            ));
            // A 2025-xx session id holds what the client declared (ADR 0005).
            if state.config.mcp.session_ttl.is_some()
                && let Some(caller) = parts.extensions.get::<Caller>()
            {
                let session = crate::transport::session::Session::from_initialize(
                    version.as_str(),
                    &capabilities,
                );
                if let Ok(value) = HeaderValue::from_str(&state.sessions.issue(&caller.0, &session))
                {
                    response
                        .headers_mut()
                        .insert(crate::transport::session::SESSION_ID, value);
                }
            }
            return response;
        }
        Simple::Ping if generation == Generation::Legacy => Ok(ServerResult::empty(())),
        Simple::Ping => Err(Error::new(Fault::MethodNotFound, "ping")),
        // Stateless: there is no session to keep a level in; log messages of a call are
        // relayed as they come (crate::mcp::relay).
        Simple::SetLevel => Ok(ServerResult::empty(())),
        Simple::Discover => Ok(ServerResult::DiscoverResult(
            rmcp::model::DiscoverResult::from_server_info(
                rmcp::model::ProtocolVersion::KNOWN_VERSIONS.to_vec(),
                handler.get_info(),
            ),
        )),
        Simple::Unknown(method) => Err(Error::new(Fault::MethodNotFound, method)),
        Simple::NotOffered(refusal) => Err(refusal),
    };
    json(shape(result, id, generation))
}
