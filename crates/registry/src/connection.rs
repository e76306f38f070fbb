//! Connections (issue 35, ADR 0015): a tenant's credential for one provider, kept sealed.
//!
//! The domain only knows a connection's shape and its rules; the secret arrives here already
//! sealed (envelope encryption in the control plane), so nothing in this crate ever holds it
//! in clear. A connection's key is `{tenant}/{provider}` for the tenant's own credential, and
//! `{tenant}/{provider}/{user}` for one user's (the caller as edges name it: `issuer#subject`
//! for an access token, the key id for an API key): a user's calls carry their own credential
//! when they have one, the tenant's otherwise.

use serde::{Deserialize, Serialize};

use crate::error::Violations;
use crate::ident::{check_slug, check_text};

/// Longest field of a sealed secret (base64): a credential of up to 8 KiB, sealed.
pub const MAX_SEALED_FIELD: usize = 12_000;

/// How a connection was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionKind {
    /// An API credential an operator handed over (a key or a long-lived token).
    #[default]
    ApiCredential,
    /// Tokens from the provider's authorization server (authorization-code flow), the access
    /// token renewed with the refresh token before it expires.
    #[serde(rename = "oauth")]
    OAuth,
}

impl ConnectionKind {
    /// The name reads show.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionKind::ApiCredential => "api_credential",
            ConnectionKind::OAuth => "oauth",
        }
    }
}

/// Most scopes one connection records.
pub const MAX_SCOPES: usize = 64;

/// A secret sealed by envelope encryption: a data key of its own encrypts the secret, a
/// key-encryption key (named by `kek_id`) encrypts the data key. Every field is base64.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// Which key-encryption key wrapped the data key.
    pub kek_id: String,
    /// The data key, encrypted under the key-encryption key (nonce first).
    pub wrapped_key: String,
    /// The secret, encrypted under the data key (nonce first).
    pub ciphertext: String,
}

impl std::fmt::Debug for Sealed {
    // Ciphertext is not secret, but it has no business in logs either.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealed")
            .field("kek_id", &self.kek_id)
            .finish_non_exhaustive()
    }
}

/// A tenant's connection to a provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    /// `{tenant}/{provider}`: the object's key.
    pub id: String,
    /// The tenant that connected (the first part of the key).
    pub tenant: String,
    /// The provider it connects (a provider of the catalogue).
    pub provider: String,
    /// The one user of the tenant whose credential it is (`None`: the tenant's, used by every
    /// caller without one of their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The tenant's incarnation the secret is bound to (a tenant deleted and created again
    /// under the same id cannot read its predecessor's secrets).
    #[serde(default)]
    pub tenant_uid: String,
    /// How it was made.
    #[serde(default)]
    pub kind: ConnectionKind,
    /// The credential, sealed.
    pub secret: Sealed,
    /// The first 12 hex digits of the credential's SHA-256: tells two credentials apart
    /// without showing either.
    pub fingerprint: String,
    /// Unix seconds.
    pub created_at: u64,
    /// Who connected it (an admin token's id, or `admin`).
    #[serde(default)]
    pub created_by: String,
    /// Unix seconds after which the credential is not used; `None` = no expiry known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// OAuth connections: the refresh token, sealed like the secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<Sealed>,
    /// OAuth connections: the scopes the provider granted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Unix seconds the credential in use was obtained (`None`: at `created_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<u64>,
    /// Until when (Unix seconds) a control plane replica holds the renewal of this
    /// credential: others leave it alone, so one refresh token is never spent twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewing_until: Option<u64>,
    /// Which replica holds the claim of `renewing_until` (only it releases the claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewing_by: Option<String>,
    /// OAuth connections: the nonce of the authorization flow that made it, so the callback
    /// link of that flow cannot connect twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
}

/// Longest user name a connection takes.
pub const MAX_USER: usize = 300;

impl Connection {
    /// The object key of `tenant`'s connection to `provider`.
    pub fn key_of(tenant: &str, provider: &str) -> String {
        format!("{tenant}/{provider}")
    }

