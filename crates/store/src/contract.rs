//! The store contract, run against every implementation.

use tp_registry::demo::DemoWorld;
use tp_registry::{Change, State};

use super::*;

async fn seed(store: &dyn Store) -> State {
    let world = DemoWorld::load();
    let mut state = State::default();
    for changes in world.seed(&State::default()).unwrap() {
        let Commit::Committed(revision) = store
            .commit(state.revision, &changes, 1_000, "system")
            .await
            .unwrap()
        else {
            panic!("unexpected conflict");
        };
        state.apply(revision, &changes);
    }
    state
}

pub(crate) async fn contract(store: &dyn Store) {
    assert_eq!(store.head().await.unwrap(), 0);
    let state = seed(store).await;
    assert_eq!(store.head().await.unwrap(), state.revision);

    // The snapshot rebuilds the same state.
    let snapshot = store.load().await.unwrap();
    assert_eq!(snapshot.revision, state.revision);
    let mut loaded = State::default();
    for object in snapshot.objects {
        loaded.put(object);
    }
    assert_eq!(loaded.tools, state.tools);
    assert_eq!(loaded.tenants, state.tenants);
    assert_eq!(loaded.policy, state.policy);

    // Replaying the log rebuilds it too; revisions have no gaps.
    let records = store.changes_since(0, 10_000).await.unwrap();
    let revisions: Vec<u64> = records.iter().map(|r| r.revision).collect();
    assert_eq!(revisions, (1..=state.revision).collect::<Vec<_>>());
    let mut replayed = State::default();
    for record in &records {
        replayed.apply(record.revision, &record.changes);
    }
    assert_eq!(replayed.tools, state.tools);
    let page = store.changes_since(5, 3).await.unwrap();
    assert_eq!(
        page.iter().map(|r| r.revision).collect::<Vec<_>>(),
        vec![6, 7, 8]
    );

    // A stale writer conflicts and writes nothing.
    let stale = state.retire_tool("gemini").unwrap();
    let outcome = store
        .commit(state.revision - 1, &stale, 2_000, "admin")
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Commit::Conflict {
            current: state.revision
        }
    );
    assert_eq!(store.head().await.unwrap(), state.revision);

    // Deletes remove objects.
    let delete = vec![Change::Delete {
        kind: tp_registry::ObjectKind::Tenant,
        key: "initech".into(),
    }];
    assert_eq!(
        store
            .commit(state.revision, &delete, 3_000, "adm_0123456789abcdef")
            .await
            .unwrap(),
        Commit::Committed(state.revision + 1)
    );
    let snapshot = store.load().await.unwrap();
    assert!(!snapshot.objects.iter().any(|o| o.key() == "initech"));
    // Every record says who wrote it.
    let log = store.changes_since(state.revision - 1, 10).await.unwrap();
    assert_eq!(
        log.iter().map(|r| r.author.as_str()).collect::<Vec<_>>(),
        ["system", "adm_0123456789abcdef"]
    );

    // Usage counters and the audit trail, written together.
    let call = |tenant: &str, tool: &str, outcome: &str, at_ms: u64| CallRecord {
        at_ms,
        request_id: format!("r{at_ms}"),
        edge: "edge-a".into(),
        tenant: tenant.into(),
        principal: format!("key-{tenant}"),
        role: "reader".into(),
        tool: tool.into(),
        action: String::new(),
        outcome: outcome.into(),
        error_code: if outcome == "ok" {
            String::new()
        } else {
            "timeout".into()
        },
        duration_ms: 7,
        approval: if outcome == "input_required" {
            r#"{"state":"asked","reason":"sends mail"}"#.into()
        } else {
            String::new()
        },
    };
    let events = [
        call("acme", "gmail", "ok", 10),
        call("acme", "gmail", "executor_error", 30),
        call("globex", "gmail", "input_required", 20),
        call("globex", "call_api", "ok", 5),
    ];
    let batch = |id, shed| CallBatch {
        id,
        edge: "edge-a",
        shed,
        calls: &events,
        received_ms: 1_000,
    };
    assert!(store.record_calls(&batch("b-1", 0)).await.unwrap());
    // The same batch again (the edge lost the acknowledgement and retried): nothing changes.
    assert!(!store.record_calls(&batch("b-1", 3)).await.unwrap());
    audit_contract(store, &events).await;
    let all = store.usage(None).await.unwrap();
    assert_eq!(
        all,
        vec![
            ToolUsage {
                tool: "call_api".into(),
                calls: 1,
                errors: 0,
                last_used_ms: 5
            },
            ToolUsage {
                tool: "gmail".into(),
                calls: 3,
                errors: 1,
                last_used_ms: 30
            },
        ]
    );
    let acme = store.usage(Some("acme")).await.unwrap();
    assert_eq!(
        acme,
        vec![ToolUsage {
            tool: "gmail".into(),
            calls: 2,
            errors: 1,
            last_used_ms: 30
        }]
    );
}

