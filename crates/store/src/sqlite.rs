//! The embedded SQLite store (the zero-setup default): one file, WAL journal, `synchronous=FULL`
//! so an acknowledged write survives `kill -9` and power loss.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tp_registry::{Change, Object};

use crate::audit::{self, AuditEntry, AuditQuery, CallBatch};
use crate::{
    ChangeRecord, Commit, Snapshot, Store, StoreError, StoreResult, ToolUsage, decode, encode,
    stamped,
};

/// Ordered schema migrations; the index + 1 is the schema version.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS revision (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
     INSERT OR IGNORE INTO revision (id, value) VALUES (1, 0);
     CREATE TABLE IF NOT EXISTS objects (
         kind TEXT NOT NULL, key TEXT NOT NULL, doc TEXT NOT NULL, revision INTEGER NOT NULL,
         PRIMARY KEY (kind, key));
     CREATE TABLE IF NOT EXISTS changes (revision INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, doc TEXT NOT NULL);
     CREATE TABLE IF NOT EXISTS usage (
         tenant TEXT NOT NULL, tool TEXT NOT NULL, calls INTEGER NOT NULL, errors INTEGER NOT NULL,
         last_used_ms INTEGER NOT NULL, PRIMARY KEY (tenant, tool));",
    "CREATE TABLE IF NOT EXISTS audit (
         seq INTEGER PRIMARY KEY AUTOINCREMENT, at_ms INTEGER NOT NULL, request_id TEXT NOT NULL,
         edge TEXT NOT NULL, tenant TEXT NOT NULL, principal TEXT NOT NULL, role TEXT NOT NULL,
         tool TEXT NOT NULL, action TEXT NOT NULL, outcome TEXT NOT NULL,
         error_code TEXT NOT NULL, duration_ms INTEGER NOT NULL);
     CREATE INDEX IF NOT EXISTS audit_by_tenant ON audit (tenant, seq);
     CREATE INDEX IF NOT EXISTS audit_by_time ON audit (at_ms);
     CREATE TABLE IF NOT EXISTS audit_shed (edge TEXT PRIMARY KEY, records INTEGER NOT NULL);",
    "ALTER TABLE changes ADD COLUMN author TEXT NOT NULL DEFAULT '';",
    "CREATE TABLE IF NOT EXISTS audit_batches (
         batch_id TEXT PRIMARY KEY, edge TEXT NOT NULL, received_ms INTEGER NOT NULL);
     CREATE INDEX IF NOT EXISTS audit_batches_by_time ON audit_batches (received_ms);",
    "CREATE TABLE IF NOT EXISTS purges (
         tenant TEXT NOT NULL, uid TEXT NOT NULL, executor TEXT NOT NULL, endpoint TEXT NOT NULL,
         attempts INTEGER NOT NULL, queued_ms INTEGER NOT NULL, PRIMARY KEY (tenant, uid, executor));",
    "ALTER TABLE audit ADD COLUMN approval TEXT NOT NULL DEFAULT '';",
];

/// SQLite-backed [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

// === impl SqliteStore ===

impl SqliteStore {
    /// Opens (creating if needed) the database file and migrates it.
    pub async fn open(path: &Path) -> StoreResult<SqliteStore> {
        // Created readable by its owner only before SQLite opens it: its WAL and shared-memory
        // files take the database file's permissions.
        #[cfg(unix)]
        {
            use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
            let created = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path);
            if created.is_ok() {
                let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            }
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        Self::with_options(options).await
    }

    /// Opens a private in-memory database (tests).
    pub async fn in_memory() -> StoreResult<SqliteStore> {
        let options = SqliteConnectOptions::from_str("sqlite::memory:")?;
        Self::with_options(options).await
    }

