//! `tools/list` pages that no precomputed page answers, cut by the one paginator.

use super::*;

/// An eligible `tools/list`: its id, `_meta`, cursor and generation; `None` leaves the request
/// to the transport.
pub(in crate::app) fn parse_list(
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
pub(in crate::app) async fn serve_list(
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
