//! Tenants, API keys, executors, providers, roles and the ceiling policy record.

use serde::{Deserialize, Serialize};

use crate::error::{DomainResult, Violations};
use crate::ident::check_http_url;
use crate::ident::{MAX_DESCRIPTION, MAX_TITLE, check_slug, check_text, check_tool_name};
use crate::tokens::MAX_TOKEN_ISSUERS;

/// Default visible-tool threshold of `auto` disclosure (ADR-037's routing-accuracy limit).
pub const DEFAULT_AUTO_THRESHOLD: u32 = 30;
/// Most pinned tools per tenant.
pub const MAX_PINNED: usize = 50;
/// Most connected APIs per tenant.
pub const MAX_CONNECTED_APIS: usize = 200;
/// Longest executor timeout.
pub const MAX_EXECUTOR_TIMEOUT_MS: u32 = 600_000;
/// Largest executor concurrency limit.
pub const MAX_EXECUTOR_CONCURRENCY: u32 = 100_000;

/// How a tenant's tools are shown in `tools/list`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisclosureMode {
    /// The whole registry.
    Full,
    /// Only the meta-tools (`capabilities`, `tool_schema`, `dispatch`) plus pinned tools.
    Progressive,
    /// Full until the visible tool count passes the threshold, progressive beyond.
    #[default]
    Auto,
}

/// Disclosure settings of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disclosure {
    /// `full`, `progressive` or `auto` (by the registry's size).
    #[serde(default)]
    pub mode: DisclosureMode,
    /// Threshold for `auto` (visible tools above it switch to progressive).
    #[serde(default = "default_threshold")]
    pub threshold: u32,
    /// Tools always listed in progressive mode (if visible).
    #[serde(default)]
    pub pinned: Vec<String>,
}

fn default_threshold() -> u32 {
    DEFAULT_AUTO_THRESHOLD
}

/// Most approval rules per tenant.
pub const MAX_APPROVALS: usize = 100;
/// Most argument names an approval rule shows.
pub const MAX_APPROVAL_SHOWN: usize = 16;
/// Longest time an approval may be waited for, and stays valid, in seconds.
pub const MAX_APPROVAL_TIMEOUT_SECS: u32 = 3600;
/// Shortest.
pub const MIN_APPROVAL_TIMEOUT_SECS: u32 = 10;
/// What an approval waits when the rule names no timeout.
pub const DEFAULT_APPROVAL_TIMEOUT_SECS: u32 = 300;

/// A call that needs a person's approval before the edge forwards it: to a tool (or one action
/// of a polymorphic tool), by every role of the tenant or the roles listed (ADR 0013).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRule {
    /// The tool whose calls need an approval.
    pub tool: String,
    /// One action of a polymorphic tool; `None` = every call of the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The roles it applies to; empty = every role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    /// Why approval is needed; shown in the question and named in every refusal.
    pub reason: String,
    /// How long the question is open and the approval stays valid, in seconds.
    #[serde(default = "default_approval_timeout")]
    pub timeout_secs: u32,
    /// Top-level arguments whose values the question shows (each clipped); the others are
    /// named, never shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub show: Vec<String>,
    /// Only calls whose argument has this value (`client_wiki` lint when `publish_report` is
    /// true); `None` = every call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<ApprovalCondition>,
}

/// The argument value an approval rule is limited to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalCondition {
    /// A top-level argument of the tool.
    pub argument: String,
    /// The value it must have; an absent argument counts as its schema's `default`.
    pub equals: serde_json::Value,
}

fn default_approval_timeout() -> u32 {
    DEFAULT_APPROVAL_TIMEOUT_SECS
}

// === impl ApprovalRule ===

impl ApprovalRule {
    /// Whether the rule applies to a call of `tool`'s `action` ("" for a plain tool) by `role`.
    pub fn applies(&self, tool: &str, action: &str, role: &str) -> bool {
        self.tool == tool
            && self.action.as_deref().is_none_or(|a| a == action)
            && (self.roles.is_empty() || self.roles.iter().any(|r| r == role))
    }

