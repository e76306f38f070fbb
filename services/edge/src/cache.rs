//! Registries and identities: L1 in process (bounded), L2 Redis (shared by the fleet), L3 the
//! control plane. Entries carry the revision they were resolved at and are used only while that
//! revision is current for their tenant ([`Versions`]) and younger than the L1 backstop TTL;
//! concurrent misses for one key make one upstream call (a placeholder the others wait on). A
//! stale entry stays in place as the last known good, served when the control plane cannot be
//! reached.
//!
//! L1 is a `quick_cache` (CLOCK-Pro, entries in a slab): about 0.5 KiB per resident tenant
//! (identity + registry) where one `moka` cache per purpose took about 2.5 KiB
//! (docs/performance.md). The edge has no other in-process cache crate.

/// How long a key the control plane refused stays refused without asking again.
const REFUSED_FOR: Duration = Duration::from_secs(10);

use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;
use quick_cache::sync::{Cache as Slab, EntryAction, EntryResult};
use tonic::Code;
use tp_proto::pb;

use crate::control::{Directory, is_unreachable};
pub use crate::identity::Identity;
use crate::registry::Registry;
use crate::shared::Shared;
use crate::versions::Versions;

/// Why a lookup failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LookupError {
    /// The key is unknown, revoked or expired.
    #[error("invalid, revoked or expired API key")]
    Unauthenticated,
    /// The tenant no longer exists.
    #[error("tenant not found")]
    NotFound,
    /// Nothing cached and the control plane is unreachable.
    #[error("the control plane is unreachable and nothing is cached: {0}")]
    Unavailable(String),
}

/// The cache settings the edge needs here.
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// L1 registry capacity.
    pub registries: u64,
    /// L1 identity capacity.
    pub identities: u64,
    /// L1 backstop TTL.
    pub l1_ttl: Duration,
    /// How long a registry or identity stays in Redis (changes are pushed; this bounds a missed one).
    pub l2_ttl: Duration,
    /// Longest time an identity the control plane confirmed is trusted without confirming it
    /// again while the control plane is unreachable; older ones are refused (401).
    pub identity_max_stale: Duration,
}

/// `tenant \0 role`.
/// The (tenant, role) of a registry in L1, as one string (`tenant\0role`: names hold no
/// NUL). Hashed as its two parts, so that a request looks its registry up by
/// [`RegistryKeyRef`] without building the string.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RegistryKey(String);

impl RegistryKey {
    fn parts(&self) -> (&str, &str) {
        self.0.split_once('\0').unwrap_or((self.0.as_str(), ""))
    }
}

impl std::hash::Hash for RegistryKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (tenant, role) = self.parts();
        RegistryKeyRef { tenant, role }.hash(state);
    }
}

/// A [`RegistryKey`] borrowed from its parts.
#[derive(Hash)]
struct RegistryKeyRef<'a> {
    tenant: &'a str,
    role: &'a str,
}

impl quick_cache::Equivalent<RegistryKey> for RegistryKeyRef<'_> {
    fn equivalent(&self, key: &RegistryKey) -> bool {
        key.parts() == (self.tenant, self.role)
    }
}

fn registry_key(tenant: &str, role: &str) -> RegistryKey {
    let mut key = String::with_capacity(tenant.len() + role.len() + 1);
    key.push_str(tenant);
    key.push('\0');
    key.push_str(role);
    RegistryKey(key)
}

/// An L1 entry: the value and when it was loaded (for the backstop TTL).
type Held<T> = (Arc<T>, Instant);

/// A registry in L1: current or the last known good, when it was loaded, and — after a failed
/// reload — until when it is served as it is without another attempt.
#[derive(Clone)]
struct Slot {
    registry: Arc<Registry>,
    loaded: Instant,
    retry_at: Option<Instant>,
}

