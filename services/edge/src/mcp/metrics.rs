//! Request metrics with bounded labels: tenants fall into 16 stable buckets.

use std::time::Instant;

const BUCKETS: [&str; 16] = [
    "b00", "b01", "b02", "b03", "b04", "b05", "b06", "b07", "b08", "b09", "b10", "b11", "b12",
    "b13", "b14", "b15",
];

/// One of 16 stable buckets for a tenant (metrics labels stay bounded in a large fleet).
fn tenant_bucket_index(tenant: &str) -> usize {
    let hash = tenant
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (hash % 16) as usize
}

/// Counts one answered MCP request, and for a `tools/list` the handler built (`started` is
/// when it began) its latency. A list served from precomputed pages passes `None`: looking a
/// page up is not worth two clock reads per request, and its whole time is in
/// `tp_edge_request_seconds{rpc="tools/list"}`.
pub(crate) fn count_request(
    method: &'static str,
    tenant: &str,
    outcome: &'static str,
    started: Option<Instant>,
) {
    let bucket = tenant_bucket_index(tenant);
    if method == "tools/list" && outcome == "ok" {
        // The hot paths: handles kept per bucket instead of looked up per request (a labelled
        // look-up cost a `tools/call` about 2 k instructions).
        let handles = list_metrics();
        handles.0[bucket].increment(1);
        if let Some(started) = started {
            handles.1.record(started.elapsed().as_secs_f64());
        }
        return;
    }
    if method == "tools/call"
        && let Some(at) = CALL_OUTCOMES.iter().position(|known| *known == outcome)
    {
        call_metrics()[at][bucket].increment(1);
        return;
    }
    ::metrics::counter!("tp_edge_mcp_requests_total", "method" => method, "tenant_bucket" => BUCKETS[bucket], "outcome" => outcome).increment(1);
    if let (Some(started), "tools/list") = (started, method) {
        ::metrics::histogram!("tp_edge_mcp_request_seconds", "method" => method)
            .record(started.elapsed().as_secs_f64());
    }
}

/// What a `tools/call` ends as, in `tp_edge_mcp_requests_total{outcome}`.
const CALL_OUTCOMES: [&str; 4] = ["ok", "tool_error", "input_required", "rejected"];

/// `tp_edge_mcp_requests_total{method="tools/call"}`, by outcome and tenant bucket.
fn call_metrics() -> &'static [[::metrics::Counter; 16]; 4] {
    static HANDLES: std::sync::OnceLock<[[::metrics::Counter; 16]; 4]> = std::sync::OnceLock::new();
    HANDLES.get_or_init(|| {
        std::array::from_fn(|outcome| {
            std::array::from_fn(|bucket| {
                ::metrics::counter!("tp_edge_mcp_requests_total", "method" => "tools/call", "tenant_bucket" => BUCKETS[bucket], "outcome" => CALL_OUTCOMES[outcome])
            })
        })
    })
}

type ListMetrics = ([::metrics::Counter; 16], ::metrics::Histogram);

fn list_metrics() -> &'static ListMetrics {
    static HANDLES: std::sync::OnceLock<ListMetrics> = std::sync::OnceLock::new();
    HANDLES.get_or_init(|| {
        (
            std::array::from_fn(|i| {
                ::metrics::counter!("tp_edge_mcp_requests_total", "method" => "tools/list", "tenant_bucket" => BUCKETS[i], "outcome" => "ok")
            }),
            ::metrics::histogram!("tp_edge_mcp_request_seconds", "method" => "tools/list"),
        )
    })
}
