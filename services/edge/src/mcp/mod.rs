//! The MCP side of the edge: an rmcp `ServerHandler` that lists and calls the caller's own
//! registry. Built per HTTP request (stateless); everything it needs is in [`EdgeState`].
//!
//! Rules (docs/mcp-compatibility.md has them per protocol version): a tool outside the caller's registry — unknown
//! or hidden — fails with the same JSON-RPC -32602 error; a forbidden action of a polymorphic
//! tool fails like a nonexistent one; arguments are validated before forwarding; executor
//! failures are `isError: true` results; edge failures are JSON-RPC errors.

// MCP logging (`logging/setLevel`, `notifications/message`) is deprecated by SEP-2577 for
// 2026-07-28 but still used by 2025-xx clients; executors' log events are relayed to them.
#![allow(deprecated)]

mod approval;
pub mod bounds;
mod call;
mod content;
pub mod context;
mod meta;
mod metrics;
mod outcome;
pub mod params;
mod relay;
mod validate;

use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument as _;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InputRequiredResult, InputResponses, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ServerCapabilities, ServerConfig,
    SubscriptionFilter,
};

pub use context::{CallContext, Sink};
use rmcp::ServerHandler;

use crate::error::Error;
use serde_json::{Value, json};
use tp_proto::Fault;
use tp_proto::pb;

use crate::cache::{Identity, LookupError};
use crate::disclosure::{self, MetaTool};
use crate::forward::Reply;
use crate::registry::{EdgeTool, Registry};
use crate::state::EdgeState;
use tp_upstream::CallEvent;

pub use crate::transport::cursor::{decode_cursor, encode_cursor};

pub use call::Retry;
pub(crate) use metrics::count_request;

/// Most validation errors reported for one call.
const MAX_REPORTED_ERRORS: usize = 5;

/// The authenticated caller, put into request extensions by the auth layer.
#[derive(Debug, Clone)]
pub struct Caller(pub Arc<Identity>);

/// The per-request handler.
#[derive(Debug, Clone)]
pub struct McpHandler {
    state: Arc<EdgeState>,
}

/// The span of the HTTP request a handler serves (handlers run on tasks of their own, so the
/// current span is not it).
fn request_span(ctx: &CallContext<'_>) -> tracing::Span {
    access_log(ctx).map_or_else(tracing::Span::current, |log| log.span().clone())
}

/// The access log of the HTTP request a handler serves.
fn access_log<'a>(ctx: &CallContext<'a>) -> Option<&'a crate::access::AccessLog> {
    ctx.parts
        .and_then(|parts| crate::access::of(&parts.extensions))
}

fn caller(ctx: &CallContext<'_>) -> Result<Arc<Identity>, Error> {
    ctx.parts
        .and_then(|parts| parts.extensions.get::<Caller>())
        .map(|caller| Arc::clone(&caller.0))
        .ok_or_else(|| {
            Error::new(
                Fault::Internal,
                "request reached the MCP handler unauthenticated",
            )
        })
}

fn lookup_error(error: LookupError) -> Error {
    match error {
        LookupError::Unauthenticated | LookupError::NotFound => Error::new(
            Fault::InvalidRequest,
            "the caller's tenant no longer exists",
        ),
        LookupError::Unavailable(message) => Error::new(
            Fault::RegistryUnavailable,
            "the tool registry is temporarily unavailable; retry shortly",
        )
        .with_data(json!({ "reason": message })),
    }
}

/// Whether the request is 2026-07-28 (per-request version in `_meta`).
fn stateless(ctx: &CallContext<'_>) -> bool {
    declares_version(ctx.meta)
}

/// Whether `_meta` names the request's protocol version (2026-07-28 and later): what
/// `RequestMetaObject::protocol_version().is_some()` says (any string is a version to rmcp),
/// without decoding the version into a new string each time it is asked.
pub(crate) fn declares_version(meta: &rmcp::model::RequestMetaObject) -> bool {
    meta.get(crate::transport::rules::META_PROTOCOL_VERSION)
        .is_some_and(serde_json::Value::is_string)
}

