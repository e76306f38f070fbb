//! Notifications, responses to no question, and methods other than POST.

use super::*;

/// A request to `/mcp` with a method other than POST (and not a 2025-xx session's GET
/// stream): 405, `Allow: POST` (a stateless edge keeps no stream to resume and no session to
/// delete).
pub(in crate::app) fn method_not_allowed() -> Response {
    direct_requests(Method::NotAllowed).increment(1);
    Error::new(Fault::MethodNotAllowed, "Method Not Allowed").into_response()
}

/// A notification is accepted (202). `notifications/cancelled` cancels the caller's own call
/// with that request id, on this edge or another ([`crate::transport::cancels`]); the others
/// (`notifications/initialized`, ...) need nothing of a stateless edge.
pub(super) async fn notification(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    method: &str,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Response {
    direct_requests(Method::Notification).increment(1);
    if method == "notifications/cancelled"
        && let Some(request_id) = params
            .and_then(|p| p.get("requestId"))
            .and_then(super::request_id)
        && let Some(key) = super::call::cancel_key(parts, &request_id)
    {
        state.cancels.cancel(&key).await;
    }
    StatusCode::ACCEPTED.into_response()
}

/// A response to no question of the edge's is refused (400: there is no request of this
/// server's for it to answer).
pub(super) fn stray_response() -> Response {
    direct_requests(Method::Response).increment(1);
    Error::invalid_request("stateless server does not accept JSON-RPC responses")
        .answer(&serde_json::Value::Null, Answering::Nothing)
}
