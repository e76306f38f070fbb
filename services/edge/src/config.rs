//! Edge configuration: defaults < TOML file < `TOOLPLANE_EDGE_*` environment < flags, into a
//! struct that rejects unknown keys, validated once into [`EdgeConfig`].

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

use tp_upstream::DEFAULT_CREDENTIAL_ENV_PREFIX;

/// Prefix of the edge's environment variables (`TOOLPLANE_EDGE_LISTEN`, ...).
pub const ENV_PREFIX: &str = "TOOLPLANE_EDGE_";

/// The file format, as operators write it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawConfig {
    /// HTTP listen address (MCP at `/mcp`, `/healthz`, `/readyz`).
    pub listen: String,
    /// Admin listen address for `/metrics` (and `/healthz`, `/readyz`); empty = none. Keep it
    /// off the network clients reach.
    pub admin_listen: String,
    /// Connection and request-read limits of the MCP listener.
    pub http: tp_net::ListenerLimits,
    /// TLS for the MCP listener (off unless `tls.cert_file` is set; files reloaded when they
    /// change).
    pub tls: tp_net::tls::TlsFiles,
    /// A name for this edge in logs, metrics and audit records (default: the listen address).
    pub name: String,
    /// Control-plane gRPC URLs, tried in order (several replicas for HA).
    pub control_plane: Vec<String>,
    /// The edge token the control plane expects.
    pub edge_token: String,
    /// A file holding the edge token (used when `edge_token` is empty).
    pub edge_token_file: String,
    /// Redis URL for the shared L2 cache and fleet-wide rate limits (`redis://`, or
    /// `rediss://` for TLS); with `cache.redis_cluster`, the seed nodes of a Redis Cluster,
    /// comma-separated; empty = none.
    pub redis_url: String,
    /// Caches.
    pub cache: RawCache,
    /// The MCP endpoint.
    pub mcp: RawMcp,
    /// Calls to executors.
    pub executors: RawExecutors,
    /// The watch stream.
    pub watch: RawWatch,
    /// Audit records sent to the control plane.
    pub audit: RawAudit,
    /// How a stopping edge leaves the fleet (SIGTERM).
    pub shutdown: RawShutdown,
    /// Requests without `Authorization` act as this tenant and role (off when empty). For
    /// public demo endpoints and the MCP conformance suite; never for production tenants.
    pub anonymous: RawAnonymous,
    /// OAuth 2.1 resource server (MCP authorization): off unless `oauth.resource` is set.
    pub oauth: crate::oauth::RawOAuth,
    /// Tool search: the optional embeddings ranker beside BM25F.
    pub search: crate::disclosure::RawSearch,
    /// Logging.
    pub log: tp_telemetry::LogConfig,
}

/// Working memory one JSON value of a request costs the edge while it handles the request —
/// its parse, the copy the call keeps, the protobuf `Struct` sent to the executor and its
/// encoding — a deliberately high estimate, so that bounding it bounds memory (the in-flight
/// byte budget, `mcp.max_in_flight_bytes`, is checked against it here). Measured (counting
/// allocator): 47 bytes a value in the parse, about 120 in all.
pub const BYTES_PER_VALUE: usize = 160;

/// What an object key costs on top of its value: a string allocated in each copy (the parse,
/// the call's copy, the protobuf map) and a map entry in each. Measured: 40,000 distinct keys
/// took 14.9 MB across the copies against 0.9 MB of body.
pub const BYTES_PER_KEY: usize = 240;

/// How many times the bytes of a body are held while it is handled (its text, then the string
/// contents in each copy).
pub const BODY_COPIES: usize = 4;

/// `[cache]`: sizes and lifetimes of the in-process (L1) and Redis (L2) caches.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawCache {
    /// Most (tenant, role) registries held in process.
    pub l1_registries: u64,
    /// Most key identities held in process.
    pub l1_identities: u64,
    /// Backstop TTL of in-process entries (changes arrive by push; this only bounds staleness
    /// if pushes are lost).
    pub l1_ttl_secs: u64,
    /// TTL of registries in Redis.
    pub l2_ttl_secs: u64,
    /// While the control plane is unreachable, an API key it confirmed longer ago than this is
    /// refused (401) instead of being served from the caches; keys the edge has seen revoked
    /// are refused at once, whatever this says.
    pub identity_max_stale_secs: u64,
    /// Redis key prefix.
    pub redis_prefix: String,
    /// Redis command timeout.
    pub redis_timeout_ms: u64,
    /// What tenants' rate limits do while Redis (where the fleet counts them) is configured but
    /// unreachable: `share` — each edge allows the limit divided by the number of edges it last
    /// saw counting in Redis; `closed` — every call of a rate-limited tenant is refused; `local`
    /// — each edge allows the whole limit (the fleet as a whole then allows up to N times it).
    pub rate_limits_when_redis_down: crate::limits::WhenRedisDown,
    /// `redis_url` names seed nodes of a Redis Cluster.
    pub redis_cluster: bool,
    /// The name of the primary that Redis Sentinels watch: `redis_url` then names the
    /// sentinels, which the edge asks where the primary is (again after a failover).
    pub redis_sentinel_master: String,
    /// PEM file of the CA that signs the Redis servers' certificates (`rediss://`); empty =
    /// the system's roots.
    pub redis_ca_file: String,
    /// PEM client certificate for Redis servers that require one.
    pub redis_cert_file: String,
    /// The client certificate's key.
    pub redis_key_file: String,
}

