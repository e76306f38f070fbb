//! `subscriptions/listen` (2026-07-28).

use super::*;

/// The notifications a 2026-07-28 `subscriptions/listen` asks for; `Err` says why its params
/// do not fit.
pub(in crate::app) fn parse_listen(
    params: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<rmcp::model::SubscriptionFilter, String> {
    let params = params.ok_or("subscriptions/listen needs params {notifications}")?;
    <rmcp::model::SubscriptionsListenRequestParams as serde::Deserialize>::deserialize(params)
        .map(|params| params.notifications)
        .map_err(|e| e.to_string())
}

/// Serves one `subscriptions/listen` (2026-07-28): an SSE stream that opens with the
/// acknowledgement of what the edge accepted (of `notifications/tools/list_changed`, all it
/// offers), carries a `notifications/tools/list_changed` for every change that may alter the
/// caller's tools, and ends — with the subscription's result — when the edge shuts down (the
/// client subscribes again on another replica), after `mcp.max_stream_secs`, or when the
/// client leaves. A key or tenant at its stream limit is answered 429.
pub(in crate::app) fn serve_listen(
    state: &Arc<EdgeState>,
    parts: &axum::http::request::Parts,
    id: RequestId,
    requested: rmcp::model::SubscriptionFilter,
) -> Response {
    use rmcp::ServerHandler as _;
    use rmcp::model::{
        GetMeta as _, ServerNotification, SubscriptionsAcknowledgedNotification,
        SubscriptionsAcknowledgedNotificationParams, SubscriptionsListenResult,
        ToolListChangedNotification,
    };
    let Some(caller) = parts.extensions.get::<Caller>() else {
        return Error::new(
            Fault::Internal,
            "request reached the MCP handler unauthenticated",
        )
        .into_response();
    };
    direct_requests(Method::Listen).increment(1);
    // The stream holds a slot of its key's and its tenant's stream limits while it is open,
    // and ends (with its result) after mcp.max_stream_secs.
    let slot = match state.streams.open(&caller.0.tenant, &caller.0.key_id) {
        Ok(slot) => slot,
        Err(refusal) => {
            return Error::new(Fault::TooManyStreams, refusal.to_string()).into_response();
        }
    };
    let handler = McpHandler::new(Arc::clone(state));
    let info = handler.get_info();
    let candidate = handler
        .accepted_subscription_filter(&requested)
        .unwrap_or_default();
    let advertised = requested.supported_by(&info.capabilities);
    let accepted = requested.intersection(&candidate).intersection(&advertised);
    let subscription = id.clone();
    let tagged = move |mut notification: ServerNotification| {
        notification
            .get_meta_mut()
            .set_subscription_id(subscription.clone());
        ServerJsonRpcMessage::notification(notification)
    };
    let acknowledged = tagged(ServerNotification::SubscriptionsAcknowledgedNotification(
        SubscriptionsAcknowledgedNotification::new(
            SubscriptionsAcknowledgedNotificationParams::new(accepted.clone()),
        ),
    ));
    let changed = changed_lists(
        state,
        &caller.0,
        accepted.tools_list_changed == Some(true),
        bearer_key(&parts.headers),
    )
    .map(move |()| {
        tagged(ServerNotification::ToolListChangedNotification(
            ToolListChangedNotification {
                method: Default::default(),
                extensions: Default::default(),
            },
        ))
    });
    let mut result = SubscriptionsListenResult::complete(id.clone());
    result.meta.set_server_info(info.server_info);
    let completed = shape(
        Ok(ServerResult::SubscriptionsListenResult(result)),
        id,
        Generation::Stateless,
    );
    let stream = futures::stream::iter([acknowledged])
        .chain(changed)
        .chain(futures::stream::iter([completed.message]))
        .map(move |message| {
            let _held = &slot;
            message
        });
    crate::transport::sse::response(stream, None, state.abort.clone())
}

/// One item per change to what the caller lists, while it subscribed to them (else none),
/// until `mcp.max_stream_secs` or the edge starts shutting down.
fn changed_lists(
    state: &Arc<EdgeState>,
    caller: &crate::cache::Identity,
    subscribed: bool,
    key: Option<String>,
) -> impl futures::Stream<Item = ()> + Send + 'static {
    let changes = if subscribed {
        crate::mcp::list_changes(Arc::clone(state), caller, key).boxed()
    } else {
        let stopping = state.shutdown.clone();
        futures::stream::once(async move { stopping.cancelled_owned().await })
            .filter_map(|()| async { None })
            .boxed()
    };
    changes.take_until(tokio::time::sleep(state.streams.lifetime))
}
