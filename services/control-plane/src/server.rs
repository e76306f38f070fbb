//! Wiring: store → engine → gRPC services with auth, health and reflection.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Server;
use tp_proto::pb::{
    admins_server::AdminsServer, audit_server::AuditServer, catalog_server::CatalogServer,
    executors_server::ExecutorsServer, policy_server::PolicyServer,
    registry_server::RegistryServer, tenants_server::TenantsServer,
};
use tp_store::{PostgresStore, SqliteStore, Store};

use crate::api::{
    admins::AdminsService, audit::AuditService, catalog::CatalogService,
    executors::ExecutorsService, policy::PolicyService, registry::RegistryService,
    tenants::TenantsService,
};
use crate::auth::TokenCheck;
use crate::config::ControlPlaneConfig;
use crate::engine::Engine;

/// The tokens in force.
#[derive(Debug, Clone)]
pub struct Tokens {
    /// For admin RPCs.
    pub admin: String,
    /// For edge RPCs.
    pub edge: String,
}

/// A running control plane.
#[derive(Debug)]
pub struct ControlPlane {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The tokens in force.
    pub tokens: Tokens,
    /// The engine (for in-process launchers and tests).
    pub engine: Arc<Engine>,
    /// Where `GET /metrics` is served, if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    /// Where the OAuth callback of connections is served, if anywhere.
    pub callback_addr: Option<SocketAddr>,
    /// The server task.
    pub task: JoinHandle<anyhow::Result<()>>,
}

/// Reads a token from `path`, or generates one and writes it there (mode 0600).
pub fn token_file(path: &Path) -> anyhow::Result<String> {
    if let Ok(existing) = std::fs::read_to_string(path) {
        let token = existing.trim().to_owned();
        if token.len() >= 16 {
            return Ok(token);
        }
    }
    let bytes: [u8; 24] = rand::random();
    let token = format!("tpt_{}", hex::encode(bytes));
    write_private(path, &token).with_context(|| format!("writing {}", path.display()))?;
    Ok(token)
}

pub use crate::files::write_private;

// === impl ControlPlane ===

