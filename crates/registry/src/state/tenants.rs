//! Tenants and their API keys: checks that span objects (roles, providers, token issuers),
//! and issuing keys.

use super::*;

impl State {
    fn check_tenant(&self, mut tenant: Tenant) -> DomainResult<Tenant> {
        let mut v = Violations::default();
        tenant.check_fields(&mut v);
        if let Some(apis) = &tenant.connected_apis {
            for api in apis {
                if !self.providers.contains_key(api) {
                    v.add(
                        "tenant.connected_apis",
                        format!("unknown provider {api:?}: register it first"),
                    );
                }
            }
        }
        for role in &tenant.roles {
            if !self.roles.contains_key(role) {
                v.add(
                    "tenant.roles",
                    format!("unknown role {role:?}: register it first"),
                );
            }
        }
        self.check_token_issuers(&tenant, &mut v);
        self.check_approvals(&tenant, &mut v);
        v.finish()?;
        Ok(tenant)
    }

    /// An approval rule names a tool of the catalogue, one of its actions, registered roles
    /// and an argument the tool has: a rule that matches nothing would only look like a
    /// safeguard.
    fn check_approvals(&self, tenant: &Tenant, v: &mut Violations) {
        for (index, rule) in tenant.approvals.iter().enumerate() {
            let at = format!("tenant.approvals[{index}]");
            let Some(tool) = self.tools.get(&rule.tool) else {
                v.add(
                    format!("{at}.tool"),
                    format!("no tool {:?} in the catalogue", rule.tool),
                );
                continue;
            };
            if let Some(action) = &rule.action {
                check_rule_action(&tool.def, action, &at, v);
            }
            if let Some(when) = &rule.when
                && !has_argument(&tool.def, rule.action.as_deref(), &when.argument)
            {
                v.add(
                    format!("{at}.when_argument"),
                    format!("{:?} has no argument {:?}", rule.tool, when.argument),
                );
            }
            for role in &rule.roles {
                if !self.roles.contains_key(role) {
                    v.add(
                        format!("{at}.roles"),
                        format!("unknown role {role:?}: register it first"),
                    );
                }
            }
        }
    }

    /// Creates a tenant.
    ///
    /// The tenant's `uid` (its incarnation) is kept when the caller chose one (the control
    /// plane's API draws a random one); otherwise it is derived from the revision the tenant is
    /// created at, which no earlier incarnation of the id can have had.
    pub fn create_tenant(&self, tenant: Tenant) -> DomainResult<Vec<Change>> {
        let mut tenant = self.check_tenant(tenant)?;
        if self.tenants.contains_key(&tenant.id) {
            return Err(DomainError::already_exists("tenant", &tenant.id));
        }
        if tenant.uid.is_empty() {
            tenant.uid = format!("r{}", self.revision + 1);
        }
        Ok(vec![Change::put(Object::Tenant(tenant))])
    }

    /// Replaces a tenant's settings.
    pub fn update_tenant(&self, tenant: Tenant) -> DomainResult<Vec<Change>> {
        let existing = self.tenant(&tenant.id)?;
        let mut tenant = self.check_tenant(tenant)?;
        tenant.revision = existing.revision;
        // The incarnation never changes.
        tenant.uid = existing.uid.clone();
        Ok(vec![Change::put(Object::Tenant(tenant))])
    }

    /// Deletes a tenant, its keys and its connections.
    pub fn delete_tenant(&self, id: &str) -> DomainResult<Vec<Change>> {
        self.tenant(id)?;
        let mut changes: Vec<Change> = self
            .keys
            .values()
            .filter(|key| key.tenant == id)
            .map(|key| Change::Delete {
                kind: ObjectKind::ApiKey,
                key: key.id.clone(),
            })
            .collect();
        changes.extend(
            self.connections
                .values()
                .filter(|connection| connection.tenant == id)
                .map(|connection| Change::Delete {
                    kind: ObjectKind::Connection,
                    key: connection.id.clone(),
                }),
        );
        changes.push(Change::Delete {
            kind: ObjectKind::Tenant,
            key: id.to_owned(),
        });
        Ok(changes)
    }

    /// Records a new key (the caller generated the secret and its hash).
    pub fn issue_key(&self, key: ApiKey, now: u64) -> DomainResult<Vec<Change>> {
        let mut v = Violations::default();
        v.check("tenant", check_slug(&key.tenant));
        v.check("role", check_slug(&key.role));
        v.check("label", check_text(&key.label, MAX_TITLE, false));
        if key.expires_at.is_some_and(|expiry| expiry <= now) {
            v.add("expires_at", "must be in the future");
        }
        v.finish()?;
        let tenant = self.tenant(&key.tenant)?;
        if !self.roles.contains_key(&key.role) {
            return Err(DomainError::invalid(
                "role",
                format!("unknown role {:?}", key.role),
            ));
        }
        if !tenant.allows_role(&key.role) {
            return Err(DomainError::invalid(
                "role",
                format!(
                    "tenant {:?} does not allow role {:?} (allowed: {:?})",
                    tenant.id, key.role, tenant.roles
                ),
            ));
        }
        if self.keys.contains_key(&key.id) || self.key_hashes.contains_key(&key.hash) {
            return Err(DomainError::already_exists("api key", &key.id));
        }
        Ok(vec![Change::put(Object::ApiKey(key))])
    }

    /// Revokes a key (a key already revoked stays as it is: nothing to commit).
    pub fn revoke_key(&self, id: &str, now: u64) -> DomainResult<Vec<Change>> {
        let existing = self
            .keys
            .get(id)
            .ok_or_else(|| DomainError::not_found("api key", id))?;
        if existing.revoked_at.is_some() {
            // Revoking is idempotent: the key stays revoked as of its first revocation.
            return Ok(Vec::new());
        }
        let mut key = existing.clone();
        key.revoked_at = Some(now);
        Ok(vec![Change::put(Object::ApiKey(key))])
    }
}

/// An approval rule's action is one of the tool's.
fn check_rule_action(def: &ToolDef, action: &str, at: &str, v: &mut Violations) {
    match def.polymorphism.as_ref().map(|p| &p.actions) {
        None => v.add(
            format!("{at}.action"),
            format!("{:?} is not a polymorphic tool: leave action out", def.name),
        ),
        Some(actions) if !actions.iter().any(|a| a.name == action) => v.add(
            format!("{at}.action"),
            format!(
                "{:?} has no action {action:?} (it has {})",
                def.name,
                actions
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        Some(_) => {}
    }
}

/// Whether the tool takes `argument`: at the top level, or in `action`'s schema (any action's
/// when the rule names none).
fn has_argument(def: &ToolDef, action: Option<&str>, argument: &str) -> bool {
    def.input_schema["properties"].get(argument).is_some()
        || def.polymorphism.iter().flat_map(|p| &p.actions).any(|a| {
            action.is_none_or(|name| name == a.name)
                && a.schema["properties"].get(argument).is_some()
        })
}
