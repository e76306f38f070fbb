//! Forwarding tool calls to executors over the gRPC `Executor` contract (or to MCP servers
//! through the `tp-upstream` crate): one lazily connected channel per executor, signed calls, the
//! deadline, a retry only when it is safe (idempotent tool, the executor was never reached),
//! and — per (executor, tool) — circuit breakers and concurrency limits that no tenant can turn
//! against another:
//!
//! - **Breakers per (executor, tool).** Each tenant has its own breaker there: its failing
//!   (or timed-out) calls open only its own. The shared breaker, which refuses every tenant,
//!   opens only when at least `breaker_shared_tenants` tenants have their own breaker open
//!   and they are at least half of the tenants that called the tool in the last minute (a
//!   genuinely broken executor), so no tenant — nor an attacker holding fewer tenants than
//!   that — can open it for the others.
//! - **Only the executor's failures count.** Errors caused by the caller's input (invalid
//!   argument, permission, not found, precondition, quota) never count against any breaker.
//! - **Concurrency per executor, per (executor, tool) and per (executor, tenant).** A call takes
//!   a slot of its tenant's share (`tenant_share_percent` of the executor's `max_concurrency`,
//!   at least one), then of its tool's share, then of the executor; a tenant that fills its
//!   share waits on its own calls, never on everyone's.
//!
//! Errors shown to callers name the tool, never the executor's address, the transport or an
//! internal error text; those are logged with the call's request id, which the caller gets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Code;
use tonic::transport::Channel;
use tp_proto::invoke_auth::ExecutorKey;
use tp_proto::pb::{self, executor_client::ExecutorClient};
use tp_registry::{Executor, ExecutorProtocol};
use tp_upstream::CallEvent;

#[cfg(test)]
use self::breaker::BreakerState;
use self::breaker::Breakers;
pub use self::error::ForwardError;
use self::error::classify;

/// Breaker and concurrency settings.
#[derive(Debug, Clone)]
pub struct BreakerSettings {
    /// Consecutive failures that open a breaker.
    pub failures: u32,
    /// How long it stays open before one probe.
    pub cooldown: Duration,
    /// Tenants whose own breakers must be open before the shared one opens (at least 2).
    pub shared_tenants: u32,
    /// How long opening a connection to an executor may take.
    pub connect_timeout: Duration,
    /// Percent of an executor's `max_concurrency` one tenant may hold.
    pub tenant_share_percent: u32,
    /// Percent of an executor's `max_concurrency` one tool may hold.
    pub tool_share_percent: u32,
    /// Only environment variables named `credential_env_prefix…` are sent to MCP executors.
    pub credential_env_prefix: String,
    /// Signs every call to a gRPC executor.
    pub key: ExecutorKey,
    /// The HTTP client of MCP upstreams.
    pub upstream_http: reqwest::Client,
}

/// What an executor answered a call with.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The tool's result.
    Done(pb::Result),
    /// The client must answer these requests first (MCP SEP-2322).
    InputRequired(pb::InputRequired),
}

impl Reply {
    fn is_error(&self) -> bool {
        matches!(self, Reply::Done(result) if result.is_error)
    }
}

/// Concurrency slots and breakers of one (executor, tool).
#[derive(Debug)]
struct Gate {
    permits: Arc<Semaphore>,
    breakers: Mutex<Breakers>,
    /// `tp_edge_breaker_state{executor, tool}` and the calls that succeeded,
    /// `tp_edge_executor_calls_total{executor, outcome="ok"}`: handles made once, not looked
    /// up (labels copied and hashed) on every call.
    breaker_state: metrics::Gauge,
    succeeded: metrics::Counter,
}

struct Handle {
    info: Executor,
    /// The gRPC contract's client, or the MCP upstream's session holder.
    client: Option<ExecutorClient<Channel>>,
    upstream: Option<Arc<tp_upstream::Upstream>>,
    permits: Arc<Semaphore>,
    tools: Mutex<HashMap<String, Arc<Gate>>>,
    tenants: Mutex<HashMap<String, Arc<Semaphore>>>,
    tool_share: usize,
    tenant_share: usize,
}

/// The executors an edge calls.
pub struct Executors {
    handles: Mutex<HashMap<String, Arc<Handle>>>,
    settings: BreakerSettings,
}

impl std::fmt::Debug for Executors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executors").finish_non_exhaustive()
    }
}

/// `percent` of `total`, at least one.
fn share(total: u32, percent: u32) -> usize {
    let total = total as usize;
    (total * percent as usize)
        .div_ceil(100)
        .clamp(1, total.max(1))
}

/// Most idle per-tenant slot sets kept per executor before the idle ones are dropped.
const TENANT_SLOTS_KEPT: usize = 1024;