impl Slot {
    /// A registry loaded just now.
    fn fresh(registry: &Arc<Registry>) -> Slot {
        Slot {
            registry: Arc::clone(registry),
            loaded: Instant::now(),
            retry_at: None,
        }
    }
}

/// How long a registry whose reload failed is served as the last known good before the next
/// attempt (so requests waiting on a failing control plane do not each try in turn).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(2);

type RegistryGuard<'a> = quick_cache::sync::PlaceholderGuard<
    'a,
    RegistryKey,
    Slot,
    quick_cache::UnitWeighter,
    quick_cache::DefaultHashBuilder,
    quick_cache::sync::DefaultLifecycle<RegistryKey, Slot>,
>;

/// A reload in progress: the placeholder other requests wait on, and the stale entry it
/// replaced. Whatever happens to the reload — an error, or the request dropped mid-way — the
/// stale entry goes back unless a new one was put in.
struct Reload<'a> {
    guard: Option<RegistryGuard<'a>>,
    stale: Option<Slot>,
}

impl Reload<'_> {
    fn put(&mut self, slot: Slot) {
        if let Some(guard) = self.guard.take() {
            let _ = guard.insert(slot);
        }
    }
}

impl Drop for Reload<'_> {
    fn drop(&mut self) {
        if let (Some(guard), Some(stale)) = (self.guard.take(), self.stale.take()) {
            let _ = guard.insert(stale);
        }
    }
}

/// SHA-256 of an API key.
type KeyHash = [u8; 32];

/// A per-process index from a credential to its SHA-256 id, keyed by SipHash-2-4 (128 bits)
/// under a key drawn when the process starts. SipHash is a keyed pseudo-random function: a
/// caller who does not know the process's key cannot make another credential land on a stored
/// one (one chance in 2^128 per stored id and attempt), and the index holds no credential and
/// nothing that can be turned back into one without the key.
struct FastIds {
    key: (u64, u64),
    ids: Slab<u128, KeyHash>,
}

impl FastIds {
    fn new(capacity: usize) -> FastIds {
        FastIds {
            key: (rand::random(), rand::random()),
            ids: Slab::new(capacity),
        }
    }

    fn of(&self, credential: &str) -> u128 {
        use siphasher::sip128::Hasher128 as _;
        use std::hash::Hasher as _;
        let mut hasher = siphasher::sip128::SipHasher24::new_with_keys(self.key.0, self.key.1);
        hasher.write(credential.as_bytes());
        hasher.finish128().as_u128()
    }

    fn get(&self, credential: &str) -> Option<KeyHash> {
        self.ids.get(&self.of(credential))
    }

    fn insert(&self, credential: &str, id: KeyHash) {
        self.ids.insert(self.of(credential), id);
    }

    fn clear(&self) {
        self.ids.clear();
    }
}

fn key_hash(key: &str) -> KeyHash {
    use sha2::Digest as _;
    sha2::Sha256::digest(key.as_bytes()).into()
}

/// The hash of a key from its hex form (as Redis and the control plane store it).
fn key_hash_from_hex(hex_hash: &str) -> Option<KeyHash> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_hash, &mut out).ok()?;
    Some(out)
}

/// All caches of an edge.
pub struct Caches {
    versions: Arc<Versions>,
    control: Arc<dyn Directory>,
    shared: Option<Arc<Shared>>,
    settings: CacheSettings,
    /// The latest registry of each (tenant, role): fresh, or the last known good.
    registries: Slab<RegistryKey, Slot>,
    /// By the SHA-256 of the key (the raw 32 bytes: half the memory of its hex form).
    identities: Slab<KeyHash, Held<Identity>>,
    /// The SHA-256 ids of the credentials this process resolved, by a keyed 128-bit
    /// SipHash-2-4 of the credential ([`FastIds`]): a warm request finds its identity without
    /// hashing its credential with SHA-256. An id whose identity was dropped (revoked,
    /// evicted) finds nothing in `identities` and the credential takes the full path.
    fast_ids: FastIds,
    /// Keys the control plane refused a moment ago: the revision it refused them at, and
    /// when (read as missing after [`REFUSED_FOR`]).
    refused: Slab<KeyHash, (u64, Instant)>,
    /// When this process's caches were made (Unix ms): an identity confirmed before it was
    /// confirmed by another process, or by an earlier life of this one.
    started_ms: u64,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("registries", &self.registries.len())
            .field("identities", &self.identities.len())
            .finish()
    }
}

