//! Where wiki objects live: any `object_store` (a local folder by default, an S3-compatible
//! bucket such as R2 by config), under `wiki/{tenant}/`. Writes of one tenant are serialised by
//! a per-tenant lock in this process; see `docs/wiki.md` for several replicas.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

/// Storage errors.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The object store failed.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// An object is not UTF-8 text.
    #[error("{0} is not UTF-8 text")]
    NotText(String),
    /// Another writer held the tenant's lease for too long.
    #[error("the wiki is busy ({0} held too long); retry")]
    Busy(String),
}

/// How long a write lease lasts without renewal (a write never takes this long).
pub const LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(60);
/// How long a writer waits for a lease.
pub const LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn rand_bytes() -> [u8; 12] {
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 12];
    for chunk in out.chunks_mut(8) {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(now_ms());
        let bytes = hasher.finish().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    out
}

/// A held write lease of one tenant; released (the lease object deleted, if still ours) on drop.
#[derive(Debug)]
pub struct TenantLease {
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    holder: String,
    _local: tokio::sync::OwnedMutexGuard<()>,
}

impl TenantLease {
    /// Releases the lease (deletes the lease object if it is still ours).
    pub async fn release(mut self) {
        release(&self.store, &self.key, &self.holder).await;
        self.holder.clear();
    }
}

async fn release(store: &Arc<dyn ObjectStore>, key: &ObjectPath, holder: &str) {
    if let Ok(current) = store.get(key).await
        && let Ok(bytes) = current.bytes().await
        && String::from_utf8_lossy(&bytes).starts_with(holder)
    {
        let _ = store.delete(key).await;
    }
}

impl Drop for TenantLease {
    fn drop(&mut self) {
        // Not released explicitly (an error path): release in the background; until then
        // other writers wait briefly, and an expired lease is taken over in any case.
        if !self.holder.is_empty()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let (store, key, holder) = (
                Arc::clone(&self.store),
                self.key.clone(),
                self.holder.clone(),
            );
            handle.spawn(async move { release(&store, &key, &holder).await });
        }
    }
}

/// The wiki's object storage.
#[derive(Debug, Clone)]
pub struct Storage {
    store: Arc<dyn ObjectStore>,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Storage {
    /// Over any object store.
    pub fn new(store: Arc<dyn ObjectStore>) -> Storage {
        Storage {
            store,
            locks: Arc::default(),
        }
    }

    /// A local folder (created if missing).
    pub fn local(dir: &Path) -> Result<Storage, StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StorageError::Store(object_store::Error::Generic {
                store: "local",
                source: Box::new(e),
            })
        })?;
        Ok(Storage::new(Arc::new(LocalFileSystem::new_with_prefix(
            dir,
        )?)))
    }

    /// In memory (tests, benchmarks).
    pub fn memory() -> Storage {
        Storage::new(Arc::new(InMemory::new()))
    }

    /// The lock serialising writes of one tenant.
    pub fn tenant_lock(&self, tenant: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(locks.entry(tenant.to_owned()).or_default())
    }

    /// Takes the write lease of `tenant` (waiting up to [`LEASE_WAIT`]); released on drop.
    pub async fn lock(&self, tenant: &str) -> Result<TenantLease, StorageError> {
        let local = self.tenant_lock(tenant).lock_owned().await;
        let key = ObjectPath::from(format!("wiki/{tenant}/.lock"));
        let holder = hex::encode(rand_bytes());
        let started = std::time::Instant::now();
        loop {
            let expires = now_ms() + u64::try_from(LEASE_TTL.as_millis()).unwrap_or(u64::MAX);
            let body = format!("{holder} {expires}");
            let options = PutOptions {
                mode: PutMode::Create,
                ..Default::default()
            };
            match self
                .store
                .put_opts(&key, PutPayload::from(body), options)
                .await
            {
                Ok(_) => {
                    return Ok(TenantLease {
                        store: Arc::clone(&self.store),
                        key,
                        holder,
                        _local: local,
                    });
                }
                Err(object_store::Error::AlreadyExists { .. }) => {
                    // Take over a lease whose holder died (expired), then try again.
                    if let Ok(current) = self.store.get(&key).await
                        && let Ok(bytes) = current.bytes().await
                    {
                        let text = String::from_utf8_lossy(&bytes).to_string();
                        let expired = text
                            .split_whitespace()
                            .nth(1)
                            .and_then(|e| e.parse::<u64>().ok())
                            .is_none_or(|expiry| expiry < now_ms());
                        if expired {
                            tracing::warn!(lease = %key, "taking over an expired wiki lease");
                            let _ = self.store.delete(&key).await;
                            continue;
                        }
                    }
                    if started.elapsed() > LEASE_WAIT {
                        return Err(StorageError::Busy(key.to_string()));
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// The text at `key`, if any.
    pub async fn get(&self, key: &str) -> Result<Option<String>, StorageError> {
        match self.store.get(&ObjectPath::from(key)).await {
            Ok(result) => {
                let bytes = result.bytes().await?;
                String::from_utf8(bytes.to_vec())
                    .map(Some)
                    .map_err(|_| StorageError::NotText(key.to_owned()))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Writes `text` at `key`.
    pub async fn put(&self, key: &str, text: &str) -> Result<(), StorageError> {
        self.store
            .put(&ObjectPath::from(key), PutPayload::from(text.to_owned()))
            .await?;
        Ok(())
    }

    /// Every key under `prefix` (a folder, without trailing slash), sorted.
    pub async fn list(&self, prefix: &str) -> Result<Vec<String>, StorageError> {
        let prefix = ObjectPath::from(prefix);
        let mut keys: Vec<String> = self
            .store
            .list(Some(&prefix))
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await?;
        keys.sort();
        Ok(keys)
    }
}
