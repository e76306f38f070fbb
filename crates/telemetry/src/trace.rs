//! OpenTelemetry traces: spans exported over OTLP/gRPC when the standard `OTEL_*` variables ask
//! for it, and the W3C trace context (`traceparent`, `tracestate`) carried across every hop —
//! into gRPC metadata on the way out ([`inject`], which the control-plane clients' bearer
//! interceptor calls), out of HTTP headers and gRPC metadata on the way in ([`GrpcTraceLayer`]
//! for gRPC servers, [`set_parent`] for the edge's HTTP requests).
//!
//! Export is on when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is
//! set, unless `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. The exporter reads the
//! rest of the standard variables itself (`OTEL_EXPORTER_OTLP_HEADERS`, `…_TIMEOUT`,
//! `OTEL_BSP_SCHEDULE_DELAY`, …); `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` name the
//! process (default: the binary's own name). Without export, nothing is propagated: the spans
//! carry no OpenTelemetry context to pass on.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Whether the environment asks for OTLP trace export.
pub fn export_requested() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
        || std::env::var("OTEL_TRACES_EXPORTER").is_ok_and(|v| v.eq_ignore_ascii_case("none"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

static EXPORTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether health checks (`/healthz`, `/readyz`) get spans: only when
/// `TOOLPLANE_TRACE_HEALTH_CHECKS=true` (a balancer's probes are otherwise noise in a trace).
pub fn health_checks_traced() -> bool {
    static ASKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ASKED.get_or_init(|| {
        std::env::var("TOOLPLANE_TRACE_HEALTH_CHECKS")
            .is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
    })
}

/// A short, stable fingerprint of an identifier that is not copied into traces as it is (a
/// sealed session id): 16 hex digits of FNV-1a over its bytes, enough to tell sessions apart.
pub fn fingerprint(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Whether this process exports spans (set by `init`). A span nothing exports and no event
/// falls in is work without a reader: the edge opens a request's span only when it is
/// exported or the request goes where events are written.
pub fn exporting() -> bool {
    EXPORTING.load(std::sync::atomic::Ordering::Relaxed)
}

pub(crate) fn set_exporting(on: bool) {
    EXPORTING.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// The tracer provider of an exporting process; flushes what is buffered when dropped.
#[derive(Debug)]
pub struct Exporting(SdkTracerProvider);

impl Drop for Exporting {
    fn drop(&mut self) {
        if let Err(error) = self.0.shutdown() {
            eprintln!("flushing spans at exit failed: {error}");
        }
    }
}

/// The OTLP exporter and the tracing layer that feeds it, for `service`, or `None` when the
/// environment does not ask for export (or it cannot be set up: said on stderr). Must run
/// inside a Tokio runtime (the gRPC exporter's client lives on it).
pub(crate) fn otlp<S>(
    service: &str,
) -> Option<(
    tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
    Exporting,
)>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    if !export_requested() {
        return None;
    }
    if tokio::runtime::Handle::try_current().is_err() {
        eprintln!("OTEL_EXPORTER_OTLP_ENDPOINT is set but there is no runtime to export on");
        return None;
    }
    use opentelemetry_otlp::WithTonicConfig as _;
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    match otlp_tls() {
        Ok(Some(tls)) => builder = builder.with_tls_config(tls),
        Ok(None) => {}
        Err(error) => {
            eprintln!("OTLP trace export is off: {error}");
            return None;
        }
    }
    let exporter = match builder.build() {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("OTLP trace export is off: {error}");
            return None;
        }
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name(service.to_owned());
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let tracer = provider.tracer("toolplane");
    let layer = tracing_opentelemetry::layer().with_tracer(tracer);
    Some((layer, Exporting(provider)))
}

/// TLS for an `https://` OTLP endpoint, from the standard variables: the CA in
/// `OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE` (else the system's roots), the client certificate
/// and key in `OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_CERTIFICATE` / `…_CLIENT_KEY` (mutual TLS).
/// `None` for an `http://` endpoint.
fn otlp_tls() -> Result<Option<tonic::transport::ClientTlsConfig>, String> {
    let var = |name: &str| {
        std::env::var(format!("OTEL_EXPORTER_OTLP_TRACES_{name}"))
            .or_else(|_| std::env::var(format!("OTEL_EXPORTER_OTLP_{name}")))
            .ok()
            .filter(|v| !v.trim().is_empty())
    };
    let Some(endpoint) = var("ENDPOINT") else {
        return Ok(None);
    };
    if !endpoint.trim().to_ascii_lowercase().starts_with("https://") {
        return Ok(None);
    }
    let read = |name: &str, path: &str| {
        std::fs::read(path).map_err(|e| format!("OTEL_EXPORTER_OTLP_{name} {path}: {e}"))
    };
    let mut tls = tonic::transport::ClientTlsConfig::new();
    tls = match var("CERTIFICATE") {
        Some(path) => tls.ca_certificate(tonic::transport::Certificate::from_pem(read(
            "CERTIFICATE",
            &path,
        )?)),
        None => tls.with_native_roots(),
    };
    match (var("CLIENT_CERTIFICATE"), var("CLIENT_KEY")) {
        (None, None) => {}
        (Some(cert), Some(key)) => {
            tls = tls.identity(tonic::transport::Identity::from_pem(
                read("CLIENT_CERTIFICATE", &cert)?,
                read("CLIENT_KEY", &key)?,
            ));
        }
        _ => {
            return Err(
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY: set both, or neither"
                    .into(),
            );
        }
    }
    Ok(Some(tls))
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            value.parse(),
        ) {
            self.0.insert(key, value);
        }
    }
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Puts the current span's trace context into outgoing gRPC metadata (nothing when no span
/// is being exported).
pub fn inject(metadata: &mut tonic::metadata::MetadataMap) {
    let context = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&context, &mut MetadataInjector(metadata));
}

/// The current span's trace context as W3C fields (`traceparent`, and `tracestate` when there
/// is one); empty when no span is being exported. For carriers other than gRPC metadata, such
/// as an MCP request's `_meta`.
pub fn current_context() -> Vec<(String, String)> {
    let context = tracing::Span::current().context();
    let mut fields = std::collections::HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut fields);
    let mut fields: Vec<(String, String)> = fields.into_iter().collect();
    fields.sort();
    fields
}

