//! Connections (issue 35, ADR 0015): a tenant's credential for one provider, kept sealed.
//!
//! The domain only knows a connection's shape and its rules; the secret arrives here already
//! sealed (envelope encryption in the control plane), so nothing in this crate ever holds it
//! in clear. A connection's key is `{tenant}/{provider}`: one credential per tenant and
//! provider.

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
}

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
    /// The tenant.
    pub tenant: String,
    /// The provider it connects (a provider of the catalogue).
    pub provider: String,
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
}

impl Connection {
    /// The object key of `tenant`'s connection to `provider`.
    pub fn key_of(tenant: &str, provider: &str) -> String {
        format!("{tenant}/{provider}")
    }

    /// Whether the credential may be used at `now` (Unix seconds).
    pub fn usable_at(&self, now: u64) -> bool {
        self.expires_at.is_none_or(|at| now < at)
    }

    pub(crate) fn check_fields(&self, v: &mut Violations) {
        v.check("connection.tenant", check_slug(&self.tenant));
        v.check("connection.provider", check_slug(&self.provider));
        if self.id != Self::key_of(&self.tenant, &self.provider) {
            v.add("connection.id", "must be {tenant}/{provider}");
        }
        v.check(
            "connection.fingerprint",
            check_text(&self.fingerprint, 64, true),
        );
        for (field, value) in [
            ("kek_id", &self.secret.kek_id),
            ("wrapped_key", &self.secret.wrapped_key),
            ("ciphertext", &self.secret.ciphertext),
        ] {
            if value.is_empty() || value.len() > MAX_SEALED_FIELD {
                v.add(
                    format!("connection.secret.{field}"),
                    format!("must hold 1 to {MAX_SEALED_FIELD} characters"),
                );
            }
        }
    }
}
