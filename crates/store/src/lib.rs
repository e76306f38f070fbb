//! Control-plane persistence.
//!
//! The control plane keeps its whole state in memory (`tp_registry::State`) and persists it
//! here as two things written in one transaction per write:
//! - `objects`: the latest version of every object (the snapshot loaded at start);
//! - `changes`: the append-only log, one row per revision, replayed by `Watch` and by other
//!   replicas to catch up.
//!
//! Commits are compare-and-set on the global revision: a commit states the revision its
//! changes were validated against and fails with [`Commit::Conflict`] if another writer got
//! there first. That makes the ceiling check, done in memory against exactly that revision,
//! serialisable across processes.

mod audit;
mod postgres;
mod sqlite;

use async_trait::async_trait;
use tp_registry::{Change, Object};

pub use audit::{AuditEntry, AuditQuery, CallBatch, CallRecord};
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// Errors of the store itself (the database failed; never a domain rule).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A stored document could not be decoded (corruption or an incompatible version).
    #[error("stored document {what} is unreadable: {source}")]
    Corrupt {
        /// What was being read.
        what: String,
        /// The decode error.
        #[source]
        source: serde_json::Error,
    },
    /// The store's URL or options are unusable.
    #[error("bad store configuration: {0}")]
    Config(String),
}

/// What every store operation returns: a value or a [`StoreError`].
pub type StoreResult<T> = Result<T, StoreError>;

/// Everything needed to rebuild the in-memory state.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The revision the objects are at.
    pub revision: u64,
    /// Every object.
    pub objects: Vec<Object>,
}

/// One committed write as recorded in the change log.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeRecord {
    /// The revision the write committed (one per write, increasing).
    pub revision: u64,
    /// Unix milliseconds of the commit.
    pub at_ms: u64,
    /// The changes, as committed (objects stamped with the revision).
    pub changes: Vec<Change>,
    /// Who made the write (`admin`, an admin token's id, or `system`; empty for writes
    /// committed before authors were recorded).
    pub author: String,
}

/// Outcome of a compare-and-set commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Committed under this revision.
    Committed(u64),
    /// Nothing written: the store is at this revision, not the expected one.
    Conflict {
        /// The store's current revision.
        current: u64,
    },
}

/// Aggregated usage of one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolUsage {
    /// The tool the counter is for.
    pub tool: String,
    /// Calls counted, failed ones included.
    pub calls: u64,
    /// Failed calls.
    pub errors: u64,
    /// Unix milliseconds of the last call.
    pub last_used_ms: u64,
}

/// A deleted tenant's data still to be purged from one executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingPurge {
    /// The deleted tenant's id.
    pub tenant: String,
    /// Its incarnation (`TenantContext.tenant_uid`).
    pub uid: String,
    /// The executor's name.
    pub executor: String,
    /// Where it was when the tenant was deleted.
    pub endpoint: String,
    /// Failed attempts so far.
    pub attempts: u32,
}

