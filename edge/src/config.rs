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
    /// Logging.
    pub log: RawLog,
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

/// `[cache]`.
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
    pub rate_limits_when_redis_down: String,
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

/// `[mcp]`.
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

/// `[executors]`.
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
    /// Its key.
    pub upstream_key_file: String,
}

/// `[watch]`.
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

/// `[audit]`.
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

/// `[anonymous]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawAnonymous {
    /// Tenant.
    pub tenant: String,
    /// Role.
    pub role: String,
}

/// `[log]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawLog {
    /// `text` or `json`.
    pub format: String,
    /// Filter directive; `RUST_LOG` wins.
    pub level: String,
}

/// Validated edge configuration.
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
    /// Edge token.
    pub edge_token: String,
    /// Redis URL, if any.
    pub redis_url: Option<String>,
    /// Cache settings.
    pub cache: RawCache,
    /// MCP settings.
    pub mcp: RawMcp,
    /// Executor settings.
    pub executors: RawExecutors,
    /// The key signing calls to gRPC executors.
    pub executor_key: tp_proto::invoke_auth::ExecutorKey,
    /// The HTTP client of MCP upstreams (their TLS settings applied).
    pub upstream_http: reqwest::Client,
    /// Watch settings.
    pub watch: RawWatch,
    /// Audit settings.
    pub audit: RawAudit,
    /// Stop settings.
    pub shutdown: RawShutdown,
    /// Anonymous (tenant, role), if enabled.
    pub anonymous: Option<(String, String)>,
    /// OAuth resource-server settings, if enabled.
    pub oauth: Option<crate::oauth::OAuth>,
    /// Log format is JSON.
    pub log_json: bool,
    /// Log filter.
    pub log_level: String,
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
            log: RawLog::default(),
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
            rate_limits_when_redis_down: "share".into(),
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

impl Default for RawLog {
    fn default() -> Self {
        Self {
            format: "text".into(),
            level: "info,rmcp=warn".into(),
        }
    }
}

// === impl RawConfig ===

impl RawConfig {
    /// Validates every field.
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
        let redis_url = (!self.redis_url.is_empty()).then_some(self.redis_url);
        self.cache.check_redis(redis_url.as_deref())?;
        self.cache.check()?;
        self.mcp.check()?;
        self.http.validate("http").map_err(anyhow::Error::msg)?;
        let raw_mcp = self.mcp.bounded()?;
        self.executors.check()?;
        let upstream_http = tp_upstream::http_client(
            &self.executors.upstream_ca_file,
            &self.executors.upstream_cert_file,
            &self.executors.upstream_key_file,
        )?;
        let executor_key = self.executors.executor_key(&edge_token)?;
        self.watch.check()?;
        self.audit.check()?;
        self.shutdown.check()?;
        let anonymous = match (
            self.anonymous.tenant.is_empty(),
            self.anonymous.role.is_empty(),
        ) {
            (true, true) => None,
            (false, false) => Some((self.anonymous.tenant, self.anonymous.role)),
            _ => bail!("anonymous: set both tenant and role, or neither"),
        };
        let log_json = self.log.json()?;
        let name = if self.name.is_empty() {
            listen.to_string()
        } else {
            self.name
        };
        let oauth = self.oauth.validate()?;
        let tls = match self.tls.enabled("tls") {
            Ok(true) => Some(self.tls),
            Ok(false) => None,
            Err(message) => bail!(message),
        };
        Ok(EdgeConfig {
            tls,
            oauth,
            listen,
            admin_listen,
            http: self.http,
            executor_key,
            upstream_http,
            name,
            control_plane: self.control_plane,
            edge_token,
            redis_url,
            cache: self.cache,
            mcp: raw_mcp,
            executors: self.executors,
            watch: self.watch,
            audit: self.audit,
            shutdown: self.shutdown,
            anonymous,
            log_json,
            log_level: self.log.level,
        })
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

impl RawLog {
    /// Whether lines are JSON (`format: json`) rather than text.
    fn json(&self) -> anyhow::Result<bool> {
        match self.format.as_str() {
            "text" => Ok(false),
            "json" => Ok(true),
            other => bail!("log.format: {other:?} is not text or json"),
        }
    }
}

// === impl EdgeConfig ===

impl EdgeConfig {
    /// The request timeout.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.mcp.request_timeout_ms)
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
    /// `redis_url` against the Redis settings of `[cache]`: one URL for a primary, several
    /// only for a cluster's seed nodes or a primary's sentinels, TLS files only with TLS.
    fn check_redis(&self, redis_url: Option<&str>) -> anyhow::Result<()> {
        if let Some(urls) = redis_url {
            let urls: Vec<&str> = urls.split(',').map(str::trim).collect();
            for url in &urls {
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
        } else if self.redis_cluster {
            bail!("cache.redis_cluster: set redis_url to the cluster's seed nodes");
        } else if !self.redis_sentinel_master.is_empty() {
            bail!("cache.redis_sentinel_master: set redis_url to the sentinels' addresses");
        }
        Ok(())
    }

    /// `[cache]`: capacities, lifetimes, the Redis prefix and the rate-limit policy.
    fn check(&self) -> anyhow::Result<()> {
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
        if !matches!(
            self.rate_limits_when_redis_down.as_str(),
            "share" | "closed" | "local"
        ) {
            bail!(
                "cache.rate_limits_when_redis_down: {:?} is not share, closed or local",
                self.rate_limits_when_redis_down
            );
        }
        Ok(())
    }
}

impl RawMcp {
    /// The limits that depend on each other: arguments travel in the body (so never larger),
    /// and the in-flight budget holds at least one largest request.
    fn bounded(self) -> anyhow::Result<RawMcp> {
        if self.max_argument_bytes < 1024 {
            bail!("mcp.max_argument_bytes: must be at least 1 KiB");
        }
        // Arguments travel in the body: they can never be larger.
        let mut mcp = self;
        mcp.max_argument_bytes = mcp.max_argument_bytes.min(mcp.max_body_bytes);
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
        Ok(mcp)
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
    fn check(&self) -> anyhow::Result<()> {
        if !(100..=60_000).contains(&self.heartbeat_ms) {
            bail!("watch.heartbeat_ms: must be between 100 and 60000");
        }
        if self.dead_after_ms <= u64::from(self.heartbeat_ms) {
            bail!("watch.dead_after_ms: must be longer than watch.heartbeat_ms");
        }
        Ok(())
    }
}

impl RawAudit {
    /// `[audit]`: buffer, flush and spill limits.
    fn check(&self) -> anyhow::Result<()> {
        if self.buffer == 0 || self.flush_ms == 0 {
            bail!("audit.buffer and audit.flush_ms: must be at least 1");
        }
        if self.spill_max_mb == 0 {
            bail!("audit.spill_max_mb: must be at least 1");
        }
        if self.stop_flush_ms > 600_000 {
            bail!("audit.stop_flush_ms: at most 600000 (ten minutes)");
        }
        Ok(())
    }
}

impl RawShutdown {
    /// `[shutdown]`: grace and drain bounds.
    fn check(&self) -> anyhow::Result<()> {
        if self.grace_ms > 600_000 {
            bail!("shutdown.grace_ms: at most 600000 (ten minutes)");
        }
        if !(1..=3600).contains(&self.drain_secs) {
            bail!("shutdown.drain_secs: must be between 1 and 3600");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
