//! Everything a request needs, shared by all requests of an edge.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::broadcast;

use crate::audit::Audit;
use crate::cache::Caches;
use crate::config::EdgeConfig;
use crate::control::{ControlPlane, Directory};
use crate::forward::Executors;
use crate::limits::RateLimiter;
use crate::shared::Shared;
use crate::versions::Versions;
use crate::watch::{self, ChangeNotice};

/// Shared state of one edge.
#[derive(Debug)]
pub struct EdgeState {
    /// Configuration.
    pub config: EdgeConfig,
    /// The control plane, as the request path asks it (gRPC in production).
    pub directory: Arc<dyn Directory>,
    /// Revisions known from the watch.
    pub versions: Arc<Versions>,
    /// Tenants' provider credentials (memory only).
    pub credentials: crate::credentials::Credentials,
    /// Registries and identities.
    pub caches: Arc<Caches>,
    /// Redis, when configured.
    pub shared: Option<Arc<Shared>>,
    /// Per-tenant rate limits.
    pub limiter: RateLimiter,
    /// Executor clients.
    pub executors: Executors,
    /// Audit buffer.
    pub audit: Arc<Audit>,
    /// Change notices from the watch (for `subscriptions/listen`).
    pub notices: broadcast::Sender<ChangeNotice>,
    /// The Prometheus exposition.
    pub metrics: Option<PrometheusHandle>,
    /// Seals `requestState` of input-required results.
    pub seal: crate::transport::request_state::StateSeal,
    /// Calls in flight a client may cancel (`notifications/cancelled`).
    pub cancels: Arc<crate::transport::cancels::Cancels>,
    /// Questions put to 2025-xx clients mid-call, waiting for their answers.
    pub questions: Arc<crate::transport::questions::Questions>,
    /// Issues and opens the session ids of 2025-xx clients.
    pub sessions: crate::transport::session::SessionSeal,
    /// Long-lived streams open, per key and per tenant.
    pub streams: Arc<crate::transport::streams::Streams>,
    /// The embeddings ranker of tool search, when `[search] embeddings_url` is set.
    pub embedder: Option<Arc<crate::disclosure::Embedder>>,
    /// Cancelled at SIGTERM, before [`EdgeState::shutdown`]: `/readyz` answers 503 and every
    /// answer carries `Connection: close` while the edge still serves (`shutdown.grace_ms`),
    /// so that balancers stop sending to it before it stops listening.
    pub unready: tokio_util::sync::CancellationToken,
    /// Set by [`EdgeState::start`]: the audit sender (stopped after the drain, then
    /// [`Audit::finish`] delivers or spills what is left).
    pub(crate) audit_sender: std::sync::Mutex<Option<AuditSender>>,
    /// Cancelled when the edge starts shutting down: it stops accepting, and long-lived
    /// streams (subscriptions, legacy notification streams) end so the drain can finish.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Cancelled when the drain time is up: what is still running is abandoned. Requests in
    /// flight before that finish and are answered (a call whose work succeeded says so).
    pub abort: tokio_util::sync::CancellationToken,
}

/// The running audit sender: its task, the token that stops it, and the control plane it
/// delivers to.
#[derive(Debug)]
pub(crate) struct AuditSender {
    pub(crate) task: tokio::task::JoinHandle<()>,
    pub(crate) stop: tokio_util::sync::CancellationToken,
    pub(crate) control: Arc<ControlPlane>,
}

/// Installs the process-wide metrics recorder once ([`tp_telemetry::metrics::prometheus`]).
pub fn metrics_handle() -> Option<PrometheusHandle> {
    tp_telemetry::metrics::prometheus()
}

// === impl EdgeState ===

impl EdgeState {
    /// After the drain: stops the audit sender and delivers (or spills) what is left.
    pub async fn finish_audit(&self) -> Option<crate::audit::Finished> {
        let sender = self
            .audit_sender
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        sender.stop.cancel();
        let _ = sender.task.await;
        let finished = self
            .audit
            .finish(&sender.control, self.config.audit.stop_flush)
            .await;
        tracing::info!(
            delivered = finished.delivered,
            kept = finished.kept,
            lost = finished.lost,
            "audit records at the stop"
        );
        Some(finished)
    }