    /// Field checks; `at` is the rule's place (`tenant.approvals[2]`).
    pub(crate) fn check_fields(&mut self, at: &str, v: &mut Violations) {
        v.check(&format!("{at}.tool"), check_tool_name(&self.tool));
        if let Some(action) = &self.action {
            v.check(&format!("{at}.action"), check_slug(action));
        }
        self.roles.sort();
        self.roles.dedup();
        for role in &self.roles {
            v.check(&format!("{at}.roles"), check_slug(role));
        }
        v.check(
            &format!("{at}.reason"),
            check_text(&self.reason, MAX_TITLE, true),
        );
        if !(MIN_APPROVAL_TIMEOUT_SECS..=MAX_APPROVAL_TIMEOUT_SECS).contains(&self.timeout_secs) {
            v.add(
                format!("{at}.timeout_secs"),
                format!(
                    "must be between {MIN_APPROVAL_TIMEOUT_SECS} and {MAX_APPROVAL_TIMEOUT_SECS} (got {})",
                    self.timeout_secs
                ),
            );
        }
        self.show.sort();
        self.show.dedup();
        if self.show.len() > MAX_APPROVAL_SHOWN {
            v.add(
                format!("{at}.show"),
                format!("at most {MAX_APPROVAL_SHOWN} arguments"),
            );
        }
        for name in &self.show {
            v.check(&format!("{at}.show"), check_text(name, 64, true));
        }
        if let Some(when) = &self.when {
            v.check(
                &format!("{at}.when_argument"),
                check_text(&when.argument, 64, true),
            );
        }
    }
}

/// A customer of the platform: what it connected, its disclosure and its limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    /// Slug id.
    pub id: String,
    /// A name for people; the id is what keys and logs use.
    #[serde(default)]
    pub display_name: String,
    /// Providers the tenant connected; `None` = every tool (ADR-039), `Some([])` = platform only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connected_apis: Option<Vec<String>>,
    /// Roles the tenant's keys may take; empty = every registered role.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Disclosure settings.
    #[serde(default)]
    pub disclosure: Disclosure,
    /// Tool calls per minute across the fleet; 0 = unlimited.
    #[serde(default)]
    pub rate_limit_per_minute: u32,
    /// Where material wiki lint findings are posted (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lint_webhook: Option<String>,
    /// Identity providers whose access tokens (JWTs) the tenant's callers may present
    /// instead of API keys, and how their claims map to roles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_issuers: Vec<crate::tokens::TokenIssuer>,
    /// Calls that need a person's approval before they are forwarded (ADR 0013).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalRule>,
    /// Revision of the last change.
    #[serde(default)]
    pub revision: u64,
    /// The tenant's incarnation: fixed when the tenant is created, different for a tenant
    /// deleted and created again under the same id (executors keep data per incarnation).
    /// Empty on tenants created before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// An API key record. The key itself is never stored; only its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    /// Public id (`key_` + 16 hex), used to list and revoke.
    pub id: String,
    /// Owning tenant.
    pub tenant: String,
    /// Role the key acts as.
    pub role: String,
    /// Hex SHA-256 of the key.
    pub hash: String,
    /// Free label.
    #[serde(default)]
    pub label: String,
    /// Unix seconds.
    pub created_at: u64,
    /// Unix seconds; `None` = never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Unix seconds of revocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<u64>,
}

/// How the edge talks to an executor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorProtocol {
    /// The gRPC `toolplane.v1.Executor` contract.
    #[default]
    Grpc,
    /// An upstream MCP server over Streamable HTTP.
    Mcp,
}

