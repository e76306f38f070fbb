//! Control-plane configuration: defaults < TOML file < `TOOLPLANE_CP_*` environment, into a
//! struct that rejects unknown keys, validated once into [`ControlPlaneConfig`].

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

/// Prefix of the control plane's environment variables (`TOOLPLANE_CP_LISTEN`,
/// `TOOLPLANE_CP_AUTH__ADMIN_TOKEN`, ...; `__` separates nested keys).
pub const ENV_PREFIX: &str = "TOOLPLANE_CP_";

/// The file format of the configuration, as written by operators.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawConfig {
    /// gRPC listen address.
    pub listen: String,
    /// Directory for the SQLite database and generated tokens.
    pub data_dir: PathBuf,
    /// Store URL: empty = `<data_dir>/control-plane.db`; `sqlite://PATH`; or
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` for several replicas on one database.
    pub store_url: String,
    /// Tokens.
    pub auth: RawAuth,
    /// The ceiling written on first start when the store has none.
    pub bootstrap: RawBootstrap,
    /// Watch stream settings.
    pub watch: RawWatch,
    /// Connection limits of the gRPC listener.
    pub grpc: RawGrpc,
    /// Where to serve Prometheus metrics (`GET /metrics`); empty = not served.
    pub metrics_listen: String,
    /// The audit trail.
    pub audit: RawAudit,
    /// Tool lifecycle work the control plane does by itself.
    pub lifecycle: RawLifecycle,
    /// TLS for the gRPC listener (off unless `tls.cert_file` is set; `tls.client_ca_file`
    /// requires client certificates; files reloaded when they change).
    pub tls: tp_net::tls::TlsFiles,
    /// `[admin_oidc]`: admins signing in with an OpenID provider's access tokens.
    pub admin_oidc: crate::admin_oidc::RawAdminOidc,
    /// `[connections]`: providers connected by OAuth and the callback they send browsers to.
    pub connections: crate::provider_oauth::RawConnections,
    /// Logging.
    pub log: tp_telemetry::LogConfig,
}

/// `[audit]`: how long the audit trail is kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawAudit {
    /// Records older than this many days are deleted (hourly); 0 = kept forever.
    pub retention_days: u32,
}

impl Default for RawAudit {
    fn default() -> Self {
        Self { retention_days: 90 }
    }
}

/// `[lifecycle]`: work on the catalogue the control plane does by itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawLifecycle {
    /// How often to retire deprecated tools whose sunset date has passed (also at start).
    pub sunset_check_secs: u64,
    /// How often to fetch the tool lists of MCP upstreams (executors with `protocol: mcp`) and
    /// compare them with the admitted definitions (also at start); 0 = never.
    pub drift_check_secs: u64,
    /// What a tool whose upstream changed its definition does until an admin admits the
    /// change: `hide` (no registry lists it; calls fail as unknown) or `serve` (the admitted
    /// text keeps being served and calls keep reaching the upstream).
    pub on_drift: OnDrift,
}

/// `lifecycle.on_drift`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDrift {
    /// Hide the tool from every registry.
    #[default]
    Hide,
    /// Keep serving the admitted definition.
    Serve,
}

impl Default for RawLifecycle {
    fn default() -> Self {
        Self {
            sunset_check_secs: 300,
            drift_check_secs: 300,
            on_drift: OnDrift::Hide,
        }
    }
}

/// `[grpc]`: the listener's connection limits and the whole-call timeout of unary calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawGrpc {
    /// Most open connections; beyond, new ones are closed as they are accepted.
    pub max_connections: usize,
    /// A connection must send its first bytes (the HTTP/2 preface) within this.
    pub handshake_timeout_ms: u64,
    /// A connection that reads and writes nothing for this long is closed (edges' watch
    /// streams carry a heartbeat every second).
    pub idle_timeout_ms: u64,
    /// Longest a unary call, its request message included, may take.
    pub request_timeout_ms: u64,
}

impl Default for RawGrpc {
    fn default() -> Self {
        let limits = tp_net::ListenerLimits::default();
        Self {
            max_connections: limits.max_connections,
            handshake_timeout_ms: limits.header_read_timeout_ms,
            idle_timeout_ms: limits.idle_timeout_ms,
            request_timeout_ms: 30_000,
        }
    }
}

impl RawGrpc {
    /// The listener limits these settings make.
    pub fn limits(&self) -> tp_net::ListenerLimits {
        tp_net::ListenerLimits {
            max_connections: self.max_connections,
            header_read_timeout_ms: self.handshake_timeout_ms,
            idle_timeout_ms: self.idle_timeout_ms,
            ..tp_net::ListenerLimits::default()
        }
    }
}

/// `[auth]`: how administrators authenticate.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawAuth {
    /// Token for admin RPCs; empty = generated once and kept in `<data_dir>/admin-token`.
    pub admin_token: String,
    /// Token for edge RPCs; empty = generated once and kept in `<data_dir>/edge-token`.
    pub edge_token: String,
    /// The key executor calls are signed with (`tpx_…`), for the purges the control plane
    /// sends them; empty = derived from the edge token, as edges derive it.
    pub executor_key: String,
    /// How soon an access token naming an unknown key id (`kid`) may make the control plane
    /// fetch its issuer's key set again (after the provider rotated keys); 0 = 30 s.
    pub token_key_refetch_secs: u64,
    /// Let token issuers' metadata and key sets be fetched from loopback, private, link-local
    /// and other non-public addresses (an identity provider on the operator's own network).
    /// Off: only public addresses, checked for every address a name resolves to, so no trust
    /// can make the control plane reach an internal service or a metadata endpoint.
    pub private_issuers: bool,
    /// The file of connections' key-encryption keys (ADR 0015): base64 keys, one per line,
    /// the first sealing new credentials. Empty = `<data_dir>/connections-keys`, generated on
    /// first start with SQLite; with PostgreSQL connections are refused until it is set (every
    /// replica must read the same keys).
    pub connections_keys_file: String,
    /// The name of an environment variable holding the connections' key-encryption keys
    /// instead of a file (base64 keys separated by commas, spaces or newlines; the first
    /// seals). Set at most one of the two.
    pub connections_keys_env: String,
}

/// `[bootstrap]`: what a first start creates.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawBootstrap {
    /// Ceiling value.
    pub ceiling: u32,
    /// ADR recorded (accepted) as the one that set it.
    pub ceiling_adr: String,
    /// Title of that ADR.
    pub ceiling_adr_title: String,
    /// Roles created on an empty store.
    pub roles: Vec<String>,
    /// Seed the demo world (ADR-037/039's 34 tools, 3 tenants) into an empty store.
    pub demo: bool,
    /// Endpoint of the demo executor in the seeded world.
    pub demo_executor: String,
    /// Endpoint of the wiki service in the seeded world.
    pub wiki_executor: String,
}

/// `[watch]`: the change stream edges watch.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawWatch {
    /// Default heartbeat period of Watch streams.
    pub heartbeat_ms: u32,
    /// How often to look for writes committed by other processes (0 = never with SQLite, which
    /// has one writer process; 1000 with PostgreSQL, where NOTIFY wakes replicas at once and
    /// this poll is the backstop).
    pub poll_ms: u32,
}

/// Validated configuration.
#[derive(Debug, Clone)]
pub struct ControlPlaneConfig {
    /// gRPC listen address.
    pub listen: SocketAddr,
    /// Data directory.
    pub data_dir: PathBuf,
    /// SQLite database path (unused with PostgreSQL).
    pub sqlite_path: PathBuf,
    /// PostgreSQL URL, when the store is PostgreSQL.
    pub postgres_url: Option<String>,
    /// Admin token (None = generate/read from the data dir).
    pub admin_token: Option<String>,
    /// Least time between fetches of one issuer's key set for unknown key ids.
    pub token_key_refetch: std::time::Duration,
    /// `auth.private_issuers`.
    pub private_issuers: bool,
    /// Edge token (None = generate/read from the data dir).
    pub edge_token: Option<String>,
    /// Where the connections' key-encryption keys come from (`None`: connections are
    /// refused).
    pub connections_keys: Option<KeySource>,
    /// Executor key (None = derived from the edge token).
    pub executor_key: Option<tp_proto::invoke_auth::ExecutorKey>,
    /// Bootstrap ceiling.
    pub bootstrap: RawBootstrap,
    /// Heartbeat period.
    pub heartbeat_ms: u32,
    /// Poll period for foreign writes (0 = off).
    pub poll_ms: u32,
    /// Logging.
    pub log: tp_telemetry::LogConfig,
    /// The gRPC listener's limits.
    pub grpc: tp_net::ListenerLimits,
    /// Longest a unary call may take.
    pub request_timeout: std::time::Duration,
    /// Where `GET /metrics` is served, if anywhere.
    pub metrics_listen: Option<SocketAddr>,
    /// How long audit records are kept (`None`: forever).
    pub audit_retention: Option<std::time::Duration>,
    /// How often tools past their sunset are looked for.
    pub sunset_check: std::time::Duration,
    /// How often MCP upstreams are checked for drift (`None`: never).
    pub drift_check: Option<std::time::Duration>,
    /// What a drifted tool does meanwhile.
    pub on_drift: OnDrift,
    /// TLS files of the gRPC listener, if it serves TLS.
    pub tls: Option<tp_net::tls::TlsFiles>,
    /// Admin sign-in with an OpenID provider, when configured.
    pub admin_oidc: Option<crate::admin_oidc::RawAdminOidc>,
    /// Providers connected by OAuth, when any are configured.
    pub oauth_connections: Option<crate::provider_oauth::OAuthConnections>,
}

// === impl RawConfig ===

impl Default for RawConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:50051".into(),
            data_dir: PathBuf::from(".toolplane"),
            store_url: String::new(),
            auth: RawAuth::default(),
            bootstrap: RawBootstrap::default(),
            watch: RawWatch::default(),
            grpc: RawGrpc::default(),
            metrics_listen: String::new(),
            audit: RawAudit::default(),
            lifecycle: RawLifecycle::default(),
            tls: tp_net::tls::TlsFiles::default(),
            admin_oidc: crate::admin_oidc::RawAdminOidc::default(),
            connections: crate::provider_oauth::RawConnections::default(),
            log: tp_telemetry::LogConfig::default(),
        }
    }
}

impl Default for RawBootstrap {
    fn default() -> Self {
        Self {
            ceiling: 35,
            ceiling_adr: "ADR-000".into(),
            ceiling_adr_title: "Initial tool ceiling (set by configuration at first start)".into(),
            roles: vec!["collector".into(), "executor".into()],
            demo: false,
            demo_executor: "http://127.0.0.1:50053".into(),
            wiki_executor: "http://127.0.0.1:50052".into(),
        }
    }
}

impl Default for RawWatch {
    fn default() -> Self {
        Self {
            heartbeat_ms: 5_000,
            poll_ms: 0,
        }
    }
}

impl RawConfig {
    /// Checks every field and builds the validated configuration.
    pub fn validate(self) -> anyhow::Result<ControlPlaneConfig> {
        let listen: SocketAddr = self.listen.parse().with_context(|| {
            format!(
                "listen: {:?} is not an address like 127.0.0.1:50051",
                self.listen
            )
        })?;
        if self.data_dir.as_os_str().is_empty() {
            bail!("data_dir: must not be empty");
        }
        let (sqlite_path, postgres_url) = store(&self.store_url, &self.data_dir)?;
        // Several replicas on PostgreSQL: commits are announced by NOTIFY; this poll is the
        // backstop when a notification is lost.
        let poll_ms = match (&postgres_url, self.watch.poll_ms) {
            (Some(_), 0) => 1000,
            (_, poll_ms) => poll_ms,
        };
        let executor_key = self.auth.check()?;
        let connections_keys = self
            .auth
            .connections_keys(&self.data_dir, postgres_url.is_some())?;
        self.bootstrap.check()?;
        self.watch.check()?;
        self.grpc.limits().validate("grpc").map_err(|e| {
            anyhow::anyhow!(e.replace("header_read_timeout_ms", "handshake_timeout_ms"))
        })?;
        if !(100..=3_600_000).contains(&self.grpc.request_timeout_ms) {
            bail!("grpc.request_timeout_ms: must be between 100 and 3600000");
        }
        let metrics_listen = metrics_listen(&self.metrics_listen)?;
        if self.audit.retention_days > 36_500 {
            bail!("audit.retention_days: must be between 0 (keep forever) and 36500");
        }
        if !(1..=86_400).contains(&self.lifecycle.sunset_check_secs) {
            bail!("lifecycle.sunset_check_secs: must be between 1 and 86400");
        }
        if self.lifecycle.drift_check_secs > 86_400 {
            bail!("lifecycle.drift_check_secs: at most 86400 (a day); 0 turns the check off");
        }
        let tls = match self.tls.enabled("tls") {
            Ok(true) => Some(self.tls),
            Ok(false) => None,
            Err(message) => bail!(message),
        };
        let admin_oidc = self.admin_oidc.validate().map_err(|e| anyhow::anyhow!(e))?;
        Ok(ControlPlaneConfig {
            tls,
            admin_oidc,
            oauth_connections: self.connections.validate()?,
            metrics_listen,
            sunset_check: std::time::Duration::from_secs(self.lifecycle.sunset_check_secs),
            drift_check: (self.lifecycle.drift_check_secs > 0)
                .then(|| std::time::Duration::from_secs(self.lifecycle.drift_check_secs)),
            on_drift: self.lifecycle.on_drift,
            audit_retention: (self.audit.retention_days > 0).then(|| {
                std::time::Duration::from_secs(u64::from(self.audit.retention_days) * 86_400)
            }),
            listen,
            data_dir: self.data_dir,
            sqlite_path,
            postgres_url,
            token_key_refetch: std::time::Duration::from_secs(
                match self.auth.token_key_refetch_secs {
                    0 => 30,
                    secs => secs,
                },
            ),
            private_issuers: self.auth.private_issuers,
            admin_token: (!self.auth.admin_token.is_empty()).then_some(self.auth.admin_token),
            edge_token: (!self.auth.edge_token.is_empty()).then_some(self.auth.edge_token),
            executor_key,
            connections_keys,
            bootstrap: self.bootstrap,
            heartbeat_ms: self.watch.heartbeat_ms,
            poll_ms,
            log: self.log,
            grpc: self.grpc.limits(),
            request_timeout: std::time::Duration::from_millis(self.grpc.request_timeout_ms),
        })
    }
}

/// `metrics_listen`: empty (no metrics listener) or an address.
fn metrics_listen(value: &str) -> anyhow::Result<Option<SocketAddr>> {
    match value {
        "" => Ok(None),
        addr => Ok(Some(addr.parse::<SocketAddr>().with_context(|| {
            format!("metrics_listen: {addr:?} is not an address like 127.0.0.1:9091")
        })?)),
    }
}

/// `store_url` as the SQLite file to use (under `data_dir` unless the URL names one) and the
/// PostgreSQL URL, if it is one.
fn store(store_url: &str, data_dir: &std::path::Path) -> anyhow::Result<(PathBuf, Option<String>)> {
    if store_url.is_empty() {
        return Ok((data_dir.join("control-plane.db"), None));
    }
    if let Some(path) = store_url.strip_prefix("sqlite://") {
        if path.is_empty() {
            bail!("store_url: sqlite:// needs a path");
        }
        return Ok((PathBuf::from(path), None));
    }
    if store_url.starts_with("postgres://") || store_url.starts_with("postgresql://") {
        return Ok((
            data_dir.join("control-plane.db"),
            Some(store_url.to_owned()),
        ));
    }
    bail!(
        "store_url: {store_url:?} is not supported (use sqlite://PATH or postgres://USER@HOST/DB)"
    )
}

/// Where the connections' key-encryption keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A file, and whether to generate it when missing.
    File(PathBuf, bool),
    /// An environment variable, by name.
    Env(String),
}

impl RawAuth {
    /// Where the connections' keys come from: the variable or the file given, or a file in
    /// the data directory with SQLite; `None` on PostgreSQL without either (replicas must
    /// share the keys).
    fn connections_keys(
        &self,
        data_dir: &std::path::Path,
        postgres: bool,
    ) -> anyhow::Result<Option<KeySource>> {
        let (file, env) = (
            self.connections_keys_file.as_str(),
            self.connections_keys_env.as_str(),
        );
        Ok(match (file, env, postgres) {
            ("", "", true) => None,
            ("", "", false) => Some(KeySource::File(data_dir.join("connections-keys"), true)),
            (path, "", _) => Some(KeySource::File(PathBuf::from(path), false)),
            ("", name, _) => Some(KeySource::Env(name.to_owned())),
            _ => bail!(
                "auth.connections_keys_file and auth.connections_keys_env are both set: keep one"
            ),
        })
    }

    /// Tokens of at least 16 characters without whitespace; the executor key, parsed.
    fn check(&self) -> anyhow::Result<Option<tp_proto::invoke_auth::ExecutorKey>> {
        for (name, token) in [
            ("auth.admin_token", &self.admin_token),
            ("auth.edge_token", &self.edge_token),
        ] {
            if !token.is_empty() && token.len() < 16 {
                bail!("{name}: must be at least 16 characters");
            }
            if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                bail!("{name}: must not contain whitespace");
            }
        }
        if self.executor_key.is_empty() {
            return Ok(None);
        }
        tp_proto::invoke_auth::ExecutorKey::parse(&self.executor_key)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("auth.executor_key: {e}"))
    }
}

impl RawBootstrap {
    /// The ceiling within bounds and tied to an ADR id, role slugs, executor URLs.
    fn check(&self) -> anyhow::Result<()> {
        if self.ceiling == 0 || self.ceiling > tp_registry::state::MAX_CEILING {
            bail!(
                "bootstrap.ceiling: must be between 1 and {}",
                tp_registry::state::MAX_CEILING
            );
        }
        tp_registry::ident::check_adr_id(&self.ceiling_adr)
            .map_err(|e| anyhow::anyhow!("bootstrap.ceiling_adr: {e}"))?;
        for role in &self.roles {
            tp_registry::ident::check_slug(role)
                .map_err(|e| anyhow::anyhow!("bootstrap.roles: {role:?}: {e}"))?;
        }
        for (name, url) in [
            ("bootstrap.demo_executor", &self.demo_executor),
            ("bootstrap.wiki_executor", &self.wiki_executor),
        ] {
            tp_registry::ident::check_http_url(url).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        }
        Ok(())
    }
}

impl RawWatch {
    fn check(&self) -> anyhow::Result<()> {
        if !(100..=60_000).contains(&self.heartbeat_ms) {
            bail!("watch.heartbeat_ms: must be between 100 and 60000");
        }
        if self.poll_ms != 0 && self.poll_ms < 10 {
            bail!("watch.poll_ms: must be 0 (off) or at least 10");
        }
        Ok(())
    }
}

/// The standard figment: defaults, then the TOML file if given, then the environment.
pub fn figment(file: Option<&std::path::Path>) -> Figment {
    let mut figment = Figment::from(Serialized::defaults(RawConfig::default()));
    if let Some(file) = file {
        figment = figment.merge(Toml::file_exact(file));
    }
    figment.merge(Env::prefixed(ENV_PREFIX).split("__"))
}

/// Extracts and validates a configuration.
pub fn load(figment: Figment) -> anyhow::Result<ControlPlaneConfig> {
    let raw: RawConfig = figment.extract().context("reading control-plane config")?;
    raw.validate()
}

#[cfg(test)]
mod tests {
    use figment::providers::Serialized;

    use super::*;

    fn with(key: &str, value: impl Serialize) -> anyhow::Result<ControlPlaneConfig> {
        load(
            Figment::from(Serialized::defaults(RawConfig::default()))
                .merge(Serialized::default(key, value)),
        )
    }

    #[test]
    fn defaults_are_valid() {
        let config = load(Figment::from(Serialized::defaults(RawConfig::default()))).unwrap();
        assert_eq!(config.listen.to_string(), "127.0.0.1:50051");
        assert_eq!(
            config.sqlite_path,
            PathBuf::from(".toolplane/control-plane.db")
        );
        assert_eq!(config.bootstrap.ceiling, 35);
    }

    #[test]
    fn bad_values_are_refused_with_the_key_named() {
        for (key, value, needle) in [
            ("listen", serde_json::json!("nowhere"), "listen"),
            ("store_url", serde_json::json!("mysql://x"), "store_url"),
            (
                "auth.admin_token",
                serde_json::json!("short"),
                "auth.admin_token",
            ),
            (
                "bootstrap.ceiling",
                serde_json::json!(0),
                "bootstrap.ceiling",
            ),
            (
                "bootstrap.ceiling_adr",
                serde_json::json!("adr 7"),
                "bootstrap.ceiling_adr",
            ),
            (
                "watch.heartbeat_ms",
                serde_json::json!(5),
                "watch.heartbeat_ms",
            ),
            ("log.format", serde_json::json!("xml"), "log.format"),
        ] {
            let err = with(key, value).unwrap_err();
            assert!(format!("{err:#}").contains(needle), "{key}: {err:#}");
        }
    }

    #[test]
    fn the_example_config_in_deploy_loads() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/config/control-plane.toml");
        let config = load(figment(Some(&path))).unwrap();
        let defaults = load(Figment::from(Serialized::defaults(RawConfig::default()))).unwrap();
        assert_eq!(config.listen, defaults.listen);
        assert_eq!(config.sqlite_path, defaults.sqlite_path);
        assert_eq!(config.bootstrap.ceiling, 35);
        assert_eq!(config.heartbeat_ms, defaults.heartbeat_ms);
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment's Jail API
    fn the_file_and_the_environment_override_defaults() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "cp.toml",
                "listen = \"127.0.0.1:6000\"\n[bootstrap]\nceiling = 50\n",
            )?;
            jail.set_env("TOOLPLANE_CP_LISTEN", "127.0.0.1:7000");
            jail.set_env(
                "TOOLPLANE_CP_AUTH__ADMIN_TOKEN",
                "an-admin-token-of-some-length",
            );
            let config =
                load(figment(Some(std::path::Path::new("cp.toml")))).map_err(|e| e.to_string())?;
            assert_eq!(config.listen.to_string(), "127.0.0.1:7000");
            assert_eq!(config.bootstrap.ceiling, 50);
            assert_eq!(
                config.admin_token.as_deref(),
                Some("an-admin-token-of-some-length")
            );
            Ok(())
        });
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = with("lisen", "127.0.0.1:1").unwrap_err();
        assert!(format!("{err:#}").contains("lisen"), "{err:#}");
    }
}
