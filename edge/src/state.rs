//! Everything a request needs, shared by all requests of an edge.

use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::broadcast;

use crate::audit::Audit;
use crate::cache::{CacheSettings, Caches};
use crate::config::EdgeConfig;
use crate::control::{ControlPlane, Directory};
use crate::forward::{BreakerSettings, Executors};
use crate::limits::RateLimiter;
use crate::shared::Shared;
use crate::versions::Versions;
use crate::watch::{self, ChangeNotice, WatchSettings};

/// Shared state of one edge.
#[derive(Debug)]
pub struct EdgeState {
    /// Configuration.
    pub config: EdgeConfig,
    /// The control plane, as the request path asks it (gRPC in production).
    pub directory: Arc<dyn Directory>,
    /// Revisions known from the watch.
    pub versions: Arc<Versions>,
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
        let within = Duration::from_millis(self.config.audit.stop_flush_ms);
        let finished = self.audit.finish(&sender.control, within).await;
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
        let shared = match &config.redis_url {
            Some(urls) => Some(Shared::connect(&crate::shared::RedisSettings {
                urls: urls.split(',').map(|u| u.trim().to_owned()).collect(),
                cluster: config.cache.redis_cluster,
                sentinel_master: config.cache.redis_sentinel_master.clone(),
                ca_file: config.cache.redis_ca_file.clone(),
                cert_file: config.cache.redis_cert_file.clone(),
                key_file: config.cache.redis_key_file.clone(),
                prefix: config.cache.redis_prefix.clone(),
                timeout: Duration::from_millis(config.cache.redis_timeout_ms),
            })?),
            None => None,
        };
        let directory: Arc<dyn Directory> = control.clone();
        let audit = Audit::open(crate::audit::AuditSettings {
            enabled: config.audit.enabled,
            capacity: config.audit.buffer,
            spill_dir: (!config.audit.spill_dir.is_empty())
                .then(|| std::path::PathBuf::from(&config.audit.spill_dir)),
            spill_max_bytes: config.audit.spill_max_mb.saturating_mul(1 << 20),
            edge: config.name.clone(),
        })?;
        if config.audit.enabled && config.audit.spill_dir.is_empty() {
            tracing::info!(
                "audit.spill_dir is not set: audit records the control plane has not taken when this edge stops (or is killed) are lost, and counted in tp_edge_audit_dropped_total"
            );
        }
        let state = EdgeState::assemble_with(config, directory, shared, audit);
        let settings = WatchSettings {
            heartbeat_ms: state.config.watch.heartbeat_ms,
            dead_after: Duration::from_millis(state.config.watch.dead_after_ms),
            max_backoff: Duration::from_millis(state.config.watch.max_backoff_ms),
        };
        // The watch ends when the edge starts stopping: a control plane that goes away then
        // (as under `toolplane up`, which stops it after the edge) is not reconnected to.
        let watching = watch::run(
            Arc::clone(&control),
            Arc::clone(&state.versions),
            Arc::clone(&state.caches),
            state.notices.clone(),
            settings,
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
        if state.config.audit.enabled {
            let stop = tokio_util::sync::CancellationToken::new();
            let task = tokio::spawn(Arc::clone(&state.audit).run(
                Arc::clone(&control),
                Duration::from_millis(state.config.audit.flush_ms),
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
        let audit = Audit::new(config.audit.buffer, config.audit.enabled);
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
            cache_settings(&config),
        ));
        let executors = Executors::new(breaker_settings(&config));
        let (notices, _) = broadcast::channel(1024);
        let secret = if config.mcp.request_state_key.is_empty() {
            config.edge_token.as_bytes()
        } else {
            config.mcp.request_state_key.as_bytes()
        };
        let seal = crate::transport::request_state::StateSeal::new(
            secret,
            Duration::from_secs(config.mcp.input_required_ttl_secs),
        );
        let questions = crate::transport::questions::Questions::new(shared.clone());
        let cancels = crate::transport::cancels::Cancels::new(shared.clone());
        let sessions = crate::transport::session::SessionSeal::new(
            secret,
            Duration::from_secs(config.mcp.session_ttl_secs),
        );
        let streams = streams(&config);
        Arc::new(EdgeState {
            streams,
            seal,
            sessions,
            unready: tokio_util::sync::CancellationToken::new(),
            audit_sender: std::sync::Mutex::new(None),
            shutdown: tokio_util::sync::CancellationToken::new(),
            abort: tokio_util::sync::CancellationToken::new(),
            questions,
            cancels,
            limiter: RateLimiter::with_policy(
                shared.clone(),
                crate::limits::WhenRedisDown::parse(&config.cache.rate_limits_when_redis_down),
            ),
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

/// The caches' settings from `cache.*`.
fn cache_settings(config: &EdgeConfig) -> CacheSettings {
    CacheSettings {
        registries: config.cache.l1_registries,
        identities: config.cache.l1_identities,
        l1_ttl: Duration::from_secs(config.cache.l1_ttl_secs),
        l2_ttl: Duration::from_secs(config.cache.l2_ttl_secs),
        identity_max_stale: Duration::from_secs(config.cache.identity_max_stale_secs),
    }
}

/// The executor clients' settings from `executors.*`.
fn breaker_settings(config: &EdgeConfig) -> BreakerSettings {
    BreakerSettings {
        failures: config.executors.breaker_failures,
        cooldown: Duration::from_millis(config.executors.breaker_cooldown_ms),
        shared_tenants: config.executors.breaker_shared_tenants,
        connect_timeout: Duration::from_millis(config.executors.connect_timeout_ms),
        tenant_share_percent: config.executors.tenant_share_percent,
        tool_share_percent: config.executors.tool_share_percent,
        credential_env_prefix: config.executors.credential_env_prefix.clone(),
        key: config.executor_key.clone(),
        upstream_http: config.upstream_http.clone(),
    }
}

/// The long-lived stream limits (`mcp.max_streams_per_*`; per tenant, by default a quarter of
/// `http.max_connections`).
fn streams(config: &EdgeConfig) -> Arc<crate::transport::streams::Streams> {
    let per_tenant = match config.mcp.max_streams_per_tenant {
        0 => (config.http.max_connections / 4).max(1),
        n => n,
    };
    crate::transport::streams::Streams::new(
        config.mcp.max_streams_per_key,
        per_tenant,
        Duration::from_secs(config.mcp.max_stream_secs),
    )
}
