//! The whole control-plane state as a fold over committed changes, and the pure mutations
//! that validate a request against it and return the changes to commit.
//!
//! A write is: `let changes = state.some_mutation(..)?;` (pure, may fail with a
//! [`DomainError`] and then changes nothing) → the store commits the changes under a new
//! revision → `state.apply(revision, &changes)`. Replaying the change log with `apply`
//! rebuilds the same state on another replica.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::admin::AdminToken;
use crate::adr::{Adr, AdrStatus};
use crate::connection::Connection;
use crate::error::{DomainError, DomainResult, ErrorCode, Violations};
use crate::ident::{MAX_TITLE, check_date, check_slug, check_text};
use crate::model::{ApiKey, CeilingChange, Executor, Policy, Provider, Role, Tenant};
use crate::policy::{self, CeilingReport};
use crate::tool::{CatalogRefs, Pin, Tool, ToolDef, ToolStatus};

/// Largest ceiling an ADR may set.
pub const MAX_CEILING: u32 = 100_000;

/// The kinds of objects the control plane stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// A catalogue tool (key: its name).
    Tool,
    /// An architecture decision record (key: its id).
    Adr,
    /// The ceiling policy (one object, key `ceiling`).
    Policy,
    /// A tenant (key: its id).
    Tenant,
    /// A tenant's API key (key: its key id; the secret is stored hashed).
    ApiKey,
    /// An executor (key: its name).
    Executor,
    /// A provider (key: its id).
    Provider,
    /// A role (key: its name).
    Role,
    /// An administrator's token (key: its id).
    AdminToken,
    /// A tenant's connection to a provider (its credential, sealed).
    Connection,
}

/// One stored object.
// Objects live in short vectors of changes; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "object", rename_all = "snake_case")]
pub enum Object {
    /// A catalogue tool with its lifecycle.
    Tool(Tool),
    /// An architecture decision record.
    Adr(Adr),
    /// The ceiling policy.
    Policy(Policy),
    /// A tenant and its settings.
    Tenant(Tenant),
    /// A tenant's API key.
    ApiKey(ApiKey),
    /// An executor and how to reach it.
    Executor(Executor),
    /// A provider tools belong to.
    Provider(Provider),
    /// A role and what it may call.
    Role(Role),
    /// An administrator's token and its scope.
    AdminToken(AdminToken),
    /// A tenant's (or user's) connection to a provider, its credential sealed.
    Connection(Connection),
}

/// One change of a write.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Change {
    /// Create or replace an object.
    Put {
        /// The new object.
        object: Object,
    },
    /// Remove an object.
    Delete {
        /// The kind of the object removed.
        kind: ObjectKind,
        /// The object's key within its kind.
        key: String,
    },
}

/// The control-plane state.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// Revision of the last applied write (0 = empty).
    pub revision: u64,
    /// Tools by name (ordered: resolution order is name order).
    pub tools: BTreeMap<String, Tool>,
    /// ADRs by id.
    pub adrs: BTreeMap<String, Adr>,
    /// The ceiling policy, once initialised.
    pub policy: Option<Policy>,
    /// Tenants by id.
    pub tenants: BTreeMap<String, Tenant>,
    /// API keys by id.
    pub keys: BTreeMap<String, ApiKey>,
    /// Key id by key hash.
    pub key_hashes: HashMap<String, String>,
    /// Executors by name.
    pub executors: BTreeMap<String, Executor>,
    /// Providers by id.
    pub providers: BTreeMap<String, Provider>,
    /// Roles by name.
    pub roles: BTreeMap<String, Role>,
    /// Admin tokens by id.
    pub admin_tokens: BTreeMap<String, AdminToken>,
    /// Admin token id by token hash.
    pub admin_token_hashes: HashMap<String, String>,
    /// Connections by `{tenant}/{provider}`.
    pub connections: BTreeMap<String, Connection>,
}

/// The key of the policy object.
pub const POLICY_KEY: &str = "ceiling";

// === impl ObjectKind ===