/// Makes `span` a child of the trace context in `headers` (`traceparent`), if there is one.
pub fn set_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    static TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");
    if headers.contains_key(&TRACEPARENT) {
        let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
        let _ = span.set_parent(parent);
    }
}

/// A span per gRPC call (`grpc.server` with the method), child of the caller's trace context.
#[derive(Debug, Clone, Copy)]
pub struct GrpcTraceLayer {
    server: &'static str,
}

impl GrpcTraceLayer {
    /// A layer for the server called `server` in the spans.
    pub fn new(server: &'static str) -> GrpcTraceLayer {
        GrpcTraceLayer { server }
    }
}

impl<S> tower::Layer<S> for GrpcTraceLayer {
    type Service = GrpcTrace<S>;

    fn layer(&self, inner: S) -> GrpcTrace<S> {
        GrpcTrace {
            inner,
            server: self.server,
        }
    }
}

/// The service [`GrpcTraceLayer`] makes.
#[derive(Debug, Clone)]
pub struct GrpcTrace<S> {
    inner: S,
    server: &'static str,
}

impl<S, B, R> tower::Service<http::Request<B>> for GrpcTrace<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<TracedBody<R>>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn Future<Output = Result<http::Response<TracedBody<R>>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let path = request.uri().path().to_owned();
        // Health checks and reflection are noise in a trace.
        if path.starts_with("/grpc.") {
            let answer = self.inner.call(request);
            return Box::pin(async move {
                answer
                    .await
                    .map(|response| response.map(TracedBody::untraced))
            });
        }
        // OpenTelemetry's RPC conventions: rpc.system, rpc.service, rpc.method, and the span
        // named `service/method`; the status code once the call has answered.
        let full = path.trim_start_matches('/');
        let (service, method) = full.split_once('/').unwrap_or((full, ""));
        let span = tracing::info_span!(
            "grpc.server",
            otel.name = %full,
            otel.kind = "server",
            server = self.server,
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %method,
            rpc.grpc.status_code = tracing::field::Empty,
        );
        set_parent(&span, request.headers());
        let answer = {
            let _entered = span.enter();
            self.inner.call(request)
        };
        let held = span.clone();
        Box::pin(
            async move {
                let response = answer.await?;
                // Unary answers carry their status in the headers; streams in the trailers,
                // which the span then outlives (it ends with the body).
                if let Some(code) = response
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<i64>().ok())
                {
                    held.record("rpc.grpc.status_code", code);
                }
                Ok(response.map(|body| TracedBody::new(body, held)))
            }
            .instrument(span),
        )
    }
}

/// A response body that keeps its call's span open until it has been sent in full: a
/// server-streaming call's span ends after its last message, not when its headers leave
/// (the work behind the stream is its child, and a child must not outlive its parent).
#[derive(Debug)]
pub struct TracedBody<B> {
    inner: B,
    span: Option<tracing::Span>,
}

impl<B> TracedBody<B> {
    fn new(inner: B, span: tracing::Span) -> TracedBody<B> {
        TracedBody {
            inner,
            span: Some(span),
        }
    }

    fn untraced(inner: B) -> TracedBody<B> {
        TracedBody { inner, span: None }
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for TracedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        // Entered while the body is polled: a span's end is its last exit
        // (tracing-opentelemetry), so the call's span ends with its last frame.
        let entered = this.span.as_ref().map(tracing::Span::enter);
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        drop(entered);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let (Some(trailers), Some(span)) = (frame.trailers_ref(), &this.span)
            && let Some(code) = trailers
                .get("grpc-status")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<i64>().ok())
        {
            span.record("rpc.grpc.status_code", code);
        }
        if matches!(polled, Poll::Ready(None)) {
            this.span = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
