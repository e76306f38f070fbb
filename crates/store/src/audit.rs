//! The audit trail's types: one row per tool call, as edges report them, and the query that
//! reads them back a page at a time.

use crate::StoreResult;

/// One delivery of audit records from an edge (`ReportUsage`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CallBatch<'a> {
    /// The edge's id for the delivery, the same on every retry of it: a batch whose id is
    /// already stored is not stored again. Empty = no deduplication (edges before batch ids).
    pub id: &'a str,
    /// The reporting edge.
    pub edge: &'a str,
    /// Records the edge dropped before it could deliver them.
    pub shed: u64,
    /// The records.
    pub calls: &'a [CallRecord],
    /// When the control plane received it (Unix milliseconds), for pruning remembered ids.
    pub received_ms: u64,
}

/// One tool call reported by an edge. Never holds argument values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallRecord {
    /// Unix milliseconds at which the edge finished the call.
    pub at_ms: u64,
    /// The HTTP request's id.
    pub request_id: String,
    /// The edge that served it.
    pub edge: String,
    /// The caller's tenant.
    pub tenant: String,
    /// API key id, or `<issuer>#<subject>` for an access token.
    pub principal: String,
    /// The role the caller acted with.
    pub role: String,
    /// The tool called (the meta-tool's target for `dispatch`).
    pub tool: String,
    /// Action (polymorphic tools), else empty.
    pub action: String,
    /// `ok`, `tool_error`, `executor_error`, `rejected` or `input_required`.
    pub outcome: String,
    /// Why the call did not succeed; empty on success.
    pub error_code: String,
    /// How long the edge took.
    pub duration_ms: u32,
    /// The approval the call needed, as JSON (`state`, `reason`, `shown`, `answered_by`,
    /// `answered_at_ms`); empty when no approval rule applied.
    pub approval: String,
}

impl CallRecord {
    /// Whether the call counts as failed in the usage counters (input-required is a pause,
    /// not a failure).
    pub fn failed(&self) -> bool {
        !matches!(self.outcome.as_str(), "ok" | "input_required")
    }
}

/// A stored [`CallRecord`] and its position in the trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Increases with every record stored.
    pub seq: u64,
    /// What was recorded of the call.
    pub record: CallRecord,
}

/// Which records to read: every filter that is set must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this tenant's records.
    pub tenant: Option<String>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only this caller's records (key id or `issuer#subject`).
    pub principal: Option<String>,
    /// Outcome (as in [`CallRecord::outcome`]).
    pub outcome: Option<String>,
    /// Unix milliseconds, inclusive.
    pub since_ms: u64,
    /// Unix milliseconds, exclusive.
    pub until_ms: u64,
    /// Only records past this position (the previous page's last `seq`): after it, or before
    /// it when `newest_first`; 0 = from the start (or the end).
    pub after_seq: u64,
    /// Newest first (descending `seq`).
    pub newest_first: bool,
    /// At most this many.
    pub limit: u32,
}

impl Default for AuditQuery {
    fn default() -> AuditQuery {
        AuditQuery {
            tenant: None,
            tool: None,
            principal: None,
            outcome: None,
            since_ms: 0,
            until_ms: u64::MAX,
            after_seq: 0,
            newest_first: false,
            limit: 100,
        }
    }
}

/// The columns every audit `SELECT` reads (what [`entry`] decodes), as a literal for
/// `concat!` so queries stay static strings.
macro_rules! audit_columns {
    () => {
        "seq, at_ms, request_id, edge, tenant, principal, role, tool, action, outcome, \
         error_code, duration_ms, approval"
    };
}
pub(crate) use audit_columns;

/// Decodes one row of `audit_columns!()` (either database).
pub(crate) fn entry<'r, R>(row: &'r R) -> StoreResult<AuditEntry>
where
    R: sqlx::Row,
    &'static str: sqlx::ColumnIndex<R>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let number = |column: &'static str| -> StoreResult<u64> {
        Ok(u64::try_from(row.try_get::<i64, _>(column)?).unwrap_or(0))
    };
    let text = |column: &'static str| -> StoreResult<String> { Ok(row.try_get(column)?) };
    Ok(AuditEntry {
        seq: number("seq")?,
        record: CallRecord {
            at_ms: number("at_ms")?,
            request_id: text("request_id")?,
            edge: text("edge")?,
            tenant: text("tenant")?,
            principal: text("principal")?,
            role: text("role")?,
            tool: text("tool")?,
            action: text("action")?,
            outcome: text("outcome")?,
            error_code: text("error_code")?,
            duration_ms: u32::try_from(number("duration_ms")?).unwrap_or(u32::MAX),
            approval: text("approval")?,
        },
    })
}
