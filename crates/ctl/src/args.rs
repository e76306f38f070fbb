//! The arguments of `toolplanectl`'s subcommands, one type per resource (the top-level
//! [`crate::Cli`] and [`crate::Command`] are in the crate root).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::{TOOL_FIELDS, commands};

/// `tools …`: the catalogue's tools and their lifecycle.
#[derive(Debug, Subcommand)]
pub enum ToolsCmd {
    /// List tools (name order).
    List {
        /// Only this category.
        #[arg(long, default_value = "")]
        category: String,
        /// Only this provider ("-" = platform tools).
        #[arg(long, default_value = "")]
        provider: String,
        /// Only this status: active, deprecated, retired.
        #[arg(long)]
        status: Option<String>,
    },
    /// Show one tool.
    Get {
        /// Tool name.
        name: String,
    },
    /// Register tools from JSON files (each one definition, or an array of them).
    #[command(long_about = TOOL_FIELDS)]
    Register {
        /// JSON files; `-` for stdin. Each holds one definition or an array of definitions;
        /// they are registered in order, with progress, and the first refusal stops the run.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Replace a tool's definition from a JSON file (the fields of `tools register`).
    #[command(long_about = TOOL_FIELDS)]
    Update {
        /// JSON file; `-` for stdin.
        file: PathBuf,
    },
    /// Deprecate a tool (it keeps counting against the ceiling).
    Deprecate {
        /// Tool name.
        name: String,
        /// Sunset date, YYYY-MM-DD.
        #[arg(long)]
        sunset: String,
    },
    /// Retire a tool (frees a ceiling slot).
    Retire {
        /// Tool name.
        name: String,
    },
    /// Reactivate a deprecated or retired tool.
    Reactivate {
        /// Tool name.
        name: String,
    },
    /// Tools whose MCP upstream now says something else than what was admitted (the control
    /// plane checks every `lifecycle.drift_check_secs`); with a name, the difference field by
    /// field. Exits 1 when there is drift.
    Drift {
        /// One tool: show what differs.
        name: Option<String>,
        /// Admit what the upstream now says (a new admission: the lint again, a new pin).
        #[arg(long, requires = "name")]
        admit: bool,
        /// The accepted ADR that allows the change, needed when it widens the tool (new
        /// actions or arguments, weaker hints, more callers).
        #[arg(long, requires = "admit")]
        adr: Option<String>,
    },
}

/// `adrs …`: architecture decision records, which admit tools and set the ceiling.
#[derive(Debug, Subcommand)]
pub enum AdrsCmd {
    /// List ADRs.
    List,
    /// Show one ADR.
    Get {
        /// ADR id.
        id: String,
    },
    /// Record an ADR.
    Create(AdrArgs),
    /// Update title, date, links, summary, supersedes.
    Update(AdrArgs),
    /// proposed -> accepted.
    Accept {
        /// ADR id.
        id: String,
    },
    /// proposed -> rejected.
    Reject {
        /// ADR id.
        id: String,
    },
    /// accepted -> superseded (not for the ceiling's ADR: use `policy amend`).
    Supersede {
        /// ADR id.
        id: String,
    },
}

/// Fields of an ADR.
#[derive(Debug, Args)]
pub struct AdrArgs {
    /// Id, e.g. ADR-040.
    pub id: String,
    /// The decision's title.
    #[arg(long)]
    pub title: String,
    /// Date, YYYY-MM-DD.
    #[arg(long)]
    pub date: String,
    /// proposed, accepted or rejected (create only).
    #[arg(long, default_value = "proposed")]
    pub status: String,
    /// The ADR this one supersedes.
    #[arg(long, default_value = "")]
    pub supersedes: String,
    /// Links (repeatable).
    #[arg(long = "link")]
    pub links: Vec<String>,
    /// A one-line summary of the decision.
    #[arg(long, default_value = "")]
    pub summary: String,
}

/// `policy …`: the tool ceiling.
#[derive(Debug, Subcommand)]
pub enum PolicyCmd {
    /// Ceiling, count, headroom, buckets, history.
    Show,
    /// Amend the ceiling citing an accepted ADR that supersedes the one in force.
    Amend {
        /// New ceiling.
        #[arg(long)]
        ceiling: u32,
        /// The accepted ADR that sets the new ceiling.
        #[arg(long)]
        adr: String,
    },
}

/// `tenants …`: tenants and their settings.
#[derive(Debug, Subcommand)]
pub enum TenantsCmd {
    /// List tenants.
    List,
    /// Show a tenant.
    Get {
        /// Tenant id.
        id: String,
    },
    /// Create a tenant.
    Create(TenantArgs),
    /// Change a tenant (only the given fields).
    Update(TenantArgs),
    /// Delete a tenant and its keys.
    Delete {
        /// Tenant id.
        id: String,
    },
    /// Trust an identity provider's OAuth access tokens for the tenant's MCP callers (replaces
    /// an earlier trust of the same issuer).
    Trust(TrustArgs),
    /// Stop trusting an identity provider: its tokens stop working at once.
    Untrust {
        /// Tenant id.
        id: String,
        /// The issuer URL.
        #[arg(long)]
        issuer: String,
    },
    /// Connect a provider for the tenant with an API credential (sealed at once, never shown
    /// again); the provider joins the tenant's connected_apis. Connecting again replaces it.
    Connect(ConnectArgs),
    /// Remove the tenant's connection to a provider, and the provider from connected_apis.
    Disconnect {
        /// Tenant id.
        id: String,
        /// The provider to disconnect.
        #[arg(long)]
        provider: String,
    },
    /// The tenant's connections (providers, fingerprints, dates; never a credential).
    Connections {
        /// Tenant id.
        id: String,
    },
}

/// `connections`: tenants' connections to providers (ADR 0015).
#[derive(Debug, Subcommand)]
pub enum ConnectionsCmd {
    /// A tenant's connections (providers, fingerprints, dates; never a credential).
    List {
        /// Tenant id.
        id: String,
    },
    /// Connect a provider for the tenant. Providers configured for OAuth on the control plane
    /// (`[[connections.oauth]]`): prints the authorization URL to open in a browser; whoever
    /// consents there connects their provider account to the tenant. With a credential
    /// (`--credential` or TOOLPLANE_PROVIDER_CREDENTIAL): connects with that API credential at
    /// once, as `tenants connect` does.
    Connect {
        /// Tenant id.
        id: String,
        /// The provider (of the catalogue).
        #[arg(long)]
        provider: String,
        /// An API credential instead of OAuth (prefer the environment variable: a flag is
        /// visible to other users in `ps`).
        #[arg(long, env = "TOOLPLANE_PROVIDER_CREDENTIAL", hide_env_values = true)]
        credential: Option<String>,
        /// With a credential: Unix seconds after which it is not used.
        #[arg(long)]
        expires_at: Option<u64>,
        /// One user of the tenant (as edges name callers: `ISSUER#SUBJECT` for an access
        /// token, the key id for an API key) instead of the whole tenant.
        #[arg(long)]
        user: Option<String>,
    },
    /// Remove the tenant's (or a user's) connection to a provider; the provider leaves
    /// connected_apis with its last connection.
    Disconnect {
        /// Tenant id.
        id: String,
        /// The provider to disconnect.
        #[arg(long)]
        provider: String,
        /// One user of the tenant (as edges name callers: `ISSUER#SUBJECT` for an access
        /// token, the key id for an API key) instead of the whole tenant.
        #[arg(long)]
        user: Option<String>,
    },
    /// One connection's state: kind, fingerprint, scopes, when its token expires and whether
    /// the control plane renews it. Exits 1 when the tenant has no usable connection to the
    /// provider.
    Status {
        /// Tenant id.
        id: String,
        /// The provider whose connection to show.
        #[arg(long)]
        provider: String,
        /// One user of the tenant (as edges name callers: `ISSUER#SUBJECT` for an access
        /// token, the key id for an API key) instead of the whole tenant.
        #[arg(long)]
        user: Option<String>,
    },
}

/// `tenants connect`.
#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// Tenant id.
    pub id: String,
    /// The provider (of the catalogue).
    #[arg(long)]
    pub provider: String,
    /// The credential (what the provider's API takes as a bearer token). Prefer the
    /// environment variable to the flag: a flag is visible to other users in `ps`.
    #[arg(long, env = "TOOLPLANE_PROVIDER_CREDENTIAL", hide_env_values = true)]
    pub credential: String,
    /// Unix seconds after which the credential is not used.
    #[arg(long)]
    pub expires_at: Option<u64>,
}