/// A backend executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Executor {
    /// Slug name.
    pub name: String,
    /// `http://host:port` (gRPC) or the MCP endpoint URL.
    pub endpoint: String,
    /// How edges call it: the executor gRPC service, or MCP Streamable HTTP.
    #[serde(default)]
    pub protocol: ExecutorProtocol,
    /// Per-call timeout.
    pub timeout_ms: u32,
    /// Concurrent calls per edge.
    pub max_concurrency: u32,
    /// What it runs.
    #[serde(default)]
    pub description: String,
    /// MCP executors: prefix of the catalogue names of its tools, stripped before calling the
    /// upstream.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool_prefix: String,
    /// MCP executors: environment variable on the edges holding the upstream credential.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub credential_env: String,
    /// Header carrying the credential (empty = `authorization`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub credential_header: String,
    /// MCP executors: a tenant's connection token is exchanged (RFC 8693) at the upstream's
    /// authorization server for a token meant for the upstream, which is sent instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_exchange: Option<TokenExchange>,
}

/// RFC 8693 token exchange at an MCP upstream's authorization server: the edge sends a
/// tenant's connection token as the subject token and sends the upstream the token it gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenExchange {
    /// The authorization server's token endpoint (https; http only on loopback).
    pub token_endpoint: String,
    /// The edge's client id there.
    pub client_id: String,
    /// The environment variable, on each edge, holding the client secret (named with the
    /// edges' `executors.credential_env_prefix`); empty = a public client.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_secret_env: String,
    /// The `audience` parameter; empty = none (the `resource` is always the upstream's URL).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub audience: String,
    /// The `scope` parameter; empty = none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope: String,
}

impl TokenExchange {
    fn check(&self, v: &mut Violations) {
        v.check(
            "executor.token_exchange.token_endpoint",
            crate::tokens::check_issuer_url(&self.token_endpoint),
        );
        v.check(
            "executor.token_exchange.client_id",
            check_text(&self.client_id, 256, true),
        );
        if !self.client_secret_env.is_empty() && !is_env_name(&self.client_secret_env) {
            v.add(
                "executor.token_exchange.client_secret_env",
                "an environment variable name: [A-Z_][A-Z0-9_]*",
            );
        }
        v.check(
            "executor.token_exchange.audience",
            check_text(&self.audience, 500, false),
        );
        v.check(
            "executor.token_exchange.scope",
            check_text(&self.scope, 500, false),
        );
    }
}

/// An environment variable name: `[A-Z_][A-Z0-9_]*`, at most 128 characters.
fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// A provider (an external API connection, e.g. `google`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provider {
    /// Slug id.
    pub id: String,
    /// A name for people; the id is what tools and connections use.
    #[serde(default)]
    pub display_name: String,
    /// What the connection covers.
    #[serde(default)]
    pub description: String,
}

/// A role keys may take (e.g. ADR-002's `collector` and `executor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    /// Slug name.
    pub name: String,
    /// What the role is for.
    #[serde(default)]
    pub description: String,
}

/// One entry of the ceiling's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CeilingChange {
    /// The ceiling value.
    pub ceiling: u32,
    /// The ADR that set it.
    pub adr: String,
    /// When (`YYYY-MM-DD`).
    pub date: String,
    /// The revision that set it.
    pub revision: u64,
}

/// The tool-ceiling policy in force, with its history (oldest first, current last).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Maximum number of live (non-retired) tools.
    pub ceiling: u32,
    /// The accepted ADR that set the ceiling.
    pub adr: String,
    /// Every value the ceiling has had.
    pub history: Vec<CeilingChange>,
}

// === impl Disclosure ===

impl Default for Disclosure {
    fn default() -> Self {
        Self {
            mode: DisclosureMode::default(),
            threshold: DEFAULT_AUTO_THRESHOLD,
            pinned: Vec::new(),
        }
    }
}

impl Disclosure {
    /// Whether a registry of `visible` tools is served progressively (meta-tools and pinned
    /// tools in `tools/list`) rather than in full.
    pub fn is_progressive(&self, visible: usize) -> bool {
        let threshold = if self.threshold == 0 {
            DEFAULT_AUTO_THRESHOLD
        } else {
            self.threshold
        };
        match self.mode {
            DisclosureMode::Full => false,
            DisclosureMode::Progressive => true,
            DisclosureMode::Auto => visible > threshold as usize,
        }
    }
}

// === impl DisclosureMode ===