impl ObjectKind {
    /// Short name used in storage and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Tool => "tool",
            ObjectKind::Adr => "adr",
            ObjectKind::Policy => "policy",
            ObjectKind::Tenant => "tenant",
            ObjectKind::ApiKey => "api_key",
            ObjectKind::Executor => "executor",
            ObjectKind::Provider => "provider",
            ObjectKind::Role => "role",
            ObjectKind::AdminToken => "admin_token",
            ObjectKind::Connection => "connection",
        }
    }

    /// Whether a change of this kind can change what some registry resolves to for every
    /// tenant (edges then drop every cached registry).
    pub fn affects_all_registries(self) -> bool {
        match self {
            ObjectKind::Tool | ObjectKind::Executor | ObjectKind::Provider | ObjectKind::Role => {
                true
            }
            ObjectKind::Adr
            | ObjectKind::Policy
            | ObjectKind::Tenant
            | ObjectKind::ApiKey
            | ObjectKind::AdminToken
            | ObjectKind::Connection => false,
        }
    }
}

// === impl Object ===

impl Object {
    /// The object's kind.
    pub fn kind(&self) -> ObjectKind {
        match self {
            Object::Tool(_) => ObjectKind::Tool,
            Object::Adr(_) => ObjectKind::Adr,
            Object::Policy(_) => ObjectKind::Policy,
            Object::Tenant(_) => ObjectKind::Tenant,
            Object::ApiKey(_) => ObjectKind::ApiKey,
            Object::Executor(_) => ObjectKind::Executor,
            Object::Provider(_) => ObjectKind::Provider,
            Object::Role(_) => ObjectKind::Role,
            Object::AdminToken(_) => ObjectKind::AdminToken,
            Object::Connection(_) => ObjectKind::Connection,
        }
    }

    /// The object's key within its kind.
    pub fn key(&self) -> &str {
        match self {
            Object::Tool(tool) => &tool.def.name,
            Object::Adr(adr) => &adr.id,
            Object::Policy(_) => POLICY_KEY,
            Object::Tenant(tenant) => &tenant.id,
            Object::ApiKey(key) => &key.id,
            Object::Executor(executor) => &executor.name,
            Object::Provider(provider) => &provider.id,
            Object::Role(role) => &role.name,
            Object::AdminToken(token) => &token.id,
            Object::Connection(connection) => &connection.id,
        }
    }

    /// The tenant whose registry or identity the object belongs to, if any.
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Object::Tenant(tenant) => Some(&tenant.id),
            Object::ApiKey(key) => Some(&key.tenant),
            Object::Connection(connection) => Some(&connection.tenant),
            Object::Tool(_)
            | Object::Adr(_)
            | Object::Policy(_)
            | Object::Executor(_)
            | Object::Provider(_)
            | Object::Role(_)
            | Object::AdminToken(_) => None,
        }
    }

    /// Records the revision on objects that carry one.
    pub fn stamp(&mut self, revision: u64) {
        match self {
            Object::Tool(tool) => {
                tool.revision = revision;
                if let Some(pin) = tool.pin.as_mut().filter(|pin| pin.revision == 0) {
                    pin.revision = revision;
                }
                if let Some(drift) = tool.drift.as_mut().filter(|drift| drift.revision == 0) {
                    drift.revision = revision;
                }
            }
            Object::Tenant(tenant) => tenant.revision = revision,
            Object::Adr(_)
            | Object::Policy(_)
            | Object::ApiKey(_)
            | Object::Executor(_)
            | Object::Provider(_)
            | Object::Role(_)
            | Object::AdminToken(_)
            | Object::Connection(_) => {}
        }
    }
}

// === impl Change ===

impl Change {
    fn put(object: Object) -> Change {
        Change::Put { object }
    }

    /// The names of the tools `changes` put.
    pub fn tools_put(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .filter_map(|change| match change {
                Change::Put {
                    object: Object::Tool(tool),
                } => Some(tool.def.name.clone()),
                _ => None,
            })
            .collect()
    }