    /// Builds the state and starts the background tasks (watch, audit, Redis connection).
    pub fn start(config: EdgeConfig) -> anyhow::Result<Arc<EdgeState>> {
        let resource = config.oauth.as_ref().map_or("", |o| o.resource.as_str());
        let control = ControlPlane::new(&config.control_plane, &config.edge_token, resource)?;
        let shared = match &config.redis {
            Some(redis) => Some(Shared::connect(redis)?),
            None => None,
        };
        let directory: Arc<dyn Directory> = control.clone();
        let audit = Audit::open(config.audit.buffer.clone())?;
        if config.audit.buffer.enabled && config.audit.buffer.spill_dir.is_none() {
            tracing::info!(
                "audit.spill_dir is not set: audit records the control plane has not taken when this edge stops (or is killed) are lost, and counted in tp_edge_audit_dropped_total"
            );
        }
        let state = EdgeState::assemble_with(config, directory, shared, audit);
        // The watch ends when the edge starts stopping: a control plane that goes away then
        // (as under `toolplane up`, which stops it after the edge) is not reconnected to.
        let watching = watch::run(
            Arc::clone(&control),
            Arc::clone(&state.versions),
            Arc::clone(&state.caches),
            state.notices.clone(),
            state.config.watch,
        );
        let stopping = state.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stopping.cancelled() => {}
                () = watching => {}
            }
        });
        // The fleet size the rate limits divide by while Redis is down.
        state.limiter.spawn_fleet_count(state.shutdown.clone());
        if state.config.audit.buffer.enabled {
            let stop = tokio_util::sync::CancellationToken::new();
            let task = tokio::spawn(Arc::clone(&state.audit).run(
                Arc::clone(&control),
                state.config.audit.flush,
                stop.clone(),
            ));
            *state.audit_sender.lock().unwrap_or_else(|e| e.into_inner()) = Some(AuditSender {
                task,
                stop,
                control,
            });
        }
        Ok(state)
    }

    /// The state over `directory` and `shared` (Redis), with no background task: nothing
    /// watches the change stream and audit records stay in the buffer. [`EdgeState::start`]
    /// adds those; the router's in-memory tests use this alone.
    pub fn assemble(
        config: EdgeConfig,
        directory: Arc<dyn Directory>,
        shared: Option<Arc<Shared>>,
    ) -> Arc<EdgeState> {
        let audit = Audit::new(config.audit.buffer.capacity, config.audit.buffer.enabled);
        EdgeState::assemble_with(config, directory, shared, audit)
    }

    fn assemble_with(
        config: EdgeConfig,
        directory: Arc<dyn Directory>,
        shared: Option<Arc<Shared>>,
        audit: Arc<Audit>,
    ) -> Arc<EdgeState> {
        let metrics = metrics_handle();
        let versions = Arc::new(Versions::default());
        let caches = Arc::new(Caches::new(
            Arc::clone(&versions),
            Arc::clone(&directory),
            shared.clone(),
            config.cache.clone(),
        ));
        let executors = Executors::new(config.executors.clone());
        let (notices, _) = broadcast::channel(1024);
        let secret = config.mcp.state_secret.as_bytes();
        let seal =
            crate::transport::request_state::StateSeal::new(secret, config.mcp.input_required_ttl);
        let questions = crate::transport::questions::Questions::new(shared.clone());
        let cancels = crate::transport::cancels::Cancels::new(shared.clone());
        let sessions = crate::transport::session::SessionSeal::new(
            secret,
            config.mcp.session_ttl.unwrap_or_default(),
        );
        let streams = crate::transport::streams::Streams::new(
            config.mcp.max_streams_per_key,
            config.mcp.max_streams_per_tenant,
            config.mcp.max_stream_age,
        );
        let embedder = crate::disclosure::Embedder::start(config.search.clone());
        Arc::new(EdgeState {
            embedder,
            credentials: crate::credentials::Credentials::default(),
            streams,
            seal,
            sessions,
            unready: tokio_util::sync::CancellationToken::new(),
            audit_sender: std::sync::Mutex::new(None),
            shutdown: tokio_util::sync::CancellationToken::new(),
            abort: tokio_util::sync::CancellationToken::new(),
            questions,
            cancels,
            limiter: RateLimiter::with_policy(shared.clone(), config.rate_limits_when_redis_down),
            directory,
            versions,
            caches,
            shared,
            executors,
            audit,
            notices,
            metrics,
            config,
        })
    }
}
