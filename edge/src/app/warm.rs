//! The warm `tools/list`: answered from the in-process cache before the router.

use super::*;

/// Largest body the warm path reads (a `tools/list` request is a few hundred bytes).
pub(super) const WARM_BODY_LIMIT: u64 = 4096;

/// Whether a body may be a `tools/list` request (a cheap scan before any parsing).
pub(super) fn mentions_tools_list(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, b"\"tools/list\"").is_some()
}

/// A `tools/list` request as the warm path reads it: the envelope and params into borrowed
/// fields, not a JSON tree. Anything it does not read as it expects (a duplicate key, an
/// escaped string, params other than `cursor` and `_meta`, `_meta` that is not an object) is
/// left to the router, which answers or refuses it.
#[derive(serde::Deserialize)]
struct WarmRequest<'a> {
    #[serde(borrow)]
    jsonrpc: &'a str,
    /// As it was written: echoed into the answer without being parsed into a value.
    #[serde(borrow)]
    id: Option<&'a serde_json::value::RawValue>,
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

/// A request id as JSON, when it is one the answer may echo as written: a string, or an
/// integer in `i64` (what `transport::pages::id_bytes` takes from a parsed id); anything else is the
/// router's.
fn raw_id(id: &serde_json::value::RawValue) -> Option<axum::body::Bytes> {
    let raw = id.get();
    let integer = || {
        let digits = raw.strip_prefix('-').unwrap_or(raw);
        !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'))
            && raw.parse::<i64>().is_ok()
    };
    (raw.starts_with('"') || integer()).then(|| axum::body::Bytes::copy_from_slice(raw.as_bytes()))
}

/// The warm answer to a body that mentions `tools/list`: key and registry from the in-process
/// cache, the request one the transport would take as it is.
pub(super) async fn warm_answer(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    bytes: &[u8],
) -> Option<Response> {
    let key = tp_proto::keys::bearer(parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?)?;
    let identity = state.caches.identity_l1(key).await?;
    if let Some(id) = parts.headers.get(&crate::transport::session::SESSION_ID)
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
    let id = raw_id(id?)?;
    // The transport's rules, as for every request: what they refuse is the router's to answer
    // (so the id a refusal would carry is not needed here).
    crate::transport::rules::media(&parts.headers).ok()?;
    let generation = crate::transport::rules::admit(
        &parts.headers,
        crate::transport::rules::Message::Request(
            &serde_json::Value::Null,
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
        id,
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

/// Why a body could not be read whole.
enum BodyError {
    /// It did not arrive in time (`http.body_read_timeout_ms`).
    TimedOut,
    /// It is longer than allowed, or the connection failed while it was read.
    TooLarge,
}

/// A body of at most `limit` bytes, whole: its one data frame as it is (a small request's
/// body arrives with its head), frames joined when there are more; trailers are ignored.
async fn read_small_body(body: Body, limit: usize) -> Result<axum::body::Bytes, BodyError> {
    use http_body_util::BodyExt as _;
    let mut body = body;
    let mut first: Option<axum::body::Bytes> = None;
    let mut joined: Vec<u8> = Vec::new();
    let mut length = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            if tp_net::is_body_timeout(&error) {
                BodyError::TimedOut
            } else {
                BodyError::TooLarge
            }
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        length += data.len();
        if length > limit {
            return Err(BodyError::TooLarge);
        }
        match first.take() {
            None if joined.is_empty() => first = Some(data),
            None => joined.extend_from_slice(&data),
            Some(previous) => {
                joined.extend_from_slice(&previous);
                joined.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| axum::body::Bytes::from(joined)))
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
    if !headers.get(header::AUTHORIZATION).is_some_and(|v| {
        v.as_bytes()
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case(b"bearer "))
    }) {
        return Err(request);
    }
    let (parts, body) = request.into_parts();
    let bytes = match read_small_body(body, usize::try_from(limit).unwrap_or(usize::MAX)).await {
        Ok(bytes) => bytes,
        Err(BodyError::TimedOut) => return Ok(body_timed_out()),
        Err(BodyError::TooLarge) => {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn id(json: &str) -> Option<String> {
        let raw: Box<serde_json::value::RawValue> = serde_json::from_str(json).unwrap();
        raw_id(&raw).map(|b| String::from_utf8(b.to_vec()).unwrap())
    }

    #[test]
    fn ids_are_echoed_as_written_when_they_are_strings_or_integers() {
        assert_eq!(id("7").as_deref(), Some("7"));
        assert_eq!(id("-12").as_deref(), Some("-12"));
        assert_eq!(id("0").as_deref(), Some("0"));
        assert_eq!(id(r#""a\"b""#).as_deref(), Some(r#""a\"b""#));
        assert_eq!(id(&i64::MIN.to_string()), Some(i64::MIN.to_string()));
        // The router's, as `transport::pages::id_bytes` leaves them.
        for other in [
            "1.5",
            "1e3",
            "null",
            "true",
            "[1]",
            "{}",
            "9223372036854775808",
        ] {
            assert_eq!(id(other), None, "{other}");
        }
    }

    #[test]
    fn the_scan_finds_the_method_wherever_it_is() {
        assert!(mentions_tools_list(br#"{"method":"tools/list"}"#));
        assert!(!mentions_tools_list(br#"{"method":"tools/call"}"#));
    }
}