impl From<ConnectArgs> for tp_proto::pb::ConnectProviderRequest {
    fn from(args: ConnectArgs) -> Self {
        Self {
            tenant: args.id,
            provider: args.provider,
            credential: args.credential,
            expires_at: args.expires_at.unwrap_or(0),
            user: String::new(),
        }
    }
}

/// `tenants trust`.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// Tenant id.
    pub id: String,
    /// The issuer (`iss`) exactly as the provider writes it (https; http only on loopback).
    #[arg(long)]
    pub issuer: String,
    /// Map a group to a role, GROUP=ROLE; repeat in order of precedence.
    #[arg(long = "group-role", value_name = "GROUP=ROLE")]
    pub group_roles: Vec<String>,
    /// The role of a caller in none of the groups (default: such callers are refused).
    #[arg(long)]
    pub default_role: Option<String>,
    /// The claim holding the caller's groups.
    #[arg(long, default_value = "groups")]
    pub role_claim: String,
    /// CLAIM=VALUE a token must hold to be this tenant's (needed when tenants share an issuer).
    #[arg(long, value_name = "CLAIM=VALUE")]
    pub tenant_claim: Option<String>,
    /// The audience tokens must name (default: the edge's resource URL).
    #[arg(long)]
    pub audience: Option<String>,
    /// The provider's key-set URL (default: discovered from the issuer's metadata).
    #[arg(long)]
    pub jwks_uri: Option<String>,
    /// Let scopes name providers: with `provider:`, a token whose scopes hold
    /// `provider:hubspot` sees only hubspot's tools of the tenant (and platform tools).
    #[arg(long)]
    pub provider_scope_prefix: Option<String>,
}