    /// The kind of the changed object.
    pub fn kind(&self) -> ObjectKind {
        match self {
            Change::Put { object } => object.kind(),
            Change::Delete { kind, .. } => *kind,
        }
    }

    /// The key of the changed object.
    pub fn key(&self) -> &str {
        match self {
            Change::Put { object } => object.key(),
            Change::Delete { key, .. } => key,
        }
    }

    /// What the change did, as an operator would say it: `revoke` for a key or admin token now
    /// revoked, `issue` for one not, `deprecate` and `retire` for tools in those states,
    /// `delete`, else `put`.
    pub fn verb(&self) -> &'static str {
        match self {
            Change::Delete {
                kind: ObjectKind::Connection,
                ..
            } => "disconnect",
            Change::Delete { .. } => "delete",
            Change::Put { object } => match object {
                Object::ApiKey(key) if key.revoked_at.is_some() => "revoke",
                Object::AdminToken(token) if token.revoked_at.is_some() => "revoke",
                Object::ApiKey(_) | Object::AdminToken(_) => "issue",
                Object::Connection(_) => "connect",
                Object::Tool(tool) => match tool.status {
                    crate::tool::ToolStatus::Deprecated { .. } => "deprecate",
                    crate::tool::ToolStatus::Retired => "retire",
                    crate::tool::ToolStatus::Active => "put",
                },
                _ => "put",
            },
        }
    }
}

// === impl State ===

impl CatalogRefs for State {
    fn has_provider(&self, id: &str) -> bool {
        self.providers.contains_key(id)
    }
    fn has_role(&self, name: &str) -> bool {
        self.roles.contains_key(name)
    }
    fn has_executor(&self, name: &str) -> bool {
        self.executors.contains_key(name)
    }
    fn adr_status(&self, id: &str) -> Option<AdrStatus> {
        self.adrs.get(id).map(|adr| adr.status)
    }
}

impl State {
    /// Applies a committed write. Infallible: the changes were validated before commit.
    pub fn apply(&mut self, revision: u64, changes: &[Change]) {
        debug_assert!(revision > self.revision, "revisions only grow");
        for change in changes {
            match change.clone() {
                Change::Put { mut object } => {
                    object.stamp(revision);
                    self.put(object);
                }
                Change::Delete { kind, key } => self.delete(kind, &key),
            }
        }
        self.revision = revision;
    }

    /// Inserts an object as loaded from a snapshot (no revision bump).
    pub fn put(&mut self, object: Object) {
        match object {
            Object::Tool(tool) => {
                self.tools.insert(tool.def.name.clone(), tool);
            }
            Object::Adr(adr) => {
                self.adrs.insert(adr.id.clone(), adr);
            }
            Object::Policy(policy) => self.policy = Some(policy),
            Object::Tenant(tenant) => {
                self.tenants.insert(tenant.id.clone(), tenant);
            }
            Object::ApiKey(key) => {
                self.key_hashes.insert(key.hash.clone(), key.id.clone());
                self.keys.insert(key.id.clone(), key);
            }
            Object::Executor(executor) => {
                self.executors.insert(executor.name.clone(), executor);
            }
            Object::Provider(provider) => {
                self.providers.insert(provider.id.clone(), provider);
            }
            Object::Role(role) => {
                self.roles.insert(role.name.clone(), role);
            }
            Object::AdminToken(token) => {
                self.admin_token_hashes
                    .insert(token.hash.clone(), token.id.clone());
                self.admin_tokens.insert(token.id.clone(), token);
            }
            Object::Connection(connection) => {
                self.connections.insert(connection.id.clone(), connection);
            }
        }
    }

