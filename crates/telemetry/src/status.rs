//! The one error answer this crate's HTTP listener makes.

/// `GET /metrics` before a recorder is installed: 503 with a sentence (a scrape must fail,
/// not read an empty exposition).
pub(crate) fn recorder_missing() -> axum::response::Response {
    use axum::response::IntoResponse as _;
    (
        http::StatusCode::SERVICE_UNAVAILABLE,
        [(http::header::CONTENT_TYPE, "text/plain")],
        "metrics recorder not installed\n",
    )
        .into_response()
}