impl DisclosureMode {
    /// Short name.
    pub fn as_str(self) -> &'static str {
        match self {
            DisclosureMode::Full => "full",
            DisclosureMode::Progressive => "progressive",
            DisclosureMode::Auto => "auto",
        }
    }
}

// === impl Tenant ===

impl Tenant {
    /// A tenant with defaults for everything but the id.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            display_name: String::new(),
            connected_apis: None,
            roles: Vec::new(),
            disclosure: Disclosure::default(),
            rate_limit_per_minute: 0,
            lint_webhook: None,
            token_issuers: Vec::new(),
            approvals: Vec::new(),
            revision: 0,
            uid: String::new(),
        }
    }

    /// The approval rule of a call of `tool`'s `action` by `role`: the first that applies.
    pub fn approval(&self, tool: &str, action: &str, role: &str) -> Option<&ApprovalRule> {
        self.approvals
            .iter()
            .find(|r| r.applies(tool, action, role))
    }

    /// Whether keys of this tenant may take `role`.
    pub fn allows_role(&self, role: &str) -> bool {
        self.roles.is_empty() || self.roles.iter().any(|r| r == role)
    }

    /// Field checks that need no other object (references are checked by the state).
    pub(crate) fn check_fields(&mut self, v: &mut Violations) {
        v.check("tenant.id", check_slug(&self.id));
        v.check(
            "tenant.display_name",
            check_text(&self.display_name, MAX_TITLE, false),
        );
        if let Some(apis) = &mut self.connected_apis {
            apis.sort();
            apis.dedup();
            if apis.len() > MAX_CONNECTED_APIS {
                v.add(
                    "tenant.connected_apis",
                    format!("at most {MAX_CONNECTED_APIS} providers"),
                );
            }
        }
        self.roles.sort();
        self.roles.dedup();
        if self.disclosure.threshold == 0 || self.disclosure.threshold > 10_000 {
            v.add("tenant.disclosure.threshold", "must be between 1 and 10000");
        }
        self.disclosure.pinned.sort();
        self.disclosure.pinned.dedup();
        if self.disclosure.pinned.len() > MAX_PINNED {
            v.add(
                "tenant.disclosure.pinned",
                format!("at most {MAX_PINNED} tools"),
            );
        }
        for name in &self.disclosure.pinned {
            if let Err(e) = check_tool_name(name) {
                v.add("tenant.disclosure.pinned", format!("{name:?}: {e}"));
            }
        }
        if let Some(url) = &self.lint_webhook {
            v.check("tenant.lint_webhook", check_http_url(url));
        }
        check_issuers(self, v);
        if self.approvals.len() > MAX_APPROVALS {
            v.add("tenant.approvals", format!("at most {MAX_APPROVALS} rules"));
        }
        for (index, rule) in self.approvals.iter_mut().enumerate() {
            rule.check_fields(&format!("tenant.approvals[{index}]"), v);
        }
    }
}

// === impl ApiKey ===

impl ApiKey {
    /// Whether the key authenticates at `now` (unix seconds).
    pub fn is_valid_at(&self, now: u64) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|expiry| now < expiry)
    }
}

// === impl Executor ===

