//! Admin tokens in the state: issued, revoked, authenticated.

use super::*;
use crate::admin::{AdminScope, AdminToken};

/// Most tenants one `tenant_admin` token may manage.
const MAX_ADMIN_TENANTS: usize = 100;

impl State {
    /// Records a new admin token. `tenant_admin` tokens name 1 to 100 existing tenants; other
    /// scopes name none.
    pub fn issue_admin_token(&self, token: AdminToken, now: u64) -> DomainResult<Vec<Change>> {
        let mut v = Violations::default();
        v.check("label", check_text(&token.label, MAX_TITLE, false));
        if token.expires_at.is_some_and(|expiry| expiry <= now) {
            v.add("expires_at", "must be in the future");
        }
        match token.scope {
            AdminScope::TenantAdmin if token.tenants.is_empty() => {
                v.add(
                    "tenants",
                    "a tenant_admin token names the tenants it manages",
                );
            }
            AdminScope::TenantAdmin if token.tenants.len() > MAX_ADMIN_TENANTS => {
                v.add(
                    "tenants",
                    format!("at most {MAX_ADMIN_TENANTS} (got {})", token.tenants.len()),
                );
            }
            AdminScope::TenantAdmin => {
                for (i, tenant) in token.tenants.iter().enumerate() {
                    v.check(&format!("tenants[{i}]"), check_slug(tenant));
                }
            }
            AdminScope::ReadOnly | AdminScope::Full if !token.tenants.is_empty() => {
                v.add(
                    "tenants",
                    format!(
                        "only a tenant_admin token names tenants, not {}",
                        token.scope.as_str()
                    ),
                );
            }
            AdminScope::ReadOnly | AdminScope::Full => {}
        }
        v.finish()?;
        for tenant in &token.tenants {
            self.tenant(tenant)?;
        }
        if self.admin_tokens.contains_key(&token.id)
            || self.admin_token_hashes.contains_key(&token.hash)
        {
            return Err(DomainError::already_exists("admin token", &token.id));
        }
        Ok(vec![Change::put(Object::AdminToken(token))])
    }

    /// Revokes an admin token.
    pub fn revoke_admin_token(&self, id: &str, now: u64) -> DomainResult<Vec<Change>> {
        let existing = self
            .admin_tokens
            .get(id)
            .ok_or_else(|| DomainError::not_found("admin token", id))?;
        if existing.revoked_at.is_some() {
            return Err(DomainError::precondition(
                "TOKEN_REVOKED",
                format!("admin-tokens/{id}"),
                format!("admin token {id} is already revoked"),
            ));
        }
        let mut token = existing.clone();
        token.revoked_at = Some(now);
        Ok(vec![Change::put(Object::AdminToken(token))])
    }

    /// The valid admin token with this hash, if any.
    pub fn authenticate_admin(&self, hash: &str, now: u64) -> Option<&AdminToken> {
        let id = self.admin_token_hashes.get(hash)?;
        self.admin_tokens
            .get(id)
            .filter(|token| token.is_valid_at(now))
    }
}
