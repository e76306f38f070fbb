//! The edge's HTTP service. [`EdgeService`] is the one stack every `/mcp` request goes
//! through: the access log (and the request's span: opened with the request when spans are
//! exported, else once a request goes past a warm answer), the Host and Origin checks, load
//! shedding, the in-flight byte budget and the request timeout; then the request's stages
//! ([`super::pipeline`]). Everything else (health checks, the protected-resource metadata)
//! goes to the [`router`].

use super::*;
use crate::transport::heads::Heads;

/// The edge's router for everything but `/mcp` (which [`EdgeService`] serves itself): health
/// checks and the protected-resource metadata.
pub fn router(state: Arc<EdgeState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/{*path}",
            get(protected_resource),
        )
        .with_state(state)
}

/// RFC 9728 metadata, when OAuth is on: at the path the resource URL implies, and at the root
/// (clients that probe the host first).
async fn protected_resource(State(state): State<Arc<EdgeState>>, uri: axum::http::Uri) -> Response {
    match &state.config.oauth {
        Some(oauth)
            if uri.path() == oauth.metadata_path
                || uri.path() == "/.well-known/oauth-protected-resource" =>
        {
            oauth.metadata()
        }
        _ => Error::new(Fault::NotFound, "no protected-resource metadata here").into_response(),
    }
}

/// The admin listener's router: `/metrics` (never on the MCP listener, which clients reach),
/// `/healthz` and `/readyz`.
pub fn admin_router(state: Arc<EdgeState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_route))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// What a shed request is told (with `Retry-After: 1`: see [`refuse`]).
pub(super) const OVERLOADED: &str = "edge overloaded; retry";

pub(super) fn overloaded() -> Response {
    Error::new(Fault::Overloaded, OVERLOADED).into_response()
}

/// The edge's HTTP service: the steps every `/mcp` request takes (see the module), then the
/// request's stages (`app/pipeline.rs`). Health checks and the protected-resource metadata
/// are never shed or timed out.
#[derive(Clone)]
pub struct EdgeService {
    state: Arc<EdgeState>,
    router: Router,
    limits: Arc<Limits>,
}

/// What bounds the requests one edge answers at a time.
struct Limits {
    /// Requests being answered (`mcp.max_in_flight`): one more is refused, not queued.
    requests: Arc<Semaphore>,
    /// Request-body bytes in flight, in KiB (`mcp.max_in_flight_bytes`).
    bytes: Arc<Semaphore>,
    /// How long a request may take to be answered (`mcp.request_timeout_ms`).
    timeout: Duration,
    /// The hosts the edge answers (`mcp.allowed_hosts`).
    hosts: crate::transport::hosts::AllowedHosts,
}

impl std::fmt::Debug for EdgeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeService").finish_non_exhaustive()
    }
}

/// The edge's service over `state` (see [`EdgeService`]).
pub fn service(state: Arc<EdgeState>) -> EdgeService {
    let kib = (state.config.mcp.max_in_flight_bytes / 1024).max(1);
    EdgeService {
        router: router(Arc::clone(&state)),
        limits: Arc::new(Limits {
            requests: Arc::new(Semaphore::new(state.config.mcp.max_in_flight)),
            bytes: Arc::new(Semaphore::new(kib)),
            timeout: state.config.request_timeout(),
            hosts: crate::transport::hosts::AllowedHosts::new(&state.config.mcp.allowed_hosts),
        }),
        state,
    }
}

pub(super) use crate::mcp::bounds::InFlightBytes;

/// Whether a request's `Origin` is allowed: none at all always is (non-browser clients); one
/// must be listed in `mcp.allowed_origins`, or — when that list is empty — be the edge's own
/// origin (its authority is the request's `Host`, which the Host check has allowed): a page of
/// another site can never make a browser call the edge.
pub(super) fn origin_allowed(heads: &Heads, allowed: &[String]) -> bool {
    let origin = match heads.origin.single() {
        Ok(None) => return true,
        Ok(Some(origin)) => origin,
        Err(()) => return false,
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if !allowed.is_empty() {
        return allowed.iter().any(|a| a == "*" || a == origin);
    }
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    let host = heads.host.first().and_then(|h| h.to_str().ok());
    matches!((authority, host), (Some(authority), Some(host)) if authority.eq_ignore_ascii_case(host))
}

/// The `Content-Length` a request declares, when it reads as a number (read once per request).
pub(super) fn declared_length(heads: &Heads) -> Option<u64> {
    heads
        .content_length
        .first()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// The KiB of the in-flight budget a request takes: its declared length, or the body limit
/// when it declares none (a streamed body may be that long).
pub(super) fn body_cost_kib(
    declared: Option<u64>,
    method: &axum::http::Method,
    max_body: usize,
) -> u32 {
    if *method == axum::http::Method::GET
        || *method == axum::http::Method::HEAD
        || *method == axum::http::Method::DELETE
    {
        return 0;
    }
    let length = declared.map_or(max_body as u64, |declared| declared.min(max_body as u64));
    u32::try_from(length.div_ceil(1024)).unwrap_or(u32::MAX)
}

/// The answer for a body that did not arrive in time.
pub(crate) fn body_timed_out() -> Response {
    Error::new(
        Fault::BodyTimedOut,
        "the request body did not arrive in time (http.body_read_timeout_ms)",
    )
    .into_response()
}

impl<B> tower::Service<Request<B>> for EdgeService
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        use futures::FutureExt as _;
        Box::pin(self.answer(request.map(Body::new)).map(Ok))
    }
}

