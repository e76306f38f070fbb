//! The MCP side of the edge: an rmcp `ServerHandler` that lists and calls the caller's own
//! registry. Built per HTTP request (stateless); everything it needs is in [`EdgeState`].
//!
//! Rules (docs/mcp-compatibility.md has them per protocol version): a tool outside the caller's registry — unknown
//! or hidden — fails with the same JSON-RPC -32602 error; a forbidden action of a polymorphic
//! tool fails like a nonexistent one; arguments are validated before forwarding; executor
//! failures are `isError: true` results; edge failures are JSON-RPC errors.

// MCP logging (`logging/setLevel`, `notifications/message`) is deprecated by SEP-2577 for
// 2026-07-28 but still used by 2025-xx clients; executors' log events are relayed to them.
#![allow(deprecated)]

pub mod ask;
pub mod bounds;
mod content;
mod cursor;
pub mod fast;
pub mod input;
pub mod params;
pub mod session;

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, InputRequiredResult, InputResponses, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscriptionFilter,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tp_proto::pb;

use crate::cache::{Identity, LookupError};
use crate::disclosure::{self, MetaTool};
use crate::forward::{CallEvent, Reply};
use crate::registry::{EdgeTool, Registry};
use crate::state::EdgeState;

pub use cursor::{decode_cursor, encode_cursor};

/// JSON-RPC code for a refused call because of the tenant's rate limit.
pub const RATE_LIMITED: ErrorCode = ErrorCode(-32029);
/// JSON-RPC code when the registry cannot be loaded (control plane down, nothing cached).
pub const REGISTRY_UNAVAILABLE: ErrorCode = ErrorCode(-32030);
/// Most validation errors reported for one call.
const MAX_REPORTED_ERRORS: usize = 5;

/// The authenticated caller, put into request extensions by the auth layer.
#[derive(Debug, Clone)]
pub struct Caller(pub Arc<Identity>);

/// The per-request handler.
#[derive(Debug, Clone)]
pub struct McpHandler {
    state: Arc<EdgeState>,
}

/// The error every unknown, hidden or forbidden tool gets.
pub fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown tool: {name}"), None)
}

/// The access log of the HTTP request a handler serves.
fn access_log(ctx: &RequestContext<RoleServer>) -> Option<&crate::access::AccessLog> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| crate::access::of(&parts.extensions))
}

/// Method-not-found for a method of a capability the edge does not offer, with a sentence.
fn not_offered(method: &str, capability: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "method not found: {method}; this server offers tools only, and its capabilities do not include {capability}"
        ),
        None,
    )
}

fn caller(ctx: &RequestContext<RoleServer>) -> Result<Arc<Identity>, ErrorData> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .map(|caller| Arc::clone(&caller.0))
        .ok_or_else(|| {
            ErrorData::internal_error("request reached the MCP handler unauthenticated", None)
        })
}

fn lookup_error(error: LookupError) -> ErrorData {
    match error {
        LookupError::Unauthenticated | LookupError::NotFound => ErrorData::new(
            ErrorCode::INVALID_REQUEST,
            "the caller's tenant no longer exists",
            None,
        ),
        LookupError::Unavailable(message) => ErrorData::new(
            REGISTRY_UNAVAILABLE,
            "the tool registry is temporarily unavailable; retry shortly",
            Some(json!({ "reason": message })),
        ),
    }
}

const BUCKETS: [&str; 16] = [
    "b00", "b01", "b02", "b03", "b04", "b05", "b06", "b07", "b08", "b09", "b10", "b11", "b12",
    "b13", "b14", "b15",
];

fn tenant_bucket_index(tenant: &str) -> usize {
    let hash = tenant
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (hash % 16) as usize
}

/// One of 16 stable buckets for a tenant (metrics labels stay bounded in a large fleet).
fn tenant_bucket(tenant: &str) -> &'static str {
    BUCKETS[tenant_bucket_index(tenant)]
}

/// Counts one answered MCP request (and its latency, for `tools/list`).
pub(crate) fn count_request(
    method: &'static str,
    tenant: &str,
    outcome: &'static str,
    started: Instant,
) {
    if method == "tools/list" && outcome == "ok" {
        // The hot path: handles kept per bucket instead of looked up per request.
        let handles = list_metrics();
        handles.0[tenant_bucket_index(tenant)].increment(1);
        handles.1.record(started.elapsed().as_secs_f64());
        return;
    }
    metrics::counter!("tp_edge_mcp_requests_total", "method" => method, "tenant_bucket" => tenant_bucket(tenant), "outcome" => outcome).increment(1);
    if method == "tools/list" {
        metrics::histogram!("tp_edge_mcp_request_seconds", "method" => method)
            .record(started.elapsed().as_secs_f64());
    }
}

type ListMetrics = ([metrics::Counter; 16], metrics::Histogram);

fn list_metrics() -> &'static ListMetrics {
    static HANDLES: std::sync::OnceLock<ListMetrics> = std::sync::OnceLock::new();
    HANDLES.get_or_init(|| {
        (
            std::array::from_fn(|i| {
                metrics::counter!("tp_edge_mcp_requests_total", "method" => "tools/list", "tenant_bucket" => BUCKETS[i], "outcome" => "ok")
            }),
            metrics::histogram!("tp_edge_mcp_request_seconds", "method" => "tools/list"),
        )
    })
}

