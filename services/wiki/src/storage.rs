//! Where wiki objects live: any `object_store` (a local folder by default, an S3-compatible
//! bucket such as R2 by config), under `wiki/{tenant}/`.
//!
//! Writes of one tenant are serialised by a lease (`wiki/{tenant}/.lock`), held by one writer
//! of any replica: it lasts [`LEASE_TTL`] and is renewed while held, so a writer that died is
//! taken over within that time (at once when it was a process of this host that no longer
//! runs). A take-over is conditional: only the writer that creates the take-over marker for
//! that exact expired lease may remove it.
//!
//! The objects one operation writes become visible together or are repaired: they go first to
//! a journal object (`wiki/{tenant}/.journal/…`, one object, written atomically), then to
//! their places, then the journal is deleted. A writer that dies in between leaves the journal,
//! which the next writer of the tenant (or the service at start) replays before anything else.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

/// Why reading or writing a wiki file failed.
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
    /// This writer lost its lease (it stalled past the lease's lifetime).
    #[error("the write lease of {0} was lost; retry")]
    LeaseLost(String),
}

/// How long a write lease lasts without renewal.
pub const LEASE_TTL: Duration = Duration::from_secs(10);
/// How often a held lease is renewed.
const LEASE_RENEW: Duration = Duration::from_secs(3);
/// How long a writer waits for a lease.
pub const LEASE_WAIT: Duration = Duration::from_secs(30);

use tp_proto::clock::now_ms;

fn random_id() -> String {
    let bytes: [u8; 12] = rand::random();
    hex::encode(bytes)
}

/// Lease holders alive in this process (every `Storage` of the process shares it, so a lease
/// of this process is never mistaken for one of a previous process with the same pid).
fn holders() -> &'static Mutex<HashMap<String, ()>> {
    static HOLDERS: std::sync::OnceLock<Mutex<HashMap<String, ()>>> = std::sync::OnceLock::new();
    HOLDERS.get_or_init(Mutex::default)
}

/// This host's name (for recognising leases of dead processes of this host).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

/// What a lease object says: `holder expires_ms host pid`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LeaseRecord {
    holder: String,
    expires_ms: u64,
    host: String,
    pid: u32,
}

impl LeaseRecord {
    fn render(&self) -> String {
        format!(
            "{} {} {} {}",
            self.holder, self.expires_ms, self.host, self.pid
        )
    }

    fn parse(text: &str) -> Option<LeaseRecord> {
        let mut parts = text.split_whitespace();
        Some(LeaseRecord {
            holder: parts.next()?.to_owned(),
            expires_ms: parts.next()?.parse().ok()?,
            host: parts.next().unwrap_or_default().to_owned(),
            pid: parts.next().and_then(|p| p.parse().ok()).unwrap_or(0),
        })
    }

    /// Whether the holder is gone: the lease expired, or it names a process of this host that
    /// no longer runs (or this very process, under a holder id it does not know: a previous
    /// life of the same pid).
    fn is_dead(&self, host: &str) -> bool {
        if self.expires_ms < now_ms() {
            return true;
        }
        if self.host.is_empty() || self.host != host || self.pid == 0 {
            return false;
        }
        if self.pid == std::process::id() {
            let held = holders().lock().unwrap_or_else(|e| e.into_inner());
            return !held.contains_key(&self.holder);
        }
        !Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}

/// A held write lease of one tenant: renewed in the background, released on drop.
#[derive(Debug)]
pub struct TenantLease {
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    holder: String,
    lost: Arc<AtomicBool>,
    renew: tokio::task::JoinHandle<()>,
    tenant: String,
    _local: tokio::sync::OwnedMutexGuard<()>,
}

impl TenantLease {
    /// The tenant whose folder this storage reads and writes.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// Fails when the lease was lost (this writer stalled past its lifetime).
    pub fn check(&self) -> Result<(), StorageError> {
        if self.lost.load(Ordering::Acquire) {
            return Err(StorageError::LeaseLost(self.tenant.clone()));
        }
        Ok(())
    }