/// Tenant fields.
#[derive(Debug, Args)]
pub struct TenantArgs {
    /// Tenant id.
    pub id: String,
    /// Display name.
    #[arg(long)]
    pub name: Option<String>,
    /// Connected providers, comma-separated ("" = none: platform tools only). Creating a
    /// tenant needs this or --all-apis: a new tenant never sees every tool by omission.
    #[arg(long, conflicts_with = "all_apis")]
    pub connected_apis: Option<String>,
    /// The tenant sees every tool, whatever its provider (ADR-039's "all").
    #[arg(long)]
    pub all_apis: bool,
    /// Roles keys may take, comma-separated ("" = all).
    #[arg(long)]
    pub roles: Option<String>,
    /// Disclosure mode: full, progressive, auto.
    #[arg(long)]
    pub disclosure: Option<String>,
    /// Auto-disclosure threshold.
    #[arg(long)]
    pub threshold: Option<u32>,
    /// Pinned tools, comma-separated.
    #[arg(long)]
    pub pinned: Option<String>,
    /// Tool calls per minute (0 = unlimited).
    #[arg(long)]
    pub rate_limit: Option<u32>,
    /// Webhook for material wiki lint findings ("" = none).
    #[arg(long)]
    pub lint_webhook: Option<String>,
    /// A call that needs a person's approval before it is forwarded (ADR 0013), as
    /// `TOOL=REASON`, `TOOL:ACTION=REASON`, or with a condition on one argument
    /// `TOOL:ACTION[ARG=JSON]=REASON` (`client_wiki:lint[publish_report=true]=…`; an absent
    /// argument counts as its schema default); repeat for several. The rules given replace
    /// the tenant's (an operator's field).
    #[arg(long = "approval", value_name = "TOOL[:ACTION][[ARG=JSON]]=REASON")]
    pub approvals: Vec<String>,
    /// Roles the --approval rules apply to, comma-separated (default: every role).
    #[arg(long, requires = "approvals")]
    pub approval_roles: Option<String>,
    /// Arguments whose values the --approval questions show, comma-separated.
    #[arg(long, requires = "approvals")]
    pub approval_show: Option<String>,
    /// How long each --approval question stays open and an approval valid (10-3600 s).
    #[arg(long, requires = "approvals")]
    pub approval_timeout: Option<u32>,
    /// Removes every approval rule of the tenant.
    #[arg(long, conflicts_with = "approvals")]
    pub no_approvals: bool,
}