/// `[mcp]`: the MCP endpoint's limits, timeouts and fleet secret.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawMcp {
    /// `tools/list` page size.
    pub page_size: u32,
    /// Largest request body (bytes); larger requests get 413.
    pub max_body_bytes: usize,
    /// Largest `arguments` of one tool call (bytes of JSON); larger calls get -32602 before
    /// anything is built from them.
    pub max_argument_bytes: usize,
    /// Most JSON values in one request body (counted before it is parsed); beyond, -32602.
    pub max_json_values: usize,
    /// The memory budget of requests being handled at once: their bodies, plus an estimate of
    /// what is built from them (160 bytes per JSON value); a request that would pass it is shed
    /// with 503 (`Retry-After`).
    pub max_in_flight_bytes: usize,
    /// Longest time the validation of one call's arguments may take (it runs off the request
    /// threads for large arguments); longer is -32602.
    pub validation_timeout_ms: u64,
    /// Whole-request timeout.
    pub request_timeout_ms: u64,
    /// Allowed `Host` header values (DNS-rebinding protection); `["*"]` disables the check.
    pub allowed_hosts: Vec<String>,
    /// Allowed `Origin` header values for browser clients; empty = no Origin accepted except
    /// none at all.
    pub allowed_origins: Vec<String>,
    /// Most concurrent requests per edge before shedding with 503.
    pub max_in_flight: usize,
    /// How long clients may cache a `tools/list` page (`ttlMs`, MCP 2026-07-28).
    pub list_ttl_ms: u64,
    /// Answer warm `tools/list` requests from bytes serialised once per registry and protocol
    /// generation (the JSON-RPC id spliced in) instead of through the MCP transport.
    pub precomputed_lists: bool,
    /// Secret that seals `requestState` of input-required results (MCP 2026-07-28); every edge
    /// of a fleet must use the same. Empty: derived from the edge token, which a fleet shares.
    pub request_state_key: String,
    /// How long a client has to answer an input-required result and retry.
    pub input_required_ttl_secs: u64,
    /// Lifetime of the session ids given to 2025-xx clients at `initialize` (they hold the
    /// session; the edge stores nothing). 0: issue none.
    pub session_ttl_secs: u64,
    /// Most long-lived streams (2025-xx `GET /mcp`, 2026-07-28 `subscriptions/listen`) one key
    /// may hold open on an edge; beyond, 429.
    pub max_streams_per_key: usize,
    /// Most long-lived streams one tenant may hold open on an edge; 0 = a quarter of
    /// `http.max_connections` (so other tenants always find connections).
    pub max_streams_per_tenant: usize,
    /// How long a long-lived stream stays open before the edge ends it (the client opens a
    /// new one).
    pub max_stream_secs: u64,
}

/// `[executors]`: breakers, fair shares, credentials and TLS towards executors.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawExecutors {
    /// Consecutive failures that open an executor's circuit breaker.
    pub breaker_failures: u32,
    /// How long an open breaker refuses calls before letting one probe through.
    pub breaker_cooldown_ms: u64,
    /// How many tenants' own breakers of a tool must be open (and be at least half of the
    /// tool's recent callers) before its breaker opens for every tenant; at least 2.
    pub breaker_shared_tenants: u32,
    /// Connect timeout to executors.
    pub connect_timeout_ms: u64,
    /// Share (percent) of an executor's `max_concurrency` that one tenant's calls may hold at
    /// once (at least one call), so no tenant can starve another.
    pub tenant_share_percent: u32,
    /// Share (percent) of an executor's `max_concurrency` that calls of one tool may hold.
    pub tool_share_percent: u32,
    /// Only environment variables whose names start with this may be sent to MCP executors as
    /// their credential (`credential_env`).
    pub credential_env_prefix: String,
    /// The key that signs every call to a gRPC executor (executors refuse unsigned calls).
    /// Empty: derived from the edge token, which every edge of a fleet shares
    /// (`toolplanectl executor-key` prints it for the executors' `--auth-key-file`).
    pub auth_key: String,
    /// A file holding `auth_key` (used when `auth_key` is empty and the file is set).
    pub auth_key_file: String,
    /// PEM CA certificates MCP upstreams' certificates may also chain to (`https://` upstreams
    /// signed by a private CA), besides the system's roots.
    pub upstream_ca_file: String,
    /// PEM client certificate presented to MCP upstreams that ask for one (mutual TLS).
    pub upstream_cert_file: String,
    /// The PEM key of `upstream_cert_file`.
    pub upstream_key_file: String,
}