use tp_proto::clock::{now_ms, now_secs};

fn hit(level: &'static str, kind: &'static str) {
    match (level, kind) {
        // The two lookups of every warm request: handles kept, not looked up each time.
        ("l1", "registry") => l1_hits()[0].increment(1),
        ("l1", "identity") => l1_hits()[1].increment(1),
        _ => metrics::counter!("tp_edge_cache_lookups_total", "level" => level, "kind" => kind)
            .increment(1),
    }
}

fn l1_hits() -> &'static [metrics::Counter; 2] {
    static HITS: std::sync::OnceLock<[metrics::Counter; 2]> = std::sync::OnceLock::new();
    HITS.get_or_init(|| {
        [
            metrics::counter!("tp_edge_cache_lookups_total", "level" => "l1", "kind" => "registry"),
            metrics::counter!("tp_edge_cache_lookups_total", "level" => "l1", "kind" => "identity"),
        ]
    })
}

// === impl Caches ===

impl Caches {
    /// Empty caches.
    pub fn new(
        versions: Arc<Versions>,
        control: Arc<dyn Directory>,
        shared: Option<Arc<Shared>>,
        settings: CacheSettings,
    ) -> Caches {
        let capacity = |n: u64| usize::try_from(n).unwrap_or(usize::MAX).max(1);
        Caches {
            registries: Slab::new(capacity(settings.registries)),
            identities: Slab::new(capacity(settings.identities)),
            fast_ids: FastIds::new(capacity(settings.identities)),
            refused: Slab::new(10_000),
            versions,
            control,
            shared,
            settings,
            started_ms: now_ms(),
        }
    }

    /// Entries held in process (registries, identities).
    pub fn sizes(&self) -> (u64, u64) {
        (self.registries.len() as u64, self.identities.len() as u64)
    }

    /// Whether an entry loaded at `loaded` is within the backstop TTL.
    fn young(&self, loaded: Instant) -> bool {
        loaded.elapsed() < self.settings.l1_ttl
    }

    fn l2_registry_key(&self, shared: &Shared, tenant: &str, role: &str, version: &str) -> String {
        shared.key(&["reg", tenant, role, version])
    }

    /// The registry of (tenant, role) if the in-process cache holds it at the current revision
    /// (no I/O; `None` otherwise).
    pub async fn registry_l1(&self, tenant: &str, role: &str) -> Option<Arc<Registry>> {
        let version = self.versions.required(tenant)?;
        let slot = self.registries.get(&RegistryKeyRef { tenant, role })?;
        if slot.registry.revision < version || !self.young(slot.loaded) {
            return None;
        }
        hit("l1", "registry");
        Some(slot.registry)
    }

    /// The identity of an API key if the in-process cache holds it and it is current (no I/O;
    /// `None` otherwise, including for keys that are not valid).
    pub async fn identity_l1(&self, key: &str) -> Option<Arc<Identity>> {
        // Only what is cached is found: a key of another shape misses like an unknown one
        // (the full check is the router's), so it is only bounded before it is hashed.
        if key.is_empty() || key.len() > tp_proto::keys::MAX_TOKEN_BYTES {
            return None;
        }
        let id = self.fast_ids.get(key)?;
        let (identity, loaded) = self.identities.get(&id)?;
        if !self.young(loaded) || !self.current(&identity, now_secs()) {
            return None;
        }
        hit("l1", "identity");
        Some(identity)
    }

