//! The PostgreSQL store, for several control-plane replicas on one database.
//!
//! Writes are serialised by the revision row: `commit` bumps it with a compare-and-set
//! `UPDATE ... WHERE value = expected` inside the transaction that writes the objects and the
//! change record. Two replicas committing at once both target the same row; PostgreSQL makes
//! the second wait for the first and then re-check its `WHERE`, so exactly one wins and the
//! other gets `Conflict` and retries against fresh state (which re-runs the ceiling check).
//! Revisions therefore never repeat, never go backwards and have no gaps. Each commit also
//! sends `NOTIFY toolplane_changes` (delivered on commit) so other replicas catch up at once
//! rather than at their next poll.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use tokio::sync::broadcast;
use tp_registry::{Change, Object};

use crate::audit::{self, AuditEntry, AuditQuery, CallBatch};
use crate::{
    ChangeRecord, Commit, Snapshot, Store, StoreError, StoreResult, ToolUsage, decode, encode,
    stamped,
};

/// The channel commits are announced on.
pub(crate) const CHANNEL: &str = "toolplane_changes";

/// Serialises migrations across replicas starting at once (an arbitrary constant).
const MIGRATION_LOCK: i64 = 0x746f_6f6c_706c_616e;

/// Ordered schema migrations; the index + 1 is the schema version.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS tp_revision (id INTEGER PRIMARY KEY CHECK (id = 1), value BIGINT NOT NULL);
     INSERT INTO tp_revision (id, value) VALUES (1, 0) ON CONFLICT DO NOTHING;
     CREATE TABLE IF NOT EXISTS tp_objects (
         kind TEXT NOT NULL, key TEXT NOT NULL, doc TEXT NOT NULL, revision BIGINT NOT NULL,
         PRIMARY KEY (kind, key));
     CREATE TABLE IF NOT EXISTS tp_changes (revision BIGINT PRIMARY KEY, at_ms BIGINT NOT NULL, doc TEXT NOT NULL);
     CREATE TABLE IF NOT EXISTS tp_usage (
         tenant TEXT NOT NULL, tool TEXT NOT NULL, calls BIGINT NOT NULL, errors BIGINT NOT NULL,
         last_used_ms BIGINT NOT NULL, PRIMARY KEY (tenant, tool));",
    "CREATE TABLE IF NOT EXISTS tp_audit (
         seq BIGSERIAL PRIMARY KEY, at_ms BIGINT NOT NULL, request_id TEXT NOT NULL,
         edge TEXT NOT NULL, tenant TEXT NOT NULL, principal TEXT NOT NULL, role TEXT NOT NULL,
         tool TEXT NOT NULL, action TEXT NOT NULL, outcome TEXT NOT NULL,
         error_code TEXT NOT NULL, duration_ms BIGINT NOT NULL);
     CREATE INDEX IF NOT EXISTS tp_audit_by_tenant ON tp_audit (tenant, seq);
     CREATE INDEX IF NOT EXISTS tp_audit_by_time ON tp_audit (at_ms);
     CREATE TABLE IF NOT EXISTS tp_audit_shed (edge TEXT PRIMARY KEY, records BIGINT NOT NULL);",
    "ALTER TABLE tp_changes ADD COLUMN IF NOT EXISTS author TEXT NOT NULL DEFAULT '';",
    "CREATE TABLE IF NOT EXISTS tp_audit_batches (
         batch_id TEXT PRIMARY KEY, edge TEXT NOT NULL, received_ms BIGINT NOT NULL);
     CREATE INDEX IF NOT EXISTS tp_audit_batches_by_time ON tp_audit_batches (received_ms);",
    "CREATE TABLE IF NOT EXISTS tp_purges (
         tenant TEXT NOT NULL, uid TEXT NOT NULL, executor TEXT NOT NULL, endpoint TEXT NOT NULL,
         attempts BIGINT NOT NULL, queued_ms BIGINT NOT NULL, PRIMARY KEY (tenant, uid, executor));",
    "ALTER TABLE tp_audit ADD COLUMN IF NOT EXISTS approval TEXT NOT NULL DEFAULT '';",
];

