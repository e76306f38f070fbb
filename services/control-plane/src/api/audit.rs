//! `toolplane.v1.Audit`: reading the audit trail edges report through `Registry.ReportUsage`,
//! and the conversions between its wire and stored forms.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tp_proto::convert::{outcome_name, outcome_named as outcome_of};
use tp_proto::pb::{self, audit_server::Audit};
use tp_registry::DomainError;
use tp_store::{AuditQuery, CallRecord};

use super::{domain, status};
use crate::engine::{Engine, EngineError};

/// Records per page unless asked otherwise.
const DEFAULT_PAGE_SIZE: u32 = 100;
/// Most records per page.
const MAX_PAGE_SIZE: u32 = 1000;
/// Longest text field of a reported record (a request id, an `issuer#subject`, a name).
pub const MAX_FIELD_BYTES: usize = 1024;

/// A reported record as stored; `INVALID_ARGUMENT` naming `records[index].field` when a field
/// is too long or the outcome is not one this control plane knows.
pub fn call_record(index: usize, record: pb::UsageRecord) -> Result<CallRecord, DomainError> {
    let outcome = match pb::CallOutcome::try_from(record.outcome) {
        Ok(pb::CallOutcome::Unspecified) | Err(_) => {
            return Err(DomainError::invalid(
                format!("records[{index}].outcome"),
                format!("unknown value {}", record.outcome),
            ));
        }
        Ok(outcome) => outcome,
    };
    let approval = record.approval.clone().unwrap_or_default();
    for (field, value) in [
        ("request_id", &record.request_id),
        ("edge", &record.edge),
        ("tenant", &record.tenant),
        ("principal", &record.principal),
        ("role", &record.role),
        ("tool", &record.tool),
        ("action", &record.action),
        ("error_code", &record.error_code),
        ("approval.reason", &approval.reason),
        ("approval.shown", &approval.shown),
        ("approval.answered_by", &approval.answered_by),
    ] {
        if value.len() > MAX_FIELD_BYTES {
            return Err(DomainError::invalid(
                format!("records[{index}].{field}"),
                format!("at most {MAX_FIELD_BYTES} bytes (got {})", value.len()),
            ));
        }
    }
    // Names come from clients (an unknown tool's, say): stored escaped, whatever the edge did.
    let safe = |text: String| tp_registry::ident::sanitized(&text, MAX_FIELD_BYTES);
    Ok(CallRecord {
        at_ms: record.at_ms,
        request_id: safe(record.request_id),
        edge: safe(record.edge),
        tenant: safe(record.tenant),
        principal: safe(record.principal),
        role: safe(record.role),
        tool: safe(record.tool),
        action: safe(record.action),
        outcome: outcome_name(outcome).to_owned(),
        error_code: safe(record.error_code),
        duration_ms: record.duration_ms,
        approval: tp_proto::convert::approval_json(
            record
                .approval
                .map(|a| pb::ApprovalRecord {
                    reason: safe(a.reason),
                    shown: safe(a.shown),
                    answered_by: safe(a.answered_by),
                    ..a
                })
                .as_ref(),
        ),
    })
}

/// Keyset page token: the last record's position.
fn page_token(seq: u64) -> String {
    format!("s.{seq}")
}

fn parse_page_token(token: &str) -> Result<u64, DomainError> {
    if token.is_empty() {
        return Ok(0);
    }
    token
        .strip_prefix("s.")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            DomainError::invalid("page_token", "is not a token returned by ListAuditRecords")
        })
}

/// `ListAuditRecords`' filters as a store query; `INVALID_ARGUMENT` for bad values.
fn query(request: &pb::ListAuditRecordsRequest) -> Result<AuditQuery, DomainError> {
    let limit = super::page_size(request.page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)?;
    let outcome = match pb::CallOutcome::try_from(request.outcome) {
        Ok(pb::CallOutcome::Unspecified) => None,
        Ok(outcome) => Some(outcome_name(outcome).to_owned()),
        Err(_) => {
            return Err(DomainError::invalid(
                "outcome",
                format!("unknown value {}", request.outcome),
            ));
        }
    };
    let until_ms = match request.until_ms {
        0 => u64::MAX,
        until => until,
    };
    if until_ms <= request.since_ms {
        return Err(DomainError::invalid(
            "until_ms",
            "must be after since_ms (or 0 for no end)",
        ));
    }
    let text = |value: &str| (!value.is_empty()).then(|| value.to_owned());
    Ok(AuditQuery {
        tenant: text(&request.tenant),
        tool: text(&request.tool),
        principal: text(&request.principal),
        outcome,
        since_ms: request.since_ms,
        until_ms,
        after_seq: parse_page_token(&request.page_token)?,
        newest_first: request.newest_first,
        limit: limit + 1,
    })
}

/// The admin-facing reader of the trail.
#[derive(Debug, Clone)]
pub struct AuditService {
    engine: Arc<Engine>,
}

impl AuditService {
    /// Serves the engine's store.
    pub fn new(engine: Arc<Engine>) -> AuditService {
        AuditService { engine }
    }
}