    /// Holds `identity` in process under `id`, the SHA-256 id of `key`.
    fn hold_identity(&self, key: &str, id: KeyHash, identity: &Arc<Identity>) {
        self.identities
            .insert(id, (Arc::clone(identity), Instant::now()));
        self.fast_ids.insert(key, id);
    }

    /// The registry of (tenant, role).
    pub async fn registry(&self, tenant: &str, role: &str) -> Result<Arc<Registry>, LookupError> {
        let key = registry_key(tenant, role);
        let Some(version) = self.versions.required(tenant) else {
            return self.registry_degraded(tenant, role, key).await;
        };
        // Fresh: kept. Stale or absent: this caller loads it while the others wait (the
        // stale one is kept aside as the last known good). A stale one whose reload failed a
        // moment ago is served as it is.
        let entry = self
            .registries
            .entry_async(&key, |_, slot| {
                if slot.registry.revision >= version && slot.loaded.elapsed() < self.settings.l1_ttl
                {
                    EntryAction::Retain((Arc::clone(&slot.registry), true))
                } else if slot.retry_at.is_some_and(|at| Instant::now() < at) {
                    EntryAction::Retain((Arc::clone(&slot.registry), false))
                } else {
                    EntryAction::ReplaceWithGuard
                }
            })
            .await;
        let mut reload = match entry {
            EntryResult::Retained((registry, fresh)) => {
                hit(if fresh { "l1" } else { "l1_stale" }, "registry");
                return Ok(registry);
            }
            EntryResult::Replaced(guard, stale) => Reload {
                guard: Some(guard),
                stale: Some(stale),
            },
            EntryResult::Vacant(guard) => Reload {
                guard: Some(guard),
                stale: None,
            },
            EntryResult::Removed(..) | EntryResult::Timeout => {
                return Err(LookupError::Unavailable("registry cache contention".into()));
            }
        };
        if let Some(registry) = self.l2_registry(tenant, role, version).await {
            hit("l2", "registry");
            let registry = Arc::new(registry);
            reload.put(Slot::fresh(&registry));
            return Ok(registry);
        }
        hit("l3", "registry");
        match self.resolve(tenant, role, Some(version)).await {
            Ok(registry) => {
                reload.put(Slot::fresh(&registry));
                Ok(registry)
            }
            Err(LookupError::Unavailable(message)) => {
                self.last_known_good(tenant, role, &mut reload, message)
                    .await
            }
            // The tenant is gone (or the key): nothing to keep.
            Err(other) => {
                reload.stale = None;
                Err(other)
            }
        }
    }

    /// The registry of (tenant, role) at `version` or later from Redis, if it holds one.
    async fn l2_registry(&self, tenant: &str, role: &str, version: u64) -> Option<Registry> {
        let shared = self.shared.as_ref()?;
        let l2_key = self.l2_registry_key(shared, tenant, role, &version.to_string());
        shared
            .get(&l2_key)
            .await
            .as_deref()
            .and_then(Registry::decode)
            .filter(|registry| registry.revision >= version)
    }

    /// The control plane is unreachable: the stale registry this edge held, else Redis's
    /// latest, served and kept for [`RETRY_AFTER_FAILURE`] before the next reload.
    async fn last_known_good(
        &self,
        tenant: &str,
        role: &str,
        reload: &mut Reload<'_>,
        message: String,
    ) -> Result<Arc<Registry>, LookupError> {
        let known = match reload.stale.take() {
            Some(slot) => {
                hit("l1_stale", "registry");
                Some(slot)
            }
            None => self.l2_latest(tenant, role).await.map(|registry| Slot {
                registry,
                loaded: Instant::now() - self.settings.l1_ttl,
                retry_at: None,
            }),
        };
        let Some(slot) = known else {
            return Err(LookupError::Unavailable(message));
        };
        let registry = Arc::clone(&slot.registry);
        reload.put(Slot {
            retry_at: Some(Instant::now() + RETRY_AFTER_FAILURE),
            ..slot
        });
        Ok(registry)
    }