/// `[watch]`: the change stream from the control plane.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawWatch {
    /// Heartbeat period asked of the control plane.
    pub heartbeat_ms: u32,
    /// The stream is considered dead after this long without any message.
    pub dead_after_ms: u64,
    /// Longest reconnect back-off.
    pub max_backoff_ms: u64,
}

/// `[audit]`: the per-call records sent to the control plane.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawAudit {
    /// Send audit records (tool calls) to the control plane.
    pub enabled: bool,
    /// Flush at least this often.
    pub flush_ms: u64,
    /// Most records buffered; beyond, the oldest are dropped (and counted).
    pub buffer: usize,
    /// A folder where batches not yet acknowledged are kept across stops (and adopted by the
    /// next edge started with the same folder); empty = memory only.
    pub spill_dir: String,
    /// Largest spill file, in MiB; later batches wait in memory only.
    pub spill_max_mb: u64,
    /// At a stop, how long to keep trying to deliver what is queued.
    pub stop_flush_ms: u64,
}

/// `[shutdown]`: leaving the fleet without failing a request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawShutdown {
    /// After SIGTERM, how long the edge answers `/readyz` 503 while still serving (each
    /// answer with `Connection: close`), so that balancers stop sending before it stops
    /// listening. A second SIGTERM or SIGINT ends the wait.
    pub grace_ms: u64,
    /// Then, how long requests in flight may take before their connections are closed.
    pub drain_secs: u64,
}

/// `[anonymous]`: the identity of requests without `Authorization` (demos only).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawAnonymous {
    /// The tenant anonymous requests act as.
    pub tenant: String,
    /// The role they act with.
    pub role: String,
}

/// Validated edge configuration: each section checked and turned into the settings of the
/// part of the edge that uses it (durations as durations, choices as enums, defaults that depend
/// on other keys resolved).
#[derive(Debug, Clone)]
pub struct EdgeConfig {
    /// Listen address.
    pub listen: SocketAddr,
    /// Admin listen address, if any.
    pub admin_listen: Option<SocketAddr>,
    /// Connection and request-read limits.
    pub http: tp_net::ListenerLimits,
    /// TLS files of the MCP listener, if it serves HTTPS.
    pub tls: Option<tp_net::tls::TlsFiles>,
    /// Edge name.
    pub name: String,
    /// Control-plane URLs.
    pub control_plane: Vec<String>,
    /// The fleet's shared secret that authenticates this edge to the control plane.
    pub edge_token: String,
    /// Redis (`redis_url` with `cache.redis_*`), if configured.
    pub redis: Option<crate::shared::RedisSettings>,
    /// `cache.rate_limits_when_redis_down`.
    pub rate_limits_when_redis_down: crate::limits::WhenRedisDown,
    /// `[cache]`: the in-process and Redis caches.
    pub cache: crate::cache::CacheSettings,
    /// `[mcp]`: the endpoint's limits.
    pub mcp: Mcp,
    /// `[executors]`: breakers, fair shares, the signing key and the upstreams' HTTP client.
    pub executors: crate::forward::BreakerSettings,
    /// `[watch]`: heartbeat and reconnect timing.
    pub watch: crate::watch::WatchSettings,
    /// `[audit]`: buffering, flushing and spilling of audit records.
    pub audit: Audit,
    /// `[shutdown]`: the grace and drain times after SIGTERM.
    pub shutdown: Shutdown,
    /// Anonymous (tenant, role), if enabled.
    pub anonymous: Option<(String, String)>,
    /// OAuth resource-server settings, if enabled.
    pub oauth: Option<crate::oauth::OAuth>,
    /// `[search]`: the embeddings endpoint, if configured.
    pub search: Option<crate::disclosure::EmbeddingSettings>,
    /// `[log]`: format and level of the edge's log lines.
    pub log: tp_telemetry::LogConfig,
}

