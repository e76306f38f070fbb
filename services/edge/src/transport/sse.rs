//! The SSE answer of a POST whose request sends the client messages before its answer
//! (progress, log messages, questions): one `data:` event per JSON-RPC message, in order, the
//! answer last, a comment every 15 s to keep idle connections open. The stream ends with the
//! answer, when the edge aborts in-flight work, or when the client goes away (which aborts the
//! request's work: nobody is left to read its answer).

use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt as _};
use rmcp::model::ServerJsonRpcMessage;
use tokio_util::sync::CancellationToken;

/// Interval of the keep-alive comments.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The SSE response carrying `messages`; `work` (the task still producing them, if any) is
/// aborted when the client goes away, and the stream ends when `abort` is cancelled.
pub fn response(
    messages: impl Stream<Item = ServerJsonRpcMessage> + Send + 'static,
    work: Option<tokio::task::AbortHandle>,
    abort: CancellationToken,
) -> Response {
    let guard = work.map(AbortOnDrop);
    let events = messages
        .map(move |message| {
            let _owned = &guard;
            let data = serde_json::to_string(&message).unwrap_or_else(|error| {
                tracing::error!(%error, "a JSON-RPC message could not be serialised");
                String::new()
            });
            Ok::<_, std::convert::Infallible>(Event::default().data(data))
        })
        .take_until(abort.cancelled_owned());
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
