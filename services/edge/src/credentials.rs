//! Tenants' provider credentials on this edge (ADR 0015). Whether a tenant connected a
//! provider comes with its registry (provider, fingerprint, expiry: no secret), so a call to
//! a provider's tool needs no question to the control plane unless the tenant connected that
//! provider. The credential itself is asked for (`GetCredential`) on the first call that needs
//! it, kept in this process's memory only — never in Redis, logs or audit — and asked again
//! when the registry names another fingerprint. While the control plane is unreachable, the
//! credential already held keeps serving, like the registry it came with.
//!
//! A user of the tenant may hold a connection of their own (the registry lists them, with
//! fingerprints): their calls carry that credential, kept apart from the tenant's under the
//! user's name. A caller without one uses the tenant's; with neither, the call is refused.

use std::collections::HashMap;
use std::sync::Mutex;

use tonic::Status;
use tp_proto::pb;

use crate::control::Directory;

/// Entries kept at most; past it the map is emptied (they are asked for again).
const MAX_ENTRIES: usize = 10_000;

/// The in-memory credential cache: (tenant, provider, user — empty for the tenant's) → the
/// credential and its fingerprint.
#[derive(Default)]
pub struct Credentials {
    entries: Mutex<HashMap<Key, (String, pb::ProviderCredential)>>,
}

/// (tenant, provider, user — empty for the tenant's).
type Key = (String, String, String);

/// Which connection a call uses: the caller's own, or the tenant's.
#[derive(Debug, Clone, Copy)]
pub struct Chosen<'a> {
    /// The provider whose connection the call's credential comes from.
    pub provider: &'a str,
    /// The user whose connection it is; empty for the tenant's.
    pub user: &'a str,
    /// The credential's fingerprint, as the registry lists it.
    pub fingerprint: &'a str,
    /// Unix seconds; 0 = none known.
    pub expires_at: u64,
}

impl<'a> Chosen<'a> {
    /// The connection a call of `caller` (Identity.key_id) to `connected`'s provider uses:
    /// the caller's own when the registry lists one, else the tenant's; `None` when neither
    /// exists (only other users connected the provider).
    pub fn for_caller(connected: &'a pb::ConnectedProvider, caller: &'a str) -> Option<Self> {
        if let Some(own) = connected
            .users
            .iter()
            .find(|user| !caller.is_empty() && user.user == caller)
        {
            return Some(Chosen {
                provider: &connected.provider,
                user: &own.user,
                fingerprint: &own.fingerprint,
                expires_at: own.expires_at,
            });
        }
        (!connected.fingerprint.is_empty()).then_some(Chosen {
            provider: &connected.provider,
            user: "",
            fingerprint: &connected.fingerprint,
            expires_at: connected.expires_at,
        })
    }

    /// Whether the credential has expired at `now` (Unix seconds).
    pub fn expired_at(&self, now: u64) -> bool {
        self.expires_at != 0 && now >= self.expires_at
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

impl Credentials {
    /// `tenant`'s credential of the `chosen` connection (from its registry): the one held
    /// when its fingerprint is the registry's, else the control plane's answer.
    pub async fn get(
        &self,
        directory: &dyn Directory,
        tenant: &str,
        chosen: Chosen<'_>,
    ) -> Result<pb::ProviderCredential, Status> {
        let key = (
            tenant.to_owned(),
            chosen.provider.to_owned(),
            chosen.user.to_owned(),
        );
        {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((fingerprint, credential)) = entries.get(&key)
                && fingerprint == chosen.fingerprint
            {
                return Ok(credential.clone());
            }
        }
        let answer = directory
            .credential(tenant, chosen.provider, chosen.user)
            .await?;
        // Only the connection asked for (a control plane predating users' connections would
        // answer the tenant's to a user's request).
        if answer.user != chosen.user {
            return Err(tp_proto::status::error(
                tp_registry::ErrorCode::Unavailable,
                "the control plane answered another connection's credential (an older version?)",
            ));
        }
        let credential = pb::ProviderCredential {
            provider: chosen.provider.to_owned(),
            token: answer.credential,
            expires_at: answer.expires_at,
            sealed: Vec::new(),
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key, (answer.fingerprint, credential.clone()));
        Ok(credential)
    }
}