    fn delete(&mut self, kind: ObjectKind, key: &str) {
        match kind {
            ObjectKind::Tool => {
                self.tools.remove(key);
            }
            ObjectKind::Adr => {
                self.adrs.remove(key);
            }
            ObjectKind::Policy => self.policy = None,
            ObjectKind::Tenant => {
                self.tenants.remove(key);
            }
            ObjectKind::ApiKey => {
                if let Some(removed) = self.keys.remove(key) {
                    self.key_hashes.remove(&removed.hash);
                }
            }
            ObjectKind::Executor => {
                self.executors.remove(key);
            }
            ObjectKind::Provider => {
                self.providers.remove(key);
            }
            ObjectKind::Role => {
                self.roles.remove(key);
            }
            ObjectKind::AdminToken => {
                if let Some(removed) = self.admin_tokens.remove(key) {
                    self.admin_token_hashes.remove(&removed.hash);
                }
            }
            ObjectKind::Connection => {
                self.connections.remove(key);
            }
        }
    }

    /// Number of live (non-retired) tools: what the ceiling bounds.
    pub fn live_tool_count(&self) -> usize {
        self.tools.values().filter(|t| t.status.is_live()).count()
    }

    /// The policy in force.
    pub fn policy(&self) -> DomainResult<&Policy> {
        self.policy.as_ref().ok_or_else(|| {
            DomainError::new(
                ErrorCode::FailedPrecondition,
                "the tool ceiling is not initialised",
            )
        })
    }

    /// The ceiling report: value, ADR, count, headroom, buckets.
    pub fn ceiling_report(&self) -> DomainResult<CeilingReport> {
        Ok(policy::report(self.policy()?, self.tools.values()))
    }

    /// A tool by name (retired included).
    pub fn tool(&self, name: &str) -> DomainResult<&Tool> {
        self.tools
            .get(name)
            .ok_or_else(|| DomainError::not_found("tool", name))
    }

    /// A tenant by id.
    pub fn tenant(&self, id: &str) -> DomainResult<&Tenant> {
        self.tenants
            .get(id)
            .ok_or_else(|| DomainError::not_found("tenant", id))
    }

    /// An ADR by id.
    pub fn adr(&self, id: &str) -> DomainResult<&Adr> {
        self.adrs
            .get(id)
            .ok_or_else(|| DomainError::not_found("ADR", id))
    }

    /// The key record of a key hash, if it authenticates at `now`.
    pub fn authenticate(&self, hash: &str, now: u64) -> Option<&ApiKey> {
        let id = self.key_hashes.get(hash)?;
        let key = self.keys.get(id)?;
        let tenant_ok = self
            .tenants
            .get(&key.tenant)
            .is_some_and(|tenant| tenant.allows_role(&key.role));
        (key.is_valid_at(now) && tenant_ok).then_some(key)
    }

    // --- bootstrap ---------------------------------------------------------------------

    /// Initialises the ceiling on an empty store: records the ADR (accepted) if missing and
    /// the policy. Returns no changes when a policy already exists.
    pub fn init_policy(&self, ceiling: u32, adr: Adr) -> DomainResult<Vec<Change>> {
        if self.policy.is_some() {
            return Ok(Vec::new());
        }
        check_ceiling_value(ceiling)?;
        let mut changes = Vec::new();
        let adr = match self.adrs.get(&adr.id) {
            Some(existing) => existing.clone(),
            None => {
                let adr = adr.validate()?;
                changes.push(Change::put(Object::Adr(adr.clone())));
                adr
            }
        };
        if adr.status != AdrStatus::Accepted {
            return Err(DomainError::precondition(
                "ADR_NOT_ACCEPTED",
                format!("adrs/{}", adr.id),
                format!(
                    "the ceiling must cite an accepted ADR; {} is {}",
                    adr.id,
                    adr.status.as_str()
                ),
            ));
        }
        changes.push(Change::put(Object::Policy(Policy {
            ceiling,
            adr: adr.id.clone(),
            history: vec![CeilingChange {
                ceiling,
                adr: adr.id,
                date: adr.date,
                revision: self.revision + 1,
            }],
        })));
        Ok(changes)
    }

    // --- providers and roles -----------------------------------------------------------

    /// Creates or updates a provider.
    pub fn upsert_provider(&self, provider: Provider) -> DomainResult<Vec<Change>> {
        let provider = provider.validate()?;
        Ok(vec![Change::put(Object::Provider(provider))])
    }