/// `keys …`: tenants' API keys.
#[derive(Debug, Subcommand)]
pub enum KeysCmd {
    /// Issue a key (printed once).
    Issue {
        /// The tenant the key belongs to.
        #[arg(long)]
        tenant: String,
        /// The role the key acts with.
        #[arg(long)]
        role: String,
        /// A label for people (who holds the key, what for).
        #[arg(long, default_value = "")]
        label: String,
        /// Lifetime in seconds (0 = never expires).
        #[arg(long, default_value_t = 0)]
        ttl: u64,
    },
    /// List keys.
    List {
        /// Only this tenant.
        #[arg(long, default_value = "")]
        tenant: String,
    },
    /// Revoke a key.
    Revoke {
        /// Key id (key_...).
        id: String,
    },
}

/// `executors …`: where tools run.
#[derive(Debug, Subcommand)]
pub enum ExecutorsCmd {
    /// List executors.
    List,
    /// Create or update an executor.
    Upsert {
        /// The executor's name, as tools name it.
        name: String,
        /// Endpoint URL (required when the executor is new).
        #[arg(long)]
        endpoint: Option<String>,
        /// grpc or mcp (new executors: grpc).
        #[arg(long)]
        protocol: Option<String>,
        /// Per-call timeout (ms; new executors: 30000).
        #[arg(long)]
        timeout_ms: Option<u32>,
        /// Concurrent calls per edge (new executors: 64).
        #[arg(long)]
        max_concurrency: Option<u32>,
        /// What the executor is, for people.
        #[arg(long)]
        description: Option<String>,
        /// MCP executors: prefix of its tools' catalogue names, stripped before calling the
        /// upstream.
        #[arg(long)]
        tool_prefix: Option<String>,
        /// MCP executors: environment variable, on each edge, holding the upstream credential.
        #[arg(long)]
        credential_env: Option<String>,
        /// Header carrying it (default `authorization`, where a bare token is sent as Bearer).
        #[arg(long)]
        credential_header: Option<String>,
        /// MCP executors: exchange tenants' connection tokens (RFC 8693) at the upstream's
        /// authorization server, as a JSON object: `{"token_endpoint": URL, "client_id": ID,
        /// "client_secret_env": VAR, "audience": A, "scope": S}` (the last three optional);
        /// an empty string removes it.
        #[arg(long)]
        token_exchange: Option<String>,
    },
    /// Read an MCP executor's live `tools/list` and print catalogue entries for its tools
    /// (names prefixed with the executor's `tool_prefix`), ready for `tools register`; with
    /// `--register`, register them (through the ceiling, citing `--adr` or `--owner`/`--scope`).
    Import {
        /// The executor (protocol mcp).
        name: String,
        /// Provider the imported tools need (empty = platform tools, visible to every tenant).
        #[arg(long, default_value = "")]
        provider: String,
        /// Category of the imported tools.
        #[arg(long, default_value = "mcp")]
        category: String,
        /// Only these upstream tools (comma-separated; default all).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Register the proposals instead of printing them.
        #[arg(long)]
        register: bool,
        /// ADR admitting the tools.
        #[arg(long, default_value = "")]
        adr: String,
        /// Owner admitting the tools (with --scope) when there is no ADR.
        #[arg(long, default_value = "")]
        owner: String,
        /// What the owner admits them for.
        #[arg(long, default_value = "")]
        scope: String,
        /// Credential for reading the upstream's list (default: the executor's credential_env,
        /// read from this shell's environment).
        #[arg(long, env = "TOOLPLANE_UPSTREAM_CREDENTIAL", hide_env_values = true)]
        credential: Option<String>,
    },
    /// Compare the catalogue's tools of an MCP executor with the upstream's live list: added,
    /// removed and changed schemas. Exits 1 on drift.
    Drift {
        /// The executor (protocol mcp).
        name: String,
        /// Credential (as for import).
        #[arg(long, env = "TOOLPLANE_UPSTREAM_CREDENTIAL", hide_env_values = true)]
        credential: Option<String>,
    },
    /// Delete an executor no live tool uses.
    Delete {
        /// The executor to delete (refused while tools use it).
        name: String,
    },
}

