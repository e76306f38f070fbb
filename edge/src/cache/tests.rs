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
        .entry_async(key.as_str(), |_, _| EntryAction::<()>::ReplaceWithGuard)
        .await;
    let EntryResult::Replaced(guard, stale) = entry else {
        panic!("a stale entry is replaced");
    };
    drop(Reload {
        guard: Some(guard),
        stale: Some(stale),
    });
    assert_eq!(
        cache.get(key.as_str()).map(|s| s.registry.revision),
        Some(3)
    );
    // One that puts a new entry in keeps it.
    let EntryResult::Replaced(guard, stale) = cache
        .entry_async(key.as_str(), |_, _| EntryAction::<()>::ReplaceWithGuard)
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
    assert_eq!(
        cache.get(key.as_str()).map(|s| s.registry.revision),
        Some(5)
    );
}