    /// Releases the lease (deletes the lease object if it is still ours).
    pub async fn release(mut self) {
        self.renew.abort();
        release(&self.store, &self.key, &self.holder).await;
        self.forget();
    }

    fn forget(&mut self) {
        holders()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.holder);
        self.holder.clear();
    }
}

async fn read_lease(store: &Arc<dyn ObjectStore>, key: &ObjectPath) -> Option<LeaseRecord> {
    let current = store.get(key).await.ok()?;
    let bytes = current.bytes().await.ok()?;
    LeaseRecord::parse(&String::from_utf8_lossy(&bytes))
}

async fn release(store: &Arc<dyn ObjectStore>, key: &ObjectPath, holder: &str) {
    if read_lease(store, key)
        .await
        .is_some_and(|record| record.holder == holder)
    {
        let _ = store.delete(key).await;
    }
}

impl Drop for TenantLease {
    fn drop(&mut self) {
        self.renew.abort();
        // Not released explicitly (an error path): release in the background; until then
        // other writers wait briefly, and an expired lease is taken over in any case.
        if !self.holder.is_empty() {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                let (store, key, holder) = (
                    Arc::clone(&self.store),
                    self.key.clone(),
                    self.holder.clone(),
                );
                handle.spawn(async move { release(&store, &key, &holder).await });
            }
            self.forget();
        }
    }
}

/// The objects one operation writes (`None`: delete), applied together by
/// [`Storage::commit`].
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct Batch {
    writes: BTreeMap<String, Option<String>>,
}

impl Batch {
    /// Writes `text` at `key` (the last write of a key wins).
    pub fn put(&mut self, key: impl Into<String>, text: impl Into<String>) {
        self.writes.insert(key.into(), Some(text.into()));
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: impl Into<String>) {
        self.writes.insert(key.into(), None);
    }

    /// What the batch holds for `key`: `Some(Some(text))` written, `Some(None)` deleted.
    pub fn get(&self, key: &str) -> Option<Option<&str>> {
        self.writes.get(key).map(Option::as_deref)
    }

    /// Whether nothing is to be written.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Bytes written.
    pub fn bytes(&self) -> usize {
        self.writes.values().flatten().map(String::len).sum()
    }
}

/// The wiki's object storage.
#[derive(Debug, Clone)]
pub struct Storage {
    store: Arc<dyn ObjectStore>,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    host: Arc<str>,
}

impl Storage {
    /// Over any object store.
    pub fn new(store: Arc<dyn ObjectStore>) -> Storage {
        Storage {
            store,
            locks: Arc::default(),
            host: host_name().into(),
        }
    }

