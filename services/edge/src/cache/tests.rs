use super::*;

fn slot(revision: u64) -> Slot {
    Slot {
        registry: Arc::new(Registry::from_pb(pb::ResolvedRegistry {
            tenant: "acme".into(),
            role: "collector".into(),
            revision,
            ..Default::default()
        })),
        loaded: Instant::now(),
        retry_at: None,
    }
}

#[tokio::test]
async fn an_abandoned_reload_puts_the_last_known_good_back() {
    let cache: Slab<RegistryKey, Slot> = Slab::new(16);
    let key = registry_key("acme", "collector");
    cache.insert(key.clone(), slot(3));
    // A reload takes the stale entry out, then is dropped (an error or a cancelled
    // request) without a new one.
    let entry = cache
        .entry_async(&key, |_, _| EntryAction::<()>::ReplaceWithGuard)
        .await;
    let EntryResult::Replaced(guard, stale) = entry else {
        panic!("a stale entry is replaced");
    };
    drop(Reload {
        guard: Some(guard),
        stale: Some(stale),
    });
    assert_eq!(cache.get(&key).map(|s| s.registry.revision), Some(3));
    // One that puts a new entry in keeps it.
    let EntryResult::Replaced(guard, stale) = cache
        .entry_async(&key, |_, _| EntryAction::<()>::ReplaceWithGuard)
        .await
    else {
        panic!("replaced");
    };
    let mut reload = Reload {
        guard: Some(guard),
        stale: Some(stale),
    };
    reload.put(slot(5));
    drop(reload);
    assert_eq!(cache.get(&key).map(|s| s.registry.revision), Some(5));
}

#[test]
fn fast_ids_find_only_the_credential_they_were_given_and_differ_between_processes() {
    let ids = FastIds::new(16);
    let key = "tpk_live_0123456789abcdef0123456789abcdef";
    let id = key_hash(key);
    assert_eq!(ids.get(key), None);
    ids.insert(key, id);
    assert_eq!(ids.get(key), Some(id));
    // A credential one character off finds nothing (it is hashed under the process's key, not
    // truncated or normalised).
    assert_eq!(ids.get("tpk_live_0123456789abcdef0123456789abcdee"), None);
    assert_eq!(ids.get(&key.to_uppercase()), None);
    // Another process draws another key: the index says nothing across processes.
    let other = FastIds::new(16);
    assert_ne!(ids.of(key), other.of(key));
    ids.clear();
    assert_eq!(ids.get(key), None);
}

#[test]
fn a_registry_is_found_by_its_borrowed_key() {
    let cache: Slab<RegistryKey, Slot> = Slab::new(16);
    cache.insert(registry_key("acme", "collector"), slot(3));
    cache.insert(registry_key("acme", "admin"), slot(4));
    let revision = |tenant, role| {
        cache
            .get(&RegistryKeyRef { tenant, role })
            .map(|s| s.registry.revision)
    };
    assert_eq!(revision("acme", "collector"), Some(3));
    assert_eq!(revision("acme", "admin"), Some(4));
    assert_eq!(revision("acme", "collect"), None);
    assert_eq!(revision("acm", "ecollector"), None);
    assert_eq!(revision("globex", "collector"), None);
}

/// A control plane that knows nothing (the caches under test never ask it).
#[derive(Debug)]
struct Nowhere;

impl Directory for Nowhere {
    fn resource(&self) -> &str {
        ""
    }
    fn reachable(&self) -> bool {
        false
    }
    fn authenticate<'a>(
        &'a self,
        _key: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<pb::Identity, tonic::Status>> {
        Box::pin(async { Err(tonic::Status::unavailable("nowhere")) })
    }
    fn resolve<'a>(
        &'a self,
        _tenant: &'a str,
        _role: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<pb::ResolvedRegistry, tonic::Status>> {
        Box::pin(async { Err(tonic::Status::unavailable("nowhere")) })
    }
    fn credential<'a>(
        &'a self,
        _tenant: &'a str,
        _provider: &'a str,
        _user: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<pb::Credential, tonic::Status>> {
        Box::pin(async { Err(tonic::Status::unavailable("nowhere")) })
    }
}