/// Durable storage of the control plane.
///
/// Contract: a `commit` that returns `Ok(Committed(r))` is durable (survives `kill -9`), its
/// revision is `expected + 1`, and `changes_since(r - 1, ..)` returns it; revisions have no gaps.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Loads the latest version of every object and the revision they are at.
    async fn load(&self) -> StoreResult<Snapshot>;

    /// Commits `changes`, written by `author`, as revision `expected + 1` if the store is
    /// still at `expected`.
    async fn commit(
        &self,
        expected: u64,
        changes: &[Change],
        at_ms: u64,
        author: &str,
    ) -> StoreResult<Commit>;

    /// Up to `limit` change records with revision `> after`, in revision order.
    async fn changes_since(&self, after: u64, limit: u32) -> StoreResult<Vec<ChangeRecord>>;

    /// The newest committed revision.
    async fn head(&self) -> StoreResult<u64>;

    /// Appends the batch's calls to the audit trail and adds them to the per-(tenant, tool)
    /// counters, and adds its `shed` to the count of records its edge dropped before delivering
    /// them; one transaction. A batch whose id was stored before changes nothing and answers
    /// `false` (the edge is retrying a delivery whose acknowledgement it lost).
    async fn record_calls(&self, batch: &CallBatch<'_>) -> StoreResult<bool>;

    /// Audit records matching `query`, in the order they were stored.
    async fn audit(&self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>>;

    /// Records shed by each edge before delivery (edges that shed none are not listed).
    async fn audit_shed(&self) -> StoreResult<Vec<(String, u64)>>;

    /// Deletes audit records older than `before_ms`; how many went.
    async fn prune_audit(&self, before_ms: u64) -> StoreResult<u64>;

    /// Forgets the ids of batches received before `before_ms` (a retry older than that is
    /// stored again); how many went.
    async fn prune_audit_batches(&self, before_ms: u64) -> StoreResult<u64>;

    /// Usage per tool, for one tenant or all (summed), in tool order.
    async fn usage(&self, tenant: Option<&str>) -> StoreResult<Vec<ToolUsage>>;

    /// Queues purges of deleted tenants' data (one per executor); one already queued stays as
    /// it is.
    async fn queue_purges(&self, purges: &[PendingPurge], at_ms: u64) -> StoreResult<()>;

    /// Purges not yet done, oldest first (every replica sees the same queue).
    async fn pending_purges(&self) -> StoreResult<Vec<PendingPurge>>;

    /// One attempt at `purge`: done (it leaves the queue), or failed (counted).
    async fn purge_attempted(&self, purge: &PendingPurge, done: bool) -> StoreResult<()>;

    /// Every usage counter, per (tenant, tool), in that order (for an export).
    async fn usage_rows(&self) -> StoreResult<Vec<(String, ToolUsage)>>;

    /// History carried over from another store (an import), in one transaction: `audit`
    /// appended in the order given (with new positions), `usage` counters and `shed` counts
    /// added to any already here.
    async fn import_history(
        &self,
        audit: &[CallRecord],
        usage: &[(String, ToolUsage)],
        shed: &[(String, u64)],
    ) -> StoreResult<()>;

    /// Revisions committed by any process sharing this store, as they commit, for stores that
    /// several processes write (`None`: poll [`Store::head`] instead).
    fn commit_notifications(&self) -> Option<tokio::sync::broadcast::Receiver<u64>> {
        None
    }
}

impl std::fmt::Debug for dyn Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dyn Store")
    }
}

/// Stamps `Put` objects with the revision they are committed under (what `State::apply` does
/// in memory), so stored documents and replayed changes agree.
pub fn stamped(changes: &[Change], revision: u64) -> Vec<Change> {
    changes
        .iter()
        .map(|change| match change {
            Change::Put { object } => {
                let mut object = object.clone();
                object.stamp(revision);
                Change::Put { object }
            }
            Change::Delete { .. } => change.clone(),
        })
        .collect()
}

fn decode<T: serde::de::DeserializeOwned>(what: impl Into<String>, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|source| StoreError::Corrupt {
        what: what.into(),
        source,
    })
}

fn encode<T: serde::Serialize>(value: &T) -> String {
    // Serialising plain data structures to a String cannot fail.
    serde_json::to_string(value)
        .unwrap_or_else(|error| unreachable!("serialising store document: {error}"))
}

impl tp_registry::HasErrorCode for StoreError {
    fn code(&self) -> tp_registry::ErrorCode {
        match self {
            StoreError::Database(_) => tp_registry::ErrorCode::Unavailable,
            StoreError::Corrupt { .. } => tp_registry::ErrorCode::Internal,
            StoreError::Config(_) => tp_registry::ErrorCode::FailedPrecondition,
        }
    }
}

#[cfg(test)]
#[allow(clippy::too_many_lines, reason = "test code")]
mod contract;
