//! `tools/call`: JSON, or SSE when the call sends the client something first.

use super::*;

/// The params of a `tools/call`, typed; `Err` says why they do not fit. Each value is read
/// from its text once, into the typed request; the client's `arguments` and
/// `inputResponses` are then held to [`crate::mcp::bounds`] with `max_argument_bytes`.
pub(in crate::app) fn parse_call(
    params: Option<&Fields<'_>>,
    max_argument_bytes: usize,
) -> Result<CallToolRequestParams, String> {
    let params = params.ok_or("tools/call needs params {name, arguments}")?;
    let params: CallToolRequestParams = params
        .typed()
        .map_err(|e| crate::transport::envelope::reason(&e))?;
    if let Some(arguments) = &params.arguments {
        crate::mcp::bounds::check_object("arguments", arguments, max_argument_bytes)?;
    }
    if let Some(responses) = &params.input_responses {
        let responses = serde_json::to_value(responses).map_err(|e| e.to_string())?;
        crate::mcp::bounds::check("inputResponses", &responses, max_argument_bytes)?;
    }
    Ok(params)
}

/// Serves one `tools/call` (see the module).
pub(in crate::app) async fn serve_call(
    state: Arc<EdgeState>,
    mut parts: axum::http::request::Parts,
    id: RequestId,
    mut params: CallToolRequestParams,
    generation: Generation,
) -> Response {
    direct_requests(Method::Call).increment(1);
    let meta = params.meta.take().unwrap_or_default();
    let (sink, mut messages) = tokio::sync::mpsc::unbounded_channel();
    let handler = McpHandler::new(Arc::clone(&state));
    // Registered for notifications/cancelled while it runs; a cancelled call gets no answer.
    let running = cancel_key(&parts, &id).map(|key| state.cancels.register(key));
    if let Some(running) = &running {
        parts
            .extensions
            .insert(crate::transport::cancels::CallCancel(running.token.clone()));
    }
    let work = async move {
        let ctx = CallContext {
            parts: Some(&parts),
            meta: &meta,
            sink: Sink::Stream(sink),
        };
        let result = handler.tools_call(params, &ctx).await;
        let cancelled = running.as_ref().is_some_and(|r| r.token.is_cancelled());
        drop(running);
        (!cancelled).then(|| shape(result.map(ServerResult::from), id, generation))
    };
    let mut work = Box::pin(work);
    // What the call sends first decides the answer's form: its answer (JSON), or a message
    // before it (SSE). Messages already queued go first.
    let first = tokio::select! {
        biased;
        Some(message) = messages.recv() => message,
        answer = &mut work => match (answer, messages.try_recv()) {
            (Some(answer), Err(_)) => return json(answer),
            (answer, first) => {
                let rest = tokio_stream::wrappers::UnboundedReceiverStream::new(messages);
                let stream = futures::stream::iter(first.ok())
                    .chain(rest)
                    .chain(futures::stream::iter(answer.map(|a| a.message)));
                return crate::transport::sse::response(stream, None, state.abort.clone());
            }
        },
        () = state.abort.cancelled() => return Error::new(Fault::Unavailable, "the edge is shutting down").into_response(),
    };
    let (last, answered) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let _ = last.send(work.await);
    });
    let rest = tokio_stream::wrappers::UnboundedReceiverStream::new(messages);
    let stream = futures::stream::iter([first]).chain(rest).chain(
        futures::stream::once(answered)
            .filter_map(|answer| async move { answer.ok().flatten().map(|a| a.message) }),
    );
    crate::transport::sse::response(stream, Some(task.abort_handle()), state.abort.clone())
}

/// The key a client's `notifications/cancelled` names this call by (see
/// [`crate::transport::cancels`]); `None` without a caller.
pub(in crate::app) fn cancel_key(
    parts: &axum::http::request::Parts,
    id: &RequestId,
) -> Option<String> {
    let caller = parts.extensions.get::<crate::mcp::Caller>()?;
    let session = parts
        .headers
        .get(&crate::transport::session::SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let id = serde_json::to_value(id).ok()?;
    Some(crate::transport::cancels::key(
        &caller.0.tenant,
        &caller.0.key_id,
        session,
        &id,
    ))
}