impl ControlPlane {
    /// Opens the store, bootstraps it if empty, binds and serves until `shutdown` resolves.
    pub async fn start(
        config: &ControlPlaneConfig,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<ControlPlane> {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("creating data dir {}", config.data_dir.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            // Tokens, the database and (with `up`) tenants' wiki pages live here.
            std::fs::set_permissions(&config.data_dir, std::fs::Permissions::from_mode(0o700))
                .with_context(|| {
                    format!("restricting {} to its owner", config.data_dir.display())
                })?;
        }
        let store: Arc<dyn Store> = match &config.postgres_url {
            Some(url) => Arc::new(
                PostgresStore::connect(url)
                    .await
                    .with_context(|| format!("connecting to PostgreSQL at {}", redact(url)))?,
            ),
            None => Arc::new(
                SqliteStore::open(&config.sqlite_path)
                    .await
                    .with_context(|| format!("opening {}", config.sqlite_path.display()))?,
            ),
        };
        let engine = Engine::open(store).await.context("loading state")?;
        Self::start_with_engine(config, engine, shutdown).await
    }

    /// Like [`ControlPlane::start`] with an engine the caller opened (and maybe seeded).
    pub async fn start_with_engine(
        config: &ControlPlaneConfig,
        engine: Arc<Engine>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<ControlPlane> {
        prepare(&engine, config).await?;
        let tokens = Tokens {
            admin: match &config.admin_token {
                Some(token) => token.clone(),
                None => token_file(&config.data_dir.join("admin-token"))?,
            },
            edge: match &config.edge_token {
                Some(token) => token.clone(),
                None => token_file(&config.data_dir.join("edge-token"))?,
            },
        };
        if config.poll_ms > 0 {
            engine.spawn_poller(Duration::from_millis(u64::from(config.poll_ms)));
        }
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let addr = listener.local_addr()?;
        let (stop_streams, stopping) = tokio::sync::watch::channel(false);
        let shutdown = async move {
            shutdown.await;
            let _ = stop_streams.send(true);
        };
        let metrics_addr = serve_metrics(config, stopping.clone()).await?;
        spawn_housekeeping(&engine, config, &stopping);
        let purges = crate::purge::Purges::start(
            Arc::clone(engine.store()),
            config.data_dir.join("purges.json"),
            config
                .executor_key
                .clone()
                .unwrap_or_else(|| tp_proto::invoke_auth::ExecutorKey::derive(&tokens.edge)),
        )
        .await;
        let started = start_connections(config, &engine, &stopping).await?;
        let (callback_addr, renewals) = (started.callback, started.renewals);
        let connections = (started.vault, started.connector);
        let router = router(&engine, &tokens, config, stopping, purges, connections).await?;
        let limits = config.grpc.clone();
        let tls = reloading_tls(config)?;
        let task = tokio::spawn(async move {
            router
                .serve_with_incoming_shutdown(
                    // Connection cap, handshake and idle deadlines, TCP_NODELAY (a streamed
                    // reply is several small writes; with Nagle each waits for the peer's
                    // delayed ACK); TLS when configured.
                    tp_net::grpc_incoming_tls(listener, &limits, tls),
                    shutdown,
                )
                .await
                .context("serving gRPC")?;
            finish_renewals(renewals).await;
            Ok(())
        });
        tracing::info!(%addr, revision = engine.revision().await, "control plane listening");
        Ok(ControlPlane {
            addr,
            metrics_addr,
            callback_addr,
            tokens,
            engine,
            task,
        })
    }
}

/// What connections need: the vault (when the keys are configured), the OAuth connector of
/// `[[connections.oauth]]` providers renewing tokens until `stopping`, and the address of its
/// callback listener (both `None` when no provider is configured).
async fn start_connections(
    config: &ControlPlaneConfig,
    engine: &Arc<Engine>,
    stopping: &tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Connections> {
    let vault = match &config.connections_keys {
        Some(crate::config::KeySource::File(path, generate)) => Some(crate::vault::Vault::new(
            Arc::new(crate::vault::KeyFile::open(path, *generate)?),
        )),
        Some(crate::config::KeySource::Env(name)) => Some(crate::vault::Vault::new(Arc::new(
            crate::vault::KeyFile::from_env(name)?,
        ))),
        None => None,
    };
    let Some(settings) = config.oauth_connections.clone() else {
        return Ok(Connections {
            vault,
            connector: None,
            callback: None,
            renewals: None,
        });
    };
    let Some(sealer) = vault.clone() else {
        anyhow::bail!(
            "[[connections.oauth]] needs the connections' keys to seal tokens: set auth.connections_keys_file or auth.connections_keys_env (every replica on PostgreSQL reads the same keys)"
        );
    };
    let connector = crate::provider_oauth::Connector::new(settings, sealer, Arc::clone(engine))?;
    let renewals = tokio::spawn(crate::provider_oauth::run(
        Arc::clone(&connector),
        stopping.clone(),
    ));
    let addr =
        crate::provider_oauth::callback::serve(Arc::clone(&connector), stopping.clone()).await?;
    Ok(Connections {
        vault,
        connector: Some(connector),
        callback: Some(addr),
        renewals: Some(renewals),
    })
}

/// The listener's TLS when configured, reloaded when its files change.
fn reloading_tls(
    config: &ControlPlaneConfig,
) -> anyhow::Result<Option<Arc<tp_net::tls::ReloadingTls>>> {
    let Some(files) = &config.tls else {
        return Ok(None);
    };
    let tls = tp_net::tls::ReloadingTls::load(files.clone(), &[b"h2"]).context("tls")?;
    tls.spawn_reloader(tp_net::tls::RELOAD_EVERY);
    Ok(Some(tls))
}

/// After the gRPC server stopped: renewals under way finish (a token a provider rotated must
/// be stored), [`crate::provider_oauth::RENEWALS_DRAIN`] at most.
async fn finish_renewals(renewals: Option<JoinHandle<()>>) {
    if let Some(renewals) = renewals
        && tokio::time::timeout(crate::provider_oauth::RENEWALS_DRAIN, renewals)
            .await
            .is_err()
    {
        tracing::warn!(
            "stopped with token renewals still under way after 30 s; a provider that rotated a refresh token meanwhile may need the connection made again"
        );
    }
}

/// What [`start_connections`] started.
struct Connections {
    vault: Option<crate::vault::Vault>,
    connector: Option<Arc<crate::provider_oauth::Connector>>,
    /// The OAuth callback's address.
    callback: Option<SocketAddr>,
    /// The renewal task, which a stop lets finish what it began.
    renewals: Option<JoinHandle<()>>,
}

/// The demo world seeded (when `bootstrap.demo` and the store is empty) and the store
/// bootstrapped: the ceiling, its ADR and the roles.
async fn prepare(engine: &Engine, config: &ControlPlaneConfig) -> anyhow::Result<()> {
    let bootstrap = &config.bootstrap;
    if bootstrap.demo {
        let world = tp_registry::demo::DemoWorld::load()
            .with_endpoints(&bootstrap.demo_executor, &bootstrap.wiki_executor);
        if engine
            .seed(&world)
            .await
            .context("seeding the demo world")?
        {
            tracing::info!(
                tools = world.tools.len(),
                tenants = world.tenants.len(),
                "seeded the demo world"
            );
        }
    }
    engine
        .bootstrap(
            bootstrap.ceiling,
            &bootstrap.ceiling_adr,
            &bootstrap.ceiling_adr_title,
            &bootstrap.roles,
        )
        .await
        .context("bootstrapping the store")
}

/// Prometheus metrics, on a listener of their own (the gRPC one speaks gRPC only), until
/// `stopping` says stop; its address.
async fn serve_metrics(
    config: &ControlPlaneConfig,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Option<SocketAddr>> {
    let Some(metrics_listen) = config.metrics_listen else {
        return Ok(None);
    };
    let listener = TcpListener::bind(metrics_listen)
        .await
        .with_context(|| format!("binding metrics_listen {metrics_listen}"))?;
    let addr = listener.local_addr()?;
    tp_telemetry::metrics::prometheus();
    tokio::spawn(tp_telemetry::metrics::serve_metrics(listener, async move {
        let _ = stopping.wait_for(|stop| *stop).await;
    }));
    tracing::info!(%addr, "metrics on /metrics");
    Ok(Some(addr))
}

/// The control plane's gRPC router, every call measured.
type MeasuredRouter = tonic::transport::server::Router<
    tower::layer::util::Stack<
        crate::admin_auth::AdminAuthLayer,
        tower::layer::util::Stack<
            tp_telemetry::trace::GrpcTraceLayer,
            tower::layer::util::Stack<
                tp_telemetry::metrics::GrpcMetricsLayer,
                tower::layer::util::Identity,
            >,
        >,
    >,
>;

async fn router(
    engine: &Arc<Engine>,
    tokens: &Tokens,
    config: &ControlPlaneConfig,
    stopping: tokio::sync::watch::Receiver<bool>,
    purges: Arc<crate::purge::Purges>,
    (vault, connector): (
        Option<crate::vault::Vault>,
        Option<Arc<crate::provider_oauth::Connector>>,
    ),
) -> anyhow::Result<MeasuredRouter> {
    let request_timeout = config.request_timeout;
    // The configured admin token is a superset: operators may call the edge-facing service
    // to debug. Admin services are guarded by the AdminAuthLayer below.
    let edge = TokenCheck::new("edge", &[&tokens.edge, &tokens.admin]);

    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<CatalogServer<CatalogService>>()
        .await;
    health_reporter
        .set_serving::<PolicyServer<PolicyService>>()
        .await;
    health_reporter
        .set_serving::<TenantsServer<TenantsService>>()
        .await;
    health_reporter
        .set_serving::<ExecutorsServer<ExecutorsService>>()
        .await;
    health_reporter
        .set_serving::<RegistryServer<RegistryService>>()
        .await;
    health_reporter
        .set_serving::<AuditServer<AuditService>>()
        .await;
    health_reporter
        .set_serving::<AdminsServer<AdminsService>>()
        .await;
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(tp_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
    };
    let registry = RegistryService::new(Arc::clone(engine), config.heartbeat_ms, stopping)
        .with_tokens(crate::oidc::TokenVerifier::with_addresses(
            config.token_key_refetch,
            config.private_issuers,
        ))
        .with_vault(vault.clone());
    let admin_oidc = config.admin_oidc.clone().map(|settings| {
        Arc::new(crate::admin_oidc::AdminOidc::new(
            settings,
            Arc::new(crate::oidc::TokenVerifier::with_addresses(
                config.token_key_refetch,
                config.private_issuers,
            )),
        ))
    });
    let registry = InterceptedService::new(
        RegistryServer::new(registry),
        move |request: tonic::Request<()>| edge.check(request),
    );
    Ok(Server::builder()
        // Every call counted and timed (tp_grpc_server_*{server="control_plane"}).
        .layer(tp_telemetry::metrics::GrpcMetricsLayer::new(
            "control_plane",
        ))
        // A span per call, child of the caller's trace (traceparent), when traces export.
        .layer(tp_telemetry::trace::GrpcTraceLayer::new("control_plane"))
        // Inside the metrics: refused calls are counted with their codes.
        .layer(
            crate::admin_auth::AdminAuthLayer::new(Arc::clone(engine), &tokens.admin)
                .with_oidc(admin_oidc),
        )
        // Unary calls (their request included) end within the timeout; streams (Watch) are
        // answered at once and then kept alive by heartbeats.
        .timeout(request_timeout)
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(std::time::Duration::from_secs(10)))
        .max_concurrent_streams(Some(256))
        .add_service(health_service)
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?)
        .add_service(CatalogServer::new(CatalogService::new(Arc::clone(engine))))
        .add_service(PolicyServer::new(PolicyService::new(Arc::clone(engine))))
        .add_service(TenantsServer::new(
            TenantsService::new(Arc::clone(engine), purges)
                .with_vault(vault)
                .with_connector(connector),
        ))
        .add_service(ExecutorsServer::new(ExecutorsService::new(Arc::clone(
            engine,
        ))))
        .add_service(AuditServer::new(AuditService::new(Arc::clone(engine))))
        .add_service(AdminsServer::new(AdminsService::new(Arc::clone(engine))))
        .add_service(registry))
}

/// Deletes audit records older than `retention`, at start and then hourly, until `stopping`.
/// How long the ids of delivered audit batches are remembered (a retry after that is stored
/// again): far longer than an edge keeps retrying one delivery in practice.
const AUDIT_BATCH_IDS_KEPT: Duration = Duration::from_secs(7 * 86_400);

/// Hourly: deletes audit records past `retention` (when set) and forgets old batch ids.
async fn prune_audit(
    engine: Arc<Engine>,
    retention: Option<Duration>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(Duration::from_secs(3600));
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        let now_ms = crate::engine::now_ms();
        if let Some(retention) = retention {
            match engine
                .store()
                .prune_audit(now_ms.saturating_sub(millis(retention)))
                .await
            {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "audit records past retention deleted"),
                Err(error) => tracing::warn!(%error, "pruning the audit trail failed; will retry"),
            }
        }
        let before = now_ms.saturating_sub(millis(AUDIT_BATCH_IDS_KEPT));
        if let Err(error) = engine.store().prune_audit_batches(before).await {
            tracing::warn!(%error, "forgetting old audit batch ids failed; will retry");
        }
    }
}

/// A database URL without its password, for logs and errors.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// The work the control plane does by itself until `stopping`: retiring tools past their
/// sunset, checking MCP upstreams for drift, pruning the audit trail.
fn spawn_housekeeping(
    engine: &Arc<Engine>,
    config: &ControlPlaneConfig,
    stopping: &tokio::sync::watch::Receiver<bool>,
) {
    let renewed: std::collections::BTreeSet<String> = config
        .oauth_connections
        .iter()
        .flat_map(|oauth| oauth.providers.keys().cloned())
        .collect();
    tokio::spawn(crate::lifecycle::run(
        Arc::clone(engine),
        config.sunset_check,
        renewed,
        stopping.clone(),
    ));
    if let Some(every) = config.drift_check {
        tokio::spawn(crate::drift::run(
            Arc::clone(engine),
            every,
            config.on_drift,
            stopping.clone(),
        ));
    }
    tokio::spawn(prune_audit(
        Arc::clone(engine),
        config.audit_retention,
        stopping.clone(),
    ));
}
