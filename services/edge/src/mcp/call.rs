//! One tool call: rate limit, action and schema checks, the executor call with its deadline,
//! input-required round trips (2026-07-28) and questions on the stream (2025-xx), the audit.

use super::outcome::Outcome;
use super::relay::Relay;
use super::validate::{
    check_action, declared_capabilities, missing_client_capabilities, validate_schema,
};
use super::*;
use crate::credentials::Chosen;
use crate::transport::request_state;
use tracing::Instrument as _;

fn request_id() -> String {
    let bytes: [u8; 8] = rand::random();
    tp_proto::digest::hex(&bytes)
}

use tp_proto::clock::now_ms;

/// The request id of a call: the HTTP request's (`x-request-id`, in the access log), so that
/// the reference a caller is shown, the executor's request id and the audit record agree.
fn call_id(ctx: &CallContext<'_>) -> String {
    access_log(ctx).map_or_else(request_id, |log| log.id().to_owned())
}

/// Longest text the edge puts in an audit record field; longer (a caller's made-up tool or
/// action name) is cut, so that no caller can make a batch the control plane refuses.
const AUDIT_FIELD_BYTES: usize = 256;

/// A field of an audit record: what a client sent (an unknown tool's name, say) is stored
/// escaped and bounded, never as it came.
fn clip(text: &str) -> String {
    tp_registry::ident::sanitized(text, AUDIT_FIELD_BYTES)
}

/// Results at most this large (bytes of protobuf) are answered without consulting the
/// in-flight budget: what they cost is noise beside what requests reserve.
const SMALL_RESULT_BYTES: usize = 64 * 1024;

/// Takes what turning a large `result` into the MCP answer costs out of the request's
/// in-flight budget, without waiting (the request still holds its own share: waiting for
/// others to give some back could wait on them doing the same). `Err` when the budget cannot
/// hold it now: the edge answers with an error instead of growing past its budget.
fn result_memory(
    budget: Option<&super::bounds::InFlightBytes>,
    result: &pb::Result,
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, ()> {
    use prost::Message as _;
    let Some(budget) = budget else {
        return Ok(None);
    };
    let encoded = result.encoded_len();
    if encoded <= SMALL_RESULT_BYTES {
        return Ok(None);
    }
    let kib = encoded
        .saturating_mul(super::bounds::RESULT_BYTES_PER_ENCODED_BYTE)
        .div_ceil(1024);
    let kib = u32::try_from(kib).unwrap_or(u32::MAX);
    std::sync::Arc::clone(&budget.0)
        .try_acquire_many_owned(kib)
        .map(Some)
        .map_err(|_| ())
}

/// What every executor request of one call carries; only the client's answers and the
/// executor's state change from one round to the next.
struct Template<'a> {
    tool: &'a EdgeTool,
    action: &'a str,
    arguments: &'a Value,
    identity: &'a Identity,
    registry: &'a Registry,
    request_id: &'a str,
    deadline_ms: u64,
    /// The client capabilities the request declared (`None`: unknown).
    declared: Option<Vec<&'static str>>,
    /// The tenant's credential for the tool's provider, when it connected one.
    credential: Option<pb::ProviderCredential>,
}

impl Template<'_> {
    fn request(
        &self,
        input_responses: Option<prost_types::Struct>,
        state: Vec<u8>,
    ) -> pb::InvokeRequest {
        pb::InvokeRequest {
            tool: self.tool.resolved.name.clone(),
            action: self.action.to_owned(),
            arguments: tp_proto::json::to_struct(self.arguments),
            tenant: self.identity.tenant.clone(),
            role: self.identity.role.clone(),
            request_id: self.request_id.to_owned(),
            deadline_ms: self.deadline_ms,
            tenant_context: Some(pb::TenantContext {
                lint_webhook: self.registry.lint_webhook.clone(),
                tenant_uid: self.registry.tenant_uid.clone(),
            }),
            input_responses,
            state,
            client_capabilities_known: self.declared.is_some(),
            client_capabilities: self
                .declared
                .iter()
                .flatten()
                .map(|c| (*c).to_owned())
                .collect(),
            credential: self.credential.clone(),
        }
    }
}

