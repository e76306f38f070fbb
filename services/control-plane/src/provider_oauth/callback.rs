//! The OAuth callback listener: `GET /connections/callback`, where providers send the browser
//! back with a code (or an error), and `GET /healthz`.
//!
//! Its pages say what happened in plain words, carry nothing secret, and are never cached or
//! passed on as a referrer (the URL held a code).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::{CallbackError, Connector};

/// Longest query string taken (a code and a state are far shorter).
const MAX_QUERY: usize = 8 * 1024;

/// Most characters of a provider's `error_description` logged.
const MAX_DESCRIPTION: usize = 200;

/// How long a callback may take (the code exchange's own timeout is shorter).
const COMPLETE_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// An OAuth error code (RFC 6749 4.1.2.1: `access_denied`, …): short, lower-case words.
pub(super) fn is_error_code(text: &str) -> bool {
    (1..=64).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// `text` cut to `max` characters (an ellipsis says so).
fn shortened(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Serves the callback on `connector`'s listener until `stopping`; its address.
pub async fn serve(
    connector: Arc<Connector>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<SocketAddr> {
    let listen = connector.config().callback_listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding connections.callback_listen {listen}"))?;
    let addr = listener.local_addr()?;
    let router = axum::Router::new()
        .route("/connections/callback", get(callback))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(tower::limit::ConcurrencyLimitLayer::new(64))
        .with_state(connector);
    tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        };
        if let Err(error) = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(%error, "the OAuth callback listener stopped");
        }
    });
    tracing::info!(%addr, "OAuth callback on /connections/callback");
    Ok(addr)
}

async fn callback(
    State(connector): State<Arc<Connector>>,
    uri: http::Uri,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    if uri.query().is_some_and(|q| q.len() > MAX_QUERY) {
        return page(
            CallbackError::bad("The request is too long.").status(),
            "Not connected",
            "The request is too long.",
        );
    }
    if let Some(error) = params.get("error") {
        return refused_by_provider(&connector, error, &params).await;
    }
    let (Some(code), Some(state)) = (params.get("code"), params.get("state")) else {
        let message = "This address is where a provider sends you back after you authorize Toolplane; it needs the provider's code and state.";
        return page(
            CallbackError::bad(message).status(),
            "Not connected",
            message,
        );
    };
    let completed = tokio::time::timeout(COMPLETE_WITHIN, connector.complete(code, state)).await;
    let Ok(completed) = completed else {
        let message = "The provider took too long to answer: start again in a moment.";
        return page(
            CallbackError::provider(message).status(),
            "Not connected",
            message,
        );
    };
    match completed {
        Ok(connection) => page(
            http::StatusCode::OK,
            "Connected",
            &match &connection.user {
                None => format!(
                    "Tenant {} is connected to {}. Its tools appear to the tenant's agents within seconds. You can close this window.",
                    connection.tenant, connection.provider
                ),
                Some(user) => format!(
                    "{user} of tenant {} is connected to {}: their calls to its tools now act as this account. You can close this window.",
                    connection.tenant, connection.provider
                ),
            },
        ),
        Err(error) => page(error.status(), "Not connected", &error.message),
    }
}

/// The page for a provider's refusal (`?error=…`). Anyone can send a browser here with words
/// of their choosing, so the page repeats only a well-formed OAuth error code; the provider's
/// description goes to the log.
async fn refused_by_provider(
    connector: &Connector,
    error: &str,
    params: &HashMap<String, String>,
) -> Response {
    let error = if is_error_code(error) {
        error
    } else {
        "an unnamed error"
    };
    let ours = match params.get("state") {
        Some(state) => connector.open_state(state).await.is_ok(),
        None => false,
    };
    if ours {
        let description = params.get("error_description").map_or("", String::as_str);
        tracing::info!(error, description = %shortened(description, MAX_DESCRIPTION), "a provider refused an OAuth connection");
    }
    let message = format!("The provider did not authorize the connection: {error}.");
    page(
        CallbackError::bad(&message).status(),
        "Not connected",
        &message,
    )
}

/// A small HTML page, escaped, uncached, without referrer.
fn page(status: http::StatusCode, title: &str, message: &str) -> Response {
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title} — Toolplane</title></head>\n<body><h1>{title}</h1>\n<p>{}</p></body></html>\n",
        escape(message)
    );
    (
        status,
        [
            (http::header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (http::header::CACHE_CONTROL, "no-store"),
            (http::header::REFERRER_POLICY, "no-referrer"),
            (http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                http::header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; frame-ancestors 'none'",
            ),
        ],
        body,
    )
        .into_response()
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_error_codes_and_short_descriptions_are_repeated() {
        assert!(is_error_code("access_denied"));
        assert!(!is_error_code("Visit evil.example to continue"));
        assert!(!is_error_code(""));
        assert_eq!(shortened("abcdef", 3), "abc…");
        assert_eq!(shortened("abc", 3), "abc");
        assert_eq!(shortened("ééé", 2), "éé…");
    }

    #[test]
    fn pages_escape_what_they_repeat() {
        assert_eq!(
            escape("<script>alert('x')</script>&"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;"
        );
    }
}
