//! Conversions between protobuf messages and `tp-registry` domain types.
//!
//! Requests convert with `try_*` functions that return `InvalidArgument` domain errors;
//! responses convert infallibly with `From`.

use serde_json::{Value, json};
use tp_registry as domain;
use tp_registry::{DomainError, DomainResult};

use crate::json::{from_struct, to_struct};
use crate::pb;

fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_owned())
}

fn opt_struct(value: &Option<Value>) -> Option<prost_types::Struct> {
    value.as_ref().and_then(to_struct)
}

// --- tools ----------------------------------------------------------------------------

/// Converts a submitted `ToolSpec` to a domain definition (not yet validated).
pub fn try_tool_def(spec: Option<pb::ToolSpec>) -> DomainResult<domain::ToolDef> {
    let spec = spec.ok_or_else(|| DomainError::invalid("tool", "is required"))?;
    let bucket = match pb::Bucket::try_from(spec.bucket) {
        Ok(pb::Bucket::Unspecified) => None,
        Ok(pb::Bucket::Curated) => Some(domain::Bucket::Curated),
        Ok(pb::Bucket::Platform) => Some(domain::Bucket::Platform),
        Err(_) => {
            return Err(DomainError::invalid(
                "tool.bucket",
                format!("unknown value {}", spec.bucket),
            ));
        }
    };
    let admission = spec.admission.unwrap_or_default();
    let annotations = spec.annotations.unwrap_or_default();
    let polymorphism = spec.polymorphism.map(|poly| domain::Polymorphism {
        discriminator: poly.discriminator,
        actions: poly
            .actions
            .into_iter()
            .map(|action| domain::Action {
                name: action.name,
                description: action.description,
                schema: action
                    .schema
                    .as_ref()
                    .map_or_else(|| json!({}), from_struct),
                roles: action.roles,
            })
            .collect(),
    });
    Ok(domain::ToolDef {
        name: spec.name,
        title: spec.title,
        description: spec.description,
        category: spec.category,
        provider: non_empty(&spec.provider),
        input_schema: spec
            .input_schema
            .as_ref()
            .map_or_else(|| json!({}), from_struct),
        output_schema: spec.output_schema.as_ref().map(from_struct),
        annotations: domain::Annotations {
            read_only: annotations.read_only,
            destructive: annotations.destructive,
            idempotent: annotations.idempotent,
            open_world: annotations.open_world,
        },
        executor: spec.executor,
        roles: spec.roles,
        examples: spec.examples,
        client_capabilities: spec.client_capabilities,
        bucket,
        admission: domain::Admission {
            adr: non_empty(&admission.adr),
            owner: non_empty(&admission.owner),
            scope: non_empty(&admission.scope),
        },
        polymorphism,
    })
}

impl From<&domain::Annotations> for pb::Annotations {
    fn from(a: &domain::Annotations) -> Self {
        pb::Annotations {
            read_only: a.read_only,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
        }
    }
}

impl From<&pb::Annotations> for domain::Annotations {
    fn from(a: &pb::Annotations) -> Self {
        domain::Annotations {
            read_only: a.read_only,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
        }
    }
}

fn bucket_pb(bucket: domain::Bucket) -> pb::Bucket {
    match bucket {
        domain::Bucket::Curated => pb::Bucket::Curated,
        domain::Bucket::Platform => pb::Bucket::Platform,
    }
}

impl From<&domain::ToolDef> for pb::ToolSpec {
    fn from(def: &domain::ToolDef) -> Self {
        pb::ToolSpec {
            name: def.name.clone(),
            title: def.title.clone(),
            description: def.description.clone(),
            category: def.category.clone(),
            provider: def.provider.clone().unwrap_or_default(),
            input_schema: to_struct(&def.input_schema),
            output_schema: opt_struct(&def.output_schema),
            annotations: Some((&def.annotations).into()),
            executor: def.executor.clone(),
            roles: def.roles.clone(),
            examples: def.examples.clone(),
            client_capabilities: def.client_capabilities.clone(),
            bucket: def.bucket.map_or(pb::Bucket::Unspecified, bucket_pb) as i32,
            admission: Some(pb::Admission {
                adr: def.admission.adr.clone().unwrap_or_default(),
                owner: def.admission.owner.clone().unwrap_or_default(),
                scope: def.admission.scope.clone().unwrap_or_default(),
            }),
            polymorphism: def.polymorphism.as_ref().map(|poly| pb::Polymorphism {
                discriminator: poly.discriminator.clone(),
                actions: poly
                    .actions
                    .iter()
                    .map(|action| pb::Action {
                        name: action.name.clone(),
                        description: action.description.clone(),
                        schema: to_struct(&action.schema),
                        roles: action.roles.clone(),
                    })
                    .collect(),
            }),
        }
    }
}