// === impl McpHandler ===

impl McpHandler {
    /// A handler over the edge's state.
    pub fn new(state: Arc<EdgeState>) -> McpHandler {
        McpHandler { state }
    }

    async fn registry(
        &self,
        identity: &Identity,
        ctx: &CallContext<'_>,
    ) -> Result<Arc<Registry>, Error> {
        // Exported spans only (see `identity.lookup`); otherwise the lookup runs in the
        // request's span.
        let span = if tp_telemetry::trace::exporting() {
            tracing::info_span!(
                parent: &request_span(ctx),
                "registry.lookup",
                tenant = %identity.tenant,
                role = %identity.role,
            )
        } else {
            request_span(ctx)
        };
        self.state
            .caches
            .registry(&identity.tenant, &identity.role)
            .instrument(span)
            .await
            .map_err(lookup_error)
            .map(|registry| match &identity.providers {
                // A token whose scopes name providers sees only theirs (ADR 0015, phase 3).
                Some(providers) => registry.narrowed_to(providers),
                None => registry,
            })
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder().enable_logging().enable_tools().enable_tool_list_changed().build(),
        )
        .with_server_info(Implementation::new("toolplane-edge", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Tools are scoped to your tenant and role. Polymorphic tools take an `action` argument; \
             only the actions listed in their schema are available to you.",
        )
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }
}

impl McpHandler {
    /// `tools/call`, whichever transport serves it.
    pub async fn tools_call(
        &self,
        request: CallToolRequestParams,
        ctx: &CallContext<'_>,
    ) -> Result<CallToolResponse, Error> {
        let identity = caller(ctx)?;
        let registry = self.registry(&identity, ctx).await?;
        // The call's work is boxed: rmcp moves this future into a task of its own, and a call's
        // state machine (the executor hop, relays, retries) is tens of KiB to copy.
        let retry = Retry {
            input_responses: request.input_responses,
            request_state: request.request_state,
        };
        let result = match MetaTool::parse(&request.name) {
            Some(meta) => {
                Box::pin(self.meta_tool(&identity, &registry, meta, request.arguments, retry, ctx))
                    .await
            }
            None => {
                // SEP-2243 headers mirror the arguments of the tool named in the request, so
                // they are checked here, not for tools reached through `dispatch`.
                if stateless(ctx)
                    && let (Some(tool), Some(parts)) = (registry.tool(&request.name), ctx.parts)
                    && let Err(reason) = params::check(
                        &tool.resolved.input_schema,
                        request.arguments.as_ref(),
                        &parts.headers,
                    )
                {
                    return Err(Error::new(Fault::HeaderMismatch, reason));
                }
                Box::pin(self.call(
                    &identity,
                    &registry,
                    &request.name,
                    request.arguments,
                    retry,
                    ctx,
                ))
                .await
            }
        };
        let outcome = match &result {
            Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => "tool_error",
            Ok(CallToolResponse::Complete(_)) => "ok",
            Ok(_) => "input_required",
            Err(_) => "rejected",
        };
        count_request("tools/call", &identity.tenant, outcome, None);
        if let Some(log) = access_log(ctx) {
            match &result {
                Err(error) => log.outcome(format!("error {}", error.jsonrpc_code(false))),
                Ok(_) => log.outcome(outcome),
            }
        }
        result
    }
}

impl McpHandler {
    /// `tools/list`, whichever transport serves it: one page of the caller's listing.
    pub async fn tools_list(
        &self,
        cursor: Option<&str>,
        ctx: &CallContext<'_>,
    ) -> Result<ListToolsResult, Error> {
        let started = Instant::now();
        let identity = caller(ctx)?;
        let registry = self.registry(&identity, ctx).await?;
        // Full or progressive (ADR 0006): the listing is built once per registry, and cut by
        // the one paginator (crate::transport::pages).
        let listing = &registry.listing;
        let start = match cursor {
            Some(cursor) => crate::transport::pages::start_after(listing, cursor)
                .ok_or_else(|| Error::new(Fault::InvalidParams, "invalid cursor"))?,
            None => 0,
        };
        let generation = if stateless(ctx) {
            crate::transport::pages::Generation::Stateless
        } else {
            crate::transport::pages::Generation::Legacy
        };
        let (result, _) =
            crate::transport::pages::page(listing, start, self.state.config.mcp.paging, generation);
        count_request("tools/list", &identity.tenant, "ok", Some(started));
        if let Some(log) = access_log(ctx) {
            log.outcome("ok");
        }
        Ok(result)
    }
}