    /// A local folder (created if missing, readable by its owner only).
    pub fn local(dir: &Path) -> Result<Storage, StorageError> {
        let io = |e: std::io::Error| {
            StorageError::Store(object_store::Error::Generic {
                store: "local",
                source: Box::new(e),
            })
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            // Pages hold tenants' data: nobody but the service's user may list or read them —
            // the folder, and the `wiki/` folder every page lives under (created here, before
            // the object store would create it with the default mode).
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
            let pages = dir.join("wiki");
            std::fs::create_dir_all(&pages).map_err(io)?;
            std::fs::set_permissions(&pages, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        }
        Ok(Storage::new(Arc::new(LocalFileSystem::new_with_prefix(
            dir,
        )?)))
    }

    /// In memory (tests, benchmarks).
    pub fn memory() -> Storage {
        Storage::new(Arc::new(InMemory::new()))
    }

    /// The lock serialising writes of one tenant in this process.
    fn tenant_lock(&self, tenant: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(locks.entry(tenant.to_owned()).or_default())
    }

    /// Takes the write lease of `tenant` (waiting up to [`LEASE_WAIT`]), then replays any
    /// journal a writer that died left behind. Released on drop.
    pub async fn lock(&self, tenant: &str) -> Result<TenantLease, StorageError> {
        let local = self.tenant_lock(tenant).lock_owned().await;
        let key = ObjectPath::from(format!("wiki/{tenant}/.lock"));
        let holder = random_id();
        holders()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(holder.clone(), ());
        let started = std::time::Instant::now();
        let record = |holder: &str| LeaseRecord::new(holder, &self.host);
        loop {
            let options = PutOptions {
                mode: PutMode::Create,
                ..Default::default()
            };
            let body = record(&holder).render();
            match self
                .store
                .put_opts(&key, PutPayload::from(body), options)
                .await
            {
                Ok(_) => break,
                Err(object_store::Error::AlreadyExists { .. }) => {
                    if let Some(current) = read_lease(&self.store, &key).await
                        && current.is_dead(&self.host)
                    {
                        self.take_over(tenant, &key, &current).await;
                        continue;
                    }
                    if started.elapsed() > LEASE_WAIT {
                        holders()
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&holder);
                        return Err(StorageError::Busy(key.to_string()));
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(error) => {
                    holders()
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&holder);
                    return Err(error.into());
                }
            }
        }
        let lost = Arc::new(AtomicBool::new(false));
        let renew = tokio::spawn(renew_lease(
            Arc::clone(&self.store),
            key.clone(),
            holder.clone(),
            Arc::clone(&lost),
            self.host.to_string(),
        ));
        let lease = TenantLease {
            store: Arc::clone(&self.store),
            key,
            holder,
            lost,
            renew,
            tenant: tenant.to_owned(),
            _local: local,
        };
        self.recover(&lease).await?;
        Ok(lease)
    }

    /// Removes a dead holder's lease, if this writer wins the take-over of that exact lease.
    async fn take_over(&self, tenant: &str, key: &ObjectPath, dead: &LeaseRecord) {
        let marker = ObjectPath::from(format!(
            "wiki/{tenant}/.lock-takeover/{}-{}",
            dead.holder, dead.expires_ms
        ));
        let options = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        if self
            .store
            .put_opts(&marker, PutPayload::from(random_id()), options)
            .await
            .is_err()
        {
            // Another writer is taking it over.
            return;
        }
        // Remove the lease only if it is still the dead one.
        if read_lease(&self.store, key)
            .await
            .is_some_and(|current| current == *dead)
        {
            tracing::warn!(lease = %key, holder = %dead.holder, "taking over the lease of a writer that is gone");
            let _ = self.store.delete(key).await;
        }
        let _ = self.store.delete(&marker).await;
    }

    /// Applies `batch` for the holder of `lease`: journal, objects, journal deleted.
    pub async fn commit(&self, lease: &TenantLease, batch: Batch) -> Result<(), StorageError> {
        if batch.is_empty() {
            return Ok(());
        }
        lease.check()?;
        // On the write runtime, at a lower priority than the threads answering queries.
        let storage = self.clone();
        let tenant = lease.tenant().to_owned();
        crate::work::write(async move { storage.journaled(&tenant, &batch).await })
            .await
            .map_err(|error| {
                StorageError::Store(object_store::Error::Generic {
                    store: "wiki",
                    source: Box::new(error),
                })
            })?
    }

    /// Writes `batch` behind a journal: the journal first, then each object, then the journal
    /// removed (a writer that dies in between leaves the journal for [`Storage::lock`]).
    async fn journaled(&self, tenant: &str, batch: &Batch) -> Result<(), StorageError> {
        let journal = ObjectPath::from(format!(
            "wiki/{tenant}/.journal/{}-{}.json",
            now_ms(),
            random_id()
        ));
        let text = serde_json::to_string(batch).unwrap_or_default();
        self.store.put(&journal, PutPayload::from(text)).await?;
        self.apply(batch).await?;
        self.store.delete(&journal).await?;
        Ok(())
    }

    async fn apply(&self, batch: &Batch) -> Result<(), StorageError> {
        for (key, write) in &batch.writes {
            let path = ObjectPath::from(key.as_str());
            match write {
                Some(text) => {
                    self.store
                        .put(&path, PutPayload::from(text.clone()))
                        .await?;
                }
                None => match self.store.delete(&path).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(error) => return Err(error.into()),
                },
            }
        }
        Ok(())
    }