/// The protobuf status of a domain status.
pub fn tool_status_pb(status: &domain::ToolStatus) -> pb::ToolStatus {
    match status {
        domain::ToolStatus::Active => pb::ToolStatus::Active,
        domain::ToolStatus::Deprecated { .. } => pb::ToolStatus::Deprecated,
        domain::ToolStatus::Retired => pb::ToolStatus::Retired,
    }
}

impl From<&domain::Tool> for pb::Tool {
    fn from(tool: &domain::Tool) -> Self {
        let sunset_date = match &tool.status {
            domain::ToolStatus::Deprecated { sunset } => sunset.clone(),
            domain::ToolStatus::Active | domain::ToolStatus::Retired => String::new(),
        };
        pb::Tool {
            spec: Some((&tool.def).into()),
            status: tool_status_pb(&tool.status) as i32,
            sunset_date,
            effective_bucket: bucket_pb(tool.def.effective_bucket()) as i32,
            revision: tool.revision,
            pin: tool.pin.as_ref().map(|pin| pb::ToolPin {
                hash: pin.hash.clone(),
                by: pin.by.clone(),
                basis: pin.basis.clone(),
                revision: pin.revision,
            }),
            findings: tool
                .findings
                .iter()
                .map(|f| pb::LintFinding {
                    rule: f.rule.clone(),
                    field: f.field.clone(),
                    found: f.found.clone(),
                })
                .collect(),
            drift: tool.drift.as_ref().map(|drift| pb::ToolDrift {
                hash: drift.hash.clone(),
                fields: drift.fields.clone(),
                upstream_json: serde_json::to_string(&drift.upstream).unwrap_or_default(),
                hidden: drift.hidden,
                revision: drift.revision,
            }),
        }
    }
}

impl From<&domain::ResolvedTool> for pb::ResolvedTool {
    fn from(tool: &domain::ResolvedTool) -> Self {
        let (discriminator, allowed_actions) = match &tool.actions {
            Some(set) => (set.discriminator.clone(), set.allowed.clone()),
            None => (String::new(), Vec::new()),
        };
        pb::ResolvedTool {
            name: tool.name.clone(),
            title: tool.title.clone(),
            description: tool.description.clone(),
            category: tool.category.clone(),
            provider: tool.provider.clone().unwrap_or_default(),
            input_schema: to_struct(&tool.input_schema),
            output_schema: opt_struct(&tool.output_schema),
            annotations: Some((&tool.annotations).into()),
            executor: tool.executor.clone(),
            examples: tool.examples.clone(),
            client_capabilities: tool.client_capabilities.clone(),
            discriminator,
            allowed_actions,
            sunset_date: tool.sunset.clone().unwrap_or_default(),
        }
    }
}

impl From<&pb::ResolvedTool> for domain::ResolvedTool {
    fn from(tool: &pb::ResolvedTool) -> Self {
        domain::ResolvedTool {
            name: tool.name.clone(),
            title: tool.title.clone(),
            description: tool.description.clone(),
            category: tool.category.clone(),
            provider: non_empty(&tool.provider),
            input_schema: tool
                .input_schema
                .as_ref()
                .map_or_else(|| json!({"type": "object"}), from_struct),
            output_schema: tool.output_schema.as_ref().map(from_struct),
            annotations: tool
                .annotations
                .as_ref()
                .map(Into::into)
                .unwrap_or_default(),
            executor: tool.executor.clone(),
            examples: tool.examples.clone(),
            client_capabilities: tool.client_capabilities.clone(),
            actions: (!tool.discriminator.is_empty()).then(|| domain::ActionSet {
                discriminator: tool.discriminator.clone(),
                allowed: tool.allowed_actions.clone(),
            }),
            sunset: non_empty(&tool.sunset_date),
        }
    }
}

