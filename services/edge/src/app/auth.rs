//! Bearer-key authentication of every `/mcp` request.

use super::*;
use tracing::Instrument as _;

/// A 401 whose challenge names the error (RFC 6750 `invalid_token`) unless the request
/// carried no credentials at all, and points at the protected-resource metadata when OAuth is
/// on (RFC 9728).
pub(super) fn unauthorized(
    oauth: Option<&crate::oauth::OAuth>,
    missing: bool,
    description: &str,
) -> Response {
    let error = if missing {
        "unauthorized"
    } else {
        "invalid_token"
    };
    let mut response = Error::new(Fault::Unauthenticated, error)
        .with_data(json!({ "error_description": description }))
        .into_response();
    let challenge = crate::oauth::challenge(oauth, (!missing).then_some(description));
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, challenge);
    response
}

/// A 401, counted in `tp_edge_auth_refused_total` by reason (`missing`, `malformed`, `invalid`).
pub(super) fn refused(state: &EdgeState, reason: &'static str, description: &str) -> Response {
    metrics::counter!("tp_edge_auth_refused_total", "reason" => reason).increment(1);
    unauthorized(
        state.config.oauth.as_ref(),
        reason == "missing",
        description,
    )
}

/// What a caller without credentials is told.
fn missing_credentials(state: &EdgeState) -> &'static str {
    if state.config.oauth.is_some() {
        "missing Authorization: Bearer <api key or access token>"
    } else {
        "missing Authorization: Bearer <api key>"
    }
}

/// Authenticates a `/mcp` request: its caller goes into the request's extensions, or the
/// answer is a refusal (401, or 503 when keys cannot be checked).
pub(super) async fn authenticate(
    state: &EdgeState,
    mut request: Request<Body>,
    heads: &crate::transport::heads::Heads,
) -> Result<Request<Body>, Response> {
    let header = heads.authorization.first().map(HeaderValue::to_str);
    let identity = match header {
        None => match &state.config.anonymous {
            Some((tenant, role)) => Arc::new(Identity::anonymous(tenant, role)),
            None => {
                return Err(refused(state, "missing", missing_credentials(state)));
            }
        },
        Some(Err(_)) => {
            return Err(refused(
                state,
                "malformed",
                "the Authorization header is not valid text",
            ));
        }
        Some(Ok(value)) => {
            let Some(key) = tp_proto::keys::bearer(value) else {
                return Err(refused(
                    state,
                    "malformed",
                    "Authorization must be \"Bearer <api key or access token>\"",
                ));
            };
            // The in-process cache first: a key it holds is answered with no I/O and no span.
            // Otherwise the lookup runs in a span of its own when spans are exported, else in
            // the request's (its events, a cache or control plane that cannot be reached,
            // carry the request id either way); it is boxed, so the warm request's future
            // stays small.
            let cached = state.caches.identity_l1(key).await;
            let identity = match cached {
                Some(identity) => Ok(identity),
                None => {
                    let lookup = if tp_telemetry::trace::exporting() {
                        tracing::info_span!("identity.lookup")
                    } else {
                        crate::access::span_to_enter(request.extensions())
                    };
                    Box::pin(state.caches.identity(key).instrument(lookup)).await
                }
            };
            match identity {
                Ok(identity) => identity,
                Err(LookupError::Unauthenticated | LookupError::NotFound) => {
                    return Err(refused(
                        state,
                        "invalid",
                        "invalid, revoked or expired API key or access token",
                    ));
                }
                Err(LookupError::Unavailable(_)) => {
                    return Err(Error::new(
                        Fault::Unavailable,
                        "cannot verify the API key right now; retry",
                    )
                    .retry_after(2)
                    .into_response());
                }
            }
        }
    };
    if let Some(log) = crate::access::of(request.extensions()) {
        log.caller(&identity);
    }
    request.extensions_mut().insert(Caller(identity));
    Ok(request)
}