fn request_id() -> String {
    let bytes: [u8; 8] = rand::random();
    hex::encode(bytes)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// What a tool call produced, before it becomes an MCP response.
struct Outcome {
    result: CallToolResponse,
    audit: pb::CallOutcome,
}

impl Outcome {
    fn error(message: String, audit: pb::CallOutcome) -> Outcome {
        Outcome {
            result: CallToolResult::error(vec![ContentBlock::text(message)]).into(),
            audit,
        }
    }
}

/// One validated call on its way to the executor.
struct Invocation<'a> {
    tool: &'a EdgeTool,
    action: &'a str,
    arguments: Value,
    /// The client's answers to a previous input-required result.
    input_responses: Option<prost_types::Struct>,
    /// The executor state from the verified `requestState` (empty on a first call).
    state: Vec<u8>,
    /// What a new `requestState` is bound to.
    binding: &'a [u8],
}

/// A call retried after an input-required result (MCP 2026-07-28, SEP-2322).
#[derive(Debug, Default)]
pub struct Retry {
    /// The client's answers, by request key.
    pub input_responses: Option<InputResponses>,
    /// The `requestState` the client got, echoed back.
    pub request_state: Option<String>,
}

/// A complete result, or an error result for a call that asked for client input where the
/// caller (`dispatch`, `dispatch_parallel`) cannot answer it.
fn complete(response: CallToolResponse, name: &str) -> CallToolResult {
    match response {
        CallToolResponse::Complete(result) => result,
        _ => CallToolResult::error(vec![ContentBlock::text(format!(
            "{name} needs input from the client (elicitation, sampling or roots) before it can finish; call it directly with tools/call"
        ))]),
    }
}

/// Whether the request is 2026-07-28 (per-request version in `_meta`).
fn stateless(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.meta.protocol_version().is_some()
}

/// The client capabilities that an executor may ask for and the caller declared: in a
/// 2026-07-28 request's `_meta`, or in a 2025-xx client's session id (`None` without one).
fn declared_capabilities(ctx: &RequestContext<RoleServer>) -> Option<Vec<&'static str>> {
    if !stateless(ctx) {
        return ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<session::Session>())
            .map(session::Session::declared);
    }
    let declared = ctx
        .meta
        .client_capabilities()
        .and_then(|caps| serde_json::to_value(caps).ok())
        .unwrap_or(Value::Null);
    Some(
        ["elicitation", "sampling", "roots"]
            .into_iter()
            .filter(|c| declared.get(*c).is_some_and(|v| !v.is_null()))
            .collect(),
    )
}

// === impl McpHandler ===

impl McpHandler {
    /// A handler over the edge's state.
    pub fn new(state: Arc<EdgeState>) -> McpHandler {
        McpHandler { state }
    }

    async fn registry(&self, identity: &Identity) -> Result<Arc<Registry>, ErrorData> {
        self.state
            .caches
            .registry(&identity.tenant, &identity.role)
            .await
            .map_err(lookup_error)
    }