// --- ADRs and policy --------------------------------------------------------------------

/// Converts a status enum value; `UNSPECIFIED` becomes `default` (or an error when `None`).
pub fn try_adr_status(
    value: i32,
    default: Option<domain::AdrStatus>,
) -> DomainResult<domain::AdrStatus> {
    match pb::AdrStatus::try_from(value) {
        Ok(pb::AdrStatus::Proposed) => Ok(domain::AdrStatus::Proposed),
        Ok(pb::AdrStatus::Accepted) => Ok(domain::AdrStatus::Accepted),
        Ok(pb::AdrStatus::Superseded) => Ok(domain::AdrStatus::Superseded),
        Ok(pb::AdrStatus::Rejected) => Ok(domain::AdrStatus::Rejected),
        Ok(pb::AdrStatus::Unspecified) => {
            default.ok_or_else(|| DomainError::invalid("status", "is required"))
        }
        Err(_) => Err(DomainError::invalid(
            "status",
            format!("unknown value {value}"),
        )),
    }
}

fn adr_status_pb(status: domain::AdrStatus) -> pb::AdrStatus {
    match status {
        domain::AdrStatus::Proposed => pb::AdrStatus::Proposed,
        domain::AdrStatus::Accepted => pb::AdrStatus::Accepted,
        domain::AdrStatus::Superseded => pb::AdrStatus::Superseded,
        domain::AdrStatus::Rejected => pb::AdrStatus::Rejected,
    }
}

/// Converts a submitted ADR (status defaults to proposed).
pub fn try_adr(adr: Option<pb::Adr>) -> DomainResult<domain::Adr> {
    let adr = adr.ok_or_else(|| DomainError::invalid("adr", "is required"))?;
    Ok(domain::Adr {
        status: try_adr_status(adr.status, Some(domain::AdrStatus::Proposed))?,
        id: adr.id,
        title: adr.title,
        date: adr.date,
        links: adr.links,
        supersedes: non_empty(&adr.supersedes),
        summary: adr.summary,
    })
}

impl From<&domain::Adr> for pb::Adr {
    fn from(adr: &domain::Adr) -> Self {
        pb::Adr {
            id: adr.id.clone(),
            title: adr.title.clone(),
            status: adr_status_pb(adr.status) as i32,
            date: adr.date.clone(),
            links: adr.links.clone(),
            supersedes: adr.supersedes.clone().unwrap_or_default(),
            summary: adr.summary.clone(),
        }
    }
}

/// Builds the policy status from the report and the policy record.
pub fn policy_status(
    report: &domain::CeilingReport,
    policy: &domain::Policy,
    revision: u64,
) -> pb::PolicyStatus {
    pb::PolicyStatus {
        ceiling: report.ceiling,
        adr: report.adr.clone(),
        count: report.count,
        headroom: report.headroom,
        curated: report.curated,
        platform: report.platform,
        deprecated: report.deprecated,
        retired: report.retired,
        history: policy
            .history
            .iter()
            .map(|h| pb::CeilingChange {
                ceiling: h.ceiling,
                adr: h.adr.clone(),
                date: h.date.clone(),
                revision: h.revision,
            })
            .collect(),
        revision,
    }
}

// --- executors, providers, roles ---------------------------------------------------------

/// Default executor timeout when the request leaves it at 0.
pub const DEFAULT_EXECUTOR_TIMEOUT_MS: u32 = 30_000;
/// Default executor concurrency when the request leaves it at 0.
pub const DEFAULT_EXECUTOR_CONCURRENCY: u32 = 64;

