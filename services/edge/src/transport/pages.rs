//! Precomputed `tools/list` answers: each page of a listing serialised once per protocol
//! generation, with rmcp's own types and serialiser (so they are the transport's bytes), kept as
//! the bytes before and after the JSON-RPC id, and answered with the caller's id spliced in.
//!
//! The answer to `tools/list` differs between tenants with the same registry body, and between
//! requests, only in the JSON-RPC `id`. Pages are built by the registry that lists the tools
//! (once per body and generation); which requests may be answered from them is
//! `tools/list`'s decision (`app::methods::list::precomputed`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use rmcp::model::{
    CacheScope, ListToolsResult, NumberOrString, ServerJsonRpcMessage, ServerResult, Tool,
};

use serde_json::Value;

use super::cursor::{decode_cursor, encode_cursor};

/// The protocol generation of a `tools/list` answer: results carry `resultType` from
/// 2026-07-28 on, and lose it (and non-object output schemas) before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// 2025-03-26 to 2025-11-25 (MCP-Protocol-Version header, no per-request version).
    Legacy = 0,
    /// 2026-07-28 (per-request `_meta` version, `Mcp-Method` header).
    Stateless = 1,
}

/// How `tools/list` is cut into pages (`mcp.page_size`) and how long clients may cache them
/// (`mcp.list_ttl_ms`).
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    /// Tools per page (at least one).
    pub page_size: usize,
    /// `ttlMs` of 2026-07-28 answers.
    pub ttl_ms: u64,
}

/// The one paginator of `tools/list`: the page of `listing` that starts at `start` (at most
/// `mcp.page_size` tools), with the cursor of the next page and, from 2026-07-28 on, the
/// listing's cache hints; and where the next page starts. Precomputed pages and every other
/// answer to `tools/list` are cut by it.
pub fn page(
    listing: &[Tool],
    start: usize,
    paging: Paging,
    generation: Generation,
) -> (ListToolsResult, usize) {
    let size = paging.page_size.max(1);
    let start = start.min(listing.len());
    let end = (start + size).min(listing.len());
    let mut result = ListToolsResult::with_all_items(listing[start..end].to_vec());
    // Cache hints exist from 2026-07-28 on; earlier clients get none (issue 19.8).
    if generation == Generation::Stateless {
        result = result
            .with_ttl_ms(paging.ttl_ms)
            .with_cache_scope(CacheScope::Private);
    }
    if end < listing.len() {
        result.next_cursor = Some(encode_cursor(&listing[end - 1].name));
    }
    (result, end)
}

/// Where the page after a cursor starts: after the tool the cursor names, whether or not that
/// tool is still listed; `None` for a cursor the edge did not issue.
pub fn start_after(listing: &[Tool], cursor: &str) -> Option<usize> {
    let name = decode_cursor(cursor)?;
    Some(listing.partition_point(|t| t.name.as_ref() <= name.as_str()))
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
    pub fn build(listing: &[Tool], paging: Paging, generation: Generation) -> Pages {
        let mut pages = Vec::new();
        let mut after = Vec::new();
        let mut start = 0;
        loop {
            let (result, end) = page(listing, start, paging, generation);
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

/// The JSON-RPC id as the transport would echo it (a string, or an integer within i64).
pub fn id_bytes(id: &Value) -> Option<Bytes> {
    match id {
        Value::String(_) => serde_json::to_vec(id).ok().map(Bytes::from),
        Value::Number(n) => n.as_i64().map(|n| Bytes::from(n.to_string())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        let paging = Paging {
            page_size: 2,
            ttl_ms: 60_000,
        };
        let listing = tools(5);
        let pages = Pages::build(&listing, paging, Generation::Stateless);
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
        assert!(answer(&pages, Some(&encode_cursor("tool_000")), Bytes::new()).is_none());
        assert!(answer(&pages, Some("garbage"), Bytes::new()).is_none());
        let legacy = Pages::build(&listing, paging, Generation::Legacy);
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
}