// === impl Handle ===

impl Handle {
    fn gate(&self, tool: &str) -> Arc<Gate> {
        let mut tools = self.tools.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(tools.entry(tool.to_owned()).or_insert_with(|| {
            Arc::new(Gate {
                permits: Arc::new(Semaphore::new(self.tool_share)),
                breakers: Mutex::new(Breakers::new()),
                breaker_state: metrics::gauge!("tp_edge_breaker_state", "executor" => self.info.name.clone(), "tool" => tool.to_owned()),
                succeeded: metrics::counter!("tp_edge_executor_calls_total", "executor" => self.info.name.clone(), "outcome" => "ok"),
            })
        }))
    }

    fn tenant_slots(&self, tenant: &str) -> Arc<Semaphore> {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        if tenants.len() > TENANT_SLOTS_KEPT {
            let full = self.tenant_share;
            tenants.retain(|_, slots| {
                Arc::strong_count(slots) > 1 || slots.available_permits() < full
            });
        }
        Arc::clone(
            tenants
                .entry(tenant.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.tenant_share))),
        )
    }
}

/// The three slots a call holds while it runs.
struct Slots {
    _tenant: OwnedSemaphorePermit,
    _tool: OwnedSemaphorePermit,
    _executor: OwnedSemaphorePermit,
}

// === impl Executors ===

impl Executors {
    /// No executors yet; handles are created on first use.
    pub fn new(settings: BreakerSettings) -> Executors {
        Executors {
            handles: Mutex::new(HashMap::new()),
            settings,
        }
    }

    fn handle(&self, info: &Executor, tool: &str) -> Result<Arc<Handle>, ForwardError> {
        let mut handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(handle) = handles.get(&info.name)
            && handle.info == *info
        {
            return Ok(Arc::clone(handle));
        }
        let (client, upstream) = match info.protocol {
            ExecutorProtocol::Grpc => {
                let connect_timeout = self.settings.connect_timeout;
                let dial = tp_net::dial::dial(&info.endpoint)
                    .map_err(|message| ForwardError::Unreachable {
                        tool: tool.to_owned(),
                        executor: info.name.clone(),
                        message,
                    })?
                    .map(|endpoint| {
                        endpoint
                            .connect_timeout(connect_timeout)
                            .tcp_nodelay(true)
                            .http2_keep_alive_interval(Duration::from_secs(15))
                            .keep_alive_timeout(Duration::from_secs(5))
                    });
                (
                    Some(
                        ExecutorClient::new(dial.connect_lazy())
                            .max_decoding_message_size(32 * 1024 * 1024),
                    ),
                    None,
                )
            }
            ExecutorProtocol::Mcp => (
                None,
                Some(Arc::new(tp_upstream::Upstream::new(
                    info.clone(),
                    &self.settings.credential_env_prefix,
                    self.settings.upstream_http.clone(),
                ))),
            ),
        };
        let handle = Arc::new(Handle {
            info: info.clone(),
            client,
            upstream,
            permits: Arc::new(Semaphore::new(info.max_concurrency.max(1) as usize)),
            tools: Mutex::new(HashMap::new()),
            tenants: Mutex::new(HashMap::new()),
            tool_share: share(info.max_concurrency, self.settings.tool_share_percent),
            tenant_share: share(info.max_concurrency, self.settings.tenant_share_percent),
        });
        handles.insert(info.name.clone(), Arc::clone(&handle));
        Ok(handle)
    }

    /// Waits (until `deadline`) for a slot of the tenant's share, of the tool's share and of
    /// the executor, in that order.
    async fn slots(
        handle: &Handle,
        gate: &Gate,
        tenant: &str,
        deadline: Instant,
    ) -> Result<Slots, ()> {
        let tenant_slots = handle.tenant_slots(tenant);
        let wait = async {
            let tenant = tenant_slots.acquire_owned().await.map_err(|_| ())?;
            let tool = Arc::clone(&gate.permits)
                .acquire_owned()
                .await
                .map_err(|_| ())?;
            let executor = Arc::clone(&handle.permits)
                .acquire_owned()
                .await
                .map_err(|_| ())?;
            Ok(Slots {
                _tenant: tenant,
                _tool: tool,
                _executor: executor,
            })
        };
        tokio::time::timeout_at(deadline.into(), wait)
            .await
            .map_err(|_| ())?
    }

