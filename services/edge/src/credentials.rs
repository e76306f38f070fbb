//! Tenants' provider credentials on this edge (ADR 0015). Whether a tenant connected a
//! provider comes with its registry (provider, fingerprint, expiry: no secret), so a call to
//! a provider's tool needs no question to the control plane unless the tenant connected that
//! provider. The credential itself is asked for (`GetCredential`) on the first call that needs
//! it, kept in this process's memory only — never in Redis, logs or audit — and asked again
//! when the registry names another fingerprint. While the control plane is unreachable, the
//! credential already held keeps serving, like the registry it came with.

use std::collections::HashMap;
use std::sync::Mutex;

use tonic::Status;
use tp_proto::pb;

use crate::control::Directory;

/// Entries kept at most; past it the map is emptied (they are asked for again).
const MAX_ENTRIES: usize = 10_000;

/// The in-memory credential cache: (tenant, provider) → the credential and its fingerprint.
#[derive(Default)]
pub struct Credentials {
    entries: Mutex<HashMap<(String, String), (String, pb::ProviderCredential)>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

impl Credentials {
    /// `tenant`'s credential for the provider of `connected` (from its registry): the one
    /// held when its fingerprint is the registry's, else the control plane's answer.
    pub async fn get(
        &self,
        directory: &dyn Directory,
        tenant: &str,
        connected: &pb::ConnectedProvider,
    ) -> Result<pb::ProviderCredential, Status> {
        let key = (tenant.to_owned(), connected.provider.clone());
        {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((fingerprint, credential)) = entries.get(&key)
                && *fingerprint == connected.fingerprint
            {
                return Ok(credential.clone());
            }
        }
        let answer = directory.credential(tenant, &connected.provider).await?;
        let credential = pb::ProviderCredential {
            provider: connected.provider.clone(),
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
