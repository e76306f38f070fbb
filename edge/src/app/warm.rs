//! The warm `tools/list`: answered from the in-process cache before the router.

use super::*;

/// Largest body the warm path reads (a `tools/list` request is a few hundred bytes).
pub(super) const WARM_BODY_LIMIT: u64 = 4096;

/// Whether a body may be a `tools/list` request (a cheap scan before any parsing).
pub(super) fn mentions_tools_list(bytes: &[u8]) -> bool {
    const NEEDLE: &[u8] = b"\"tools/list\"";
    bytes.windows(NEEDLE.len()).any(|w| w == NEEDLE)
}

/// A `tools/list` request as the warm path reads it: the envelope and params into borrowed
/// fields, not a JSON tree. Anything it does not read as it expects (a duplicate key, an
/// escaped string, params other than `cursor` and `_meta`, `_meta` that is not an object) is
/// left to the router, which answers or refuses it.
#[derive(serde::Deserialize)]
struct WarmRequest<'a> {
    #[serde(borrow)]
    jsonrpc: &'a str,
    id: Option<serde_json::Value>,
    #[serde(borrow)]
    method: &'a str,
    #[serde(borrow)]
    params: Option<WarmParams<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WarmParams<'a> {
    #[serde(borrow)]
    cursor: Option<&'a str>,
    #[serde(rename = "_meta", borrow)]
    meta: Option<WarmMeta<'a>>,
}

/// The `_meta` keys the rules read; the rest (client info, progress token, log level) is not
/// the warm answer's concern.
#[derive(serde::Deserialize)]
struct WarmMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow)]
    protocol_version: Option<&'a str>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow)]
    capabilities: Option<&'a serde_json::value::RawValue>,
}

impl crate::transport::rules::Params for WarmParams<'_> {
    fn field(&self, key: &str) -> Option<&str> {
        (key == "cursor").then_some(self.cursor).flatten()
    }

    fn meta_version(&self) -> Option<&str> {
        self.meta.as_ref()?.protocol_version
    }

    fn declares_capabilities(&self) -> bool {
        self.meta
            .as_ref()
            .and_then(|m| m.capabilities)
            .is_some_and(|c| {
                serde_json::from_str::<rmcp::model::ClientCapabilities>(c.get()).is_ok()
            })
    }
}

/// The warm answer to a body that mentions `tools/list`: key and registry from the in-process
/// cache, the request one the transport would take as it is.
pub(super) async fn warm_answer(
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
    if let Some(id) = parts.headers.get(&crate::mcp::fast::SESSION_ID)
        && state.config.mcp.session_ttl_secs > 0
    {
        // A session id that does not open is the router's to refuse (404).
        state
            .sessions
            .open(&identity, id.to_str().unwrap_or_default())?;
    }
    let WarmRequest {
        jsonrpc,
        id,
        method,
        params,
    } = serde_json::from_slice(bytes).ok()?;
    if jsonrpc != "2.0" || method != "tools/list" {
        return None;
    }
    let id = id.filter(|id| id.is_string() || id.is_number())?;
    // The transport's rules, as for every request: what they refuse is the router's to answer.
    crate::transport::rules::media(&parts.headers).ok()?;
    let generation = crate::transport::rules::admit(
        &parts.headers,
        crate::transport::rules::Message::Request(
            &id,
            method,
            params
                .as_ref()
                .map(|p| p as &dyn crate::transport::rules::Params),
        ),
    )
    .ok()?;
    let registry = state
        .caches
        .registry_l1(&identity.tenant, &identity.role)
        .await?;
    let response = precomputed_list(
        state,
        &id,
        params.as_ref().and_then(|p| p.cursor),
        generation,
        &identity,
        &registry,
    )?;
    if let Some(log) = crate::access::of(&parts.extensions) {
        log.caller(&identity.tenant, &identity.role);
        log.rpc("tools/list", None);
        log.outcome("ok");
    }
    Some(response)
}

/// Answers a warm `tools/list` with no I/O beyond the request, or hands the request back
/// unchanged (its body re-assembled) for the router.
pub(super) async fn warm_list(state: &EdgeState, request: Request) -> Result<Response, Request> {
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
        && crate::transport::rules::is_json(headers);
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
            return Ok(refuse(
                Fault::BodyTooLarge,
                "request body exceeds mcp.max_body_bytes",
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