/// Each change that altered what `caller` lists — its tenant's settings, the catalogue, or
/// notices lost to lag — until the edge starts shutting down. What `subscriptions/listen`
/// streams, whichever transport serves it. A change elsewhere in the catalogue (a tool this
/// caller cannot see registered, say, or one of a provider its token's scopes leave out) is
/// not announced: it would tell the caller that something it cannot see exists. With the caller's `key`, the stream also ends when a change
/// revokes it.
pub fn list_changes(
    state: Arc<EdgeState>,
    caller: &crate::cache::Identity,
    key: Option<String>,
) -> impl futures::Stream<Item = ()> + Send + 'static {
    let notices = state.notices.subscribe();
    let seer = Seer {
        tenant: caller.tenant.clone(),
        role: caller.role.clone(),
        providers: caller.providers.clone(),
    };
    futures::stream::unfold(
        (notices, state, seer, key, None),
        |(mut notices, state, seer, key, mut seen)| async move {
            if seen.is_none() {
                seen = Some(listing_of(&state, &seer).await);
            }
            loop {
                let notice = tokio::select! {
                    () = state.shutdown.cancelled() => return None,
                    notice = notices.recv() => notice,
                };
                let relevant = match notice {
                    Ok(notice) => notice.all || notice.tenants.contains(&seer.tenant),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => true,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                };
                if let Some(key) = &key
                    && matches!(
                        state.caches.identity(key).await,
                        Err(crate::cache::LookupError::Unauthenticated
                            | crate::cache::LookupError::NotFound)
                    )
                {
                    return None;
                }
                if relevant && listing_changed(&state, &seer, &mut seen).await {
                    return Some(((), (notices, state, seer, key, seen)));
                }
            }
        },
    )
}

/// Whose listing a change stream follows: a tenant and role, narrowed to some providers when
/// the caller's token scopes name them.
struct Seer {
    tenant: String,
    role: String,
    providers: Option<Vec<String>>,
}

/// The listing digest of the registry `seer` sees; `None` when it cannot be loaded.
async fn listing_of(state: &EdgeState, seer: &Seer) -> Option<[u8; 32]> {
    let registry = state.caches.registry(&seer.tenant, &seer.role).await.ok()?;
    Some(match &seer.providers {
        Some(providers) => registry.narrowed_to(providers).listing_digest,
        None => registry.listing_digest,
    })
}

/// Whether (`tenant`, `role`)'s listing differs from `seen` (which it then becomes). A
/// registry that cannot be loaded counts as changed: the client lists again and learns why.
async fn listing_changed(
    state: &EdgeState,
    seer: &Seer,
    seen: &mut Option<Option<[u8; 32]>>,
) -> bool {
    let now = listing_of(state, seer).await;
    let changed = now.is_none() || seen.is_none_or(|before| before != now);
    *seen = Some(now);
    changed
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_declared_version_is_what_rmcp_reads_as_one() {
        for meta in [
            serde_json::json!({}),
            serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
            serde_json::json!({"io.modelcontextprotocol/protocolVersion": "not-a-date"}),
            serde_json::json!({"io.modelcontextprotocol/protocolVersion": 20260728}),
            serde_json::json!({"io.modelcontextprotocol/protocolVersion": null}),
            serde_json::json!({"io.modelcontextprotocol/protocolversion": "2026-07-28"}),
        ] {
            let meta: rmcp::model::RequestMetaObject =
                serde_json::from_value(meta.clone()).expect("a _meta object");
            assert_eq!(
                super::declares_version(&meta),
                meta.protocol_version().is_some(),
                "{meta:?}"
            );
        }
    }
}