/// `providers …`: the external APIs tools belong to.
#[derive(Debug, Subcommand)]
pub enum ProvidersCmd {
    /// List providers.
    List,
    /// Create or update a provider.
    Upsert {
        /// The provider's id, as tools and tenants' connected_apis name it.
        id: String,
        /// Display name.
        #[arg(long, default_value = "")]
        name: String,
        /// What the provider is, for people.
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Delete an unused provider.
    Delete {
        /// The provider to delete.
        id: String,
    },
}

/// `roles …`: the roles keys act with.
#[derive(Debug, Subcommand)]
pub enum RolesCmd {
    /// List roles.
    List,
    /// Create or update a role.
    Upsert {
        /// The role's name, as keys name it.
        name: String,
        /// What the role is for, for people.
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Delete an unused role.
    Delete {
        /// The role to delete.
        name: String,
    },
}

/// `registry --tenant T --role R`
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// The tenant whose registry to resolve.
    #[arg(long)]
    pub tenant: String,
    /// The role to resolve it for.
    #[arg(long)]
    pub role: String,
}

/// `usage [--tenant T] [--unused-days N]`
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Only this tenant.
    #[arg(long, default_value = "")]
    pub tenant: String,
    /// Instead, the live tools (active or deprecated) nobody called in the last N days —
    /// across all tenants unless --tenant — never-called ones included. ADR-037 makes a tool
    /// unused by every tenant for 60 days a candidate for retirement.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub unused_days: Option<u32>,
}

/// `audit [--tenant T] [--tool X] [--principal P] [--outcome O] [--since W] [--until W]
/// [--limit N]`
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only this tenant.
    #[arg(long, default_value = "")]
    pub tenant: String,
    /// Only this tool.
    #[arg(long, default_value = "")]
    pub tool: String,
    /// Only this caller: an API key's id, or `<issuer>#<subject>` for an OAuth token.
    #[arg(long, default_value = "")]
    pub principal: String,
    /// Only this outcome.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(commands::audit::outcomes()))]
    pub outcome: Option<String>,
    /// From this time on: RFC 3339 (2026-11-25T10:00:00Z) or an age (90s, 30m, 12h, 7d).
    #[arg(long, value_parser = commands::audit::parse_when)]
    pub since: Option<u64>,
    /// Before this time (same forms as --since).
    #[arg(long, value_parser = commands::audit::parse_when)]
    pub until: Option<u64>,
    /// At most this many records.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    /// Oldest first (default: newest first).
    #[arg(long)]
    pub oldest_first: bool,
}

/// `admin-tokens …`: administrators' tokens.
#[derive(Debug, Subcommand)]
pub enum AdminTokensCmd {
    /// Issue an admin token (printed once).
    Issue {
        /// What it may do: read-only (every read), tenant-admin (reads, and everything about
        /// the --tenant tenants), or full (everything, admin tokens included).
        #[arg(long, value_parser = ["read-only", "tenant-admin", "full"])]
        scope: String,
        /// A tenant a tenant-admin token manages (repeat for several).
        #[arg(long = "tenant")]
        tenants: Vec<String>,
        /// Who or what holds it.
        #[arg(long, default_value = "")]
        label: String,
        /// Lifetime in seconds (default: never expires).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=315_360_000))]
        ttl: Option<u64>,
    },
    /// List admin tokens (never their secrets).
    List,
    /// Revoke an admin token.
    Revoke {
        /// Token id (adm_...).
        id: String,
    },
}

/// `changes [--since-revision N] [--author A] [--limit N]`
#[derive(Debug, Args)]
pub struct ChangesArgs {
    /// Only writes after this revision.
    #[arg(long, default_value_t = 0)]
    pub since_revision: u64,
    /// Only writes by this author (`admin`, an admin token's id, or `system`).
    #[arg(long, default_value = "")]
    pub author: String,
    /// At most this many writes.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
}

/// `docs …`: TOOLS.md and the check for stated tool counts that drifted.
#[derive(Debug, Subcommand)]
pub enum DocsCmd {
    /// Render TOOLS.md from the catalogue.
    Render {
        /// Write here instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Report stated tool counts that disagree with the catalogue; exit 1 if any.
    Check {
        /// Documents to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}
