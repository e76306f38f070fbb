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
