//! The warm `tools/list` fast path: pages serialised once per registry body and protocol
//! generation, answered with the caller's JSON-RPC id spliced in, without the MCP transport.
//!
//! The answer to `tools/list` differs between tenants with the same body, and between requests,
//! only in the JSON-RPC `id`, so each page is kept as the bytes before the id and the bytes after
//! it (built with rmcp's own types and serialiser, so they are the transport's bytes). The fast
//! path takes only requests whose every header and field the transport would accept as they are
//! (see [`eligible`]); anything else — a browser `Origin`, an unknown protocol version, a cursor
//! this edge did not issue — goes through the transport unchanged, which answers or refuses it.
//! `tests/fast_list.rs` checks the two paths answer the same bytes and statuses.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use rmcp::model::{
    CacheScope, ListToolsResult, NumberOrString, ServerJsonRpcMessage, ServerResult, Tool,
};
use serde_json::{Map, Value};

use super::cursor::decode_cursor;
use crate::config::RawMcp;

/// The protocol generation of a `tools/list` answer: results carry `resultType` from
/// 2026-07-28 on, and lose it (and non-object output schemas) before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// 2025-03-26 to 2025-11-25 (MCP-Protocol-Version header, no per-request version).
    Legacy = 0,
    /// 2026-07-28 (per-request `_meta` version, `Mcp-Method` header).
    Stateless = 1,
}

/// One page as the bytes before and after the JSON-RPC id.
#[derive(Debug)]
pub struct Page {
    prefix: Bytes,
    suffix: Bytes,
}

/// Every page of one listing for one generation.
#[derive(Debug)]
pub struct Pages {
    pages: Vec<Page>,
    /// The name each page after the first continues after (what its cursor encodes).
    after: Vec<Arc<str>>,
}

const SENTINEL: &str = "\u{1}toolplane-id\u{1}";

impl Pages {
    /// Serialises `listing` page by page, as the MCP handler would answer it.
    pub fn build(listing: &[Tool], mcp: &RawMcp, generation: Generation) -> Pages {
        let size = (mcp.page_size as usize).max(1);
        let mut pages = Vec::new();
        let mut after = Vec::new();
        let mut start = 0;
        loop {
            let end = (start + size).min(listing.len());
            let mut result = ListToolsResult::with_all_items(listing[start..end].to_vec());
            // Cache hints exist from 2026-07-28 on; earlier clients get none (issue 19.8).
            if generation == Generation::Stateless {
                result = result
                    .with_ttl_ms(mcp.list_ttl_ms)
                    .with_cache_scope(CacheScope::Private);
            }
            if end < listing.len() {
                result.next_cursor = Some(super::encode_cursor(&listing[end - 1].name));
            }
            let mut result = ServerResult::ListToolsResult(result);
            match generation {
                Generation::Legacy => {
                    result.strip_result_type_for_legacy_peer();
                    result.strip_non_object_output_for_legacy_peer();
                }
                Generation::Stateless => result.fill_missing_cache_hints(),
            }
            let message =
                ServerJsonRpcMessage::response(result, NumberOrString::String(SENTINEL.into()));
            let bytes = serde_json::to_vec(&message).expect("a tool list serialises");
            let marker = serde_json::to_vec(SENTINEL).expect("a string serialises");
            let at = bytes
                .windows(marker.len())
                .position(|w| w == marker.as_slice())
                .expect("the sentinel id is in the answer");
            pages.push(Page {
                prefix: Bytes::copy_from_slice(&bytes[..at]),
                suffix: Bytes::copy_from_slice(&bytes[at + marker.len()..]),
            });
            if start > 0 {
                after.push(Arc::from(listing[start - 1].name.as_ref()));
            }
            if end >= listing.len() {
                break;
            }
            start = end;
        }
        Pages { pages, after }
    }

    /// The page a cursor names (`None` = the first page); `None` for a cursor that is not a
    /// page boundary of this listing.
    fn page(&self, cursor: Option<&str>) -> Option<&Page> {
        match cursor {
            None => self.pages.first(),
            Some(cursor) => {
                let name = decode_cursor(cursor)?;
                let index = self
                    .after
                    .binary_search_by(|n| n.as_ref().cmp(name.as_str()))
                    .ok()?;
                self.pages.get(index + 1)
            }
        }
    }
}