    /// Calls the executor for `request.tool` on behalf of `request.tenant`: honours the
    /// breakers, waits for concurrency slots, applies the deadline (the executor's timeout,
    /// capped by `deadline`), relays events through `on_event`, retries once on a connect
    /// error when `idempotent`.
    pub async fn invoke(
        &self,
        info: &Executor,
        request: pb::InvokeRequest,
        deadline: Instant,
        idempotent: bool,
        on_event: &mut (dyn FnMut(CallEvent) + Send),
    ) -> Result<Reply, ForwardError> {
        let tool = request.tool.clone();
        let tenant = request.tenant.clone();
        let handle = self.handle(info, &tool)?;
        let gate = handle.gate(&tool);
        let executor_deadline = Instant::now() + Duration::from_millis(u64::from(info.timeout_ms));
        let deadline = deadline.min(executor_deadline);
        let admitted = gate
            .breakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .admit(&tenant);
        if !admitted {
            metrics::counter!("tp_edge_executor_calls_total", "executor" => info.name.clone(), "outcome" => "breaker_open").increment(1);
            return Err(ForwardError::BreakerOpen { tool });
        }
        let slots = Self::slots(&handle, &gate, &tenant, deadline)
            .await
            .map_err(|()| timed_out(&tool, info))?;
        let result = self
            .attempts(
                &handle,
                info,
                &tool,
                request,
                (deadline, idempotent),
                on_event,
            )
            .await;
        drop(slots);
        self.record(&gate, info, &tool, &tenant, &result);
        result
    }

    /// Sends the request within `deadline`; once more when the first attempt never reached
    /// the executor, or lost its connection before any event was relayed, and the tool is
    /// idempotent (only then is the request copied).
    async fn attempts(
        &self,
        handle: &Arc<Handle>,
        info: &Executor,
        tool: &str,
        request: pb::InvokeRequest,
        (deadline, idempotent): (Instant, bool),
        on_event: &mut (dyn FnMut(CallEvent) + Send),
    ) -> Result<Reply, ForwardError> {
        let mut attempt = 0;
        // Whether any event of the call reached the caller (then it is never sent again).
        let relayed = std::sync::atomic::AtomicBool::new(false);
        let mut relay = |event: CallEvent| {
            relayed.store(true, std::sync::atomic::Ordering::Relaxed);
            on_event(event);
        };
        let mut request = Some(request);
        loop {
            attempt += 1;
            let this_attempt = if idempotent && attempt == 1 {
                request.clone()
            } else {
                request.take()
            };
            let Some(this_attempt) = this_attempt else {
                return Err(timed_out(tool, info));
            };
            // Boxed: the gRPC or MCP call's future is kilobytes, and every future above it
            // (the retries, the executor's slots, the tool call's steps) would otherwise hold
            // and move a copy of it (issue 33: the largest cost of a `tools/call` was memcpy).
            let sent = Box::pin(call(
                handle,
                &self.settings.key,
                this_attempt,
                deadline,
                &mut relay,
            ));
            let outcome = tokio::time::timeout_at(deadline.into(), sent)
                .await
                .unwrap_or_else(|_| Err(timed_out(tool, info)));
            let again = attempt == 1 && idempotent && Instant::now() < deadline;
            match outcome {
                // Never reached: safe to send again when a repeat is harmless. Lost under the
                // call: only when the tool is idempotent and nothing of it was relayed yet.
                Err(ForwardError::Unreachable { .. }) if again => {}
                Err(ForwardError::ConnectionLost { .. })
                    if again && !relayed.load(std::sync::atomic::Ordering::Relaxed) => {}
                other => return other,
            }
            metrics::counter!("tp_edge_executor_retries_total", "executor" => info.name.clone())
                .increment(1);
            retry_pause(deadline).await;
        }
    }

    fn record(
        &self,
        gate: &Gate,
        info: &Executor,
        tool: &str,
        tenant: &str,
        result: &Result<Reply, ForwardError>,
    ) {
        let mut breakers = gate.breakers.lock().unwrap_or_else(|e| e.into_inner());
        let had_own = breakers.tenants.contains_key(tenant);
        let outcome = match result {
            Ok(reply) => {
                breakers.succeeded(tenant);
                match reply {
                    r if r.is_error() => "tool_error",
                    Reply::InputRequired(_) => "input_required",
                    Reply::Done(_) => "ok",
                }
            }
            Err(error) => {
                if error.counts_against_executor() && breakers.failed(tenant, &self.settings) {
                    tracing::warn!(executor = %info.name, tool, "circuit breaker open for every tenant");
                }
                error.outcome()
            }
        };
        // 0 closed, 1 half-open, 2 open: the tool's breaker for every tenant, and the caller's own.
        gate.breaker_state.set(breakers.shared.value());
        let own = breakers.tenants.get(tenant).map(|state| state.value());
        drop(breakers);
        // Only tenants whose own breaker has counted a failure get a series (and keep it, at
        // 0 once closed): a fleet of healthy tenants adds none.
        if had_own || own.is_some() {
            metrics::gauge!(
                "tp_edge_tenant_breaker_state",
                "executor" => info.name.clone(),
                "tool" => tool.to_owned(),
                "tenant" => tenant.to_owned()
            )
            .set(own.unwrap_or(0.0));
        }
        if outcome == "ok" {
            gate.succeeded.increment(1);
        } else {
            metrics::counter!("tp_edge_executor_calls_total", "executor" => info.name.clone(), "outcome" => outcome).increment(1);
        }
    }
}

