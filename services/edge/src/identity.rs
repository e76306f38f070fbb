//! Who is calling: the identity a key or access token resolves to, as the caches keep it and
//! the sealed session carries it.

use tp_proto::pb;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The tenant the key belongs to.
    pub tenant: String,
    /// The role the key acts with.
    pub role: String,
    /// Key id (empty for the anonymous identity).
    pub key_id: String,
    /// Unix seconds; 0 = never.
    pub expires_at: u64,
    /// Revision it was resolved at.
    pub revision: u64,
    /// Unix milliseconds at which the control plane last confirmed the key (0: never, e.g.
    /// the anonymous identity).
    pub confirmed_at_ms: u64,
    /// The providers an access token's scopes narrow the caller to (ADR 0015, phase 3):
    /// only their tools and platform tools are seen and callable. `None` = no narrowing.
    pub providers: Option<Vec<String>>,
}

// === impl Identity ===

impl Identity {
    pub(crate) fn from_pb(identity: pb::Identity) -> Identity {
        Identity {
            tenant: identity.tenant,
            role: identity.role,
            key_id: identity.key_id,
            expires_at: identity.expires_at,
            revision: identity.revision,
            confirmed_at_ms: identity.confirmed_at_ms,
            providers: identity.providers.map(|scopes| scopes.providers),
        }
    }

    pub(crate) fn to_pb(&self) -> pb::Identity {
        pb::Identity {
            tenant: self.tenant.clone(),
            role: self.role.clone(),
            key_id: self.key_id.clone(),
            expires_at: self.expires_at,
            revision: self.revision,
            confirmed_at_ms: self.confirmed_at_ms,
            providers: self
                .providers
                .clone()
                .map(|providers| pb::ProviderScopes { providers }),
        }
    }

    /// The identity of callers without credentials (`anonymous` in the edge's settings).
    pub(crate) fn anonymous(tenant: &str, role: &str) -> Identity {
        Identity {
            tenant: tenant.to_owned(),
            role: role.to_owned(),
            key_id: String::new(),
            expires_at: 0,
            revision: u64::MAX,
            confirmed_at_ms: 0,
            providers: None,
        }
    }

    pub(crate) fn expired(&self, now: u64) -> bool {
        self.expires_at != 0 && now >= self.expires_at
    }
}