    /// Without a synced watch: the control plane if it answers, else the last known good.
    async fn registry_degraded(
        &self,
        tenant: &str,
        role: &str,
        key: RegistryKey,
    ) -> Result<Arc<Registry>, LookupError> {
        if self.control.reachable() {
            match self.resolve(tenant, role, None).await {
                Ok(registry) => {
                    self.registries.insert(key, Slot::fresh(&registry));
                    return Ok(registry);
                }
                Err(LookupError::Unavailable(_)) => {}
                Err(other) => return Err(other),
            }
        }
        if let Some(slot) = self.registries.get(&key) {
            hit("l1_stale", "registry");
            return Ok(slot.registry);
        }
        let registry = self.l2_latest(tenant, role).await.ok_or_else(|| {
            LookupError::Unavailable(format!("no cached registry for tenant {tenant:?}"))
        })?;
        // Held as stale: the next lookup with a synced watch loads a current one.
        self.registries.insert(
            key,
            Slot {
                registry: Arc::clone(&registry),
                loaded: Instant::now() - self.settings.l1_ttl,
                retry_at: None,
            },
        );
        Ok(registry)
    }

    /// The last registry any edge resolved for (tenant, role), from Redis.
    async fn l2_latest(&self, tenant: &str, role: &str) -> Option<Arc<Registry>> {
        let shared = self.shared.as_ref()?;
        let key = self.l2_registry_key(shared, tenant, role, "latest");
        // The last place to look: a second read if the first found nothing (it may have
        // timed out on a loaded or freshly connected edge).
        let bytes = match shared.get(&key).await {
            Some(bytes) => Some(bytes),
            None => shared.get(&key).await,
        };
        let registry = bytes.as_deref().and_then(Registry::decode)?;
        hit("l2_stale", "registry");
        Some(Arc::new(registry))
    }

    async fn resolve(
        &self,
        tenant: &str,
        role: &str,
        version: Option<u64>,
    ) -> Result<Arc<Registry>, LookupError> {
        let resolved =
            self.control
                .resolve(tenant, role)
                .await
                .map_err(|status| match status.code() {
                    Code::NotFound => LookupError::NotFound,
                    _ if is_unreachable(&status) => {
                        LookupError::Unavailable(status.message().to_owned())
                    }
                    _ => LookupError::Unavailable(format!(
                        "{:?}: {}",
                        status.code(),
                        status.message()
                    )),
                })?;
        let encoded = self.shared.as_ref().map(|_| resolved.encode_to_vec());
        let registry = Arc::new(Registry::from_pb(resolved));
        if let (Some(shared), Some(encoded)) = (&self.shared, encoded) {
            let mut entries = vec![(
                self.l2_registry_key(shared, tenant, role, "latest"),
                encoded.clone(),
            )];
            if let Some(version) = version {
                entries.push((
                    self.l2_registry_key(shared, tenant, role, &version.to_string()),
                    encoded,
                ));
            }
            shared.set_many(&entries, self.settings.l2_ttl).await;
        }
        Ok(registry)
    }

    /// Forgets everything held in process (after the control plane's log was reset).
    pub fn clear(&self) {
        self.registries.clear();
        self.identities.clear();
        self.fast_ids.clear();
        self.refused.clear();
    }
}

mod identity;
impl tp_registry::HasErrorCode for LookupError {
    fn code(&self) -> tp_registry::ErrorCode {
        match self {
            LookupError::Unauthenticated => tp_registry::ErrorCode::Unauthenticated,
            LookupError::NotFound => tp_registry::ErrorCode::NotFound,
            LookupError::Unavailable(_) => tp_registry::ErrorCode::Unavailable,
        }
    }
}

#[cfg(test)]
mod tests;