/// What the edge's listener serves: [`EdgeService`], its answer's future kept inline in the
/// connection's in-flight slot instead of boxed per request ([`tp_net::Handler`]).
impl tp_net::Handler<Body> for EdgeService {
    fn handle(
        &self,
        request: tp_net::IncomingRequest,
    ) -> impl std::future::Future<Output = Response> + Send + use<> {
        self.answer(request.map(Body::new))
    }
}

impl EdgeService {
    /// The answer to one request (see [`EdgeService`]).
    pub(crate) fn answer(
        &self,
        request: Request,
    ) -> impl std::future::Future<Output = Response> + use<> {
        let state = Arc::clone(&self.state);
        let router = self.router.clone();
        let limits = Arc::clone(&self.limits);
        async move {
            let unready = state.unready.clone();
            // The headers every step reads, found in one pass; boxed, since the answer's
            // future is moved whole a few times per request (and held by every connection).
            let heads = Box::new(Heads::read(request.headers()));
            let heads = &*heads;
            // Outermost: every request is logged (crate::access), including refused ones and
            // those answered from precomputed pages.
            let mut response = crate::access::around(request, heads, move |request| {
                serve(state, router, limits, request, heads)
            })
            .await;
            // Leaving the fleet: the client (or the balancer) opens its next connection
            // elsewhere instead of reusing one this edge is about to close.
            if unready.is_cancelled() {
                response.headers_mut().insert(
                    header::CONNECTION,
                    axum::http::HeaderValue::from_static("close"),
                );
            }
            response
        }
    }
}

/// The checks every `/mcp` request passes before anything reads it: headers that do not
/// contradict themselves, an allowed `Host`, and no browser `Origin` the edge does not serve.
fn screen(
    request: &Request,
    heads: &Heads,
    limits: &Limits,
    state: &EdgeState,
) -> Result<(), Error> {
    // Headers that say two things at once (two Authorization headers: which one did a proxy
    // in front check?) are refused before anything reads them.
    if let Some(what) = crate::transport::hosts::contradiction(heads, request.uri()) {
        metrics::counter!("tp_edge_bad_headers_total").increment(1);
        return Err(Error::new(Fault::BadHeaders, what));
    }
    // DNS rebinding: only the hosts the edge is reached by (checked once, here, for every
    // path; an entry without a port allows any port).
    if !crate::transport::hosts::host_allowed(heads, request.uri(), &limits.hosts) {
        metrics::counter!("tp_edge_host_refused_total").increment(1);
        return Err(Error::new(
            Fault::ForbiddenOrigin,
            "Host not allowed: the edge answers only the hosts listed in mcp.allowed_hosts",
        ));
    }
    // Cross-site requests: a browser Origin must be listed.
    if !origin_allowed(heads, &state.config.mcp.allowed_origins) {
        metrics::counter!("tp_edge_origin_refused_total").increment(1);
        return Err(Error::new(
            Fault::ForbiddenOrigin,
            "Origin not allowed: only the edge's own origin or one listed in mcp.allowed_origins",
        ));
    }
    Ok(())
}

/// Everything [`EdgeService`] does inside the access log.
async fn serve(
    state: Arc<EdgeState>,
    router: Router,
    limits: Arc<Limits>,
    request: Request,
    heads: &Heads,
) -> Response {
    use tower::ServiceExt as _;
    use tracing::Instrument as _;
    let path = request.uri().path();
    if path != "/mcp" && !path.starts_with("/mcp/") {
        let span = crate::access::span_to_enter(request.extensions());
        return match Box::pin(router.oneshot(request).instrument(span)).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
    }
    if let Err(refused) = screen(&request, heads, &limits, &state) {
        return refused.into_response();
    }
    // A request holds its slot until it is answered or timed out.
    let Ok(_slot) = Arc::clone(&limits.requests).try_acquire_owned() else {
        metrics::counter!("tp_edge_shed_total").increment(1);
        return overloaded();
    };
    // Memory: the bytes of request bodies being read and processed are bounded as a
    // whole, not only the number of requests.
    let declared = declared_length(heads);
    let cost = body_cost_kib(declared, request.method(), state.config.mcp.max_body_bytes);
    let _budget = if cost == 0 {
        None
    } else {
        match Arc::clone(&limits.bytes).try_acquire_many_owned(cost) {
            Ok(permit) => Some(permit),
            Err(_) => {
                metrics::counter!("tp_edge_shed_total", "reason" => "bytes").increment(1);
                return overloaded();
            }
        }
    };
    let started = crate::access::of(request.extensions())
        .map_or_else(std::time::Instant::now, crate::access::AccessLog::started);
    let mut request = request;
    request
        .extensions_mut()
        .insert(InFlightBytes(Arc::clone(&limits.bytes)));
    let answer = serve_mcp_request(state, request, heads, declared);
    // The request timeout, from when the request arrived. An answer ready at the first poll
    // (a warm `tools/list` whose body came with its head) never arms the timer.
    let mut answer = std::pin::pin!(answer);
    if let std::task::Poll::Ready(response) = futures::poll!(answer.as_mut()) {
        return response;
    }
    let Some(deadline) = started.checked_add(limits.timeout) else {
        return answer.await;
    };
    match tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), answer).await {
        Ok(response) => response,
        Err(_) => Error::new(Fault::TimedOut, "request timed out").into_response(),
    }
}