#[tonic::async_trait]
impl Audit for AuditService {
    async fn get_usage(
        &self,
        request: Request<pb::GetUsageRequest>,
    ) -> Result<Response<pb::GetUsageResponse>, Status> {
        let who = crate::admin_auth::caller(&request);
        let mut tenant = request.into_inner().tenant;
        // A tenant admin reads its tenants' counters, one at a time (its only tenant when it
        // names none); the sum over all tenants is for scopes that see every tenant.
        if !who.sees_every_tenant() {
            if tenant.is_empty() {
                match who.tenants.as_slice() {
                    [only] => tenant.clone_from(only),
                    _ => {
                        return Err(tp_proto::status::error(
                            tp_registry::ErrorCode::PermissionDenied,
                            format!(
                                "admin token {} manages several tenants: name one (tenant)",
                                who.name
                            ),
                        ));
                    }
                }
            }
            crate::admin_auth::check_tenant(&who, &tenant)?;
        }
        let usage = self
            .engine
            .store()
            .usage((!tenant.is_empty()).then_some(tenant.as_str()))
            .await
            .map_err(|e| status(EngineError::Store(e)))?;
        Ok(Response::new(pb::GetUsageResponse {
            tools: usage
                .into_iter()
                .map(|u| pb::ToolUsage {
                    tool: u.tool,
                    calls: u.calls,
                    errors: u.errors,
                    last_used_ms: u.last_used_ms,
                })
                .collect(),
        }))
    }

    async fn list_audit_records(
        &self,
        request: Request<pb::ListAuditRecordsRequest>,
    ) -> Result<Response<pb::ListAuditRecordsResponse>, Status> {
        let who = crate::admin_auth::caller(&request);
        let mut request = request.into_inner();
        // A tenant admin reads the records of its tenants, one at a time (its only tenant
        // when it names none).
        if !who.sees_every_tenant() {
            if request.tenant.is_empty() {
                match who.tenants.as_slice() {
                    [only] => request.tenant.clone_from(only),
                    _ => {
                        return Err(tp_proto::status::error(
                            tp_registry::ErrorCode::PermissionDenied,
                            format!(
                                "admin token {} manages several tenants: name one (tenant)",
                                who.name
                            ),
                        ));
                    }
                }
            }
            crate::admin_auth::check_tenant(&who, &request.tenant)?;
        }
        let query = query(&request).map_err(domain)?;
        let store = self.engine.store();
        let mut entries = store
            .audit(&query)
            .await
            .map_err(|e| status(EngineError::Store(e)))?;
        let page_size = query.limit as usize - 1;
        let next_page_token = if entries.len() > page_size {
            entries.truncate(page_size);
            entries
                .last()
                .map(|e| page_token(e.seq))
                .unwrap_or_default()
        } else {
            String::new()
        };
        let shed_by_edge = store
            .audit_shed()
            .await
            .map_err(|e| status(EngineError::Store(e)))?
            .into_iter()
            .collect();
        let records = entries
            .into_iter()
            .map(|entry| {
                let record = entry.record;
                pb::AuditRecord {
                    seq: entry.seq,
                    at_ms: record.at_ms,
                    request_id: record.request_id,
                    edge: record.edge,
                    tenant: record.tenant,
                    principal: record.principal,
                    role: record.role,
                    tool: record.tool,
                    action: record.action,
                    outcome: outcome_of(&record.outcome) as i32,
                    error_code: record.error_code,
                    duration_ms: record.duration_ms,
                    approval: tp_proto::convert::approval_from_json(&record.approval),
                }
            })
            .collect();
        Ok(Response::new(pb::ListAuditRecordsResponse {
            records,
            next_page_token,
            shed_by_edge,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_round_trips_through_its_stored_name() {
        for outcome in [
            pb::CallOutcome::Ok,
            pb::CallOutcome::ToolError,
            pb::CallOutcome::ExecutorError,
            pb::CallOutcome::Rejected,
            pb::CallOutcome::InputRequired,
        ] {
            assert_eq!(outcome_of(outcome_name(outcome)), outcome);
        }
    }

    #[test]
    fn bad_queries_name_their_field() {
        let field = |request: pb::ListAuditRecordsRequest| match query(&request) {
            Err(error) => error.violations[0].field.clone(),
            Ok(query) => panic!("accepted: {query:?}"),
        };
        assert_eq!(
            field(pb::ListAuditRecordsRequest {
                page_size: 1001,
                ..Default::default()
            }),
            "page_size"
        );
        assert_eq!(
            field(pb::ListAuditRecordsRequest {
                outcome: 99,
                ..Default::default()
            }),
            "outcome"
        );
        assert_eq!(
            field(pb::ListAuditRecordsRequest {
                since_ms: 10,
                until_ms: 10,
                ..Default::default()
            }),
            "until_ms"
        );
        for token in ["x", "s.", "s.-1", "n.00"] {
            assert_eq!(
                field(pb::ListAuditRecordsRequest {
                    page_token: token.into(),
                    ..Default::default()
                }),
                "page_token",
                "{token}"
            );
        }
        let fine = query(&pb::ListAuditRecordsRequest {
            page_token: page_token(41),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(fine.after_seq, 41);
        assert_eq!(fine.limit, DEFAULT_PAGE_SIZE + 1);
    }

    #[test]
    fn reported_records_are_bounded_and_name_the_offender() {
        let record = pb::UsageRecord {
            tenant: "acme".into(),
            tool: "gmail".into(),
            outcome: pb::CallOutcome::Ok as i32,
            ..Default::default()
        };
        assert_eq!(call_record(0, record.clone()).unwrap().outcome, "ok");
        let long = pb::UsageRecord {
            principal: "p".repeat(MAX_FIELD_BYTES + 1),
            ..record.clone()
        };
        assert_eq!(
            call_record(3, long).unwrap_err().violations[0].field,
            "records[3].principal"
        );
        let unknown = pb::UsageRecord {
            outcome: 42,
            ..record
        };
        assert_eq!(
            call_record(1, unknown).unwrap_err().violations[0].field,
            "records[1].outcome"
        );
    }
}
