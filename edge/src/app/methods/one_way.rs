//! Notifications, responses to no question, and methods other than POST.

use super::*;

/// A request to `/mcp` with a method other than POST (and not a 2025-xx session's GET stream),
/// when the transport would not refuse its `Host` first (its `Origin` was checked before):
/// 405, `Allow: POST` (a stateless edge keeps no stream to resume and no session to delete).
pub(in crate::app) fn method_not_allowed(
    headers: &axum::http::HeaderMap,
    mcp: &crate::config::RawMcp,
) -> Option<Response> {
    if !crate::mcp::fast::host_allowed(headers, &mcp.allowed_hosts) {
        return None;
    }
    direct_requests(Method::NotAllowed).increment(1);
    Some(
        (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, HeaderValue::from_static("POST"))],
            "Method Not Allowed",
        )
            .into_response(),
    )
}

/// A notification (no id) or a response to no question of the edge's, as the transport would
/// take it: a notification is accepted (202) and dropped — a stateless edge has no session for
/// `notifications/initialized` or `notifications/cancelled` to act on — and a response is
/// refused (400: there is no request of this server's for it to answer).
pub(in crate::app) fn one_way(
    headers: &axum::http::HeaderMap,
    request: Option<&Call>,
    mcp: &crate::config::RawMcp,
) -> Option<Response> {
    match request {
        Some((id, method, params)) if id.is_null() => {
            crate::mcp::fast::eligible_for(headers, params.as_ref(), mcp, method, None)?;
            direct_requests(Method::Notification).increment(1);
            Some(StatusCode::ACCEPTED.into_response())
        }
        None => {
            let generation = crate::mcp::fast::eligible_for(headers, None, mcp, "", None)?;
            direct_requests(Method::Response).increment(1);
            let refusal = ServerJsonRpcMessage::error(
                rmcp::ErrorData::invalid_request(
                    "stateless server does not accept JSON-RPC responses",
                    None,
                ),
                None,
            );
            let mut response = json(&refusal, generation);
            *response.status_mut() = StatusCode::BAD_REQUEST;
            Some(response)
        }
        Some(_) => None,
    }
}