/// `[mcp]`, validated.
#[derive(Debug, Clone)]
pub struct Mcp {
    /// `tools/list` page size and cache hint.
    pub paging: crate::transport::pages::Paging,
    /// Largest request body (bytes).
    pub max_body_bytes: usize,
    /// Largest `arguments` of one call (never more than `max_body_bytes`).
    pub max_argument_bytes: usize,
    /// Most JSON values in one body.
    pub max_json_values: usize,
    /// Memory budget of the requests being handled at once.
    pub max_in_flight_bytes: usize,
    /// Most concurrent requests.
    pub max_in_flight: usize,
    /// Longest validation of one call's arguments.
    pub validation_timeout: Duration,
    /// Whole-request timeout.
    pub request_timeout: Duration,
    /// Allowed `Host` values (`*` disables the check).
    pub allowed_hosts: Vec<String>,
    /// Allowed `Origin` values.
    pub allowed_origins: Vec<String>,
    /// Warm `tools/list` answered from precomputed bytes.
    pub precomputed_lists: bool,
    /// The secret that seals `requestState` and session ids: `mcp.request_state_key`, else
    /// the edge token (which a fleet shares).
    pub state_secret: String,
    /// How long an input-required result may be answered.
    pub input_required_ttl: Duration,
    /// Lifetime of 2025-xx session ids; `None` issues none.
    pub session_ttl: Option<Duration>,
    /// Long-lived streams per key.
    pub max_streams_per_key: usize,
    /// Long-lived streams per tenant (a quarter of `http.max_connections` when the file says 0).
    pub max_streams_per_tenant: usize,
    /// How long a long-lived stream stays open.
    pub max_stream_age: Duration,
}

/// `[audit]`, validated.
#[derive(Debug, Clone)]
pub struct Audit {
    /// The buffer and its spill folder.
    pub buffer: crate::audit::AuditSettings,
    /// Flush at least this often.
    pub flush: Duration,
    /// At a stop, how long to keep trying to deliver what is queued.
    pub stop_flush: Duration,
}

/// `[shutdown]`, validated.
#[derive(Debug, Clone, Copy)]
pub struct Shutdown {
    /// After SIGTERM, how long `/readyz` answers 503 while the edge still serves.
    pub grace: Duration,
    /// Then, how long requests in flight may take.
    pub drain: Duration,
}

// === defaults ===

impl Default for RawConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            admin_listen: "127.0.0.1:8081".into(),
            http: tp_net::ListenerLimits::default(),
            tls: tp_net::tls::TlsFiles::default(),
            name: String::new(),
            control_plane: vec!["http://127.0.0.1:50051".into()],
            edge_token: String::new(),
            edge_token_file: ".toolplane/edge-token".into(),
            redis_url: String::new(),
            cache: RawCache::default(),
            mcp: RawMcp::default(),
            executors: RawExecutors::default(),
            watch: RawWatch::default(),
            audit: RawAudit::default(),
            shutdown: RawShutdown::default(),
            anonymous: RawAnonymous::default(),
            oauth: crate::oauth::RawOAuth::default(),
            search: crate::disclosure::RawSearch::default(),
            log: tp_telemetry::LogConfig::with_level("info,rmcp=warn"),
        }
    }
}

impl Default for RawCache {
    fn default() -> Self {
        Self {
            l1_registries: 100_000,
            l1_identities: 100_000,
            l1_ttl_secs: 300,
            l2_ttl_secs: 86_400,
            identity_max_stale_secs: 300,
            redis_prefix: "tp".into(),
            redis_timeout_ms: 250,
            rate_limits_when_redis_down: crate::limits::WhenRedisDown::Share,
            redis_cluster: false,
            redis_sentinel_master: String::new(),
            redis_ca_file: String::new(),
            redis_cert_file: String::new(),
            redis_key_file: String::new(),
        }
    }
}

impl Default for RawMcp {
    fn default() -> Self {
        Self {
            page_size: 100,
            max_body_bytes: 4 * 1024 * 1024,
            max_argument_bytes: 1024 * 1024,
            max_json_values: 100_000,
            max_in_flight_bytes: 256 * 1024 * 1024,
            validation_timeout_ms: 1_000,
            request_timeout_ms: 60_000,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: Vec::new(),
            max_in_flight: 4096,
            list_ttl_ms: 30_000,
            precomputed_lists: true,
            request_state_key: String::new(),
            input_required_ttl_secs: 600,
            session_ttl_secs: 86_400,
            max_streams_per_key: 4,
            max_streams_per_tenant: 0,
            max_stream_secs: 3_600,
        }
    }
}

impl Default for RawExecutors {
    fn default() -> Self {
        Self {
            breaker_failures: 5,
            breaker_cooldown_ms: 5_000,
            breaker_shared_tenants: 3,
            connect_timeout_ms: 2_000,
            tenant_share_percent: 50,
            tool_share_percent: 100,
            credential_env_prefix: DEFAULT_CREDENTIAL_ENV_PREFIX.into(),
            auth_key: String::new(),
            auth_key_file: String::new(),
            upstream_ca_file: String::new(),
            upstream_cert_file: String::new(),
            upstream_key_file: String::new(),
        }
    }
}