/// PostgreSQL-backed [`Store`].
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    url: String,
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

// === impl PostgresStore ===

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`) and migrates the schema (safe when
    /// several replicas start at once: migrations run under an advisory lock).
    pub async fn connect(url: &str) -> StoreResult<PostgresStore> {
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        let store = PostgresStore {
            pool,
            url: url.to_owned(),
        };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await?;
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *conn)
            .await?;
        let result = async {
            sqlx::query("CREATE TABLE IF NOT EXISTS tp_schema_version (version INTEGER NOT NULL)")
                .execute(&mut *conn)
                .await?;
            let version: Option<i32> =
                sqlx::query_scalar("SELECT MAX(version) FROM tp_schema_version")
                    .fetch_one(&mut *conn)
                    .await?;
            let version = usize::try_from(version.unwrap_or(0)).unwrap_or(0);
            if version > MIGRATIONS.len() {
                return Err(StoreError::Config(format!(
                    "database schema version {version} is newer than this binary ({}); upgrade toolplane",
                    MIGRATIONS.len()
                )));
            }
            for (index, migration) in MIGRATIONS.iter().enumerate().skip(version) {
                let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                sqlx::raw_sql(*migration).execute(&mut *tx).await?;
                sqlx::query("INSERT INTO tp_schema_version (version) VALUES ($1)")
                    .bind(i32::try_from(index + 1).unwrap_or(i32::MAX))
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
            }
            Ok(())
        }
        .await;
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *conn)
            .await?;
        result
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn load(&self) -> StoreResult<Snapshot> {
        // One snapshot: the objects and the revision they are at, read consistently.
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            .execute(&mut *tx)
            .await?;
        let revision: i64 = sqlx::query_scalar("SELECT value FROM tp_revision WHERE id = 1")
            .fetch_one(&mut *tx)
            .await?;
        let rows = sqlx::query("SELECT kind, key, doc FROM tp_objects ORDER BY kind, key")
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut objects = Vec::with_capacity(rows.len());
        for row in rows {
            let kind: String = row.try_get("kind")?;
            let key: String = row.try_get("key")?;
            let doc: String = row.try_get("doc")?;
            objects.push(decode::<Object>(format!("{kind}/{key}"), &doc)?);
        }
        Ok(Snapshot {
            revision: to_u64(revision),
            objects,
        })
    }

    async fn commit(
        &self,
        expected: u64,
        changes: &[Change],
        at_ms: u64,
        author: &str,
    ) -> StoreResult<Commit> {
        let revision = expected + 1;
        let mut tx = self.pool.begin().await?;
        let bumped = sqlx::query("UPDATE tp_revision SET value = $1 WHERE id = 1 AND value = $2")
            .bind(to_i64(revision))
            .bind(to_i64(expected))
            .execute(&mut *tx)
            .await?;
        if bumped.rows_affected() != 1 {
            let current: i64 = sqlx::query_scalar("SELECT value FROM tp_revision WHERE id = 1")
                .fetch_one(&mut *tx)
                .await?;
            tx.rollback().await?;
            return Ok(Commit::Conflict {
                current: to_u64(current),
            });
        }
        let changes = stamped(changes, revision);
        for change in &changes {
            match change {
                Change::Put { object } => {
                    sqlx::query(
                        "INSERT INTO tp_objects (kind, key, doc, revision) VALUES ($1, $2, $3, $4)
                         ON CONFLICT (kind, key) DO UPDATE SET doc = excluded.doc, revision = excluded.revision",
                    )
                    .bind(object.kind().as_str())
                    .bind(object.key())
                    .bind(encode(object))
                    .bind(to_i64(revision))
                    .execute(&mut *tx)
                    .await?;
                }
                Change::Delete { kind, key } => {
                    sqlx::query("DELETE FROM tp_objects WHERE kind = $1 AND key = $2")
                        .bind(kind.as_str())
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        sqlx::query(
            "INSERT INTO tp_changes (revision, at_ms, doc, author) VALUES ($1, $2, $3, $4)",
        )
        .bind(to_i64(revision))
        .bind(to_i64(at_ms))
        .bind(encode(&changes))
        .bind(author)
        .execute(&mut *tx)
        .await?;
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(revision.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Commit::Committed(revision))
    }

    async fn changes_since(&self, after: u64, limit: u32) -> StoreResult<Vec<ChangeRecord>> {
        let rows = sqlx::query(
            "SELECT revision, at_ms, doc, author FROM tp_changes WHERE revision > $1 ORDER BY revision LIMIT $2",
        )
        .bind(to_i64(after))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let mut records = Vec::with_capacity(rows.len());
        for row in rows {
            let revision = to_u64(row.try_get("revision")?);
            let doc: String = row.try_get("doc")?;
            records.push(ChangeRecord {
                revision,
                at_ms: to_u64(row.try_get("at_ms")?),
                changes: decode(format!("change {revision}"), &doc)?,
                author: row.try_get("author")?,
            });
        }
        Ok(records)
    }

    async fn head(&self) -> StoreResult<u64> {
        let revision: i64 = sqlx::query_scalar("SELECT value FROM tp_revision WHERE id = 1")
            .fetch_one(&self.pool)
            .await?;
        Ok(to_u64(revision))
    }

    async fn record_calls(&self, batch: &CallBatch<'_>) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        if !batch.id.is_empty() {
            // First writer wins; a concurrent retry waits on the key and then finds it.
            let fresh = sqlx::query(
                "INSERT INTO tp_audit_batches (batch_id, edge, received_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (batch_id) DO NOTHING",
            )
            .bind(batch.id)
            .bind(batch.edge)
            .bind(to_i64(batch.received_ms))
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if !fresh {
                tx.rollback().await?;
                return Ok(false);
            }
        }
        let (calls, edge, shed) = (batch.calls, batch.edge, batch.shed);
        for call in calls {
            sqlx::query(
                "INSERT INTO tp_usage (tenant, tool, calls, errors, last_used_ms) VALUES ($1, $2, 1, $3, $4)
                 ON CONFLICT (tenant, tool) DO UPDATE SET calls = tp_usage.calls + 1,
                 errors = tp_usage.errors + excluded.errors,
                 last_used_ms = GREATEST(tp_usage.last_used_ms, excluded.last_used_ms)",
            )
            .bind(&call.tenant)
            .bind(&call.tool)
            .bind(i64::from(call.failed()))
            .bind(to_i64(call.at_ms))
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO tp_audit (at_ms, request_id, edge, tenant, principal, role, tool,
                 action, outcome, error_code, duration_ms, approval)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            )
            .bind(to_i64(call.at_ms))
            .bind(&call.request_id)
            .bind(&call.edge)
            .bind(&call.tenant)
            .bind(&call.principal)
            .bind(&call.role)
            .bind(&call.tool)
            .bind(&call.action)
            .bind(&call.outcome)
            .bind(&call.error_code)
            .bind(i64::from(call.duration_ms))
            .bind(&call.approval)
            .execute(&mut *tx)
            .await?;
        }
        if shed > 0 {
            sqlx::query(
                "INSERT INTO tp_audit_shed (edge, records) VALUES ($1, $2)
                 ON CONFLICT (edge) DO UPDATE SET records = tp_audit_shed.records + excluded.records",
            )
            .bind(edge)
            .bind(to_i64(shed))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn audit(&self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>> {
        let sql = if query.newest_first {
            concat!(
                "SELECT ",
                audit::audit_columns!(),
                " FROM tp_audit WHERE seq < $1 AND ($2::TEXT IS NULL OR tenant = $2)
                 AND ($3::TEXT IS NULL OR tool = $3) AND ($4::TEXT IS NULL OR principal = $4)
                 AND ($5::TEXT IS NULL OR outcome = $5) AND at_ms >= $6 AND at_ms < $7
                 ORDER BY seq DESC LIMIT $8"
            )
        } else {
            concat!(
                "SELECT ",
                audit::audit_columns!(),
                " FROM tp_audit WHERE seq > $1 AND ($2::TEXT IS NULL OR tenant = $2)
                 AND ($3::TEXT IS NULL OR tool = $3) AND ($4::TEXT IS NULL OR principal = $4)
                 AND ($5::TEXT IS NULL OR outcome = $5) AND at_ms >= $6 AND at_ms < $7
                 ORDER BY seq LIMIT $8"
            )
        };
        let position = match (query.newest_first, query.after_seq) {
            (true, 0) => i64::MAX,
            (_, seq) => to_i64(seq),
        };
        let rows = sqlx::query(sql)
            .bind(position)
            .bind(query.tenant.as_deref())
            .bind(query.tool.as_deref())
            .bind(query.principal.as_deref())
            .bind(query.outcome.as_deref())
            .bind(to_i64(query.since_ms))
            .bind(to_i64(query.until_ms))
            .bind(i64::from(query.limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(audit::entry).collect()
    }

    async fn audit_shed(&self) -> StoreResult<Vec<(String, u64)>> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT edge, records FROM tp_audit_shed ORDER BY edge")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(|(e, n)| (e, to_u64(n))).collect())
    }

    async fn prune_audit(&self, before_ms: u64) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM tp_audit WHERE at_ms < $1")
            .bind(to_i64(before_ms))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn prune_audit_batches(&self, before_ms: u64) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM tp_audit_batches WHERE received_ms < $1")
            .bind(to_i64(before_ms))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn queue_purges(&self, purges: &[crate::PendingPurge], at_ms: u64) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        for purge in purges {
            sqlx::query(
                "INSERT INTO tp_purges (tenant, uid, executor, endpoint, attempts, queued_ms)
                 VALUES ($1, $2, $3, $4, 0, $5)
                 ON CONFLICT (tenant, uid, executor) DO NOTHING",
            )
            .bind(&purge.tenant)
            .bind(&purge.uid)
            .bind(&purge.executor)
            .bind(&purge.endpoint)
            .bind(to_i64(at_ms))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn pending_purges(&self) -> StoreResult<Vec<crate::PendingPurge>> {
        let rows = sqlx::query(
            "SELECT tenant, uid, executor, endpoint, attempts FROM tp_purges ORDER BY queued_ms, tenant, executor",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut purges = Vec::with_capacity(rows.len());
        for row in rows {
            purges.push(crate::PendingPurge {
                tenant: row.try_get("tenant")?,
                uid: row.try_get("uid")?,
                executor: row.try_get("executor")?,
                endpoint: row.try_get("endpoint")?,
                attempts: u32::try_from(to_u64(row.try_get("attempts")?)).unwrap_or(u32::MAX),
            });
        }
        Ok(purges)
    }

    async fn purge_attempted(&self, purge: &crate::PendingPurge, done: bool) -> StoreResult<()> {
        let query = if done {
            "DELETE FROM tp_purges WHERE tenant = $1 AND uid = $2 AND executor = $3"
        } else {
            "UPDATE tp_purges SET attempts = attempts + 1 WHERE tenant = $1 AND uid = $2 AND executor = $3"
        };
        sqlx::query(query)
            .bind(&purge.tenant)
            .bind(&purge.uid)
            .bind(&purge.executor)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn usage_rows(&self) -> StoreResult<Vec<(String, ToolUsage)>> {
        let rows = sqlx::query(
            "SELECT tenant, tool, calls, errors, last_used_ms FROM tp_usage ORDER BY tenant, tool",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut usage = Vec::with_capacity(rows.len());
        for row in rows {
            usage.push((
                row.try_get("tenant")?,
                ToolUsage {
                    tool: row.try_get("tool")?,
                    calls: to_u64(row.try_get("calls")?),
                    errors: to_u64(row.try_get("errors")?),
                    last_used_ms: to_u64(row.try_get("last_used_ms")?),
                },
            ));
        }
        Ok(usage)
    }

    async fn import_history(
        &self,
        audit: &[crate::CallRecord],
        usage: &[(String, ToolUsage)],
        shed: &[(String, u64)],
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        for call in audit {
            sqlx::query(
                "INSERT INTO tp_audit (at_ms, request_id, edge, tenant, principal, role, tool,
                 action, outcome, error_code, duration_ms, approval)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            )
            .bind(to_i64(call.at_ms))
            .bind(&call.request_id)
            .bind(&call.edge)
            .bind(&call.tenant)
            .bind(&call.principal)
            .bind(&call.role)
            .bind(&call.tool)
            .bind(&call.action)
            .bind(&call.outcome)
            .bind(&call.error_code)
            .bind(i64::from(call.duration_ms))
            .bind(&call.approval)
            .execute(&mut *tx)
            .await?;
        }
        for (tenant, row) in usage {
            sqlx::query(
                "INSERT INTO tp_usage (tenant, tool, calls, errors, last_used_ms) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (tenant, tool) DO UPDATE SET calls = tp_usage.calls + excluded.calls,
                 errors = tp_usage.errors + excluded.errors,
                 last_used_ms = GREATEST(tp_usage.last_used_ms, excluded.last_used_ms)",
            )
            .bind(tenant)
            .bind(&row.tool)
            .bind(to_i64(row.calls))
            .bind(to_i64(row.errors))
            .bind(to_i64(row.last_used_ms))
            .execute(&mut *tx)
            .await?;
        }
        for (edge, records) in shed {
            sqlx::query(
                "INSERT INTO tp_audit_shed (edge, records) VALUES ($1, $2)
                 ON CONFLICT (edge) DO UPDATE SET records = tp_audit_shed.records + excluded.records",
            )
            .bind(edge)
            .bind(to_i64(*records))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn usage(&self, tenant: Option<&str>) -> StoreResult<Vec<ToolUsage>> {
        let rows = sqlx::query(
            "SELECT tool, SUM(calls)::BIGINT AS calls, SUM(errors)::BIGINT AS errors,
                    MAX(last_used_ms) AS last_used_ms
             FROM tp_usage WHERE ($1::TEXT IS NULL OR tenant = $1) GROUP BY tool ORDER BY tool",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        let mut usage = Vec::with_capacity(rows.len());
        for row in rows {
            usage.push(ToolUsage {
                tool: row.try_get("tool")?,
                calls: to_u64(row.try_get("calls")?),
                errors: to_u64(row.try_get("errors")?),
                last_used_ms: to_u64(row.try_get("last_used_ms")?),
            });
        }
        Ok(usage)
    }

    fn commit_notifications(&self) -> Option<broadcast::Receiver<u64>> {
        let (sender, receiver) = broadcast::channel(64);
        let url = self.url.clone();
        tokio::spawn(async move {
            // Reconnects forever; a missed notification only delays catch-up to the next poll.
            loop {
                match PgListener::connect(&url).await {
                    Ok(mut listener) => {
                        if let Err(error) = listener.listen(CHANNEL).await {
                            tracing::warn!(%error, "LISTEN failed");
                        } else {
                            loop {
                                match listener.recv().await {
                                    Ok(notification) => {
                                        let revision = notification.payload().parse().unwrap_or(0);
                                        if sender.send(revision).is_err() {
                                            return;
                                        }
                                    }
                                    Err(error) => {
                                        tracing::warn!(%error, "listening for commits failed");
                                        break;
                                    }
                                }
                            }
                        }
                    }
                    Err(error) => tracing::warn!(%error, "connecting the commit listener failed"),
                }
                if sender.receiver_count() == 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        Some(receiver)
    }
}