/// A tool routed to an executor this edge has no configuration for.
fn unconfigured(identity: &Identity, tool: &EdgeTool, request_id: &str) -> Outcome {
    tracing::warn!(
        tenant = %identity.tenant,
        tool = %tool.resolved.name,
        executor = %tool.resolved.executor,
        request_id,
        "the tool routes to an executor that is not configured"
    );
    Outcome::error(
        format!(
            "{} is not available (reference {request_id})",
            tool.resolved.name
        ),
        pb::CallOutcome::ExecutorError,
        "executor_not_configured",
    )
}

/// The executor call's span, when spans are exported: the request's child, the executor's
/// parent (its traceparent is this span). Otherwise the call's events are written in the
/// request's span, which names the tool and the request id: a span of its own would be
/// formatted for nobody on every call.
fn executor_span(
    ctx: &CallContext<'_>,
    tool: &EdgeTool,
    executor: &str,
    request_id: &str,
) -> tracing::Span {
    if tp_telemetry::trace::exporting() {
        tracing::info_span!(
            parent: &request_span(ctx),
            "executor.call",
            tool = %tool.resolved.name,
            executor = %executor,
            request_id,
        )
    } else {
        tracing::Span::none()
    }
}

/// `invoking`, unless the client cancels the call first (notifications/cancelled): the
/// executor call is then dropped, which resets a gRPC executor's stream and cancels an MCP
/// upstream's call.
async fn cancellable<T>(
    invoking: impl std::future::Future<Output = Result<T, Outcome>>,
    tool: &EdgeTool,
    request_id: &str,
    ctx: &CallContext<'_>,
) -> Result<T, Outcome> {
    let cancel = ctx.parts.and_then(|parts| {
        parts
            .extensions
            .get::<crate::transport::cancels::CallCancel>()
    });
    let Some(cancel) = cancel else {
        return invoking.await;
    };
    tokio::select! {
        result = invoking => result,
        () = cancel.0.cancelled() => Err(Outcome::error(
            format!("{} was cancelled by the client (reference {request_id})", tool.resolved.name),
            pb::CallOutcome::ToolError,
            "cancelled",
        )),
    }
}

/// A result the executor returned, once what relaying it costs is taken from the in-flight
/// budget (an error when the budget cannot hold it now).
fn done(result: pb::Result, tool: &EdgeTool, request_id: &str, ctx: &CallContext<'_>) -> Outcome {
    let budget = ctx
        .parts
        .and_then(|parts| parts.extensions.get::<super::bounds::InFlightBytes>());
    let Ok(_memory) = result_memory(budget, &result) else {
        ::metrics::counter!("tp_edge_shed_total", "reason" => "result_bytes").increment(1);
        return Outcome::error(
            format!(
                "{}'s result is too large for this edge to relay right now (mcp.max_in_flight_bytes); retry (reference {request_id})",
                tool.resolved.name
            ),
            pb::CallOutcome::ExecutorError,
            "result_too_large",
        );
    };
    let (audit, code) = if result.is_error {
        (pb::CallOutcome::ToolError, "tool_error")
    } else {
        (pb::CallOutcome::Ok, "")
    };
    Outcome {
        result: content::call_result(result).into(),
        audit,
        code: code.to_owned(),
    }
}

/// An executor call that failed: a tool error the model can read, with a reference.
fn failed(
    error: &crate::forward::ForwardError,
    identity: &Identity,
    tool: &EdgeTool,
    request_id: &str,
) -> Outcome {
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
        result: CallToolResult::error(vec![ContentBlock::text(error.caller_message(request_id))])
            .into(),
        audit: pb::CallOutcome::ExecutorError,
        code: error.audit_code(),
    }
}

/// A call refused before it was forwarded: the error, the audit code, and the action once it
/// was checked (the requested one is audited before).
struct CallRefusal {
    error: Error,
    code: &'static str,
    action: Option<String>,
}

impl CallRefusal {
    fn new(error: Error, code: &'static str) -> CallRefusal {
        CallRefusal {
            error,
            code,
            action: None,
        }
    }
}

