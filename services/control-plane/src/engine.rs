//! The engine: the in-memory state, the store behind it, and the write path.
//!
//! Reads are served from memory. A write validates a request against the state at revision
//! `r` (pure domain code), commits the resulting changes as `r + 1` with a compare-and-set on
//! the store, then applies them in memory and wakes every watcher. If another process
//! committed first, the engine catches up from the change log and validates again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, RwLock, broadcast};
use tp_registry::{Adr, AdrStatus, Change, DomainError, DomainResult, ErrorCode, Role, State};
use tp_store::{Commit, Store, StoreError};

/// Most conflict retries of one write before giving up.
const MAX_CONFLICT_RETRIES: usize = 32;

/// Why a write or read failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A domain rule refused the request (nothing changed).
    #[error(transparent)]
    Domain(#[from] DomainError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What every engine operation returns: a value or an [`EngineError`].
pub type EngineResult<T> = Result<T, EngineError>;

/// What a successful write returns.
#[derive(Debug)]
pub struct Written<T> {
    /// The revision of the write (the current one when the write changed nothing).
    pub revision: u64,
    /// The value the mutation produced.
    pub value: T,
}

/// The control plane's state and store.
#[derive(Debug)]
pub struct Engine {
    state: RwLock<State>,
    store: Arc<dyn Store>,
    write_lock: Mutex<()>,
    committed: broadcast::Sender<u64>,
}

pub use tp_proto::clock::{now_ms, now_secs};

/// Today's UTC date as `YYYY-MM-DD`.
pub fn today() -> String {
    let date = time::OffsetDateTime::now_utc().date();
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

// === impl Engine ===

impl Engine {
    /// Loads the state from the store.
    pub async fn open(store: Arc<dyn Store>) -> EngineResult<Arc<Engine>> {
        let snapshot = store.load().await?;
        let mut state = State::default();
        for object in snapshot.objects {
            state.put(object);
        }
        state.revision = snapshot.revision;
        let (committed, _) = broadcast::channel(1024);
        Ok(Arc::new(Engine {
            state: RwLock::new(state),
            store,
            write_lock: Mutex::new(()),
            committed,
        }))
    }

    /// The store every write and read goes to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Runs `f` on the current state.
    pub async fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&*self.state.read().await)
    }

    /// The revision of the in-memory state.
    pub async fn revision(&self) -> u64 {
        self.state.read().await.revision
    }

    /// Wakes on every revision this engine commits or catches up to.
    pub fn subscribe(&self) -> broadcast::Receiver<u64> {
        self.committed.subscribe()
    }

    /// Validates and commits one write, recorded under `author` (the admin caller's name, or
    /// `system…` for work no caller asked for). `mutation` may run several times (after
    /// conflicts) and must be pure. A write with no changes commits nothing. A refusal is
    /// returned only after checking that it was decided against the store's latest revision.
    pub async fn write<T>(
        &self,
        author: &str,
        mutation: impl Fn(&State) -> DomainResult<(Vec<Change>, T)>,
    ) -> EngineResult<Written<T>> {
        let _writer = self.write_lock.lock().await;
        for _ in 0..MAX_CONFLICT_RETRIES {
            let (expected, outcome) = {
                let state = self.state.read().await;
                (state.revision, mutation(&state))
            };
            let (changes, value) = match outcome {
                Ok(result) => result,
                Err(refusal) => {
                    // A refusal is authoritative only if no other process has written since.
                    if self.store.head().await? != expected {
                        self.catch_up_locked().await?;
                        continue;
                    }
                    return Err(refusal.into());
                }
            };
            if changes.is_empty() {
                return Ok(Written {
                    revision: expected,
                    value,
                });
            }
            match self
                .store
                .commit(expected, &changes, now_ms(), author)
                .await?
            {
                Commit::Committed(revision) => {
                    self.state.write().await.apply(revision, &changes);
                    let _ = self.committed.send(revision);
                    return Ok(Written { revision, value });
                }
                Commit::Conflict { current } => {
                    tracing::debug!(expected, current, "write conflict; catching up");
                    self.catch_up_locked().await?;
                }
            }
        }
        Err(DomainError::new(ErrorCode::Unavailable, "too many concurrent writers; retry").into())
    }

    /// Applies writes committed by other processes (a no-op with one writer).
    pub async fn catch_up(&self) -> EngineResult<u64> {
        let _writer = self.write_lock.lock().await;
        self.catch_up_locked().await
    }

    async fn catch_up_locked(&self) -> EngineResult<u64> {
        loop {
            let from = self.state.read().await.revision;
            let records = self.store.changes_since(from, 1000).await?;
            let Some(last) = records.last().map(|r| r.revision) else {
                return Ok(from);
            };
            {
                let mut state = self.state.write().await;
                for record in &records {
                    state.apply(record.revision, &record.changes);
                }
            }
            let _ = self.committed.send(last);
        }
    }

    /// Polls the store for foreign writes every `period` (multi-process stores).
    pub fn spawn_poller(self: &Arc<Self>, period: Duration) -> tokio::task::JoinHandle<()> {
        let engine = Arc::clone(self);
        let mut notifications = engine.store.commit_notifications();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            loop {
                match notifications.as_mut() {
                    Some(receiver) => {
                        tokio::select! {
                            _ = ticker.tick() => {}
                            notified = receiver.recv() => {
                                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = notified {
                                    notifications = None;
                                }
                            }
                        }
                    }
                    None => {
                        ticker.tick().await;
                    }
                }
                let head = match engine.store.head().await {
                    Ok(head) => head,
                    Err(error) => {
                        tracing::warn!(%error, "polling the store failed");
                        continue;
                    }
                };
                if head > engine.revision().await
                    && let Err(error) = engine.catch_up().await
                {
                    tracing::warn!(%error, "catching up failed");
                }
            }
        })
    }

    /// Seeds `world` into an empty store (revision 0), one write per object. Returns whether
    /// it seeded.
    pub async fn seed(&self, world: &tp_registry::demo::DemoWorld) -> EngineResult<bool> {
        if self.revision().await != 0 {
            return Ok(false);
        }
        let writes = self.read(|state| world.seed(state)).await?;
        for changes in writes {
            self.write("system", |_| Ok((changes.clone(), ()))).await?;
        }
        Ok(true)
    }

    /// On an empty store, creates the configured roles; on a store without a ceiling, records
    /// the ceiling ADR (accepted) and the ceiling. Does nothing otherwise.
    pub async fn bootstrap(
        &self,
        ceiling: u32,
        adr_id: &str,
        adr_title: &str,
        roles: &[String],
    ) -> EngineResult<()> {
        if self.revision().await == 0 {
            for name in roles {
                let role = Role {
                    name: name.clone(),
                    description: String::new(),
                };
                self.write("system", |state| Ok((state.upsert_role(role.clone())?, ())))
                    .await?;
            }
        }
        let adr = Adr {
            id: adr_id.to_owned(),
            title: adr_title.to_owned(),
            status: AdrStatus::Accepted,
            date: today(),
            links: Vec::new(),
            supersedes: None,
            summary: "Recorded by the control plane on first start; amend the ceiling with a new ADR that supersedes it."
                .to_owned(),
        };
        self.write("system", |state| {
            Ok((state.init_policy(ceiling, adr.clone())?, ()))
        })
        .await?;
        Ok(())
    }
}