impl Default for RawWatch {
    fn default() -> Self {
        Self {
            heartbeat_ms: 1_000,
            dead_after_ms: 5_000,
            max_backoff_ms: 5_000,
        }
    }
}

impl Default for RawAudit {
    fn default() -> Self {
        Self {
            enabled: true,
            flush_ms: 1_000,
            buffer: 10_000,
            spill_dir: String::new(),
            spill_max_mb: 64,
            stop_flush_ms: 5_000,
        }
    }
}

impl Default for RawShutdown {
    fn default() -> Self {
        Self {
            grace_ms: 5_000,
            drain_secs: 30,
        }
    }
}

// === impl RawConfig ===

impl RawConfig {
    /// Validates every section into the settings the edge runs with.
    pub fn validate(self) -> anyhow::Result<EdgeConfig> {
        let (listen, admin_listen) = addresses(&self.listen, &self.admin_listen)?;
        if self.control_plane.is_empty() {
            bail!("control_plane: at least one URL is needed");
        }
        for url in &self.control_plane {
            tp_registry::ident::check_http_url(url)
                .map_err(|e| anyhow::anyhow!("control_plane: {e}"))?;
        }
        let edge_token = edge_token(self.edge_token, &self.edge_token_file)?;
        let redis = self.cache.redis(&self.redis_url)?;
        self.http.validate("http").map_err(anyhow::Error::msg)?;
        let name = if self.name.is_empty() {
            listen.to_string()
        } else {
            self.name
        };
        let tls = match self.tls.enabled("tls") {
            Ok(true) => Some(self.tls),
            Ok(false) => None,
            Err(message) => bail!(message),
        };
        Ok(EdgeConfig {
            tls,
            oauth: self.oauth.validate()?,
            search: self.search.settings()?,
            listen,
            admin_listen,
            redis,
            rate_limits_when_redis_down: self.cache.rate_limits_when_redis_down,
            cache: self.cache.settings()?,
            mcp: self.mcp.settings(&edge_token, self.http.max_connections)?,
            executors: self.executors.settings(&edge_token)?,
            watch: self.watch.settings()?,
            audit: self.audit.settings(&name)?,
            shutdown: self.shutdown.settings()?,
            anonymous: anonymous(self.anonymous)?,
            http: self.http,
            name,
            control_plane: self.control_plane,
            edge_token,
            log: self.log,
        })
    }
}

/// `[anonymous]`: both tenant and role, or neither.
fn anonymous(raw: RawAnonymous) -> anyhow::Result<Option<(String, String)>> {
    match (raw.tenant.is_empty(), raw.role.is_empty()) {
        (true, true) => Ok(None),
        (false, false) => Ok(Some((raw.tenant, raw.role))),
        _ => bail!("anonymous: set both tenant and role, or neither"),
    }
}

/// `listen` and `admin_listen` (empty: no admin listener) as addresses.
fn addresses(listen: &str, admin_listen: &str) -> anyhow::Result<(SocketAddr, Option<SocketAddr>)> {
    let listen: SocketAddr = listen
        .parse()
        .with_context(|| format!("listen: {listen:?} is not an address like 127.0.0.1:8080"))?;
    if admin_listen.is_empty() {
        return Ok((listen, None));
    }
    let admin = admin_listen.parse::<SocketAddr>().with_context(|| {
        format!(
            "admin_listen: {admin_listen:?} is not an address like 127.0.0.1:8081 (or empty for none)"
        )
    })?;
    Ok((listen, Some(admin)))
}

// === impl EdgeConfig ===

impl EdgeConfig {
    /// How long any `/mcp` request may take (`mcp.request_timeout_ms`), also the executors' deadline.
    pub fn request_timeout(&self) -> Duration {
        self.mcp.request_timeout
    }
}

/// Defaults, then the TOML file if given, then the environment.
pub fn figment(file: Option<&std::path::Path>) -> Figment {
    let mut figment = Figment::from(Serialized::defaults(RawConfig::default()));
    if let Some(file) = file {
        figment = figment.merge(Toml::file_exact(file));
    }
    figment.merge(Env::prefixed(ENV_PREFIX).split("__"))
}

/// Extracts and validates.
pub fn load(figment: Figment) -> anyhow::Result<EdgeConfig> {
    let raw: RawConfig = figment.extract().context("reading edge config")?;
    raw.validate()
}

