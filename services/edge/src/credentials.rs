//! Tenants' provider credentials on this edge (ADR 0015): asked of the control plane on the
//! first call that needs one, kept in this process's memory only (never in Redis, logs or
//! audit), and asked again once the watch reports a change of the tenant after they were read.

use std::collections::HashMap;
use std::sync::Mutex;

use tonic::{Code, Status};
use tp_proto::pb;

use crate::control::Directory;
use crate::versions::Versions;

/// Entries kept at most; past it the map is emptied (they are asked for again).
const MAX_ENTRIES: usize = 10_000;

/// What the control plane said of one (tenant, provider), at a revision.
struct Entry {
    /// `None`: the tenant has no usable connection to the provider.
    credential: Option<pb::ProviderCredential>,
    revision: u64,
}

/// The in-memory credential cache.
#[derive(Default)]
pub struct Credentials {
    entries: Mutex<HashMap<(String, String), Entry>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

fn now_secs() -> u64 {
    tp_proto::clock::now_ms() / 1000
}

impl Credentials {
    /// The credential `tenant` connected for `provider`, or `None` when it has none. Fails
    /// only when the control plane cannot be asked and nothing current is known: a call must
    /// not fall back to the executor's own credential for a tenant that may have one.
    pub async fn get(
        &self,
        directory: &dyn Directory,
        versions: &Versions,
        tenant: &str,
        provider: &str,
    ) -> Result<Option<pb::ProviderCredential>, Status> {
        let key = (tenant.to_owned(), provider.to_owned());
        if let Some(required) = versions.required(tenant) {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = entries.get(&key).filter(|e| e.revision >= required) {
                let usable = entry
                    .credential
                    .as_ref()
                    .filter(|c| c.expires_at == 0 || now_secs() < c.expires_at);
                if usable.is_some() || entry.credential.is_none() {
                    return Ok(usable.cloned());
                }
            }
        }
        let (credential, revision) = match directory.credential(tenant, provider).await {
            Ok(answer) => (
                Some(pb::ProviderCredential {
                    provider: provider.to_owned(),
                    token: answer.credential,
                    expires_at: answer.expires_at,
                }),
                answer.revision,
            ),
            Err(status) if status.code() == Code::NotFound => (None, versions.head()),
            Err(status) => return Err(status),
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(
            key,
            Entry {
                credential: credential.clone(),
                revision,
            },
        );
        Ok(credential)
    }
}