    /// Replays the journals of `lease`'s tenant (left by a writer that died mid-commit).
    async fn recover(&self, lease: &TenantLease) -> Result<usize, StorageError> {
        let prefix = format!("wiki/{}/.journal", lease.tenant());
        let mut replayed = 0;
        for key in self.list(&prefix).await? {
            let Some(text) = self.get(&key).await? else {
                continue;
            };
            match serde_json::from_str::<Batch>(&text) {
                Ok(batch) => {
                    self.apply(&batch).await?;
                    replayed += 1;
                    tracing::warn!(journal = %key, objects = batch.writes.len(), "replayed an interrupted wiki write");
                }
                // A journal cut short was never acknowledged: nothing of it was applied.
                Err(_) => tracing::warn!(journal = %key, "dropped an incomplete wiki journal"),
            }
            self.store.delete(&ObjectPath::from(key.as_str())).await?;
        }
        Ok(replayed)
    }

    /// Replays every tenant's interrupted writes (at start); returns how many.
    pub async fn recover_all(&self) -> Result<usize, StorageError> {
        let listing = self
            .store
            .list_with_delimiter(Some(&ObjectPath::from("wiki")))
            .await?;
        let mut replayed = 0;
        for prefix in listing.common_prefixes {
            let Some(tenant) = prefix.filename() else {
                continue;
            };
            if self
                .list(&format!("wiki/{tenant}/.journal"))
                .await?
                .is_empty()
            {
                continue;
            }
            let lease = self.lock(tenant).await?;
            replayed += 1;
            lease.release().await;
        }
        Ok(replayed)
    }

    /// Deletes every object of `tenant` (its lease aside, released by the caller); returns how
    /// many.
    pub async fn purge(&self, lease: &TenantLease) -> Result<u64, StorageError> {
        let lock = format!("wiki/{}/.lock", lease.tenant());
        let mut deleted = 0;
        for key in self.list(&format!("wiki/{}", lease.tenant())).await? {
            if key == lock {
                continue;
            }
            match self.store.delete(&ObjectPath::from(key.as_str())).await {
                Ok(()) => deleted += 1,
                Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(deleted)
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

    /// Writes `text` at `key` at once (outside any batch: markers, never pages).
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

impl tp_registry::HasErrorCode for StorageError {
    fn code(&self) -> tp_registry::ErrorCode {
        use tp_registry::ErrorCode;
        match self {
            StorageError::Store(_) | StorageError::Busy(_) | StorageError::LeaseLost(_) => {
                ErrorCode::Unavailable
            }
            StorageError::NotText(_) => ErrorCode::Internal,
        }
    }
}

/// Renews the lease every [`LEASE_RENEW`] while `holder` still holds it; marks it `lost` and
/// stops when another writer has it.
async fn renew_lease(
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    holder: String,
    lost: Arc<AtomicBool>,
    host: String,
) {
    loop {
        tokio::time::sleep(LEASE_RENEW).await;
        match read_lease(&store, &key).await {
            Some(current) if current.holder == holder => {
                let renewed = LeaseRecord::new(&holder, &host);
                let _ = store.put(&key, PutPayload::from(renewed.render())).await;
            }
            _ => {
                tracing::warn!(lease = %key, "wiki write lease lost");
                lost.store(true, Ordering::Release);
                return;
            }
        }
    }
}

impl LeaseRecord {
    /// A lease of `holder` on `host` (this process) that expires [`LEASE_TTL`] from now.
    fn new(holder: &str, host: &str) -> LeaseRecord {
        LeaseRecord {
            holder: holder.to_owned(),
            expires_ms: now_ms() + u64::try_from(LEASE_TTL.as_millis()).unwrap_or(u64::MAX),
            host: host.to_owned(),
            pid: std::process::id(),
        }
    }
}

#[cfg(test)]
mod tests;