    async fn with_options(options: SqliteConnectOptions) -> StoreResult<SqliteStore> {
        // One connection: SQLite has one writer anyway, and an in-memory database is per
        // connection. Reads are served from the control plane's memory, not from here.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        let store = SqliteStore { pool };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> StoreResult<()> {
        sqlx::query("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            .execute(&self.pool)
            .await?;
        let version: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM schema_version")
            .fetch_one(&self.pool)
            .await?;
        let version = usize::try_from(version.unwrap_or(0)).unwrap_or(0);
        if version > MIGRATIONS.len() {
            return Err(StoreError::Config(format!(
                "database schema version {version} is newer than this binary ({}); upgrade toolplane",
                MIGRATIONS.len()
            )));
        }
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(version) {
            let mut tx = self.pool.begin().await?;
            sqlx::raw_sql(*migration).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO schema_version (version) VALUES (?)")
                .bind(i64::try_from(index + 1).unwrap_or(i64::MAX))
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        Ok(())
    }
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

#[async_trait]
impl Store for SqliteStore {
    async fn load(&self) -> StoreResult<Snapshot> {
        let mut tx = self.pool.begin().await?;
        let revision: i64 = sqlx::query_scalar("SELECT value FROM revision WHERE id = 1")
            .fetch_one(&mut *tx)
            .await?;
        let rows = sqlx::query("SELECT kind, key, doc FROM objects ORDER BY kind, key")
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
        let bumped = sqlx::query("UPDATE revision SET value = ? WHERE id = 1 AND value = ?")
            .bind(to_i64(revision))
            .bind(to_i64(expected))
            .execute(&mut *tx)
            .await?;
        if bumped.rows_affected() != 1 {
            let current: i64 = sqlx::query_scalar("SELECT value FROM revision WHERE id = 1")
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
                        "INSERT INTO objects (kind, key, doc, revision) VALUES (?, ?, ?, ?)
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
                    sqlx::query("DELETE FROM objects WHERE kind = ? AND key = ?")
                        .bind(kind.as_str())
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        sqlx::query("INSERT INTO changes (revision, at_ms, doc, author) VALUES (?, ?, ?, ?)")
            .bind(to_i64(revision))
            .bind(to_i64(at_ms))
            .bind(encode(&changes))
            .bind(author)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Commit::Committed(revision))
    }

    async fn changes_since(&self, after: u64, limit: u32) -> StoreResult<Vec<ChangeRecord>> {
        let rows = sqlx::query(
            "SELECT revision, at_ms, doc, author FROM changes WHERE revision > ? ORDER BY revision LIMIT ?",
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
        let revision: i64 = sqlx::query_scalar("SELECT value FROM revision WHERE id = 1")
            .fetch_one(&self.pool)
            .await?;
        Ok(to_u64(revision))
    }

    async fn record_calls(&self, batch: &CallBatch<'_>) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        if !batch.id.is_empty() {
            // First writer wins; a concurrent retry waits on the key and then finds it.
            let fresh = sqlx::query(
                "INSERT INTO audit_batches (batch_id, edge, received_ms) VALUES (?, ?, ?)
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
                "INSERT INTO usage (tenant, tool, calls, errors, last_used_ms) VALUES (?, ?, 1, ?, ?)
                 ON CONFLICT (tenant, tool) DO UPDATE SET calls = calls + 1, errors = errors + excluded.errors,
                 last_used_ms = MAX(last_used_ms, excluded.last_used_ms)",
            )
            .bind(&call.tenant)
            .bind(&call.tool)
            .bind(i64::from(call.failed()))
            .bind(to_i64(call.at_ms))
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO audit (at_ms, request_id, edge, tenant, principal, role, tool, action,
                 outcome, error_code, duration_ms, approval) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                "INSERT INTO audit_shed (edge, records) VALUES (?, ?)
                 ON CONFLICT (edge) DO UPDATE SET records = records + excluded.records",
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
                " FROM audit WHERE seq < ?1 AND (?2 IS NULL OR tenant = ?2)
                 AND (?3 IS NULL OR tool = ?3) AND (?4 IS NULL OR principal = ?4)
                 AND (?5 IS NULL OR outcome = ?5) AND at_ms >= ?6 AND at_ms < ?7
                 ORDER BY seq DESC LIMIT ?8"
            )
        } else {
            concat!(
                "SELECT ",
                audit::audit_columns!(),
                " FROM audit WHERE seq > ?1 AND (?2 IS NULL OR tenant = ?2)
                 AND (?3 IS NULL OR tool = ?3) AND (?4 IS NULL OR principal = ?4)
                 AND (?5 IS NULL OR outcome = ?5) AND at_ms >= ?6 AND at_ms < ?7
                 ORDER BY seq LIMIT ?8"
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
            sqlx::query_as("SELECT edge, records FROM audit_shed ORDER BY edge")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(|(e, n)| (e, to_u64(n))).collect())
    }

    async fn prune_audit(&self, before_ms: u64) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM audit WHERE at_ms < ?")
            .bind(to_i64(before_ms))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn prune_audit_batches(&self, before_ms: u64) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM audit_batches WHERE received_ms < ?")
            .bind(to_i64(before_ms))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn queue_purges(&self, purges: &[crate::PendingPurge], at_ms: u64) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        for purge in purges {
            sqlx::query(
                "INSERT INTO purges (tenant, uid, executor, endpoint, attempts, queued_ms)
                 VALUES (?, ?, ?, ?, 0, ?)
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
            "SELECT tenant, uid, executor, endpoint, attempts FROM purges ORDER BY queued_ms, tenant, executor",
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
            "DELETE FROM purges WHERE tenant = ? AND uid = ? AND executor = ?"
        } else {
            "UPDATE purges SET attempts = attempts + 1 WHERE tenant = ? AND uid = ? AND executor = ?"
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
            "SELECT tenant, tool, calls, errors, last_used_ms FROM usage ORDER BY tenant, tool",
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
                "INSERT INTO audit (at_ms, request_id, edge, tenant, principal, role, tool,
                 action, outcome, error_code, duration_ms, approval)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                "INSERT INTO usage (tenant, tool, calls, errors, last_used_ms) VALUES (?, ?, ?, ?, ?)
                 ON CONFLICT (tenant, tool) DO UPDATE SET calls = calls + excluded.calls,
                 errors = errors + excluded.errors,
                 last_used_ms = MAX(last_used_ms, excluded.last_used_ms)",
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
                "INSERT INTO audit_shed (edge, records) VALUES (?, ?)
                 ON CONFLICT (edge) DO UPDATE SET records = records + excluded.records",
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
            "SELECT tool, SUM(calls) AS calls, SUM(errors) AS errors, MAX(last_used_ms) AS last_used_ms
             FROM usage WHERE (?1 IS NULL OR tenant = ?1) GROUP BY tool ORDER BY tool",
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
}