/// The action a call's arguments ask for (empty when none), for the audit of a call refused
/// before its action is checked.
fn requested_action(arguments: Option<&rmcp::model::JsonObject>) -> String {
    arguments
        .and_then(|a| a.get("action"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// How a call ended, for its audit record.
struct Audited<'a> {
    tool: &'a str,
    action: &'a str,
    outcome: pb::CallOutcome,
    code: &'a str,
    /// The approval the call needed, when a rule applied.
    approval: Option<pb::ApprovalRecord>,
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
    /// The call's request id.
    request_id: &'a str,
    /// What a new `requestState` is bound to.
    binding: &'a [u8],
    /// The call's approval, carried into a new `requestState` (ADR 0013).
    approval: Option<request_state::ApprovalSeal>,
}

/// A call past its checks and its approval, on its way to the executor.
struct Ready<'a> {
    tool: &'a EdgeTool,
    action: &'a str,
    arguments: Value,
    /// The executor state from the verified `requestState` (empty on a first call).
    state: Vec<u8>,
    /// The client's answers to a previous input-required result (the approval's removed).
    responses: Option<InputResponses>,
    binding: &'a [u8],
    request_id: &'a str,
    started: Instant,
    /// The call's approval, when a rule applied: the seal later rounds carry, and the record.
    approval: Option<(request_state::ApprovalSeal, pb::ApprovalRecord)>,
}

/// A call retried after an input-required result (MCP 2026-07-28, SEP-2322).
#[derive(Debug, Default)]
pub struct Retry {
    /// The client's answers, by request key.
    pub input_responses: Option<InputResponses>,
    /// The `requestState` the client got, echoed back.
    pub request_state: Option<String>,
}

impl McpHandler {
    /// Validates and forwards one call to a tool of `registry`. Shared by `tools/call` and
    /// (later) `dispatch`.
    pub async fn call(
        &self,
        identity: &Identity,
        registry: &Registry,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        retry: Retry,
        ctx: &CallContext<'_>,
    ) -> Result<CallToolResponse, Error> {
        let started = Instant::now();
        let request_id = call_id(ctx);
        // The action asked for, for the audit of a call refused before it is checked.
        let requested = requested_action(arguments.as_ref());
        let refused = |code: &str, action: &str| {
            let audited = Audited {
                tool: name,
                action,
                outcome: pb::CallOutcome::Rejected,
                code,
                approval: None,
            };
            self.audit(identity, &request_id, audited, started);
        };
        let admitted = self.admit(identity, registry, name, arguments, &requested, ctx);
        let (tool, action, arguments) = match admitted.await {
            Ok(admitted) => admitted,
            Err(refusal) => {
                refused(
                    refusal.code,
                    refusal.action.as_deref().unwrap_or(&requested),
                );
                return Err(refusal.error);
            }
        };
        let binding = request_state::binding(&identity.tenant, &identity.role, name, &arguments);
        let opened = match retry
            .request_state
            .map(|sealed| self.state.seal.open_with(&binding, &sealed))
        {
            None => (Vec::new(), None),
            Some(Ok(opened)) => opened,
            Some(Err(error)) => {
                refused("invalid_request_state", &action);
                return Err(Error::invalid_params(error.to_string()));
            }
        };
        let mut responses = retry.input_responses;
        let pending =
            super::approval::Pending::of(registry, identity, name, &action, &arguments, &binding);
        let (state, approval) = match self
            .clear(pending.as_ref(), opened, &mut responses, ctx)
            .await
        {
            Ok(cleared) => cleared,
            Err(held) => {
                let audited = Audited {
                    tool: name,
                    action: &action,
                    outcome: held.outcome.audit,
                    code: &held.outcome.code,
                    approval: Some(held.record),
                };
                self.audit(identity, &request_id, audited, started);
                return Ok(held.outcome.result);
            }
        };
        let ready = Ready {
            tool,
            action: &action,
            arguments,
            state,
            responses,
            binding: &binding,
            request_id: &request_id,
            started,
            approval,
        };
        Ok(self.run(identity, registry, ready, ctx).await)
    }

    /// Forwards a call that passed its checks and its approval, audits it, and adds the
    /// deprecation notice of a tool past its sunset announcement.
    async fn run(
        &self,
        identity: &Identity,
        registry: &Registry,
        ready: Ready<'_>,
        ctx: &CallContext<'_>,
    ) -> CallToolResponse {
        let Ready {
            tool,
            action,
            arguments,
            state,
            responses,
            binding,
            request_id,
            started,
            approval,
        } = ready;
        let responses = responses
            .filter(|responses| !responses.is_empty())
            .and_then(|responses| {
                tp_proto::json::to_struct(&Value::Object(responses.into_iter().collect()))
            });
        let outcome = self
            .forward(
                identity,
                registry,
                Invocation {
                    tool,
                    action,
                    arguments,
                    input_responses: responses,
                    state,
                    binding,
                    request_id,
                    approval: approval.as_ref().map(|(seal, _)| *seal),
                },
                ctx,
            )
            .await;
        let name = tool.resolved.name.as_str();
        let audited = Audited {
            tool: name,
            action,
            outcome: outcome.audit,
            code: &outcome.code,
            approval: approval.map(|(_, record)| record),
        };
        self.audit(identity, request_id, audited, started);
        let mut response = outcome.result;
        if let (Some(sunset), CallToolResponse::Complete(result)) =
            (&tool.resolved.sunset, &mut response)
        {
            deprecation_notice(result, name, sunset);
        }
        response
    }

    /// The checks a call passes before anything is forwarded, in order: the tool is the
    /// caller's, the request declares the client capabilities it needs, the tenant's rate
    /// limit, the action, the arguments against the action's schema. The tool, the action
    /// and the validated arguments; or why not, with the audit code.
    async fn admit<'r>(
        &self,
        identity: &Identity,
        registry: &'r Registry,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        requested: &str,
        ctx: &CallContext<'_>,
    ) -> Result<(&'r EdgeTool, String, Value), CallRefusal> {
        let Some(tool) = registry.tool(name) else {
            return Err(CallRefusal::new(Error::unknown_tool(name), "unknown_tool"));
        };
        missing_client_capabilities(tool, ctx)
            .map_err(|error| CallRefusal::new(error, "missing_client_capability"))?;
        if let Some(log) = access_log(ctx) {
            log.action(requested);
        }
        if let Err(limited) = self
            .state
            .limiter
            .check(&identity.tenant, registry.rate_limit_per_minute)
            .await
        {
            let error = Error::new(
                Fault::RateLimited,
                format!(
                    "rate limit of {} tool calls per minute reached; retry in {} s",
                    limited.limit, limited.retry_after_secs
                ),
            )
            .with_data(json!({ "retry_after_secs": limited.retry_after_secs }));
            return Err(CallRefusal::new(error, "rate_limited"));
        }
        let arguments = Value::Object(arguments.unwrap_or_default());
        let action = check_action(tool, &arguments)
            .map_err(|error| CallRefusal::new(error, "invalid_action"))?;
        let timeout = self.state.config.mcp.validation_timeout;
        match validate_schema(tool, &action, arguments, timeout).await {
            Ok(arguments) => Ok((tool, action, arguments)),
            Err(error) => Err(CallRefusal {
                error,
                code: "invalid_arguments",
                action: Some(action),
            }),
        }
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
        approval: Option<request_state::ApprovalSeal>,
        ctx: &CallContext<'_>,
    ) -> Outcome {
        let name = &tool.resolved.name;
        let Some(declared) = declared_capabilities(ctx).filter(|_| stateless(ctx)) else {
            return Outcome::error(
                format!(
                    "{name} needs input from the client (elicitation, sampling or roots) before it can finish; this edge relays such requests over MCP 2026-07-28 (input-required results), so connect with that protocol version"
                ),
                pb::CallOutcome::ToolError,
                "input_unsupported",
            );
        };
        if input.state.len() > request_state::MAX_EXECUTOR_STATE {
            return Outcome::error(
                format!(
                    "executor {executor:?} returned {} bytes of input-required state (at most {})",
                    input.state.len(),
                    request_state::MAX_EXECUTOR_STATE
                ),
                pb::CallOutcome::ExecutorError,
                "executor_state_too_large",
            );
        }
        let requests = input
            .requests
            .as_ref()
            .map(tp_proto::json::from_struct)
            .unwrap_or_else(|| json!({}));
        let requests = match request_state::input_requests(&requests, Some(&declared)) {
            Ok(requests) => requests,
            Err(message) => {
                return Outcome::error(
                    format!("executor {executor:?} asked for input it may not: {message}"),
                    pb::CallOutcome::ExecutorError,
                    "executor_bad_input_request",
                );
            }
        };
        let request_state = self.state.seal.seal_with(binding, &input.state, approval);
        let result = InputRequiredResult::new(
            (!requests.is_empty()).then_some(requests),
            Some(request_state),
        );
        Outcome {
            result: CallToolResponse::InputRequired(result),
            audit: pb::CallOutcome::InputRequired,
            code: String::new(),
        }
    }

    /// The tenant's credential for the tool's provider (ADR 0015), when its registry says it
    /// connected that provider, or why the call cannot be made: an expired connection, or a
    /// credential the control plane cannot hand over (then the call is refused rather than
    /// sent with the executor's own credential).
    async fn credential(
        &self,
        identity: &Identity,
        registry: &Registry,
        tool: &EdgeTool,
        request_id: &str,
    ) -> Result<Option<pb::ProviderCredential>, Outcome> {
        let Some(provider) = tool.resolved.provider.as_deref().filter(|p| !p.is_empty()) else {
            return Ok(None);
        };
        // Not connected: the executor's own credential, as before connections.
        let Some(connected) = registry.connections.iter().find(|c| c.provider == provider) else {
            return Ok(None);
        };
        let name = &tool.resolved.name;
        // Only other users connected the provider: this caller has no credential to act with.
        let Some(chosen) = Chosen::for_caller(connected, &identity.key_id) else {
            return Err(not_connected(identity, name, provider, request_id));
        };
        let fetched = if chosen.expired_at(now_ms() / 1000) {
            Err(tp_proto::status::error(
                tp_registry::ErrorCode::FailedPrecondition,
                "expired",
            ))
        } else {
            let state = &self.state;
            state
                .credentials
                .get(&*state.directory, &identity.tenant, chosen)
                .await
        };
        fetched.map(Some).map_err(|status| {
            tracing::warn!(
                tenant = %identity.tenant,
                provider,
                request_id,
                error = %status.message(),
                "the tenant's credential for the provider could not be used"
            );
            // Never the executor's credential instead: the tenant would act as someone else.
            let (text, code) = if status.code() == tonic::Code::FailedPrecondition {
                (
                    format!(
                        "{name} cannot be called: {} connection to {provider} has expired or cannot be used, and must be connected again (reference {request_id})",
                        if chosen.user.is_empty() { "this tenant's" } else { "your own" }
                    ),
                    "credential_expired",
                )
            } else {
                (
                    format!("{name} is temporarily unavailable: the credential for {provider} could not be read (reference {request_id})"),
                    "credential_unavailable",
                )
            };
            Outcome::error(text, pb::CallOutcome::ExecutorError, code)
        })
    }

    /// The executor call of one admitted invocation, its questions to a 2025-xx client, the
    /// client's cancellation, and what the executor's reply becomes.
    async fn forward(
        &self,
        identity: &Identity,
        registry: &Registry,
        invocation: Invocation<'_>,
        ctx: &CallContext<'_>,
    ) -> Outcome {
        let Invocation {
            tool,
            action,
            arguments,
            input_responses,
            state,
            binding,
            request_id,
            approval,
        } = invocation;
        let Some(executor) = registry.executors.get(&tool.resolved.executor) else {
            return unconfigured(identity, tool, request_id);
        };
        let credential = match self.credential(identity, registry, tool, request_id).await {
            Ok(credential) => credential,
            Err(outcome) => return outcome,
        };
        let timeout = self.state.config.request_timeout();
        let template = Template {
            credential,
            tool,
            action,
            arguments: &arguments,
            identity,
            registry,
            request_id,
            deadline_ms: now_ms() + u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            declared: declared_capabilities(ctx),
        };
        let first = template.request(input_responses, state);
        // Progress and log events are relayed to the client while the call runs, by a task
        // started at the first event (most calls have none).
        let mut relay = Relay::new(ctx);
        // Boxed: held by pointer, not copied into `cancellable` (see `Executors::attempts`).
        let invoking = Box::pin(self.invoke_asking(
            executor,
            &template,
            first,
            Instant::now() + timeout,
            &mut relay,
            ctx,
        ));
        let result = cancellable(invoking, tool, request_id, ctx).await;
        relay.finish().await;
        match result {
            Err(outcome) => outcome,
            Ok(Ok(Reply::Done(result))) => done(result, tool, request_id, ctx),
            Ok(Ok(Reply::InputRequired(input))) => {
                self.input_required(tool, &executor.name, input, binding, approval, ctx)
            }
            Ok(Err(error)) => failed(&error, identity, tool, request_id),
        }
    }

    /// Calls the executor; a 2025-xx caller is asked on this call's stream when the executor
    /// needs input, and the executor called again with the answers (2026-07-28 callers get
    /// an input-required result instead). `Err` when the client did not answer.
    async fn invoke_asking(
        &self,
        executor: &tp_registry::Executor,
        template: &Template<'_>,
        mut request: pb::InvokeRequest,
        deadline: Instant,
        relay: &mut Relay,
        ctx: &CallContext<'_>,
    ) -> Result<Result<Reply, crate::forward::ForwardError>, Outcome> {
        let tool = template.tool;
        let mut on_event = |event: CallEvent| relay.send(event);
        let span = executor_span(ctx, tool, &executor.name, template.request_id);
        let mut rounds = 0;
        loop {
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
                .instrument(span.clone())
                .await;
            match result {
                Ok(Reply::InputRequired(input))
                    if !stateless(ctx) && rounds < request_state::MAX_ROUNDS =>
                {
                    rounds += 1;
                    match self
                        .ask_on_stream(template.identity, &input, deadline, ctx)
                        .await
                    {
                        Ok(responses) => request = template.request(Some(responses), input.state),
                        Err(message) => {
                            return Err(Outcome::error(
                                format!("{}: {message}", tool.resolved.name),
                                pb::CallOutcome::ToolError,
                                "client_did_not_answer",
                            ));
                        }
                    }
                }
                other => return Ok(other),
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
        ctx: &CallContext<'_>,
    ) -> Result<prost_types::Struct, String> {
        let requests = input
            .requests
            .as_ref()
            .map(tp_proto::json::from_struct)
            .unwrap_or_else(|| json!({}));
        // What the client declared at `initialize` (in its session id), when it kept one.
        let declared = declared_capabilities(ctx);
        let requests = request_state::input_requests(&requests, declared.as_deref())
            .map_err(|message| format!("the executor asked for input it may not: {message}"))?;
        if requests.is_empty() {
            return Err("the executor asked for input without naming a request".into());
        }
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
            ctx.ask(question.id.clone(), server_request)
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

    fn audit(&self, identity: &Identity, request_id: &str, call: Audited<'_>, started: Instant) {
        let Audited {
            tool,
            action,
            outcome,
            code,
            approval,
        } = call;
        let duration_ms = u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX);
        ::metrics::histogram!("tp_edge_tool_call_seconds").record(started.elapsed().as_secs_f64());
        self.state.audit.record(pb::UsageRecord {
            tenant: identity.tenant.clone(),
            role: identity.role.clone(),
            tool: clip(tool),
            action: clip(action),
            outcome: outcome as i32,
            duration_ms,
            at_ms: now_ms(),
            request_id: clip(request_id),
            edge: self.state.config.name.clone(),
            principal: clip(&identity.key_id),
            error_code: code.to_owned(),
            approval,
        });
        // The request's access line (crate::access) carries the call at INFO.
        if action.is_empty() {
            tracing::debug!(tenant = %identity.tenant, role = %identity.role, tool, outcome = outcome.as_str_name(), code, duration_ms, "tool call");
        } else {
            tracing::debug!(tenant = %identity.tenant, role = %identity.role, tool, action, outcome = outcome.as_str_name(), code, duration_ms, "tool call");
        }
    }
}

/// The `_meta` key of the notice a deprecated tool's results carry.
pub(super) const DEPRECATION_META: &str = "toolplane/deprecation";

/// Tells the caller of a deprecated tool, in the result's `_meta`, when the tool goes away, so
/// that an agent (or the person reading its logs) can move off it before its sunset date; the
/// tool's description in `tools/list` says the same.
fn deprecation_notice(result: &mut CallToolResult, name: &str, sunset: &str) {
    let meta = result.meta.get_or_insert_with(Default::default);
    meta.0.insert(
        DEPRECATION_META.to_owned(),
        json!({
            "sunset": sunset,
            "message": format!("{name} is deprecated and will be removed after {sunset}"),
        }),
    );
}

/// The refusal of a call whose provider only other users of the tenant connected: the caller
/// has no credential to act with, and is told how to connect one.
fn not_connected(identity: &Identity, name: &str, provider: &str, request_id: &str) -> Outcome {
    tracing::info!(tenant = %identity.tenant, provider, request_id, "a call needs the caller's own connection to the provider");
    let how = if identity.key_id.is_empty() {
        "sign in with a key or token of your own, then ask an operator to connect your account"
            .to_owned()
    } else {
        format!(
            "ask an operator to run `toolplanectl connections connect {} --provider {provider} --user {}`",
            identity.tenant, identity.key_id
        )
    };
    Outcome::error(
        format!(
            "{name} cannot be called: it acts with each user's own {provider} account and you have not connected yours; {how} (reference {request_id})"
        ),
        pb::CallOutcome::ExecutorError,
        "credential_missing",
    )
}
