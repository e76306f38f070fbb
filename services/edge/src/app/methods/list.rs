//! `tools/list`: a warm one from precomputed pages ([`precomputed`]), the others cut by the
//! one paginator ([`serve_list`]).

use super::*;

/// `params.cursor`: `Ok(None)` when absent or `null`, `Err` when it is not a string.
fn cursor<'a>(fields: Option<&Fields<'a>>) -> Result<Option<std::borrow::Cow<'a, str>>, ()> {
    let Some(fields) = fields else {
        return Ok(None);
    };
    if fields.absent("cursor") {
        return Ok(None);
    }
    fields.str("cursor").map(Some).ok_or(())
}

/// The answer to a `tools/list` from the registry's precomputed pages (`mcp.precomputed_lists`),
/// or `None` to serve it from the registry ([`serve_list`], which also reports every error: a
/// registry that cannot be loaded, a bad cursor, ...). Only a first page, or one at a cursor
/// this edge issued, with no params but `cursor` and `_meta` (which the rules have read).
pub(super) async fn precomputed(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    envelope: &Envelope<'_>,
    generation: Generation,
) -> Option<Response> {
    if !state.config.mcp.precomputed_lists {
        return None;
    }
    let fields = envelope.fields.as_ref();
    if fields.is_some_and(|f| f.keys().any(|k| k != "cursor" && k != "_meta")) {
        return None;
    }
    let cursor = cursor(fields).ok()?;
    let id = crate::transport::pages::id_bytes(&envelope.id)?;
    let caller = &parts.extensions.get::<Caller>()?.0;
    let registry = match state.caches.registry_l1(&caller.tenant, &caller.role).await {
        Some(registry) => registry,
        None => Box::pin(state.caches.registry(&caller.tenant, &caller.role))
            .await
            .ok()?,
    };
    let registry = match &caller.providers {
        Some(providers) => registry.narrowed_to(providers),
        None => registry,
    };
    let pages = registry.pages(generation, state.config.mcp.paging);
    let response = crate::transport::pages::answer(pages, cursor.as_deref(), id)?;
    crate::mcp::count_request("tools/list", &caller.tenant, "ok", None);
    precomputed_counter().increment(1);
    if let Some(log) = crate::access::of(&parts.extensions) {
        log.outcome("ok");
    }
    Some(response)
}

/// `tp_edge_list_precomputed_total`, its handle made once.
fn precomputed_counter() -> &'static metrics::Counter {
    static COUNTER: std::sync::OnceLock<metrics::Counter> = std::sync::OnceLock::new();
    COUNTER.get_or_init(|| metrics::counter!("tp_edge_list_precomputed_total"))
}

/// A `tools/list`'s `_meta` and cursor; `Err` says why its params do not fit.
pub(in crate::app) fn parse_list(
    fields: Option<&Fields<'_>>,
) -> Result<(RequestMetaObject, Option<String>), String> {
    let cursor = cursor(fields)
        .map_err(|()| "params.cursor must be a string")?
        .map(std::borrow::Cow::into_owned);
    let meta = match fields.and_then(|f| f.get("_meta")) {
        None => RequestMetaObject::default(),
        Some(meta) => serde_json::from_str::<RequestMetaObject>(meta.get())
            .map_err(|e| format!("params._meta: {}", crate::transport::envelope::reason(&e)))?,
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
    json(shape(result, id, generation))
}