    /// Validates and forwards one call to a tool of `registry`. Shared by `tools/call` and
    /// (later) `dispatch`.
    pub async fn call(
        &self,
        identity: &Identity,
        registry: &Registry,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        retry: Retry,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let tool = registry.tool(name).ok_or_else(|| unknown_tool(name))?;
        missing_client_capabilities(tool, ctx)?;
        // The action asked for, for the audit of a call refused before it is checked.
        let requested = arguments
            .as_ref()
            .and_then(|a| a.get("action"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some(log) = access_log(ctx) {
            log.action(&requested);
        }
        if let Err(limited) = self
            .state
            .limiter
            .check(&identity.tenant, registry.rate_limit_per_minute)
            .await
        {
            self.audit(
                identity,
                name,
                &requested,
                pb::CallOutcome::Rejected,
                started,
            );
            return Err(ErrorData::new(
                RATE_LIMITED,
                format!(
                    "rate limit of {} tool calls per minute reached; retry in {} s",
                    limited.limit, limited.retry_after_secs
                ),
                Some(json!({ "retry_after_secs": limited.retry_after_secs })),
            ));
        }
        let arguments = Value::Object(arguments.unwrap_or_default());
        let action = match check_action(tool, &arguments) {
            Ok(action) => action,
            Err(error) => {
                self.audit(
                    identity,
                    name,
                    &requested,
                    pb::CallOutcome::Rejected,
                    started,
                );
                return Err(error);
            }
        };
        let timeout = std::time::Duration::from_millis(self.state.config.mcp.validation_timeout_ms);
        let arguments = match validate_schema(tool, arguments, timeout).await {
            Ok(arguments) => arguments,
            Err(error) => {
                self.audit(identity, name, &action, pb::CallOutcome::Rejected, started);
                return Err(error);
            }
        };
        let binding = input::binding(&identity.tenant, &identity.role, name, &arguments);
        let state = match &retry.request_state {
            None => Vec::new(),
            Some(sealed) => match self.state.seal.open(&binding, sealed) {
                Ok(state) => state,
                Err(error) => {
                    self.audit(identity, name, &action, pb::CallOutcome::Rejected, started);
                    return Err(ErrorData::invalid_params(error.to_string(), None));
                }
            },
        };
        let responses = retry.input_responses.map(|responses| {
            tp_proto::json::to_struct(&Value::Object(responses.into_iter().collect()))
        });
        let outcome = self
            .forward(
                identity,
                registry,
                Invocation {
                    tool,
                    action: &action,
                    arguments,
                    input_responses: responses.flatten(),
                    state,
                    binding: &binding,
                },
                ctx,
            )
            .await;
        self.audit(identity, name, &action, outcome.audit, started);
        Ok(outcome.result)
    }

    /// An executor's `InputRequired` as an MCP input-required result: for 2026-07-28 callers,
    /// checked (methods MCP defines, capabilities the caller declared, sizes) and with the
    /// executor's state sealed into `requestState`; earlier versions get an error result.
    fn input_required(
        &self,
        tool: &EdgeTool,
        executor: &str,
        input: pb::InputRequired,
        binding: &[u8],
        ctx: &RequestContext<RoleServer>,
    ) -> Outcome {
        let name = &tool.resolved.name;
        let Some(declared) = declared_capabilities(ctx).filter(|_| stateless(ctx)) else {
            return Outcome::error(
                format!(
                    "{name} needs input from the client (elicitation, sampling or roots) before it can finish; this edge relays such requests over MCP 2026-07-28 (input-required results), so connect with that protocol version"
                ),
                pb::CallOutcome::ToolError,
            );
        };
        if input.state.len() > input::MAX_EXECUTOR_STATE {
            return Outcome::error(
                format!(
                    "executor {executor:?} returned {} bytes of input-required state (at most {})",
                    input.state.len(),
                    input::MAX_EXECUTOR_STATE
                ),
                pb::CallOutcome::ExecutorError,
            );
        }
        let requests = input
            .requests
            .as_ref()
            .map(tp_proto::json::from_struct)
            .unwrap_or_else(|| json!({}));
        let requests = match input::input_requests(&requests, Some(&declared)) {
            Ok(requests) => requests,
            Err(message) => {
                return Outcome::error(
                    format!("executor {executor:?} asked for input it may not: {message}"),
                    pb::CallOutcome::ExecutorError,
                );
            }
        };
        let request_state = self.state.seal.seal(binding, &input.state);
        let result = InputRequiredResult::new(
            (!requests.is_empty()).then_some(requests),
            Some(request_state),
        );
        Outcome {
            result: CallToolResponse::InputRequired(result),
            audit: pb::CallOutcome::InputRequired,
        }
    }

    async fn forward(
        &self,
        identity: &Identity,
        registry: &Registry,
        invocation: Invocation<'_>,
        ctx: &RequestContext<RoleServer>,
    ) -> Outcome {
        let Invocation {
            tool,
            action,
            arguments,
            input_responses,
            state,
            binding,
        } = invocation;
        let request_id = request_id();
        let Some(executor) = registry.executors.get(&tool.resolved.executor) else {
            tracing::warn!(
                tenant = %identity.tenant,
                tool = %tool.resolved.name,
                executor = %tool.resolved.executor,
                request_id,
                "the tool routes to an executor that is not configured"
            );
            return Outcome::error(
                format!(
                    "{} is not available (reference {request_id})",
                    tool.resolved.name
                ),
                pb::CallOutcome::ExecutorError,
            );
        };
        let declared = declared_capabilities(ctx);
        let deadline = Instant::now() + self.state.config.request_timeout();
        let deadline_ms = now_ms()
            + u64::try_from(self.state.config.request_timeout().as_millis()).unwrap_or(u64::MAX);
        let make_request =
            |input_responses: Option<prost_types::Struct>, state: Vec<u8>| pb::InvokeRequest {
                tool: tool.resolved.name.clone(),
                action: action.to_owned(),
                arguments: tp_proto::json::to_struct(&arguments),
                tenant: identity.tenant.clone(),
                role: identity.role.clone(),
                request_id: request_id.clone(),
                deadline_ms,
                tenant_context: Some(pb::TenantContext {
                    lint_webhook: registry.lint_webhook.clone(),
                    tenant_uid: registry.tenant_uid.clone(),
                }),
                input_responses,
                state,
                client_capabilities_known: declared.is_some(),
                client_capabilities: declared.iter().flatten().map(|c| (*c).to_owned()).collect(),
            };
        let mut request = make_request(input_responses, state);
        // Progress and log events are relayed to the client while the call runs, by a task
        // started at the first event (most calls have none).
        let mut relay = Relay::new(ctx);
        let mut on_event = |event: CallEvent| relay.send(event);
        let mut rounds = 0;
        let result = loop {
            let result = self
                .state
                .executors
                .invoke(
                    executor,
                    request,
                    deadline,
                    tool.idempotent(),
                    &mut on_event,
                )
                .await;
            match result {
                // A 2025-xx caller is asked on this call's stream, and the executor called
                // again with the answers (2026-07-28 callers get an input-required result).
                Ok(Reply::InputRequired(input))
                    if !stateless(ctx) && rounds < input::MAX_ROUNDS =>
                {
                    rounds += 1;
                    match self.ask_on_stream(identity, &input, deadline, ctx).await {
                        Ok(responses) => request = make_request(Some(responses), input.state),
                        Err(message) => {
                            break Err(Outcome::error(
                                format!("{}: {message}", tool.resolved.name),
                                pb::CallOutcome::ToolError,
                            ));
                        }
                    }
                }
                other => break Ok(other),
            }
        };
        relay.finish().await;
        match result {
            Err(outcome) => outcome,
            Ok(Ok(Reply::Done(result))) => {
                let audit = if result.is_error {
                    pb::CallOutcome::ToolError
                } else {
                    pb::CallOutcome::Ok
                };
                Outcome {
                    result: content::call_result(result).into(),
                    audit,
                }
            }
            Ok(Ok(Reply::InputRequired(input))) => {
                self.input_required(tool, &executor.name, input, binding, ctx)
            }
            Ok(Err(error)) => {
                if error.counts_against_executor() {
                    tracing::warn!(
                        tenant = %identity.tenant,
                        tool = %tool.resolved.name,
                        request_id,
                        %error,
                        "executor call failed"
                    );
                }
                Outcome {
                    result: CallToolResult::error(vec![ContentBlock::text(
                        error.caller_message(&request_id),
                    )])
                    .into(),
                    audit: pb::CallOutcome::ExecutorError,
                }
            }
        }
    }

    /// Puts an executor's input requests to a 2025-xx client as server requests on the call's
    /// SSE stream, under ids of the edge's own (see [`ask`]), and waits for every answer; the
    /// answers by request key, for the executor.
    async fn ask_on_stream(
        &self,
        identity: &Identity,
        input: &pb::InputRequired,
        deadline: Instant,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<prost_types::Struct, String> {
        let requests = input
            .requests
            .as_ref()
            .map(tp_proto::json::from_struct)
            .unwrap_or_else(|| json!({}));
        // What the client declared at `initialize` (in its session id), when it kept one.
        let declared = declared_capabilities(ctx);
        let requests = input::input_requests(&requests, declared.as_deref())
            .map_err(|message| format!("the executor asked for input it may not: {message}"))?;
        if requests.is_empty() {
            return Err("the executor asked for input without naming a request".into());
        }
        let ids = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<ask::StreamIds>())
            .cloned()
            .ok_or("this request cannot carry questions to the client")?;
        let ttl = deadline.saturating_duration_since(Instant::now());
        let mut asked = Vec::with_capacity(requests.len());
        for (key, request) in requests {
            let method = match &request {
                rmcp::model::InputRequest::CreateMessage(_) => "sampling/createMessage",
                rmcp::model::InputRequest::Elicitation(_) => "elicitation/create",
                _ => "roots/list",
            };
            let server_request: rmcp::model::ServerRequest = match request {
                rmcp::model::InputRequest::CreateMessage(r) => r.into(),
                rmcp::model::InputRequest::Elicitation(r) => r.into(),
                rmcp::model::InputRequest::ListRoots(r) => r.into(),
                _ => {
                    return Err(format!(
                        "input request {key:?} has a kind this edge cannot ask"
                    ));
                }
            };
            let question = self
                .state
                .questions
                .ask(&identity.tenant, &identity.role, ttl)
                .await;
            ids.push(question.id.clone());
            // The transport's own handle for the request is never answered (its reply comes
            // through `Questions`); only the send matters.
            ctx.peer
                .send_cancellable_request(
                    server_request,
                    rmcp::service::PeerRequestOptions::no_options(),
                )
                .await
                .map_err(|e| format!("could not ask the client ({method}): {e}"))?;
            asked.push((key, method, question));
        }
        let mut answers = serde_json::Map::new();
        for (key, method, mut question) in asked {
            let message = tokio::time::timeout_at(deadline.into(), &mut question.answer)
                .await
                .map_err(|_| format!("the client did not answer {method} in time"))?
                .map_err(|_| format!("the question {method} was dropped"))?;
            if let Some(error) = message.get("error") {
                let text = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                return Err(format!("the client refused {method}: {text}"));
            }
            answers.insert(key, message.get("result").cloned().unwrap_or(Value::Null));
        }
        tp_proto::json::to_struct(&Value::Object(answers))
            .ok_or_else(|| "the client's answers cannot be forwarded".to_owned())
    }

    /// Serves a meta-tool (ADR 0006) from the caller's registry.
    async fn meta_tool(
        &self,
        identity: &Identity,
        registry: &Registry,
        meta: MetaTool,
        arguments: Option<rmcp::model::JsonObject>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let arguments = arguments.unwrap_or_default();
        match meta {
            MetaTool::Capabilities => {
                only_keys(&arguments, "capabilities", &["category"])?;
                let category = optional_str(&arguments, "category")?;
                let answer =
                    disclosure::capabilities(&registry.tools, category, registry.progressive)
                        .ok_or_else(|| {
                            ErrorData::invalid_params(
                                format!("unknown category: {}", category.unwrap_or_default()),
                                None,
                            )
                        })?;
                let mut result = CallToolResult::success(vec![ContentBlock::text(
                    disclosure::capabilities_text(&answer),
                )]);
                result.structured_content = Some(answer);
                Ok(result)
            }
            MetaTool::ToolSchema => {
                only_keys(&arguments, "tool_schema", &["tool", "tools", "action"])?;
                if let Some(action) = optional_str(&arguments, "action")? {
                    let Some(Value::String(name)) = arguments.get("tool") else {
                        return Err(ErrorData::invalid_params(
                            "tool_schema: `action` goes with `tool`",
                            None,
                        ));
                    };
                    let tool = registry.tool(name).ok_or_else(|| unknown_tool(name))?;
                    let entry = disclosure::action_schema_entry(tool, action).ok_or_else(|| {
                        let allowed = tool
                            .resolved
                            .actions
                            .as_ref()
                            .map(|set| set.allowed.join(", "))
                            .unwrap_or_default();
                        ErrorData::invalid_params(
                            format!("tool_schema: {name} has no action {action:?} for you (allowed: {allowed})"),
                            None,
                        )
                    })?;
                    return Ok(CallToolResult::structured(json!({ "tools": [entry] })));
                }
                let names: Vec<String> = match (arguments.get("tool"), arguments.get("tools")) {
                    (Some(Value::String(name)), None) => vec![name.clone()],
                    (None, Some(Value::Array(names)))
                        if !names.is_empty() && names.len() <= disclosure::MAX_SCHEMA_BATCH =>
                    {
                        names
                            .iter()
                            .map(|n| n.as_str().map(str::to_owned))
                            .collect::<Option<Vec<_>>>()
                            .ok_or_else(|| {
                                ErrorData::invalid_params(
                                    "tool_schema: `tools` must be names",
                                    None,
                                )
                            })?
                    }
                    _ => {
                        return Err(ErrorData::invalid_params(
                            format!(
                                "tool_schema takes either `tool` (a name) or `tools` (1 to {} names)",
                                disclosure::MAX_SCHEMA_BATCH
                            ),
                            None,
                        ));
                    }
                };
                let mut schemas = Vec::with_capacity(names.len());
                for name in &names {
                    if let Some(meta) = disclosure::meta_tools()
                        .iter()
                        .find(|t| t.name == name.as_str())
                    {
                        schemas.push(json!({"name": meta.name, "description": meta.description, "inputSchema": meta.input_schema}));
                        continue;
                    }
                    let tool = registry.tool(name).ok_or_else(|| unknown_tool(name))?;
                    schemas.push(disclosure::schema_entry(tool));
                }
                Ok(CallToolResult::structured(json!({ "tools": schemas })))
            }
            MetaTool::Dispatch => {
                only_keys(&arguments, "dispatch", &["tool", "arguments"])?;
                let (name, inner) = dispatch_target(&arguments)?;
                self.call(identity, registry, &name, inner, Retry::default(), ctx)
                    .await
                    .map(|response| complete(response, &name))
            }
            MetaTool::DispatchParallel => {
                only_keys(&arguments, "dispatch_parallel", &["calls", "timeout_ms"])?;
                let limit = self.state.config.request_timeout();
                let timeout = match arguments.get("timeout_ms") {
                    None => limit,
                    Some(value) => match value.as_u64() {
                        Some(ms) if ms >= 1 => std::time::Duration::from_millis(ms).min(limit),
                        _ => {
                            return Err(ErrorData::invalid_params(
                                "dispatch_parallel: `timeout_ms` must be a positive integer",
                                None,
                            ));
                        }
                    },
                };
                let calls = match arguments.get("calls") {
                    Some(Value::Array(calls))
                        if !calls.is_empty() && calls.len() <= disclosure::MAX_PARALLEL_CALLS =>
                    {
                        calls
                            .iter()
                            .map(|call| match call {
                                Value::Object(call) => {
                                    only_keys(call, "dispatch_parallel call", &["tool", "arguments"])?;
                                    dispatch_target(call)
                                }
                                _ => Err(ErrorData::invalid_params(
                                    "dispatch_parallel: every call is an object with `tool` and `arguments`",
                                    None,
                                )),
                            })
                            .collect::<Result<Vec<_>, _>>()?
                    }
                    _ => {
                        return Err(ErrorData::invalid_params(
                            format!(
                                "dispatch_parallel: `calls` must hold 1 to {} calls",
                                disclosure::MAX_PARALLEL_CALLS
                            ),
                            None,
                        ));
                    }
                };
                use futures::StreamExt as _;
                let results: Vec<Value> = futures::stream::iter(calls)
                    .map(|(name, inner)| async move {
                        let outcome =
                            tokio::time::timeout(timeout, self.call(identity, registry, &name, inner, Retry::default(), ctx))
                                .await
                                .map(|outcome| outcome.map(|response| complete(response, &name)));
                        match outcome {
                            Ok(Ok(result)) => {
                                let mut entry = json!({
                                    "tool": name,
                                    "isError": result.is_error.unwrap_or(false),
                                    "content": result.content,
                                });
                                if let Some(structured) = result.structured_content {
                                    entry["structuredContent"] = structured;
                                }
                                entry
                            }
                            Ok(Err(error)) => json!({
                                "tool": name,
                                "error": {"code": error.code.0, "message": error.message, "data": error.data},
                            }),
                            Err(_) => json!({
                                "tool": name,
                                "error": {"code": -32001, "message": format!("timed out after {} ms", timeout.as_millis())},
                            }),
                        }
                    })
                    .buffered(disclosure::PARALLEL_FAN_OUT)
                    .collect()
                    .await;
                Ok(CallToolResult::structured(json!({ "results": results })))
            }
        }
    }

    fn audit(
        &self,
        identity: &Identity,
        tool: &str,
        action: &str,
        outcome: pb::CallOutcome,
        started: Instant,
    ) {
        let duration_ms = u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX);
        metrics::histogram!("tp_edge_tool_call_seconds").record(started.elapsed().as_secs_f64());
        self.state.audit.record(pb::UsageRecord {
            tenant: identity.tenant.clone(),
            role: identity.role.clone(),
            tool: tool.to_owned(),
            action: action.to_owned(),
            outcome: outcome as i32,
            duration_ms,
            at_ms: now_ms(),
            request_id: String::new(),
            edge: self.state.config.name.clone(),
        });
        // The request's access line (crate::access) carries the call at INFO.
        if action.is_empty() {
            tracing::debug!(tenant = %identity.tenant, role = %identity.role, tool, outcome = outcome.as_str_name(), duration_ms, "tool call");
        } else {
            tracing::debug!(tenant = %identity.tenant, role = %identity.role, tool, action, outcome = outcome.as_str_name(), duration_ms, "tool call");
        }
    }
}

/// Relays an executor's progress and log events to the client while a call runs: a task
/// started at the first event, fed through a channel.
struct Relay {
    peer: rmcp::Peer<RoleServer>,
    progress_token: Option<rmcp::model::ProgressToken>,
    min_log: Option<u8>,
    sender: Option<tokio::sync::mpsc::UnboundedSender<CallEvent>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Relay {
    fn new(ctx: &RequestContext<RoleServer>) -> Relay {
        // 2026-07-28 requests carry their own log level; without one the client asked for no
        // log messages. Earlier versions set a level per session, which a stateless edge does
        // not keep, so every message of the call is relayed.
        let min_log = if ctx.meta.protocol_version().is_some() {
            ctx.meta.log_level().map(log_rank)
        } else {
            Some(0)
        };
        Relay {
            peer: ctx.peer.clone(),
            progress_token: ctx.meta.get_progress_token(),
            min_log,
            sender: None,
            task: None,
        }
    }

    fn send(&mut self, event: CallEvent) {
        if self.sender.is_none() {
            let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
            self.task = Some(tokio::spawn(relay(
                receiver,
                self.peer.clone(),
                self.progress_token.clone(),
                self.min_log,
            )));
            self.sender = Some(sender);
        }
        if let Some(sender) = &self.sender {
            let _ = sender.send(event);
        }
    }

    /// Waits until every event sent so far has gone out.
    async fn finish(&mut self) {
        self.sender = None;
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

async fn relay(
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<CallEvent>,
    peer: rmcp::Peer<RoleServer>,
    progress_token: Option<rmcp::model::ProgressToken>,
    min_log: Option<u8>,
) {
    while let Some(event) = receiver.recv().await {
        match event {
            CallEvent::Progress(progress) => {
                let Some(token) = progress_token.clone() else {
                    continue;
                };
                let mut param = ProgressNotificationParam::new(token, progress.progress);
                if progress.total > 0.0 {
                    param = param.with_total(progress.total);
                }
                if !progress.message.is_empty() {
                    param = param.with_message(progress.message);
                }
                let _ = peer.notify_progress(param).await;
            }
            CallEvent::Log(log) => {
                let level = match pb::LogLevel::try_from(log.level) {
                    Ok(pb::LogLevel::Debug) => LoggingLevel::Debug,
                    Ok(pb::LogLevel::Warning) => LoggingLevel::Warning,
                    Ok(pb::LogLevel::Error) => LoggingLevel::Error,
                    Ok(pb::LogLevel::Info | pb::LogLevel::Unspecified) | Err(_) => {
                        LoggingLevel::Info
                    }
                };
                if min_log.is_none_or(|min| log_rank(level) < min) {
                    continue;
                }
                let param = LoggingMessageNotificationParam::new(level, Value::String(log.message));
                let _ = peer.notify_logging_message(param).await;
            }
        }
    }
}

/// The action of a polymorphic tool, checked against the role's allowed actions ("" for plain
/// tools). A forbidden action fails exactly like one that does not exist, and the caller's
/// value is not echoed.
fn check_action(tool: &EdgeTool, arguments: &Value) -> Result<String, ErrorData> {
    let Some(set) = &tool.resolved.actions else {
        return Ok(String::new());
    };
    let requested = arguments
        .get(&set.discriminator)
        .and_then(Value::as_str)
        .unwrap_or("");
    if !set.allowed.iter().any(|a| a == requested) {
        // A hidden action gets the same answer as one that does not exist, as hidden tools do.
        return Err(ErrorData::invalid_params(
            format!(
                "invalid arguments for {}: {}; available: {}",
                tool.resolved.name,
                if requested.is_empty() {
                    format!("{} is required", set.discriminator)
                } else {
                    format!("unknown {} {requested:?}", set.discriminator)
                },
                set.allowed.join(", ")
            ),
            Some(
                json!({ "errors": [{ "path": format!("/{}", set.discriminator), "message": "unknown action" }] }),
            ),
        ));
    }
    Ok(requested.to_owned())
}

/// Arguments at least this large (bytes of JSON) are validated on the blocking pool, with
/// `mcp.validation_timeout_ms`, instead of on the request's thread.
const INLINE_VALIDATION_BYTES: usize = 16 * 1024;

/// Longest message reported for one validation error.
const MAX_ERROR_MESSAGE: usize = 200;

/// The schema errors of `arguments`: path and message, with the caller's values masked (they
/// are not echoed back, nor logged).
fn schema_errors(validator: &jsonschema::Validator, arguments: &Value) -> Vec<(String, String)> {
    validator
        .iter_errors(arguments)
        .take(MAX_REPORTED_ERRORS)
        .map(|error| {
            let path = error.instance_path().to_string();
            let mut message = error.masked_with("the value").to_string();
            if message.len() > MAX_ERROR_MESSAGE {
                let mut cut = MAX_ERROR_MESSAGE;
                while !message.is_char_boundary(cut) {
                    cut -= 1;
                }
                message.truncate(cut);
                message.push('…');
            }
            (
                if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                },
                message,
            )
        })
        .collect()
}

/// Validates the arguments against the tool's (role-projected) schema, with the linear-time
/// pattern engine; large arguments are validated off the request threads within `timeout`.
/// Returns the arguments back.
async fn validate_schema(
    tool: &EdgeTool,
    arguments: Value,
    timeout: std::time::Duration,
) -> Result<Value, ErrorData> {
    let validator = tool
        .validator()
        .map_err(|message| ErrorData::internal_error(message, None))?;
    let (arguments, errors) = if bounds::size(&arguments) < INLINE_VALIDATION_BYTES {
        let errors = schema_errors(&validator, &arguments);
        (arguments, errors)
    } else {
        let job = tokio::task::spawn_blocking(move || {
            let errors = schema_errors(&validator, &arguments);
            (arguments, errors)
        });
        match tokio::time::timeout(timeout, job).await {
            Ok(Ok(done)) => done,
            Ok(Err(_)) => {
                return Err(ErrorData::internal_error(
                    "validating the arguments failed",
                    None,
                ));
            }
            Err(_) => {
                metrics::counter!("tp_edge_validation_timeouts_total").increment(1);
                return Err(ErrorData::invalid_params(
                    format!(
                        "invalid arguments for {}: validating them took longer than {} ms",
                        tool.resolved.name,
                        timeout.as_millis()
                    ),
                    None,
                ));
            }
        }
    };
    if errors.is_empty() {
        return Ok(arguments);
    }
    let summary = errors
        .iter()
        .map(|(path, message)| format!("{path}: {message}"))
        .collect::<Vec<_>>()
        .join("; ");
    Err(ErrorData::invalid_params(
        format!("invalid arguments for {}: {summary}", tool.resolved.name),
        Some(
            json!({ "errors": errors.iter().map(|(p, m)| json!({"path": p, "message": m})).collect::<Vec<_>>() }),
        ),
    ))
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder().enable_logging().enable_tools().enable_tool_list_changed().build(),
        )
        .with_server_info(Implementation::new("toolplane-edge", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Tools are scoped to your tenant and role. Polymorphic tools take an `action` argument; \
             only the actions listed in their schema are available to you.",
        )
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Stateless: log messages of a call are relayed as they come; there is no session to
        // remember a level in.
        Ok(())
    }

    // Resources and prompts are not offered, and the capabilities say so; a client that asks
    // anyway gets method-not-found with a sentence, not the bare method name. (Answering empty
    // lists would tell 2026-07-28 clients the server handles prompts without declaring them.)
    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        Err(not_offered("resources/list", "resources"))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        Err(not_offered("resources/templates/list", "resources"))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        Err(not_offered("prompts/list", "prompts"))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        Err(ErrorData::resource_not_found(
            format!(
                "resource not found: {}; this server offers tools only, no resources",
                request.uri
            ),
            None,
        ))
    }