impl Executor {
    /// Field checks.
    pub fn validate(self) -> DomainResult<Executor> {
        let mut v = Violations::default();
        v.check("executor.name", check_slug(&self.name));
        v.check("executor.endpoint", check_http_url(&self.endpoint));
        if self.timeout_ms == 0 || self.timeout_ms > MAX_EXECUTOR_TIMEOUT_MS {
            v.add(
                "executor.timeout_ms",
                format!("must be between 1 and {MAX_EXECUTOR_TIMEOUT_MS}"),
            );
        }
        if self.max_concurrency == 0 || self.max_concurrency > MAX_EXECUTOR_CONCURRENCY {
            v.add(
                "executor.max_concurrency",
                format!("must be between 1 and {MAX_EXECUTOR_CONCURRENCY}"),
            );
        }
        v.check(
            "executor.description",
            check_text(&self.description, MAX_DESCRIPTION, false),
        );
        let mcp_only = self.protocol != ExecutorProtocol::Mcp;
        if !self.tool_prefix.is_empty() {
            if mcp_only {
                v.add("executor.tool_prefix", "only for MCP executors");
            } else if self.tool_prefix.len() > 64
                || !self
                    .tool_prefix
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            {
                v.add(
                    "executor.tool_prefix",
                    "at most 64 characters of [A-Za-z0-9_.-]",
                );
            }
        }
        if !self.credential_env.is_empty() {
            if mcp_only {
                v.add("executor.credential_env", "only for MCP executors");
            } else if !is_env_name(&self.credential_env) {
                v.add(
                    "executor.credential_env",
                    "an environment variable name: [A-Z_][A-Z0-9_]*",
                );
            }
        }
        if !self.credential_header.is_empty() {
            if self.credential_env.is_empty() {
                v.add("executor.credential_header", "needs credential_env");
            } else if self.credential_header.len() > 64
                || !self
                    .credential_header
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
            {
                v.add(
                    "executor.credential_header",
                    "an HTTP header name: [A-Za-z0-9-]",
                );
            }
        }
        if let Some(exchange) = &self.token_exchange {
            if mcp_only {
                v.add("executor.token_exchange", "only for MCP executors");
            }
            exchange.check(&mut v);
        }
        v.finish()?;
        Ok(self)
    }
}

// === impl ExecutorProtocol ===

impl ExecutorProtocol {
    /// Short name.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorProtocol::Grpc => "grpc",
            ExecutorProtocol::Mcp => "mcp",
        }
    }
}

// === impl Provider ===

impl Provider {
    /// Field checks.
    pub fn validate(self) -> DomainResult<Provider> {
        let mut v = Violations::default();
        v.check("provider.id", check_slug(&self.id));
        v.check(
            "provider.display_name",
            check_text(&self.display_name, MAX_TITLE, false),
        );
        v.check(
            "provider.description",
            check_text(&self.description, MAX_DESCRIPTION, false),
        );
        v.finish()?;
        Ok(self)
    }
}

// === impl Role ===

impl Role {
    /// Field checks.
    pub fn validate(self) -> DomainResult<Role> {
        let mut v = Violations::default();
        v.check("role.name", check_slug(&self.name));
        v.check(
            "role.description",
            check_text(&self.description, MAX_DESCRIPTION, false),
        );
        v.finish()?;
        Ok(self)
    }
}

/// Field checks of a tenant's token issuers (references are checked by the state).
pub(crate) fn check_issuers(tenant: &mut Tenant, v: &mut Violations) {
    if tenant.token_issuers.len() > MAX_TOKEN_ISSUERS {
        v.add(
            "tenant.token_issuers",
            format!("at most {MAX_TOKEN_ISSUERS} issuers"),
        );
    }
    for (i, trust) in tenant.token_issuers.iter_mut().enumerate() {
        trust.check_fields(v, &format!("tenant.token_issuers[{i}]"));
    }
    let mut issuers: Vec<&str> = tenant
        .token_issuers
        .iter()
        .map(|t| t.issuer.as_str())
        .collect();
    issuers.sort_unstable();
    if issuers.windows(2).any(|w| w[0] == w[1]) {
        v.add("tenant.token_issuers", "each issuer at most once");
    }
}

#[cfg(test)]
mod disclosure_tests {
    use super::*;

    #[test]
    fn auto_switches_strictly_above_the_threshold() {
        let auto = Disclosure::default();
        assert!(!auto.is_progressive(30));
        assert!(auto.is_progressive(31));
        let zero = Disclosure {
            threshold: 0,
            ..Disclosure::default()
        };
        assert!(
            !zero.is_progressive(30) && zero.is_progressive(31),
            "0 means the default 30"
        );
        let full = Disclosure {
            mode: DisclosureMode::Full,
            ..Disclosure::default()
        };
        assert!(!full.is_progressive(10_000));
        let progressive = Disclosure {
            mode: DisclosureMode::Progressive,
            ..Disclosure::default()
        };
        assert!(progressive.is_progressive(0));
    }
}
