//! Prometheus metrics shared by every Toolplane process: one recorder per process (so
//! `toolplane up`, which hosts every component, exposes them all in one place), latencies
//! as histograms with the same buckets everywhere (so they aggregate across a fleet), a
//! tower layer that measures every gRPC call a server answers, and a small `/metrics`
//! listener for the processes that have no HTTP listener of their own.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Instant;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Bucket bounds (seconds) of every `*_seconds` histogram: 0.25 ms to 30 s.
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0,
];

/// How often histogram samples are folded into their buckets when nobody scrapes.
const UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The process-wide recorder, installed on first use; `None` if another recorder was
/// installed first (then nothing is recorded here).
pub fn prometheus() -> Option<PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            match PrometheusBuilder::new()
                // Histograms, not summaries: summaries cannot be aggregated across processes.
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &LATENCY_BUCKETS)
                .and_then(PrometheusBuilder::install_recorder)
            {
                Ok(handle) => {
                    // Histogram samples wait in the recorder until they are folded into the
                    // buckets, which rendering does: a process nobody scrapes grew by 8 bytes
                    // per sample (megabytes a second on a busy edge). Folded every 5 s here.
                    let upkeep = handle.clone();
                    let _ = std::thread::Builder::new()
                        .name("tp-metrics-upkeep".into())
                        .spawn(move || {
                            loop {
                                std::thread::sleep(UPKEEP_INTERVAL);
                                upkeep.run_upkeep();
                            }
                        });
                    Some(handle)
                }
                Err(error) => {
                    tracing::warn!(%error, "metrics recorder not installed");
                    None
                }
            }
        })
        .clone()
}

/// The name of a gRPC status code, as Prometheus labels and logs spell it.
pub fn grpc_code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

/// Measures every gRPC call a server answers: `tp_grpc_server_requests_total` and
/// `tp_grpc_server_request_duration_seconds` (a histogram), labelled with the server
/// (`control_plane`, `wiki`, ...), the method and the status code. The time is to the response
/// head, which for unary calls is the whole call and for streams their start; a call whose
/// status travels in trailers (a success, or a stream's end) counts as `OK` at its head. Paths
/// that name no method (answered `UNIMPLEMENTED`) are labelled `unknown`, so a client cannot
/// grow the label set.
#[derive(Debug, Clone, Copy)]
pub struct GrpcMetricsLayer {
    server: &'static str,
}

impl GrpcMetricsLayer {
    /// A layer for the server called `server` in the labels.
    pub fn new(server: &'static str) -> GrpcMetricsLayer {
        GrpcMetricsLayer { server }
    }
}

impl<S> tower::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> GrpcMetrics<S> {
        GrpcMetrics {
            inner,
            server: self.server,
        }
    }
}

/// The service [`GrpcMetricsLayer`] makes.
#[derive(Debug, Clone)]
pub struct GrpcMetrics<S> {
    inner: S,
    server: &'static str,
}

impl<S, B, R> tower::Service<http::Request<B>> for GrpcMetrics<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    R: 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.uri().path().to_owned();
        let server = self.server;
        let started = Instant::now();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let result = answer.await;
            let code = match &result {
                Ok(response) => response
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<i32>().ok())
                    .unwrap_or(0),
                Err(_) => 2,
            };
            let method = if code == 12 {
                "unknown".to_owned()
            } else {
                method
            };
            let code = grpc_code_name(code);
            metrics::counter!("tp_grpc_server_requests_total",
                "server" => server, "method" => method.clone(), "code" => code)
            .increment(1);
            metrics::histogram!("tp_grpc_server_request_duration_seconds",
                "server" => server, "method" => method, "code" => code)
            .record(started.elapsed().as_secs_f64());
            result
        })
    }
}

/// Serves `GET /metrics` (Prometheus text) and `GET /healthz` on `listener` until `shutdown`
/// resolves, for processes whose own listener speaks gRPC only.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::routing::get;
    let handle = prometheus();
    let router = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let handle = handle.clone();
                async move {
                    use axum::response::IntoResponse as _;
                    match handle {
                        Some(handle) => (
                            [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                            handle.render(),
                        )
                            .into_response(),
                        None => crate::status::recorder_missing(),
                    }
                }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }));
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls a measured service answering `status` (in the head) at `path`; the exposition.
    fn measure(calls: &[(&str, Option<&str>)]) -> String {
        use tower::{Layer as _, ServiceExt as _};
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &LATENCY_BUCKETS)
            .unwrap()
            .build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            for (path, status) in calls {
                let status = status.map(str::to_owned);
                let service = GrpcMetricsLayer::new("test").layer(tower::service_fn(
                    move |_: http::Request<()>| {
                        let status = status.clone();
                        async move {
                            let mut response = http::Response::new(());
                            if let Some(status) = status {
                                response
                                    .headers_mut()
                                    .insert("grpc-status", status.parse().unwrap());
                            }
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    },
                ));
                let request = http::Request::builder().uri(*path).body(()).unwrap();
                runtime.block_on(service.oneshot(request)).unwrap();
            }
        });
        handle.render()
    }

    #[test]
    fn calls_are_counted_by_method_and_code_and_unknown_paths_share_one_label() {
        let text = measure(&[
            ("/toolplane.v1.Catalog/ListTools", None),
            ("/toolplane.v1.Catalog/GetTool", Some("5")),
            ("/random/path-one", Some("12")),
            ("/random/path-two", Some("12")),
        ]);
        for line in [
            r#"tp_grpc_server_requests_total{server="test",method="/toolplane.v1.Catalog/ListTools",code="OK"} 1"#,
            r#"tp_grpc_server_requests_total{server="test",method="/toolplane.v1.Catalog/GetTool",code="NOT_FOUND"} 1"#,
            r#"tp_grpc_server_requests_total{server="test",method="unknown",code="UNIMPLEMENTED"} 2"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains("random"), "{text}");
        assert!(
            text.contains(r#"tp_grpc_server_request_duration_seconds_bucket{server="test",method="/toolplane.v1.Catalog/ListTools",code="OK",le="0.00025"}"#),
            "{text}"
        );
    }

    #[test]
    fn every_grpc_code_has_its_name() {
        let names: Vec<&str> = (0..=16).map(grpc_code_name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 17, "{names:?}");
        assert_eq!(grpc_code_name(16), "UNAUTHENTICATED");
        assert_eq!(grpc_code_name(99), "UNKNOWN");
    }
}