/// The fleet's edge token: `edge_token` itself, else the first line of `edge_token_file`; at
/// least 16 characters.
fn edge_token(token: String, file: &str) -> anyhow::Result<String> {
    let edge_token = if token.is_empty() {
        let text = std::fs::read_to_string(file).with_context(|| {
            let at = std::env::current_dir()
                .map(|dir| format!(" (from {})", dir.display()))
                .unwrap_or_default();
            format!(
                "the edge needs the fleet's edge token: edge_token (TOOLPLANE_EDGE_EDGE_TOKEN) is empty and edge_token_file {:?}{at} cannot be read. The control plane writes it to <its data_dir>/edge-token on first start (toolplane up: .toolplane/edge-token); point edge_token_file there, or set the token itself",
                file
            )
        })?;
        text.trim().to_owned()
    } else {
        token
    };
    if edge_token.len() < 16 {
        bail!("edge_token: must be at least 16 characters");
    }
    Ok(edge_token)
}

// === per-section checks (each section's own ranges; what spans sections stays in validate) ===

impl RawCache {
    /// `redis_url` (empty: no Redis) with the Redis settings of `[cache]`: one URL for a
    /// primary, several only for a cluster's seed nodes or a primary's sentinels, TLS files
    /// only with TLS.
    fn redis(&self, redis_url: &str) -> anyhow::Result<Option<crate::shared::RedisSettings>> {
        if redis_url.is_empty() {
            if self.redis_cluster {
                bail!("cache.redis_cluster: set redis_url to the cluster's seed nodes");
            }
            if !self.redis_sentinel_master.is_empty() {
                bail!("cache.redis_sentinel_master: set redis_url to the sentinels' addresses");
            }
            return Ok(None);
        }
        let urls: Vec<&str> = redis_url.split(',').map(str::trim).collect();
        self.check_redis(&urls)?;
        Ok(Some(crate::shared::RedisSettings {
            urls: urls.into_iter().map(str::to_owned).collect(),
            cluster: self.redis_cluster,
            sentinel_master: self.redis_sentinel_master.clone(),
            ca_file: self.redis_ca_file.clone(),
            cert_file: self.redis_cert_file.clone(),
            key_file: self.redis_key_file.clone(),
            prefix: self.redis_prefix.clone(),
            timeout: Duration::from_millis(self.redis_timeout_ms),
        }))
    }

    /// The URLs against the topology and TLS keys of `[cache]`.
    fn check_redis(&self, urls: &[&str]) -> anyhow::Result<()> {
        for url in urls {
            if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                bail!("redis_url: {url:?} must start with redis:// or rediss://");
            }
        }
        let sentinel = !self.redis_sentinel_master.is_empty();
        if sentinel && self.redis_cluster {
            bail!(
                "cache.redis_sentinel_master and cache.redis_cluster: a Redis Cluster has no sentinels; set one of them"
            );
        }
        if urls.len() > 1 && !self.redis_cluster && !sentinel {
            bail!(
                "redis_url: several URLs are the seed nodes of a Redis Cluster or the sentinels of a primary; set cache.redis_cluster = true or cache.redis_sentinel_master, or give one URL"
            );
        }
        if sentinel && urls.iter().any(|u| u.starts_with("rediss://")) {
            bail!(
                "cache.redis_sentinel_master: sentinels over TLS are not supported; use redis:// URLs"
            );
        }
        let tls = urls.iter().all(|u| u.starts_with("rediss://"));
        let files = [
            &self.redis_ca_file,
            &self.redis_cert_file,
            &self.redis_key_file,
        ];
        if !tls && files.iter().any(|f| !f.is_empty()) {
            bail!(
                "cache.redis_ca_file, redis_cert_file, redis_key_file: only for TLS; make redis_url rediss://"
            );
        }
        Ok(())
    }

    /// `[cache]`: capacities, lifetimes and the Redis prefix.
    fn settings(&self) -> anyhow::Result<crate::cache::CacheSettings> {
        if self.l1_registries == 0 || self.l1_identities == 0 {
            bail!("cache.l1_registries and cache.l1_identities: must be at least 1");
        }
        if self.l1_ttl_secs == 0 || self.l2_ttl_secs == 0 {
            bail!("cache.l1_ttl_secs and cache.l2_ttl_secs: must be at least 1");
        }
        if !(1..=86_400).contains(&self.identity_max_stale_secs) {
            bail!("cache.identity_max_stale_secs: must be between 1 and 86400");
        }
        if self.redis_prefix.is_empty() || self.redis_prefix.contains(char::is_whitespace) {
            bail!("cache.redis_prefix: must be a non-empty word");
        }
        Ok(crate::cache::CacheSettings {
            registries: self.l1_registries,
            identities: self.l1_identities,
            l1_ttl: Duration::from_secs(self.l1_ttl_secs),
            l2_ttl: Duration::from_secs(self.l2_ttl_secs),
            identity_max_stale: Duration::from_secs(self.identity_max_stale_secs),
        })
    }
}

