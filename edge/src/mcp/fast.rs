//! The warm `tools/list` fast path: pages serialised once per registry body and protocol
//! generation, answered with the caller's JSON-RPC id spliced in, without the MCP transport.
//!
//! The answer to `tools/list` differs between tenants with the same body, and between requests,
//! only in the JSON-RPC `id`, so each page is kept as the bytes before the id and the bytes after
//! it (built with rmcp's own types and serialiser, so they are the transport's bytes). The fast
//! path takes only requests the transport's rules admit (`crate::transport::rules`) with a
//! cursor it issued at a page boundary; anything else goes on, to be answered or refused.
//! `tests/fast_list.rs` checks the two paths answer the same bytes and statuses.

use axum::http::HeaderName;
use serde_json::{Map, Value};

pub use crate::transport::pages::{Generation, Pages, answer, id_bytes};

pub use crate::transport::rules::{METHOD, NAME, PROTOCOL_VERSION};
/// `Mcp-Session-Id` (2025-xx sessions).
pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// `params.cursor` as the fast path reads it: `Some(None)` without one, `None` for a shape it
/// leaves to the transport.
pub fn cursor(params: Option<&Map<String, Value>>) -> Option<Option<&str>> {
    match params.and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(cursor)) => Some(Some(cursor)),
        Some(_) => None,
    }
}