/// The protocol generation the transport would serve this request as, when the fast path may
/// answer it: no `Origin` (browsers take the transport's checks), an allowed `Host`, both
/// media types accepted, and either a legacy version header with no per-request version, or
/// 2026-07-28 in the header, in `_meta` and `Mcp-Method: tools/list` with no `Mcp-Name`.
pub fn eligible(
    headers: &HeaderMap,
    params: Option<&Map<String, Value>>,
    mcp: &RawMcp,
) -> Option<Generation> {
    if headers.contains_key(header::ORIGIN) || !host_allowed(headers, &mcp.allowed_hosts) {
        return None;
    }
    if !accepts_json_and_sse(headers) {
        return None;
    }
    let version = match headers.get_all("mcp-protocol-version").iter().count() {
        0 => None,
        1 => Some(headers.get("mcp-protocol-version")?.to_str().ok()?),
        _ => return None,
    };
    let meta = match params.and_then(|p| p.get("_meta")) {
        None => None,
        Some(Value::Object(meta)) => Some(meta),
        Some(_) => return None,
    };
    let meta_version = match meta.and_then(|m| m.get("io.modelcontextprotocol/protocolVersion")) {
        None => None,
        Some(Value::String(v)) => Some(v.as_str()),
        Some(_) => return None,
    };
    // 2026-07-28 requests must declare their capabilities, in a shape the transport reads.
    let capabilities_declared = meta
        .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
        .is_some_and(|c| {
            c.is_object()
                && <rmcp::model::ClientCapabilities as serde::Deserialize>::deserialize(c).is_ok()
        });
    let mcp_method = headers.get("mcp-method").map(HeaderValue::to_str);
    match (version, meta_version) {
        (None | Some("2025-03-26" | "2025-06-18" | "2025-11-25"), None) => (mcp_method.is_none()
            && !headers.contains_key("mcp-name"))
        .then_some(Generation::Legacy),
        (Some("2026-07-28"), Some("2026-07-28")) => (capabilities_declared
            && matches!(mcp_method, Some(Ok("tools/list")))
            && headers.get_all("mcp-method").iter().count() == 1
            && !headers.contains_key("mcp-name"))
        .then_some(Generation::Stateless),
        _ => None,
    }
}

/// `params.cursor` as the fast path reads it: `Some(None)` without one, `None` for a shape it
/// leaves to the transport.
pub fn cursor(params: Option<&Map<String, Value>>) -> Option<Option<&str>> {
    match params.and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(cursor)) => Some(Some(cursor)),
        Some(_) => None,
    }
}

/// The JSON-RPC id as the transport would echo it (a string, or an integer within i64).
pub fn id_bytes(id: &Value) -> Option<Bytes> {
    match id {
        Value::String(_) => serde_json::to_vec(id).ok().map(Bytes::from),
        Value::Number(n) => n.as_i64().map(|n| Bytes::from(n.to_string())),
        _ => None,
    }
}

/// The answer for one page, or `None` when the cursor is not one of the listing's pages.
pub fn answer(pages: &Pages, cursor: Option<&str>, id: Bytes) -> Option<Response> {
    let page = pages.page(cursor)?;
    let body = Spliced {
        parts: [page.prefix.clone(), id, page.suffix.clone()],
        next: 0,
    };
    let mut response = Response::new(axum::body::Body::new(body));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Some(response)
}

/// A body of three shared buffers with an exact length (so the response has a
/// `Content-Length` and the buffers are written without being copied together).
struct Spliced {
    parts: [Bytes; 3],
    next: usize,
}

impl http_body::Body for Spliced {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        while self.next < self.parts.len() {
            let i = self.next;
            self.next += 1;
            let part = std::mem::take(&mut self.parts[i]);
            if !part.is_empty() {
                return Poll::Ready(Some(Ok(http_body::Frame::data(part))));
            }
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.parts[self.next.min(3)..].iter().all(Bytes::is_empty)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let remaining: usize = self.parts[self.next.min(3)..].iter().map(Bytes::len).sum();
        http_body::SizeHint::with_exact(remaining as u64)
    }
}

fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        // Quality values (a `q=0` refuses a type) and quoted parameters are the transport's
        // to read.
        if value.contains("q=") || value.contains('"') {
            return false;
        }
        for item in value.split(',') {
            let essence = item.split(';').next().unwrap_or("").trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// The `Host` check of the transport (an entry without a port allows any port), for the one
/// `Host` header a well-formed request has; `["*"]` allows every host.
pub(crate) fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    if allowed.iter().any(|h| h == "*") {
        return true;
    }
    let mut hosts = headers.get_all(header::HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return false;
    };
    let Some(host) = host
        .to_str()
        .ok()
        .and_then(|h| h.parse::<axum::http::uri::Authority>().ok())
    else {
        return false;
    };
    let name = normalize(host.host());
    allowed.iter().any(
        |entry| match entry.trim().parse::<axum::http::uri::Authority>() {
            Ok(entry) => {
                normalize(entry.host()) == name
                    && entry.port_u16().is_none_or(|p| host.port_u16() == Some(p))
            }
            Err(_) => normalize(entry.trim()) == name,
        },
    )
}

