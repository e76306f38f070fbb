//! Bearer-key authentication of every `/mcp` request.

use super::*;

pub(super) fn unauthorized(description: &str) -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        Json(json!({ "error": "unauthorized", "error_description": description })),
    )
        .into_response();
    let challenge = format!(
        "Bearer realm=\"toolplane\", error=\"invalid_token\", error_description=\"{description}\""
    );
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// A 401, counted in `tp_edge_auth_refused_total` by reason (`missing`, `malformed`, `invalid`).
pub(super) fn refused(reason: &'static str, description: &str) -> Response {
    metrics::counter!("tp_edge_auth_refused_total", "reason" => reason).increment(1);
    unauthorized(description)
}

pub(super) async fn authenticate(
    State(state): State<Arc<EdgeState>>,
    mut request: Request<Body>,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().map(str::to_owned));
    let identity = match header {
        None => match &state.config.anonymous {
            Some((tenant, role)) => Arc::new(Identity {
                tenant: tenant.clone(),
                role: role.clone(),
                key_id: String::new(),
                expires_at: 0,
                revision: u64::MAX,
                confirmed_at_ms: 0,
            }),
            None => {
                return refused("missing", "missing Authorization: Bearer <api key>");
            }
        },
        Some(Err(_)) => {
            return refused("malformed", "the Authorization header is not valid text");
        }
        Some(Ok(value)) => {
            let Some(key) = value.strip_prefix("Bearer ").map(str::trim) else {
                return refused("malformed", "Authorization must be \"Bearer <api key>\"");
            };
            match state.caches.identity(key).await {
                Ok(identity) => identity,
                Err(LookupError::Unauthenticated | LookupError::NotFound) => {
                    return refused("invalid", "invalid, revoked or expired API key");
                }
                Err(LookupError::Unavailable(_)) => {
                    let mut response = json_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "cannot verify the API key right now; retry",
                    );
                    response
                        .headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
                    return response;
                }
            }
        }
    };
    let span = tracing::Span::current();
    span.record("tenant", identity.tenant.as_str());
    span.record("role", identity.role.as_str());
    if let Some(log) = crate::access::of(request.extensions()) {
        log.caller(&identity.tenant, &identity.role);
    }
    request.extensions_mut().insert(Caller(identity));
    next.run(request).await
}
