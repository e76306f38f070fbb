use super::*;

#[tokio::test]
async fn a_dead_writers_journal_is_replayed_by_the_next_writer() {
    let storage = Storage::memory();
    // A writer that died after its journal and one of two objects.
    let mut batch = Batch::default();
    batch.put("wiki/acme/wiki/a.md", "A");
    batch.put("wiki/acme/wiki/b.md", "B");
    storage
        .put(
            "wiki/acme/.journal/1-x.json",
            &serde_json::to_string(&batch).unwrap(),
        )
        .await
        .unwrap();
    storage.put("wiki/acme/wiki/a.md", "A").await.unwrap();
    let lease = storage.lock("acme").await.unwrap();
    assert_eq!(
        storage.get("wiki/acme/wiki/b.md").await.unwrap().as_deref(),
        Some("B")
    );
    assert!(storage.list("wiki/acme/.journal").await.unwrap().is_empty());
    lease.release().await;
}

#[tokio::test]
async fn an_expired_or_dead_lease_is_taken_over_and_a_live_one_is_not() {
    let storage = Storage::memory();
    let dead = LeaseRecord {
        holder: "gone".into(),
        expires_ms: now_ms() + 60_000,
        host: host_name(),
        // No process has this pid (pid_max is at most 2^22).
        pid: 4_194_999,
    };
    storage
        .put("wiki/acme/.lock", &dead.render())
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let lease = storage.lock("acme").await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "taken over at once"
    );
    lease.release().await;
    // A live holder of another host keeps its lease until it expires.
    let live = LeaseRecord {
        holder: "elsewhere".into(),
        expires_ms: now_ms() + 60_000,
        host: "another-host".into(),
        pid: 1,
    };
    storage
        .put("wiki/globex/.lock", &live.render())
        .await
        .unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(300), storage.lock("globex")).await;
    assert!(waiting.is_err(), "still held");
}

#[tokio::test]
async fn commit_writes_and_deletes_and_purge_empties_the_tenant() {
    let storage = Storage::memory();
    let lease = storage.lock("acme").await.unwrap();
    let mut batch = Batch::default();
    batch.put("wiki/acme/wiki/a.md", "A");
    batch.put("wiki/acme/raw/x.txt", "X");
    storage.commit(&lease, batch).await.unwrap();
    let mut batch = Batch::default();
    batch.delete("wiki/acme/raw/x.txt");
    storage.commit(&lease, batch).await.unwrap();
    assert_eq!(storage.get("wiki/acme/raw/x.txt").await.unwrap(), None);
    assert_eq!(storage.purge(&lease).await.unwrap(), 1);
    lease.release().await;
    assert!(storage.list("wiki/acme").await.unwrap().is_empty());
}