fn normalize(host: &str) -> String {
    host.trim_matches(['[', ']']).to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(n: usize) -> Vec<Tool> {
        (0..n)
            .map(|i| {
                Tool::new(
                    format!("tool_{i:03}"),
                    format!("Tool {i}"),
                    Arc::new(json!({"type": "object"}).as_object().unwrap().clone()),
                )
            })
            .collect()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    fn body(response: Response) -> Vec<u8> {
        use http_body_util::BodyExt as _;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(response.into_body().collect())
            .unwrap()
            .to_bytes()
            .to_vec()
    }

    #[test]
    fn pages_splice_the_id_and_follow_cursors() {
        let mcp = RawMcp {
            page_size: 2,
            ..RawMcp::default()
        };
        let listing = tools(5);
        let pages = Pages::build(&listing, &mcp, Generation::Stateless);
        assert_eq!(pages.pages.len(), 3);
        let first: Value = serde_json::from_slice(&body(
            answer(&pages, None, id_bytes(&json!("abc")).unwrap()).unwrap(),
        ))
        .unwrap();
        assert_eq!(first["id"], "abc");
        assert_eq!(first["result"]["resultType"], "complete");
        assert_eq!(first["result"]["tools"].as_array().unwrap().len(), 2);
        let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
        let second: Value = serde_json::from_slice(&body(
            answer(&pages, Some(&cursor), id_bytes(&json!(7)).unwrap()).unwrap(),
        ))
        .unwrap();
        assert_eq!(second["id"], 7);
        assert_eq!(second["result"]["tools"][0]["name"], "tool_002");
        // A cursor that is not a page boundary is left to the transport.
        assert!(
            answer(
                &pages,
                Some(&super::super::encode_cursor("tool_000")),
                Bytes::new()
            )
            .is_none()
        );
        assert!(answer(&pages, Some("garbage"), Bytes::new()).is_none());
        let legacy = Pages::build(&listing, &mcp, Generation::Legacy);
        let first: Value = serde_json::from_slice(&body(
            answer(&legacy, None, id_bytes(&json!(1)).unwrap()).unwrap(),
        ))
        .unwrap();
        assert!(first["result"].get("resultType").is_none());
    }

    #[test]
    fn ids_the_transport_would_not_echo_as_given_are_left_to_it() {
        assert!(id_bytes(&json!(1.5)).is_none());
        assert!(id_bytes(&json!(u64::MAX)).is_none());
        assert!(id_bytes(&Value::Null).is_none());
        assert_eq!(id_bytes(&json!("x\"y")).unwrap().as_ref(), br#""x\"y""#);
        assert_eq!(id_bytes(&json!(-3)).unwrap().as_ref(), b"-3");
    }

    #[test]
    fn eligibility() {
        let mcp = RawMcp::default();
        let base = [
            ("host", "127.0.0.1:8080"),
            ("accept", "application/json, text/event-stream"),
        ];
        let legacy = |extra: &[(&'static str, &str)]| {
            let mut all = base.to_vec();
            all.extend_from_slice(extra);
            eligible(&headers(&all), None, &mcp)
        };
        assert_eq!(legacy(&[]), Some(Generation::Legacy));
        assert_eq!(
            legacy(&[("mcp-protocol-version", "2025-11-25")]),
            Some(Generation::Legacy)
        );
        assert_eq!(legacy(&[("mcp-protocol-version", "2024-11-05")]), None);
        assert_eq!(legacy(&[("mcp-protocol-version", "2026-07-28")]), None);
        assert_eq!(legacy(&[("origin", "http://127.0.0.1:8080")]), None);
        assert_eq!(legacy(&[("mcp-method", "tools/list")]), None);
        let mut wrong_host = base.to_vec();
        wrong_host[0] = ("host", "evil.example.com");
        assert_eq!(eligible(&headers(&wrong_host), None, &mcp), None);
        let mut only_json = base.to_vec();
        only_json[1] = ("accept", "application/json");
        assert_eq!(eligible(&headers(&only_json), None, &mcp), None);

        let bare_meta = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
        let meta = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                    "io.modelcontextprotocol/clientCapabilities": {}}});
        let params = meta.as_object();
        let mut stateless = base.to_vec();
        stateless.push(("mcp-protocol-version", "2026-07-28"));
        assert_eq!(eligible(&headers(&stateless), params, &mcp), None);
        let mut with_method = stateless.clone();
        with_method.push(("mcp-method", "tools/list"));
        // Capabilities are required at 2026-07-28.
        assert_eq!(
            eligible(&headers(&with_method), bare_meta.as_object(), &mcp),
            None
        );
        stateless.push(("mcp-method", "tools/list"));
        assert_eq!(
            eligible(&headers(&stateless), params, &mcp),
            Some(Generation::Stateless)
        );
        stateless.push(("mcp-name", "x"));
        assert_eq!(eligible(&headers(&stateless), params, &mcp), None);
        // A per-request version under a legacy header is the transport's to judge.
        let mut mixed = base.to_vec();
        mixed.push(("mcp-protocol-version", "2025-11-25"));
        assert_eq!(eligible(&headers(&mixed), params, &mcp), None);
    }

    #[test]
    fn hosts() {
        let allowed = vec![
            "localhost".to_owned(),
            "::1".to_owned(),
            "edge.internal:9000".to_owned(),
        ];
        let ok = |host: &str| host_allowed(&headers(&[("host", host)]), &allowed);
        assert!(ok("localhost") && ok("LOCALHOST:8080") && ok("[::1]:8080"));
        assert!(ok("edge.internal:9000"));
        assert!(!ok("edge.internal:9001") && !ok("edge.internal") && !ok("127.0.0.1"));
        assert!(!host_allowed(&HeaderMap::new(), &allowed));
        assert!(host_allowed(&HeaderMap::new(), &["*".to_owned()]));
    }
}