    /// Deletes a provider no tool or tenant refers to.
    pub fn delete_provider(&self, id: &str) -> DomainResult<Vec<Change>> {
        if !self.providers.contains_key(id) {
            return Err(DomainError::not_found("provider", id));
        }
        let tools: Vec<&str> = self
            .tools
            .values()
            .filter(|t| t.def.provider.as_deref() == Some(id))
            .map(|t| t.def.name.as_str())
            .collect();
        let tenants: Vec<&str> = self
            .tenants
            .values()
            .filter(|t| {
                t.connected_apis
                    .as_ref()
                    .is_some_and(|apis| apis.iter().any(|a| a == id))
                    || self
                        .connections
                        .values()
                        .any(|c| c.tenant == t.id && c.provider == id)
            })
            .map(|t| t.id.as_str())
            .collect();
        if !tools.is_empty() || !tenants.is_empty() {
            return Err(DomainError::precondition(
                "IN_USE",
                format!("providers/{id}"),
                format!("provider {id:?} is still used by tools {tools:?} and tenants {tenants:?}"),
            ));
        }
        Ok(vec![Change::Delete {
            kind: ObjectKind::Provider,
            key: id.to_owned(),
        }])
    }

    /// Creates or updates a role.
    pub fn upsert_role(&self, role: Role) -> DomainResult<Vec<Change>> {
        let role = role.validate()?;
        Ok(vec![Change::put(Object::Role(role))])
    }

    /// Deletes a role no tool, tenant or live key refers to.
    pub fn delete_role(&self, name: &str) -> DomainResult<Vec<Change>> {
        if !self.roles.contains_key(name) {
            return Err(DomainError::not_found("role", name));
        }
        let in_tools = self.tools.values().any(|t| {
            t.def.roles.iter().any(|r| r == name)
                || t.def
                    .polymorphism
                    .as_ref()
                    .is_some_and(|p| p.actions.iter().any(|a| a.roles.iter().any(|r| r == name)))
        });
        let in_tenants = self
            .tenants
            .values()
            .any(|t| t.roles.iter().any(|r| r == name));
        let in_keys = self
            .keys
            .values()
            .any(|k| k.role == name && k.revoked_at.is_none());
        if in_tools || in_tenants || in_keys {
            return Err(DomainError::precondition(
                "IN_USE",
                format!("roles/{name}"),
                format!("role {name:?} is still used by tools, tenants or live keys"),
            ));
        }
        Ok(vec![Change::Delete {
            kind: ObjectKind::Role,
            key: name.to_owned(),
        }])
    }

    // --- executors ---------------------------------------------------------------------

    /// Creates or updates an executor.
    pub fn upsert_executor(&self, executor: Executor) -> DomainResult<Vec<Change>> {
        let executor = executor.validate()?;
        Ok(vec![Change::put(Object::Executor(executor))])
    }

    /// Deletes an executor no live tool routes to.
    pub fn delete_executor(&self, name: &str) -> DomainResult<Vec<Change>> {
        if !self.executors.contains_key(name) {
            return Err(DomainError::not_found("executor", name));
        }
        let tools: Vec<&str> = self
            .tools
            .values()
            .filter(|t| t.def.executor == name && t.status.is_live())
            .map(|t| t.def.name.as_str())
            .collect();
        if !tools.is_empty() {
            return Err(DomainError::precondition(
                "IN_USE",
                format!("executors/{name}"),
                format!("executor {name:?} still runs tools {tools:?}"),
            ));
        }
        Ok(vec![Change::Delete {
            kind: ObjectKind::Executor,
            key: name.to_owned(),
        }])
    }
}

fn check_ceiling_value(ceiling: u32) -> DomainResult<()> {
    if ceiling == 0 || ceiling > MAX_CEILING {
        return Err(DomainError::invalid(
            "ceiling",
            format!("must be between 1 and {MAX_CEILING}"),
        ));
    }
    Ok(())
}

mod admins;
mod adrs;
mod connections;
mod drift;
mod issuers;
mod tenants;
mod tools;

#[cfg(test)]
mod tests;