/// Caches on the in-process stand-in for Redis.
fn caches_on(shared: &Arc<Shared>) -> Caches {
    let minute = Duration::from_secs(60);
    Caches::new(
        Arc::new(Versions::default()),
        Arc::new(Nowhere),
        Some(Arc::clone(shared)),
        CacheSettings {
            registries: 16,
            identities: 4096,
            l1_ttl: minute,
            l2_ttl: minute,
            identity_max_stale: minute,
        },
    )
}

/// Key `i`'s identity at `revision`, in Redis (`l2`) and in L1 (`l1`): its key id and hash.
async fn resolved(caches: &Caches, i: usize, l2: u64, l1: u64) -> (String, KeyHash) {
    let shared = caches.shared.as_ref().unwrap();
    let (key_id, key) = (format!("key-{i}"), format!("tpk_{i:064x}"));
    let id = key_hash(&key);
    let identity = |revision| {
        Arc::new(Identity::from_pb(pb::Identity {
            tenant: "acme".into(),
            role: "collector".into(),
            key_id: key_id.clone(),
            revision,
            ..Default::default()
        }))
    };
    let ttl = Duration::from_secs(60);
    shared
        .set(
            &shared.key(&["idk", &key_id]),
            hex::encode(id).as_bytes(),
            ttl,
        )
        .await;
    shared
        .set(
            &shared.key(&["id", &hex::encode(id)]),
            &identity(l2).to_pb().encode_to_vec(),
            ttl,
        )
        .await;
    caches.hold_identity(&key, id, &identity(l1));
    (key_id, id)
}

/// A change at revision 10 naming 600 keys (three batches): the copies resolved before it go,
/// from Redis and from L1; those resolved after it stay; an L1 copy newer than its Redis copy
/// stays in L1 while the Redis copy goes. Keys without a copy, an index entry that is not a
/// hash and a key named twice change nothing else.
#[tokio::test]
async fn a_change_forgets_the_copies_older_than_itself_in_batches() {
    let shared = Shared::memory("t");
    let caches = caches_on(&shared);
    let mut keys = Vec::new();
    for i in 0..600 {
        let (l2, l1) = match i % 3 {
            0 => (5, 5),
            1 => (20, 20),
            _ => (5, 20),
        };
        keys.push((resolved(&caches, i, l2, l1).await, l2, l1));
    }
    shared
        .set(
            &shared.key(&["idk", "not-a-hash"]),
            b"zz",
            Duration::from_secs(60),
        )
        .await;
    let mut named: Vec<&str> = keys
        .iter()
        .map(|((key_id, _), _, _)| key_id.as_str())
        .collect();
    named.extend(["never-seen", "not-a-hash", "key-0"]);
    caches.forget_keys(&named, 10).await;
    for ((key_id, id), l2, l1) in &keys {
        let in_l2 = shared
            .get(&shared.key(&["id", &hex::encode(id)]))
            .await
            .is_some();
        assert_eq!(in_l2, *l2 >= 10, "{key_id} in Redis");
        assert_eq!(
            caches.identities.get(id).is_some(),
            *l1 >= 10,
            "{key_id} in L1"
        );
    }
}

/// Redis down: nothing is forgotten (not even from L1, as before batching), and the change
/// is done with at once instead of waiting on every batch.
#[tokio::test]
async fn a_change_seen_while_redis_is_down_leaves_the_copies_alone() {
    let shared = Shared::memory("t");
    let caches = caches_on(&shared);
    let mut keys = Vec::new();
    for i in 0..300 {
        keys.push(resolved(&caches, i, 5, 5).await);
    }
    shared.set_down(true);
    let named: Vec<&str> = keys.iter().map(|(key_id, _)| key_id.as_str()).collect();
    caches.forget_keys(&named, 10).await;
    let failures = shared.failures();
    assert_eq!(failures, 1, "one failed read, not one per batch");
    shared.set_down(false);
    for (key_id, id) in &keys {
        assert!(caches.identities.get(id).is_some(), "{key_id} in L1");
    }
}
