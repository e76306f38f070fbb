//! Deleting a tenant deletes what executors keep for it: after the deletion is committed, the
//! control plane calls `Executor.PurgeTenant` (signed with the fleet's executor key) on every
//! gRPC executor, and again with back-off until each has answered.
//!
//! The queue is in the store, not in one replica: a purge is queued right after the deletion
//! commits, every replica works through the same queue (a purge is idempotent, so two replicas
//! calling one executor at once do no harm), and a replica that dies — or is replaced — leaves
//! nothing behind: the others, or its successor, finish. Queues that earlier versions kept in
//! `<data_dir>/purges.json` are moved into the store at start.
//!
//! Executors that keep data also keep it per incarnation of the tenant (`TenantContext
//! .tenant_uid`): a tenant created again under the same id never reads its predecessor's data,
//! even before the purge has reached them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::Notify;
use tp_proto::invoke_auth::ExecutorKey;
use tp_proto::pb;
use tp_store::{PendingPurge, Store};

/// Pending purges and the task that carries them out.
pub struct Purges {
    store: Arc<dyn Store>,
    key: ExecutorKey,
    wake: Notify,
}

impl std::fmt::Debug for Purges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Purges").finish_non_exhaustive()
    }
}

/// Longest pause between two rounds of attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// How often a replica looks at the queue when nothing woke it (another replica's deletions,
/// purges left by a replica that died): one small query.
const POLL: Duration = Duration::from_secs(5);

/// A purge as `purges.json` held it (before the queue moved into the store).
#[derive(Debug, Deserialize)]
struct Legacy {
    tenant: String,
    uid: String,
    targets: Vec<LegacyTarget>,
}

#[derive(Debug, Deserialize)]
struct LegacyTarget {
    name: String,
    endpoint: String,
}

impl Purges {
    /// Moves a legacy `purges.json` (if any) into the store and starts carrying out the queue.
    pub async fn start(store: Arc<dyn Store>, legacy: PathBuf, key: ExecutorKey) -> Arc<Purges> {
        if let Ok(text) = std::fs::read_to_string(&legacy) {
            let old: Vec<Legacy> = serde_json::from_str(&text).unwrap_or_default();
            let queued: Vec<PendingPurge> = old
                .into_iter()
                .flat_map(|p| {
                    p.targets.into_iter().map(move |t| PendingPurge {
                        tenant: p.tenant.clone(),
                        uid: p.uid.clone(),
                        executor: t.name,
                        endpoint: t.endpoint,
                        attempts: 0,
                    })
                })
                .collect();
            match store.queue_purges(&queued, crate::engine::now_ms()).await {
                Ok(()) => {
                    tracing::info!(
                        purges = queued.len(),
                        file = %legacy.display(),
                        "pending purges moved from the data directory into the store"
                    );
                    let _ = std::fs::remove_file(&legacy);
                }
                Err(error) => {
                    tracing::warn!(%error, file = %legacy.display(), "could not move pending purges into the store; will try at the next start");
                }
            }
        }
        let purges = Arc::new(Purges {
            store,
            key,
            wake: Notify::new(),
        });
        tokio::spawn(Arc::clone(&purges).run());
        purges
    }

    /// Queues the purge of `tenant` (incarnation `uid`) on `executors` (name, endpoint).
    pub async fn enqueue(&self, tenant: &str, uid: &str, executors: Vec<(String, String)>) {
        if executors.is_empty() {
            return;
        }
        let queued: Vec<PendingPurge> = executors
            .into_iter()
            .map(|(executor, endpoint)| PendingPurge {
                tenant: tenant.to_owned(),
                uid: uid.to_owned(),
                executor,
                endpoint,
                attempts: 0,
            })
            .collect();
        if let Err(error) = self
            .store
            .queue_purges(&queued, crate::engine::now_ms())
            .await
        {
            // The tenant is deleted; its data stays with the executors until purged by hand.
            tracing::error!(%error, tenant, "could not queue the purge of a deleted tenant's data; run `toolplanectl tenants delete` again to queue it");
            metrics::counter!("tp_cp_purges_lost_total").increment(1);
        }
        self.wake.notify_one();
    }

    /// Purges still pending (tenant, executors left).
    pub async fn pending(&self) -> Vec<(String, usize)> {
        let mut by_tenant: Vec<(String, usize)> = Vec::new();
        for purge in self.store.pending_purges().await.unwrap_or_default() {
            match by_tenant.iter_mut().find(|(t, _)| *t == purge.tenant) {
                Some((_, n)) => *n += 1,
                None => by_tenant.push((purge.tenant, 1)),
            }
        }
        by_tenant
    }

    async fn run(self: Arc<Self>) {
        let mut backoff = Duration::from_secs(1);
        loop {
            let work = match self.store.pending_purges().await {
                Ok(work) => work,
                Err(error) => {
                    tracing::warn!(%error, "reading the purge queue failed; will retry");
                    Vec::new()
                }
            };
            metrics::gauge!("tp_cp_purges_pending").set(work.len() as f64);
            if work.is_empty() {
                backoff = Duration::from_secs(1);
                tokio::select! {
                    () = self.wake.notified() => {}
                    () = tokio::time::sleep(POLL) => {}
                }
                continue;
            }
            let mut all_done = true;
            for purge in work {
                let done = match self.call(&purge).await {
                    Ok(deleted) => {
                        tracing::info!(tenant = %purge.tenant, executor = %purge.executor, deleted, "tenant data purged");
                        true
                    }
                    Err(status) => {
                        tracing::warn!(tenant = %purge.tenant, executor = %purge.executor, error = %status.message(), attempt = purge.attempts + 1, "tenant data purge failed; will retry");
                        all_done = false;
                        false
                    }
                };
                if let Err(error) = self.store.purge_attempted(&purge, done).await {
                    tracing::warn!(%error, "recording a purge attempt failed; it will be tried again");
                }
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
    async fn call(&self, purge: &PendingPurge) -> Result<u64, tonic::Status> {
        let channel = tp_net::dial::dial(&purge.endpoint)
            .map_err(tonic::Status::invalid_argument)?
            .map(|endpoint| {
                endpoint
                    .connect_timeout(Duration::from_secs(3))
                    .timeout(Duration::from_secs(60))
            })
            .connect()
            .await
            .map_err(|e| {
                tp_proto::status::error(tp_registry::ErrorCode::Unavailable, e.to_string())
            })?;
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