/// The executor did not answer `tool` within its timeout (or the caller's deadline).
fn timed_out(tool: &str, info: &Executor) -> ForwardError {
    ForwardError::Timeout {
        tool: tool.to_owned(),
        timeout_ms: u64::from(info.timeout_ms),
    }
}

/// A short pause before a retry, within the deadline: long enough for the channel to see that
/// the connection the first attempt died on is closed (a retry sent at once can be handed the
/// same dead connection and fail the same way), short enough not to matter to the caller.
async fn retry_pause(deadline: Instant) {
    let pause = Instant::now() + Duration::from_millis(50);
    tokio::time::sleep_until(pause.min(deadline).into()).await;
}

/// What an MCP upstream's failure means to the forwarding layer.
fn upstream_error(error: tp_upstream::UpstreamError, tool: &str, name: &str) -> ForwardError {
    match error {
        tp_upstream::UpstreamError::Unreachable(message) => ForwardError::Unreachable {
            tool: tool.to_owned(),
            executor: name.to_owned(),
            message,
        },
        // The connection's token refused in the exchange: the caller's to fix (never
        // counted against the executor, never retried).
        tp_upstream::UpstreamError::CredentialRefused(message) => ForwardError::Failed {
            tool: tool.to_owned(),
            executor: name.to_owned(),
            code: Code::FailedPrecondition,
            message: format!(
                "{message}; the connection to this tool's provider must be made again"
            ),
        },
        // The upstream's JSON-RPC error for the call: its own answer to the caller.
        tp_upstream::UpstreamError::Failed(message) => ForwardError::Failed {
            tool: tool.to_owned(),
            executor: name.to_owned(),
            code: Code::InvalidArgument,
            message,
        },
    }
}

async fn call(
    handle: &Handle,
    key: &ExecutorKey,
    request: pb::InvokeRequest,
    deadline: Instant,
    on_event: &mut (dyn FnMut(CallEvent) + Send),
) -> Result<Reply, ForwardError> {
    let name = &handle.info.name;
    let tool = request.tool.clone();
    let timeout_ms = u64::from(handle.info.timeout_ms);
    if let Some(upstream) = &handle.upstream {
        let arguments = request.arguments.as_ref().and_then(|arguments| {
            match tp_proto::json::from_struct(arguments) {
                serde_json::Value::Object(map) => Some(map),
                _ => None,
            }
        });
        let tenant_token = request.credential.as_ref().map(|c| c.token.as_str());
        return upstream
            .call_as(&request.tool, arguments, tenant_token, on_event)
            .await
            .map(Reply::Done)
            .map_err(|error| upstream_error(error, &tool, name));
    }
    let Some(mut client) = handle.client.clone() else {
        return Err(ForwardError::Unsupported {
            tool,
            executor: name.clone(),
        });
    };
    let mut request = request;
    // A tenant's credential travels sealed to the executor's key, bound to this call.
    key.seal_credential(&mut request);
    let mut grpc_request = tonic::Request::new(request);
    grpc_request.set_timeout(deadline.saturating_duration_since(Instant::now()));
    key.sign_request("Invoke", &mut grpc_request);
    // The executor's spans continue the call's trace.
    tp_telemetry::trace::inject(grpc_request.metadata_mut());
    let mut stream = client
        .invoke(grpc_request)
        .await
        .map_err(|status| classify(&tool, name, timeout_ms, status))?
        .into_inner();
    while let Some(event) = stream.next().await {
        let event = event.map_err(|status| classify(&tool, name, timeout_ms, status))?;
        match event.event {
            Some(pb::invoke_event::Event::Result(result)) => return Ok(Reply::Done(result)),
            Some(pb::invoke_event::Event::InputRequired(input)) => {
                return Ok(Reply::InputRequired(input));
            }
            Some(pb::invoke_event::Event::Progress(progress)) => {
                on_event(CallEvent::Progress(progress))
            }
            Some(pb::invoke_event::Event::Log(log)) => on_event(CallEvent::Log(log)),
            None => {}
        }
    }
    Err(ForwardError::Failed {
        tool,
        executor: name.clone(),
        code: Code::Internal,
        message: "the executor ended its stream without a result".into(),
    })
}

mod breaker;
mod error;
#[cfg(test)]
mod tests;