/// Converts a submitted executor (zero limits take the defaults).
pub fn try_executor(executor: Option<pb::ExecutorInfo>) -> DomainResult<domain::Executor> {
    let executor = executor.ok_or_else(|| DomainError::invalid("executor", "is required"))?;
    let protocol = match pb::ExecutorProtocol::try_from(executor.protocol) {
        Ok(pb::ExecutorProtocol::Unspecified | pb::ExecutorProtocol::Grpc) => {
            domain::ExecutorProtocol::Grpc
        }
        Ok(pb::ExecutorProtocol::Mcp) => domain::ExecutorProtocol::Mcp,
        Err(_) => {
            return Err(DomainError::invalid(
                "executor.protocol",
                format!("unknown value {}", executor.protocol),
            ));
        }
    };
    Ok(domain::Executor {
        name: executor.name,
        endpoint: executor.endpoint,
        protocol,
        timeout_ms: if executor.timeout_ms == 0 {
            DEFAULT_EXECUTOR_TIMEOUT_MS
        } else {
            executor.timeout_ms
        },
        max_concurrency: if executor.max_concurrency == 0 {
            DEFAULT_EXECUTOR_CONCURRENCY
        } else {
            executor.max_concurrency
        },
        description: executor.description,
        tool_prefix: executor.tool_prefix,
        credential_env: executor.credential_env,
        credential_header: executor.credential_header,
        token_exchange: executor
            .token_exchange
            .map(|exchange| domain::TokenExchange {
                token_endpoint: exchange.token_endpoint,
                client_id: exchange.client_id,
                client_secret_env: exchange.client_secret_env,
                audience: exchange.audience,
                scope: exchange.scope,
            }),
    })
}

/// The fields of an executor an upsert may name (`UpsertExecutorRequest.update_mask`).
pub const EXECUTOR_FIELDS: &[&str] = &[
    "endpoint",
    "protocol",
    "timeout_ms",
    "max_concurrency",
    "description",
    "tool_prefix",
    "credential_env",
    "credential_header",
    "token_exchange",
];

/// An upsert of `submitted` over `existing` (see `UpsertExecutorRequest`): a new executor is
/// `submitted` with defaults; an existing one changes only the fields the mask names (or,
/// without one, the fields `submitted` sets to a non-default value).
pub fn patch_executor(
    existing: Option<&domain::Executor>,
    submitted: pb::ExecutorInfo,
    mask: Option<&prost_types::FieldMask>,
) -> DomainResult<domain::Executor> {
    let Some(existing) = existing else {
        return try_executor(Some(submitted));
    };
    let named: Vec<String> = match mask {
        Some(mask) if !mask.paths.is_empty() => {
            let unknown: Vec<&String> = mask
                .paths
                .iter()
                .filter(|p| *p != "*" && !EXECUTOR_FIELDS.contains(&p.as_str()))
                .collect();
            if !unknown.is_empty() {
                return Err(unknown_mask_fields(&unknown, EXECUTOR_FIELDS));
            }
            if mask.paths.iter().any(|p| p == "*") {
                EXECUTOR_FIELDS.iter().map(|f| (*f).to_owned()).collect()
            } else {
                mask.paths.clone()
            }
        }
        _ => {
            let set = [
                ("endpoint", !submitted.endpoint.is_empty()),
                ("protocol", submitted.protocol != 0),
                ("timeout_ms", submitted.timeout_ms != 0),
                ("max_concurrency", submitted.max_concurrency != 0),
                ("description", !submitted.description.is_empty()),
                ("tool_prefix", !submitted.tool_prefix.is_empty()),
                ("credential_env", !submitted.credential_env.is_empty()),
                ("credential_header", !submitted.credential_header.is_empty()),
                ("token_exchange", submitted.token_exchange.is_some()),
            ];
            set.iter()
                .filter(|(_, on)| *on)
                .map(|(f, _)| (*f).to_owned())
                .collect()
        }
    };
    let mut merged = pb::ExecutorInfo::from(existing);
    let name = |field: &str| named.iter().any(|n| n == field);
    if name("endpoint") {
        merged.endpoint = submitted.endpoint;
    }
    if name("protocol") {
        merged.protocol = submitted.protocol;
    }
    if name("timeout_ms") {
        merged.timeout_ms = submitted.timeout_ms;
    }
    if name("max_concurrency") {
        merged.max_concurrency = submitted.max_concurrency;
    }
    if name("description") {
        merged.description = submitted.description;
    }
    if name("tool_prefix") {
        merged.tool_prefix = submitted.tool_prefix;
    }
    if name("credential_env") {
        merged.credential_env = submitted.credential_env;
    }
    if name("credential_header") {
        merged.credential_header = submitted.credential_header;
    }
    if name("token_exchange") {
        merged.token_exchange = submitted.token_exchange;
    }
    try_executor(Some(merged))
}

