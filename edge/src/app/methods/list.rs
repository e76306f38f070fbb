//! `tools/list` pages that no precomputed page answers, cut by the one paginator.

use super::*;

/// A `tools/list`'s `_meta` and cursor; `Err` says why its params do not fit.
pub(in crate::app) fn parse_list(
    params: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<(RequestMetaObject, Option<String>), String> {
    let cursor = crate::transport::pages::cursor(params)
        .ok_or("params.cursor must be a string")?
        .map(str::to_owned);
    let meta = match params.and_then(|p| p.get("_meta")) {
        None => RequestMetaObject::default(),
        Some(meta) => <RequestMetaObject as serde::Deserialize>::deserialize(meta)
            .map_err(|e| format!("params._meta: {e}"))?,
    };
    Ok((meta, cursor))
}

/// Serves one `tools/list` that no precomputed page answers.
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