impl tp_registry::HasErrorCode for EngineError {
    fn code(&self) -> ErrorCode {
        match self {
            EngineError::Domain(error) => tp_registry::HasErrorCode::code(error),
            EngineError::Store(error) => tp_registry::HasErrorCode::code(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use tp_registry::demo::DemoWorld;
    use tp_store::SqliteStore;

    use super::*;

    async fn engine() -> Arc<Engine> {
        Engine::open(Arc::new(SqliteStore::in_memory().await.unwrap()))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn writes_commit_apply_and_notify() {
        let engine = engine().await;
        let mut events = engine.subscribe();
        engine
            .bootstrap(35, "ADR-000", "initial", &["collector".into()])
            .await
            .unwrap();
        assert_eq!(engine.revision().await, 2);
        assert_eq!(events.recv().await.unwrap(), 1);
        assert_eq!(events.recv().await.unwrap(), 2);
        assert_eq!(engine.read(|s| s.policy.clone().unwrap().ceiling).await, 35);
        // A second bootstrap changes nothing.
        engine
            .bootstrap(50, "ADR-000", "initial", &["collector".into()])
            .await
            .unwrap();
        assert_eq!(engine.revision().await, 2);
    }

    #[tokio::test]
    async fn a_refused_write_changes_nothing() {
        let engine = engine().await;
        engine
            .bootstrap(35, "ADR-000", "initial", &[])
            .await
            .unwrap();
        let before = engine.revision().await;
        let err = engine
            .write("system", |state| Ok((state.retire_tool("ghost")?, ())))
            .await
            .unwrap_err();
        assert!(matches!(err, EngineError::Domain(ref e) if e.code == ErrorCode::NotFound));
        assert_eq!(engine.revision().await, before);
        assert_eq!(engine.store().head().await.unwrap(), before);
    }

    #[tokio::test]
    async fn a_second_engine_on_the_same_file_catches_up_on_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp.db");
        let a = Engine::open(Arc::new(SqliteStore::open(&path).await.unwrap()))
            .await
            .unwrap();
        let b = Engine::open(Arc::new(SqliteStore::open(&path).await.unwrap()))
            .await
            .unwrap();
        let world = DemoWorld::load();
        for changes in world.seed(&State::default()).unwrap() {
            a.write("system", |_| Ok((changes.clone(), ())))
                .await
                .unwrap();
        }
        // b is stale; its write conflicts, catches up, revalidates against the real state.
        let written = b
            .write("system", |state| Ok((state.retire_tool("gemini")?, ())))
            .await
            .unwrap();
        assert_eq!(written.revision, a.revision().await + 1);
        assert_eq!(b.read(|s| s.tools.len()).await, 34);
        a.catch_up().await.unwrap();
        assert_eq!(a.read(|s| s.live_tool_count()).await, 33);
    }
}