impl RawMcp {
    /// `[mcp]` checked, with what depends on other keys resolved: the secret sealing request
    /// state (else the edge token) and the per-tenant stream limit (else a quarter of
    /// `max_connections`).
    fn settings(self, edge_token: &str, max_connections: usize) -> anyhow::Result<Mcp> {
        self.check()?;
        self.check_budget()?;
        Ok(Mcp {
            paging: crate::transport::pages::Paging {
                page_size: self.page_size as usize,
                ttl_ms: self.list_ttl_ms,
            },
            // Arguments travel in the body: they can never be larger.
            max_argument_bytes: self.max_argument_bytes.min(self.max_body_bytes),
            max_body_bytes: self.max_body_bytes,
            max_json_values: self.max_json_values,
            max_in_flight_bytes: self.max_in_flight_bytes,
            max_in_flight: self.max_in_flight,
            validation_timeout: Duration::from_millis(self.validation_timeout_ms),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            allowed_hosts: self.allowed_hosts,
            allowed_origins: self.allowed_origins,
            precomputed_lists: self.precomputed_lists,
            state_secret: if self.request_state_key.is_empty() {
                edge_token.to_owned()
            } else {
                self.request_state_key
            },
            input_required_ttl: Duration::from_secs(self.input_required_ttl_secs),
            session_ttl: (self.session_ttl_secs > 0)
                .then(|| Duration::from_secs(self.session_ttl_secs)),
            max_streams_per_key: self.max_streams_per_key,
            max_streams_per_tenant: match self.max_streams_per_tenant {
                0 => (max_connections / 4).max(1),
                n => n,
            },
            max_stream_age: Duration::from_secs(self.max_stream_secs),
        })
    }

    /// The limits that depend on each other: the in-flight budget holds at least one largest
    /// request.
    fn check_budget(&self) -> anyhow::Result<()> {
        if self.max_argument_bytes < 1024 {
            bail!("mcp.max_argument_bytes: must be at least 1 KiB");
        }
        let mcp = self;
        if !(100..=10_000_000).contains(&mcp.max_json_values) {
            bail!("mcp.max_json_values: must be between 100 and 10000000");
        }
        if mcp.max_in_flight_bytes
            < mcp.max_body_bytes * BODY_COPIES
                + mcp.max_json_values * (BYTES_PER_VALUE + BYTES_PER_KEY)
        {
            bail!(
                "mcp.max_in_flight_bytes: must hold at least one largest request: 4 × mcp.max_body_bytes + 400 × mcp.max_json_values bytes"
            );
        }
        if !(10..=60_000).contains(&mcp.validation_timeout_ms) {
            bail!("mcp.validation_timeout_ms: must be between 10 and 60000");
        }
        Ok(())
    }

    /// `[mcp]`: page size, body and time limits, hosts, streams and sessions.
    fn check(&self) -> anyhow::Result<()> {
        if !(1..=1000).contains(&self.page_size) {
            bail!("mcp.page_size: must be between 1 and 1000");
        }
        if !(1024..=64 * 1024 * 1024).contains(&self.max_body_bytes) {
            bail!("mcp.max_body_bytes: must be between 1 KiB and 64 MiB");
        }
        if self.request_timeout_ms < 100 {
            bail!("mcp.request_timeout_ms: must be at least 100");
        }
        if self.allowed_hosts.is_empty() {
            bail!(
                "mcp.allowed_hosts: list the host names clients use, or [\"*\"] to disable the check"
            );
        }
        if !self.request_state_key.is_empty() && self.request_state_key.len() < 32 {
            bail!("mcp.request_state_key: must be at least 32 characters (or empty)");
        }
        if self.max_streams_per_key == 0 {
            bail!("mcp.max_streams_per_key: must be at least 1");
        }
        if !(1..=86_400).contains(&self.max_stream_secs) {
            bail!("mcp.max_stream_secs: must be between 1 and 86400");
        }
        if self.session_ttl_secs > 30 * 86_400 {
            bail!("mcp.session_ttl_secs: at most 2592000 (30 days); 0 issues no session ids");
        }
        if !(1..=86_400).contains(&self.input_required_ttl_secs) {
            bail!("mcp.input_required_ttl_secs: must be between 1 and 86400");
        }
        if self.max_in_flight == 0 {
            bail!("mcp.max_in_flight: must be at least 1");
        }
        Ok(())
    }
}

impl RawExecutors {
    /// The key calls to executors are signed with: `auth_key`, else the first line of
    /// `auth_key_file`, else derived from the fleet's edge token.
    fn executor_key(&self, edge_token: &str) -> anyhow::Result<tp_proto::invoke_auth::ExecutorKey> {
        let explicit = if !self.auth_key.is_empty() {
            Some(self.auth_key.clone())
        } else if !self.auth_key_file.is_empty() {
            let text = std::fs::read_to_string(&self.auth_key_file).with_context(|| {
                format!(
                    "executors.auth_key_file {:?} cannot be read",
                    self.auth_key_file
                )
            })?;
            Some(text.lines().next().unwrap_or_default().trim().to_owned())
        } else {
            None
        };
        Ok(match explicit {
            Some(text) => tp_proto::invoke_auth::ExecutorKey::parse(&text)
                .map_err(|e| anyhow::anyhow!("executors.auth_key: {e}"))?,
            None => tp_proto::invoke_auth::ExecutorKey::derive(edge_token),
        })
    }

