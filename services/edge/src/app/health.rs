//! `/healthz`, `/readyz` and `/metrics`.

use super::*;

pub(super) async fn healthz() -> &'static str {
    "ok"
}

pub(super) async fn readyz(State(state): State<Arc<EdgeState>>) -> Response {
    let synced = state.versions.synced();
    let control_plane = state.directory.reachable();
    let redis = state.shared.as_ref().map(|s| s.healthy());
    let (registries, identities) = state.caches.sizes();
    // Ready when a registry can be served from somewhere: the control plane, or Redis.
    // Not when leaving the fleet (SIGTERM): balancers must stop sending first.
    let stopping = state.unready.is_cancelled();
    let ready = !stopping && (control_plane || redis == Some(true) || registries > 0);
    let degraded = !synced || redis == Some(false);
    let body = json!({
        "ready": ready,
        "stopping": stopping,
        "degraded": degraded,
        "control_plane": { "reachable": control_plane, "watch_synced": synced, "revision": state.versions.head() },
        "redis": match redis { None => "not configured", Some(true) => "up", Some(false) => "down" },
        "cache": { "registries": registries, "identities": identities },
    });
    if ready {
        Json(body).into_response()
    } else {
        Error::new(Fault::Unavailable, "not ready")
            .with_data(body)
            .into_response()
    }
}

pub(super) async fn metrics_route(State(state): State<Arc<EdgeState>>) -> Response {
    match &state.metrics {
        Some(handle) => {
            let (registries, identities) = state.caches.sizes();
            metrics::gauge!("tp_edge_l1_registries").set(registries as f64);
            metrics::gauge!("tp_edge_l1_identities").set(identities as f64);
            (
                [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                handle.render(),
            )
                .into_response()
        }
        None => Error::new(Fault::Unavailable, "metrics recorder not installed").into_response(),
    }
}