impl From<&domain::Executor> for pb::ExecutorInfo {
    fn from(e: &domain::Executor) -> Self {
        let protocol = match e.protocol {
            domain::ExecutorProtocol::Grpc => pb::ExecutorProtocol::Grpc,
            domain::ExecutorProtocol::Mcp => pb::ExecutorProtocol::Mcp,
        };
        pb::ExecutorInfo {
            name: e.name.clone(),
            endpoint: e.endpoint.clone(),
            protocol: protocol as i32,
            timeout_ms: e.timeout_ms,
            max_concurrency: e.max_concurrency,
            description: e.description.clone(),
            tool_prefix: e.tool_prefix.clone(),
            credential_env: e.credential_env.clone(),
            credential_header: e.credential_header.clone(),
            token_exchange: e.token_exchange.as_ref().map(|exchange| pb::TokenExchange {
                token_endpoint: exchange.token_endpoint.clone(),
                client_id: exchange.client_id.clone(),
                client_secret_env: exchange.client_secret_env.clone(),
                audience: exchange.audience.clone(),
                scope: exchange.scope.clone(),
            }),
        }
    }
}

impl From<&pb::ExecutorInfo> for domain::Executor {
    fn from(e: &pb::ExecutorInfo) -> Self {
        try_executor(Some(e.clone())).unwrap_or_else(|_| domain::Executor {
            name: e.name.clone(),
            endpoint: e.endpoint.clone(),
            protocol: domain::ExecutorProtocol::Grpc,
            timeout_ms: DEFAULT_EXECUTOR_TIMEOUT_MS,
            max_concurrency: DEFAULT_EXECUTOR_CONCURRENCY,
            description: e.description.clone(),
            tool_prefix: String::new(),
            credential_env: String::new(),
            credential_header: String::new(),
            token_exchange: None,
        })
    }
}

impl From<&domain::Provider> for pb::Provider {
    fn from(p: &domain::Provider) -> Self {
        pb::Provider {
            id: p.id.clone(),
            display_name: p.display_name.clone(),
            description: p.description.clone(),
        }
    }
}

impl From<pb::Provider> for domain::Provider {
    fn from(p: pb::Provider) -> Self {
        domain::Provider {
            id: p.id,
            display_name: p.display_name,
            description: p.description,
        }
    }
}

impl From<&domain::Role> for pb::Role {
    fn from(r: &domain::Role) -> Self {
        pb::Role {
            name: r.name.clone(),
            description: r.description.clone(),
        }
    }
}

impl From<pb::Role> for domain::Role {
    fn from(r: pb::Role) -> Self {
        domain::Role {
            name: r.name,
            description: r.description,
        }
    }
}

// --- changes --------------------------------------------------------------------------

/// The wire kind of an object kind.
pub fn object_kind_pb(kind: domain::ObjectKind) -> pb::ObjectKind {
    match kind {
        domain::ObjectKind::Tool => pb::ObjectKind::Tool,
        domain::ObjectKind::Adr => pb::ObjectKind::Adr,
        domain::ObjectKind::Policy => pb::ObjectKind::Policy,
        domain::ObjectKind::Tenant => pb::ObjectKind::Tenant,
        domain::ObjectKind::ApiKey => pb::ObjectKind::ApiKey,
        domain::ObjectKind::Executor => pb::ObjectKind::Executor,
        domain::ObjectKind::Provider => pb::ObjectKind::Provider,
        domain::ObjectKind::Role => pb::ObjectKind::Role,
        domain::ObjectKind::AdminToken => pb::ObjectKind::AdminToken,
        domain::ObjectKind::Connection => pb::ObjectKind::Connection,
    }
}

