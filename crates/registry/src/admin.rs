//! Admin identities: scoped admin tokens, and what each scope may do.
//!
//! The control plane's configured admin token is the bootstrap identity (scope `full`, named
//! `admin`). Operators issue further tokens through the API, each with a scope:
//! - `read_only`: every read of the admin API, nothing else;
//! - `tenant_admin`: reads of the catalogue and policy, and everything about the tenants it
//!   names (their settings, API keys, token issuers, registry previews, audit records) — not
//!   other tenants, not the catalogue, not other admins;
//! - `full`: everything, issuing and revoking admin tokens included.
//!
//! Tokens are stored as SHA-256 hashes, shown once, and can expire and be revoked; every
//! committed write records the identity that made it.

use serde::{Deserialize, Serialize};

/// What an admin identity may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminScope {
    /// Every read, no write.
    ReadOnly,
    /// Reads, and writes about the named tenants.
    TenantAdmin,
    /// Everything.
    Full,
}

impl AdminScope {
    /// The scope's name on the command line and in errors.
    pub fn as_str(self) -> &'static str {
        match self {
            AdminScope::ReadOnly => "read_only",
            AdminScope::TenantAdmin => "tenant_admin",
            AdminScope::Full => "full",
        }
    }
}

/// One issued admin token (its secret is never stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminToken {
    /// Public id (`adm_` + 16 hex), used to list and revoke, and recorded as the author of
    /// every write made with the token.
    pub id: String,
    /// Hex SHA-256 of the token.
    pub hash: String,
    /// Free label (who or what holds it).
    #[serde(default)]
    pub label: String,
    /// What the token may do: read only, administer the named tenants, or everything.
    pub scope: AdminScope,
    /// The tenants a `tenant_admin` token manages (empty for other scopes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
    /// Unix seconds.
    pub created_at: u64,
    /// Who issued it.
    #[serde(default)]
    pub created_by: String,
    /// Unix seconds; `None` = never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Unix seconds of revocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<u64>,
}

impl AdminToken {
    /// Whether the token authenticates at `now` (Unix seconds).
    pub fn is_valid_at(&self, now: u64) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|expiry| now < expiry)
    }
}

/// An authenticated admin caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminCaller {
    /// Who: `admin` for the bootstrap token, else the token's id.
    pub name: String,
    /// What it may do.
    pub scope: AdminScope,
    /// For `tenant_admin`, the tenants it manages.
    pub tenants: Vec<String>,
}

/// What an admin RPC needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A read of shared things (the catalogue, the policy, executors): any scope.
    Read,
    /// A read about one tenant: any scope; `tenant_admin` only for its tenants.
    TenantRead,
    /// A write about one tenant: `full`, or `tenant_admin` for its tenants.
    TenantWrite,
    /// Anything else: `full` only.
    Full,
}

impl AdminCaller {
    /// The bootstrap identity (the configured admin token).
    pub fn bootstrap() -> AdminCaller {
        AdminCaller {
            name: "admin".into(),
            scope: AdminScope::Full,
            tenants: Vec::new(),
        }
    }

    /// The caller a valid token stands for.
    pub fn of(token: &AdminToken) -> AdminCaller {
        AdminCaller {
            name: token.id.clone(),
            scope: token.scope,
            tenants: token.tenants.clone(),
        }
    }

    /// Whether the caller may make a call needing `access` at all (tenant checks come later,
    /// once the tenant is known: [`AdminCaller::may_manage`]).
    pub fn allows(&self, access: Access) -> bool {
        match (self.scope, access) {
            (AdminScope::Full, _) => true,
            (_, Access::Read | Access::TenantRead) => true,
            (AdminScope::TenantAdmin, Access::TenantWrite) => true,
            (AdminScope::ReadOnly, Access::TenantWrite) | (_, Access::Full) => false,
        }
    }

    /// Whether the caller may see (and, scope permitting, change) `tenant`.
    pub fn may_manage(&self, tenant: &str) -> bool {
        match self.scope {
            AdminScope::Full | AdminScope::ReadOnly => true,
            AdminScope::TenantAdmin => self.tenants.iter().any(|t| t == tenant),
        }
    }

    /// Whether the caller sees every tenant (not a `tenant_admin`).
    pub fn sees_every_tenant(&self) -> bool {
        self.scope != AdminScope::TenantAdmin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(scope: AdminScope, tenants: &[&str]) -> AdminCaller {
        AdminCaller {
            name: "adm_x".into(),
            scope,
            tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
        }
    }

    #[test]
    fn each_scope_allows_what_it_says_and_nothing_more() {
        use Access::*;
        let read_only = caller(AdminScope::ReadOnly, &[]);
        let acme = caller(AdminScope::TenantAdmin, &["acme"]);
        let full = caller(AdminScope::Full, &[]);
        let table = [
            (&read_only, [true, true, false, false]),
            (&acme, [true, true, true, false]),
            (&full, [true, true, true, true]),
        ];
        for (who, expected) in table {
            let got = [Read, TenantRead, TenantWrite, Full].map(|a| who.allows(a));
            assert_eq!(got, expected, "{:?}", who.scope);
        }
        assert!(acme.may_manage("acme") && !acme.may_manage("globex"));
        assert!(read_only.may_manage("globex") && full.may_manage("globex"));
        assert!(!acme.sees_every_tenant() && read_only.sees_every_tenant());
    }

    #[test]
    fn revoked_and_expired_tokens_do_not_authenticate() {
        let token = AdminToken {
            id: "adm_1".into(),
            hash: "h".into(),
            label: String::new(),
            scope: AdminScope::Full,
            tenants: Vec::new(),
            created_at: 1,
            created_by: "admin".into(),
            expires_at: Some(100),
            revoked_at: None,
        };
        assert!(token.is_valid_at(99));
        assert!(!token.is_valid_at(100));
        let revoked = AdminToken {
            revoked_at: Some(50),
            expires_at: None,
            ..token
        };
        assert!(!revoked.is_valid_at(10));
    }
}
