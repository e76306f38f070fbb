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
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// Storage errors.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The object store failed.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// An object is not UTF-8 text.
    #[error("{0} is not UTF-8 text")]
    NotText(String),
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