    /// `[executors]` checked, with the signing key and the upstreams' HTTP client built.
    fn settings(&self, edge_token: &str) -> anyhow::Result<crate::forward::BreakerSettings> {
        self.check()?;
        Ok(crate::forward::BreakerSettings {
            failures: self.breaker_failures,
            cooldown: Duration::from_millis(self.breaker_cooldown_ms),
            shared_tenants: self.breaker_shared_tenants,
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
            tenant_share_percent: self.tenant_share_percent,
            tool_share_percent: self.tool_share_percent,
            credential_env_prefix: self.credential_env_prefix.clone(),
            key: self.executor_key(edge_token)?,
            upstream_http: tp_upstream::http_client(
                &self.upstream_ca_file,
                &self.upstream_cert_file,
                &self.upstream_key_file,
            )?,
        })
    }

    /// `[executors]`: fair shares, the credential prefix, and breakers no tenant may open for
    /// the others.
    fn check(&self) -> anyhow::Result<()> {
        if !(1..=100).contains(&self.tenant_share_percent)
            || !(1..=100).contains(&self.tool_share_percent)
        {
            bail!(
                "executors.tenant_share_percent and executors.tool_share_percent: must be between 1 and 100"
            );
        }
        if self.credential_env_prefix.len() < 3
            || !self
                .credential_env_prefix
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            bail!(
                "executors.credential_env_prefix: must be at least 3 characters of A-Z, 0-9 and _ (e.g. TOOLPLANE_CRED_)"
            );
        }
        if self.breaker_shared_tenants < 2 {
            bail!(
                "executors.breaker_shared_tenants: must be at least 2 (one tenant must never open a breaker for the others)"
            );
        }
        if self.breaker_failures == 0 {
            bail!("executors.breaker_failures: must be at least 1");
        }
        Ok(())
    }
}

impl RawWatch {
    /// `[watch]`: the heartbeat, and a dead stream detected after it.
    fn settings(&self) -> anyhow::Result<crate::watch::WatchSettings> {
        if !(100..=60_000).contains(&self.heartbeat_ms) {
            bail!("watch.heartbeat_ms: must be between 100 and 60000");
        }
        if self.dead_after_ms <= u64::from(self.heartbeat_ms) {
            bail!("watch.dead_after_ms: must be longer than watch.heartbeat_ms");
        }
        Ok(crate::watch::WatchSettings {
            heartbeat_ms: self.heartbeat_ms,
            dead_after: Duration::from_millis(self.dead_after_ms),
            max_backoff: Duration::from_millis(self.max_backoff_ms),
        })
    }
}

impl RawAudit {
    /// `[audit]`: buffer, flush and spill limits; records name the edge `name`.
    fn settings(self, name: &str) -> anyhow::Result<Audit> {
        if self.buffer == 0 || self.flush_ms == 0 {
            bail!("audit.buffer and audit.flush_ms: must be at least 1");
        }
        if self.spill_max_mb == 0 {
            bail!("audit.spill_max_mb: must be at least 1");
        }
        if self.stop_flush_ms > 600_000 {
            bail!("audit.stop_flush_ms: at most 600000 (ten minutes)");
        }
        Ok(Audit {
            buffer: crate::audit::AuditSettings {
                enabled: self.enabled,
                capacity: self.buffer,
                spill_dir: (!self.spill_dir.is_empty()).then(|| self.spill_dir.into()),
                spill_max_bytes: self.spill_max_mb.saturating_mul(1 << 20),
                edge: name.to_owned(),
            },
            flush: Duration::from_millis(self.flush_ms),
            stop_flush: Duration::from_millis(self.stop_flush_ms),
        })
    }
}

impl RawShutdown {
    /// `[shutdown]`: grace and drain bounds.
    fn settings(&self) -> anyhow::Result<Shutdown> {
        if self.grace_ms > 600_000 {
            bail!("shutdown.grace_ms: at most 600000 (ten minutes)");
        }
        if !(1..=3600).contains(&self.drain_secs) {
            bail!("shutdown.drain_secs: must be between 1 and 3600");
        }
        Ok(Shutdown {
            grace: Duration::from_millis(self.grace_ms),
            drain: Duration::from_secs(self.drain_secs),
        })
    }
}

#[cfg(test)]
mod tests;