    async fn get_prompt(
        &self,
        _request: rmcp::model::GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        Err(not_offered("prompts/get", "prompts"))
    }

    async fn complete(
        &self,
        _request: rmcp::model::CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, ErrorData> {
        Err(not_offered("completion/complete", "completions"))
    }

    async fn subscribe(
        &self,
        _request: rmcp::model::SubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Err(not_offered("resources/subscribe", "resources"))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let started = Instant::now();
        let identity = caller(&ctx)?;
        let registry = self.registry(&identity).await?;
        let after = match request.and_then(|r| r.cursor) {
            Some(cursor) => Some(
                decode_cursor(&cursor)
                    .ok_or_else(|| ErrorData::invalid_params("invalid cursor", None))?,
            ),
            None => None,
        };
        // Full or progressive (ADR 0006): the listing is built once per registry.
        let listing = &registry.listing;
        let start = match &after {
            Some(name) => listing.partition_point(|t| t.name.as_ref() <= name.as_str()),
            None => 0,
        };
        let page_size = self.state.config.mcp.page_size as usize;
        let end = (start + page_size).min(listing.len());
        let tools = listing[start..end].to_vec();
        let mut result = ListToolsResult::with_all_items(tools);
        // `ttlMs` and `cacheScope` are defined by 2026-07-28 only.
        if stateless(&ctx) {
            result = result
                .with_ttl_ms(self.state.config.mcp.list_ttl_ms)
                .with_cache_scope(CacheScope::Private);
        }
        if end < listing.len() {
            result.next_cursor = Some(encode_cursor(&listing[end - 1].name));
        }
        count_request("tools/list", &identity.tenant, "ok", started);
        if let Some(log) = access_log(&ctx) {
            log.outcome("ok");
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let identity = caller(&ctx)?;
        let registry = self.registry(&identity).await?;
        let result = match MetaTool::parse(&request.name) {
            Some(meta) => self
                .meta_tool(&identity, &registry, meta, request.arguments, &ctx)
                .await
                .map(CallToolResponse::from),
            None => {
                // SEP-2243 headers mirror the arguments of the tool named in the request, so
                // they are checked here, not for tools reached through `dispatch`.
                if stateless(&ctx)
                    && let (Some(tool), Some(parts)) = (
                        registry.tool(&request.name),
                        ctx.extensions.get::<http::request::Parts>(),
                    )
                    && let Err(reason) = params::check(
                        &tool.resolved.input_schema,
                        request.arguments.as_ref(),
                        &parts.headers,
                    )
                {
                    return Err(ErrorData::new(ErrorCode::HEADER_MISMATCH, reason, None));
                }
                let retry = Retry {
                    input_responses: request.input_responses,
                    request_state: request.request_state,
                };
                self.call(
                    &identity,
                    &registry,
                    &request.name,
                    request.arguments,
                    retry,
                    &ctx,
                )
                .await
            }
        };
        let outcome = match &result {
            Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => "tool_error",
            Ok(CallToolResponse::Complete(_)) => "ok",
            Ok(_) => "input_required",
            Err(_) => "rejected",
        };
        count_request("tools/call", &identity.tenant, outcome, Instant::now());
        if let Some(log) = access_log(&ctx) {
            match &result {
                Err(error) => log.outcome(format!("error {}", error.code.0)),
                Ok(_) => log.outcome(outcome),
            }
        }
        result
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let identity = caller(context.request_context())?;
        // A subscription ends when the client leaves or the edge starts shutting down (the
        // client re-subscribes on another replica).
        let stopping = self.state.shutdown.clone();
        if context.accepted().tools_list_changed != Some(true) {
            tokio::select! {
                () = context.cancelled() => {}
                () = stopping.cancelled() => {}
            }
            return Ok(());
        }
        let mut notices = self.state.notices.subscribe();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                () = stopping.cancelled() => return Ok(()),
                notice = notices.recv() => match notice {
                    Ok(notice) if notice.all || notice.tenants.iter().any(|t| t == &identity.tenant) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let _ = context.sink().notify_tool_list_changed().await;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

/// Severity order of MCP log levels (RFC 5424, least severe first).
fn log_rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Refuses keys other than `allowed` in a meta-tool's arguments.
fn only_keys(
    arguments: &rmcp::model::JsonObject,
    tool: &str,
    allowed: &[&str],
) -> Result<(), ErrorData> {
    match arguments.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(ErrorData::invalid_params(
            format!(
                "{tool}: unknown argument {key:?} (allowed: {})",
                allowed.join(", ")
            ),
            None,
        )),
        None => Ok(()),
    }
}

fn optional_str<'a>(
    arguments: &'a rmcp::model::JsonObject,
    key: &str,
) -> Result<Option<&'a str>, ErrorData> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.as_str())),
        Some(_) => Err(ErrorData::invalid_params(
            format!("`{key}` must be a string"),
            None,
        )),
    }
}

/// `tool` and `arguments` of a dispatch; meta-tools cannot be dispatched.
fn dispatch_target(
    arguments: &rmcp::model::JsonObject,
) -> Result<(String, Option<rmcp::model::JsonObject>), ErrorData> {
    let Some(Value::String(name)) = arguments.get("tool") else {
        return Err(ErrorData::invalid_params(
            "dispatch: `tool` (a tool name) is required",
            None,
        ));
    };
    if MetaTool::parse(name).is_some() {
        return Err(unknown_tool(name));
    }
    let inner = match arguments.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(inner)) => Some(inner.clone()),
        Some(_) => {
            return Err(ErrorData::invalid_params(
                "dispatch: `arguments` must be an object",
                None,
            ));
        }
    };
    Ok((name.clone(), inner))
}

/// A 2026-07-28 caller must declare, in the request's `_meta`, every client capability the
/// tool needs; otherwise -32021 (HTTP 400) names them and nothing runs. Earlier versions
/// declared capabilities at `initialize`, which a stateless edge does not keep: not checked.
fn missing_client_capabilities(
    tool: &EdgeTool,
    ctx: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    if tool.resolved.client_capabilities.is_empty() || ctx.meta.protocol_version().is_none() {
        return Ok(());
    }
    let declared = ctx
        .meta
        .client_capabilities()
        .and_then(|caps| serde_json::to_value(caps).ok())
        .unwrap_or(Value::Null);
    let missing: serde_json::Map<String, Value> = tool
        .resolved
        .client_capabilities
        .iter()
        .filter(|capability| declared.get(capability.as_str()).is_none_or(Value::is_null))
        .map(|capability| (capability.clone(), json!({})))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let required: rmcp::model::ClientCapabilities =
        serde_json::from_value(Value::Object(missing)).unwrap_or_default();
    Err(ErrorData::missing_required_client_capability(required))
}
