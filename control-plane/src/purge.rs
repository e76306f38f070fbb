//! Deleting a tenant deletes what executors keep for it: after the deletion is committed, the
//! control plane calls `Executor.PurgeTenant` (signed with the fleet's executor key) on every
//! gRPC executor, and again with back-off until each has answered. Pending purges are kept in
//! `<data_dir>/purges.json`, so a restart resumes them.
//!
//! Executors that keep data also keep it per incarnation of the tenant (`TenantContext
//! .tenant_uid`): a tenant created again under the same id never reads its predecessor's data,
//! even before the purge has reached them.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tp_proto::invoke_auth::ExecutorKey;
use tp_proto::pb;

/// One executor still to be told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Target {
    name: String,
    endpoint: String,
}

/// One deleted tenant's purge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Purge {
    tenant: String,
    uid: String,
    targets: Vec<Target>,
    attempts: u32,
}

/// Pending purges and the task that carries them out.
#[derive(Debug)]
pub struct Purges {
    path: PathBuf,
    pending: Mutex<Vec<Purge>>,
    key: ExecutorKey,
    wake: Notify,
}

/// Longest pause between two rounds of attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

impl Purges {
    /// Loads pending purges from `path` and starts carrying them out.
    pub fn start(path: PathBuf, key: ExecutorKey) -> Arc<Purges> {
        let pending: Vec<Purge> = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        if !pending.is_empty() {
            tracing::info!(pending = pending.len(), "resuming tenant data purges");
        }
        let purges = Arc::new(Purges {
            path,
            pending: Mutex::new(pending),
            key,
            wake: Notify::new(),
        });
        tokio::spawn(Arc::clone(&purges).run());
        purges
    }

    /// Queues the purge of `tenant` (incarnation `uid`) on `executors` (name, endpoint).
    pub fn enqueue(&self, tenant: &str, uid: &str, executors: Vec<(String, String)>) {
        if executors.is_empty() {
            return;
        }
        {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            pending.push(Purge {
                tenant: tenant.to_owned(),
                uid: uid.to_owned(),
                targets: executors
                    .into_iter()
                    .map(|(name, endpoint)| Target { name, endpoint })
                    .collect(),
                attempts: 0,
            });
            self.save(&pending);
        }
        self.wake.notify_one();
    }

    /// Purges still pending (tenant, executors left).
    pub fn pending(&self) -> Vec<(String, usize)> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|p| (p.tenant.clone(), p.targets.len()))
            .collect()
    }

    fn save(&self, pending: &[Purge]) {
        let text = serde_json::to_string_pretty(pending).unwrap_or_default();
        if let Err(error) = crate::server::write_private(&self.path, &text) {
            tracing::warn!(%error, path = %self.path.display(), "could not record pending purges");
        }
    }

    async fn run(self: Arc<Self>) {
        let mut backoff = Duration::from_secs(1);
        loop {
            let work: Vec<Purge> = self
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if work.is_empty() {
                backoff = Duration::from_secs(1);
                self.wake.notified().await;
                continue;
            }
            let mut all_done = true;
            for purge in work {
                let mut left = Vec::new();
                for target in &purge.targets {
                    match self.call(&purge, target).await {
                        Ok(deleted) => {
                            tracing::info!(tenant = %purge.tenant, executor = %target.name, deleted, "tenant data purged");
                        }
                        Err(status) => {
                            tracing::warn!(tenant = %purge.tenant, executor = %target.name, error = %status.message(), attempt = purge.attempts + 1, "tenant data purge failed; will retry");
                            left.push(target.clone());
                        }
                    }
                }
                all_done &= left.is_empty();
                let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(entry) = pending
                    .iter_mut()
                    .find(|p| p.tenant == purge.tenant && p.uid == purge.uid)
                {
                    entry.targets = left;
                    entry.attempts += 1;
                }
                pending.retain(|p| !p.targets.is_empty());
                self.save(&pending);
            }
            if !all_done {
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = self.wake.notified() => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }

    /// One signed `PurgeTenant` call; an executor that does not implement it keeps nothing.
    async fn call(&self, purge: &Purge, target: &Target) -> Result<u64, tonic::Status> {
        let channel = tp_net::dial::dial(&target.endpoint)
            .map_err(tonic::Status::invalid_argument)?
            .map(|endpoint| {
                endpoint
                    .connect_timeout(Duration::from_secs(3))
                    .timeout(Duration::from_secs(60))
            })
            .connect()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let mut client = pb::executor_client::ExecutorClient::new(channel);
        let mut request = tonic::Request::new(pb::PurgeTenantRequest {
            tenant: purge.tenant.clone(),
            tenant_uid: purge.uid.clone(),
        });
        self.key.sign_request("PurgeTenant", &mut request);
        match client.purge_tenant(request).await {
            Ok(response) => Ok(response.into_inner().deleted),
            Err(status) if status.code() == tonic::Code::Unimplemented => Ok(0),
            Err(status) => Err(status),
        }
    }
}