/// Reading the trail back: filters, pages, the time window, shed counts and pruning.
async fn audit_contract(store: &dyn Store, stored: &[CallRecord]) {
    let everything = store
        .audit(&AuditQuery {
            limit: 1000,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let records: Vec<&CallRecord> = everything.iter().map(|e| &e.record).collect();
    assert_eq!(records, stored.iter().collect::<Vec<_>>());
    assert!(everything.windows(2).all(|w| w[0].seq < w[1].seq));
    let query = |f: fn(&mut AuditQuery)| {
        let mut query = AuditQuery::default();
        f(&mut query);
        async move {
            store
                .audit(&query)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.record.at_ms)
                .collect::<Vec<u64>>()
        }
    };
    assert_eq!(query(|q| q.tenant = Some("acme".into())).await, [10, 30]);
    assert_eq!(query(|q| q.tool = Some("call_api".into())).await, [5]);
    assert_eq!(
        query(|q| q.principal = Some("key-globex".into())).await,
        [20, 5]
    );
    assert_eq!(
        query(|q| q.outcome = Some("executor_error".into())).await,
        [30]
    );
    assert_eq!(
        query(|q| q.tenant = Some("initech".into())).await,
        [] as [u64; 0]
    );
    // since inclusive, until exclusive.
    assert_eq!(
        query(|q| {
            q.since_ms = 10;
            q.until_ms = 30;
        })
        .await,
        [10, 20]
    );
    // Pages: `after_seq` continues where the last page ended.
    let first = store
        .audit(&AuditQuery {
            limit: 3,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(first.len(), 3);
    let rest = store
        .audit(&AuditQuery {
            after_seq: first[2].seq,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].record.at_ms, 5);
    // Newest first: the same records the other way round, paged the same way.
    let newest = store
        .audit(&AuditQuery {
            limit: 3,
            newest_first: true,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(newest.len(), 3);
    assert!(newest.windows(2).all(|w| w[0].seq > w[1].seq));
    assert_eq!(newest[0].seq, rest[0].seq);
    let older = store
        .audit(&AuditQuery {
            after_seq: newest[2].seq,
            newest_first: true,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(older.len(), 1);
    assert_eq!(older[0].seq, first[0].seq);

    // Shed counts add up per edge.
    assert!(store.audit_shed().await.unwrap().is_empty());
    // Without ids (edges from before batch ids) every delivery counts.
    for (edge, shed) in [("edge-b", 4), ("edge-b", 2), ("edge-a", 1)] {
        assert!(
            store
                .record_calls(&CallBatch {
                    edge,
                    shed,
                    ..CallBatch::default()
                })
                .await
                .unwrap()
        );
    }
    assert_eq!(
        store.audit_shed().await.unwrap(),
        vec![("edge-a".to_owned(), 1), ("edge-b".to_owned(), 6)]
    );

    // Pruning drops old records only; the usage counters stay.
    assert_eq!(store.prune_audit(20).await.unwrap(), 2);
    assert_eq!(query(|_| {}).await, [30, 20]);
    assert_eq!(store.prune_audit(20).await.unwrap(), 0);

    // Batch ids are remembered until pruned; then a retry is a new delivery.
    let late = CallBatch {
        id: "b-late",
        edge: "edge-c",
        shed: 5,
        calls: &[],
        received_ms: 5_000,
    };
    assert!(store.record_calls(&late).await.unwrap());
    assert!(!store.record_calls(&late).await.unwrap());
    assert_eq!(
        store.prune_audit_batches(5_000).await.unwrap(),
        1,
        "b-1 only"
    );
    assert!(!store.record_calls(&late).await.unwrap());
    assert_eq!(store.prune_audit_batches(5_001).await.unwrap(), 1);
    assert!(store.record_calls(&late).await.unwrap());
    let shed: Vec<(String, u64)> = store.audit_shed().await.unwrap();
    assert!(shed.contains(&("edge-c".to_owned(), 10)), "{shed:?}");
}

#[tokio::test]
async fn sqlite_in_memory_honours_the_contract() {
    contract(&SqliteStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn sqlite_file_honours_the_contract_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolplane.db");
    let store = SqliteStore::open(&path).await.unwrap();
    contract(&store).await;
    let head = store.head().await.unwrap();
    drop(store);
    let reopened = SqliteStore::open(&path).await.unwrap();
    assert_eq!(reopened.head().await.unwrap(), head);
}

/// A database of its own on the local PostgreSQL (`TOOLPLANE_TEST_PG`, default
/// `postgres://postgres@127.0.0.1:5432`), dropped on [`TestDb::drop_now`].
struct TestDb {
    admin: String,
    name: String,
    url: String,
}

impl TestDb {
    async fn create() -> TestDb {
        let base = std::env::var("TOOLPLANE_TEST_PG")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
        let admin = format!("{base}/postgres");
        let name = format!("tp_store_{}", hex::encode(rand::random::<[u8; 6]>()));
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
            .await
            .unwrap_or_else(|e| {
                panic!("PostgreSQL must be running at {admin} (set TOOLPLANE_TEST_PG): {e}")
            });
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap();
        TestDb {
            url: format!("{base}/{name}"),
            admin,
            name,
        }
    }

    async fn drop_now(self) {
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&self.admin)
            .await
            .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&mut conn)
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn postgres_honours_the_contract_and_reconnects() {
    let db = TestDb::create().await;
    let store = PostgresStore::connect(&db.url).await.unwrap();
    contract(&store).await;
    let head = store.head().await.unwrap();
    drop(store);
    let reopened = PostgresStore::connect(&db.url).await.unwrap();
    assert_eq!(reopened.head().await.unwrap(), head);
    drop(reopened);
    db.drop_now().await;
}

#[tokio::test]
async fn postgres_replicas_migrate_together_and_never_repeat_a_revision() {
    let db = TestDb::create().await;
    // Several replicas start at once: migrations serialise, none fails.
    let stores: Vec<PostgresStore> =
        futures::future::join_all((0..4).map(|_| PostgresStore::connect(&db.url)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    let mut notified = stores[1].commit_notifications().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await; // LISTEN is set up
    // Every replica races to commit on top of the same revision, many times: exactly one
    // wins each round, the rest conflict and see the winner's revision.
    let change = |i: usize| {
        vec![Change::Delete {
            kind: tp_registry::ObjectKind::Tenant,
            key: format!("t{i}"),
        }]
    };
    let mut wins = 0;
    for round in 0..25u64 {
        let outcomes =
            futures::future::join_all(stores.iter().enumerate().map(|(i, s)| async move {
                s.commit(round, &change(i), 1, "system").await.unwrap()
            }))
            .await;
        let committed: Vec<&Commit> = outcomes
            .iter()
            .filter(|o| matches!(o, Commit::Committed(_)))
            .collect();
        assert_eq!(committed.len(), 1, "round {round}: {outcomes:?}");
        assert_eq!(committed[0], &Commit::Committed(round + 1));
        for outcome in &outcomes {
            if let Commit::Conflict { current } = outcome {
                assert_eq!(*current, round + 1);
            }
        }
        wins += 1;
    }
    let revisions: Vec<u64> = stores[3]
        .changes_since(0, 1000)
        .await
        .unwrap()
        .iter()
        .map(|r| r.revision)
        .collect();
    assert_eq!(
        revisions,
        (1..=25).collect::<Vec<_>>(),
        "no gaps, no repeats"
    );
    assert_eq!(wins, 25);
    // Commits are announced to listeners on other connections.
    let first = tokio::time::timeout(std::time::Duration::from_secs(5), notified.recv())
        .await
        .expect("a commit notification")
        .unwrap();
    assert!(first >= 1);
    drop(stores);
    db.drop_now().await;
}