    /// The object key of the connection of `tenant` (or of its `user`) to `provider`.
    pub fn key_for(tenant: &str, provider: &str, user: Option<&str>) -> String {
        match user {
            Some(user) => format!("{tenant}/{provider}/{user}"),
            None => Self::key_of(tenant, provider),
        }
    }

    /// What the connection's secrets are bound to besides the tenant: the provider, and the
    /// user for a user's connection (a user's credential copied onto another user's or the
    /// tenant's connection does not open).
    pub fn binding(&self) -> String {
        Self::binding_of(&self.provider, self.user.as_deref())
    }

    /// [`Connection::binding`] of a connection to `provider` (of `user`).
    pub fn binding_of(provider: &str, user: Option<&str>) -> String {
        match user {
            Some(user) => format!("{provider}\0user\0{user}"),
            None => provider.to_owned(),
        }
    }

    /// Whether the credential may be used at `now` (Unix seconds).
    pub fn usable_at(&self, now: u64) -> bool {
        self.expires_at.is_none_or(|at| now < at)
    }

    /// Whether the control plane can renew the credential (an OAuth connection with a
    /// refresh token).
    pub fn refreshable(&self) -> bool {
        self.kind == ConnectionKind::OAuth && self.refresh.is_some()
    }

    /// Whether a refreshable credential is due for renewal at `now`: when half its lifetime
    /// or five minutes are left, whichever comes later (a token living an hour is renewed at
    /// 55 minutes, one living a minute at 30 seconds). Expired ones are due too.
    pub fn refresh_due_at(&self, now: u64) -> bool {
        let Some(expires_at) = self.expires_at.filter(|_| self.refreshable()) else {
            return false;
        };
        let issued_at = self.issued_at.unwrap_or(self.created_at);
        let lifetime = expires_at.saturating_sub(issued_at);
        let margin = (lifetime / 2).min(300);
        now.saturating_add(margin) >= expires_at
    }

    pub(crate) fn check_fields(&self, v: &mut Violations) {
        v.check("connection.tenant", check_slug(&self.tenant));
        v.check("connection.provider", check_slug(&self.provider));
        if let Some(user) = &self.user {
            v.check("connection.user", check_user(user));
        }
        if self.id != Self::key_for(&self.tenant, &self.provider, self.user.as_deref()) {
            v.add("connection.id", "must be {tenant}/{provider}[/{user}]");
        }
        v.check(
            "connection.fingerprint",
            check_text(&self.fingerprint, 64, true),
        );
        self.secret.check("connection.secret", v);
        if let Some(refresh) = &self.refresh {
            refresh.check("connection.refresh", v);
            if self.kind != ConnectionKind::OAuth {
                v.add("connection.refresh", "only OAuth connections have one");
            }
        }
        if self.scopes.len() > MAX_SCOPES {
            v.add("connection.scopes", format!("at most {MAX_SCOPES} scopes"));
        }
        for scope in &self.scopes {
            v.check("connection.scopes", check_text(scope, 256, false));
        }
        if let Some(flow) = &self.flow {
            v.check("connection.flow", check_text(flow, 64, true));
        }
        if let Some(by) = &self.renewing_by {
            v.check("connection.renewing_by", check_text(by, 64, true));
        }
    }
}

/// A user as connections name them: 1 to [`MAX_USER`] characters, no whitespace or control
/// characters.
pub fn check_user(user: &str) -> Result<(), String> {
    if user.is_empty() || user.chars().count() > MAX_USER {
        return Err(format!("must hold 1 to {MAX_USER} characters"));
    }
    if user.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain whitespace or control characters".into());
    }
    Ok(())
}

impl Sealed {
    fn check(&self, at: &str, v: &mut Violations) {
        for (field, value) in [
            ("kek_id", &self.kek_id),
            ("wrapped_key", &self.wrapped_key),
            ("ciphertext", &self.ciphertext),
        ] {
            if value.is_empty() || value.len() > MAX_SEALED_FIELD {
                v.add(
                    format!("{at}.{field}"),
                    format!("must hold 1 to {MAX_SEALED_FIELD} characters"),
                );
            }
        }
    }
}