/// The wire form of one committed write. `tenant_of_key` resolves the tenant of deleted
/// keys (deletes carry no object).
pub fn change_pb(
    revision: u64,
    committed_at_ms: u64,
    author: &str,
    changes: &[domain::Change],
    tenant_of: impl Fn(&domain::Change) -> Option<String>,
) -> pb::Change {
    pb::Change {
        revision,
        committed_at_ms,
        author: author.to_owned(),
        items: changes
            .iter()
            .map(|change| {
                let (op, tenant) = match change {
                    domain::Change::Put { object } => (
                        pb::ChangeOp::Put,
                        object
                            .tenant()
                            .map(str::to_owned)
                            .or_else(|| tenant_of(change)),
                    ),
                    domain::Change::Delete { .. } => (pb::ChangeOp::Delete, tenant_of(change)),
                };
                pb::ChangeItem {
                    kind: object_kind_pb(change.kind()) as i32,
                    key: change.key().to_owned(),
                    op: op as i32,
                    tenant: tenant.unwrap_or_default(),
                    verb: change.verb().to_owned(),
                }
            })
            .collect(),
    }
}

mod tenants;

/// Every call outcome and the name the audit trail stores it under (what
/// `toolplanectl audit --outcome` takes).
pub const OUTCOME_NAMES: [(pb::CallOutcome, &str); 5] = [
    (pb::CallOutcome::Ok, "ok"),
    (pb::CallOutcome::ToolError, "tool_error"),
    (pb::CallOutcome::ExecutorError, "executor_error"),
    (pb::CallOutcome::Rejected, "rejected"),
    (pb::CallOutcome::InputRequired, "input_required"),
];

/// The stored name of an outcome (`unspecified` for the zero value).
pub fn outcome_name(outcome: pb::CallOutcome) -> &'static str {
    OUTCOME_NAMES
        .iter()
        .find(|(o, _)| *o == outcome)
        .map_or("unspecified", |(_, name)| name)
}

/// The outcome stored under `name` (`Unspecified` for any other name).
pub fn outcome_named(name: &str) -> pb::CallOutcome {
    OUTCOME_NAMES
        .iter()
        .find(|(_, n)| *n == name)
        .map_or(pb::CallOutcome::Unspecified, |(outcome, _)| *outcome)
}

/// Every approval state and the name the audit trail stores it under.
pub const APPROVAL_STATE_NAMES: [(pb::ApprovalState, &str); 5] = [
    (pb::ApprovalState::Asked, "asked"),
    (pb::ApprovalState::Approved, "approved"),
    (pb::ApprovalState::Declined, "declined"),
    (pb::ApprovalState::TimedOut, "timed_out"),
    (pb::ApprovalState::Unsupported, "unsupported"),
];

/// A call's approval as the audit trail stores it: one JSON object (empty text for none).
pub fn approval_json(approval: Option<&pb::ApprovalRecord>) -> String {
    let Some(approval) = approval else {
        return String::new();
    };
    let state = APPROVAL_STATE_NAMES
        .iter()
        .find(|(s, _)| *s as i32 == approval.state)
        .map_or("unspecified", |(_, name)| name);
    serde_json::json!({
        "state": state,
        "reason": approval.reason,
        "shown": approval.shown,
        "answered_by": approval.answered_by,
        "answered_at_ms": approval.answered_at_ms,
    })
    .to_string()
}

/// The approval stored as [`approval_json`] wrote it (`None` for empty or unreadable text).
pub fn approval_from_json(text: &str) -> Option<pb::ApprovalRecord> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let field = |name: &str| {
        value
            .get(name)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let state = value
        .get("state")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    Some(pb::ApprovalRecord {
        state: APPROVAL_STATE_NAMES
            .iter()
            .find(|(_, name)| *name == state)
            .map_or(0, |(s, _)| *s as i32),
        reason: field("reason"),
        shown: field("shown"),
        answered_by: field("answered_by"),
        answered_at_ms: value
            .get("answered_at_ms")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0),
    })
}

pub use self::tenants::{
    OPERATOR_FIELDS, TENANT_FIELDS, approval_rule, operator_fields_changed, patch_tenant,
    try_tenant,
};

/// An update mask naming fields the object does not have.
pub(crate) fn unknown_mask_fields<S: AsRef<str>>(unknown: &[S], fields: &[&str]) -> DomainError {
    DomainError::invalid(
        "update_mask",
        format!(
            "unknown field {} (fields: {})",
            unknown
                .iter()
                .map(|p| format!("{:?}", p.as_ref()))
                .collect::<Vec<_>>()
                .join(", "),
            fields.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests;
