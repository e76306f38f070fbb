//! Forwarding tool calls to executors over the gRPC `Executor` contract: one lazily
//! connected channel per executor, a concurrency limit, a circuit breaker, the deadline, and a
//! retry only when it is safe (idempotent tool, the executor was never reached).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::Semaphore;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};
use tp_proto::pb::{self, executor_client::ExecutorClient};
use tp_registry::{Executor, ExecutorProtocol};

/// Breaker settings.
#[derive(Debug, Clone, Copy)]
pub struct BreakerSettings {
    /// Consecutive failures that open the breaker.
    pub failures: u32,
    /// How long it stays open before one probe.
    pub cooldown: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
}

/// Why a call did not produce a result. All of these are reported to the model as
/// `isError: true` results with the message; none is a JSON-RPC error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ForwardError {
    /// The executor's breaker is open.
    #[error(
        "executor {0:?} is failing; calls are refused for a few seconds (circuit breaker open)"
    )]
    BreakerOpen(String),
    /// The deadline passed.
    #[error("executor {executor:?} did not answer within {timeout_ms} ms")]
    Timeout {
        /// Executor.
        executor: String,
        /// The timeout.
        timeout_ms: u64,
    },
    /// The executor could not be reached.
    #[error("executor {executor:?} is unreachable: {message}")]
    Unreachable {
        /// Executor.
        executor: String,
        /// Details.
        message: String,
    },
    /// The executor refused or failed the call.
    #[error("executor {executor:?} failed the call: {message}")]
    Failed {
        /// Executor.
        executor: String,
        /// gRPC code.
        code: Code,
        /// Details.
        message: String,
    },
    /// The executor speaks a protocol this edge does not.
    #[error("executor {0:?} uses a protocol this edge does not support yet")]
    Unsupported(String),
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

/// A progress or log event relayed during a call.
#[derive(Debug, Clone)]
pub enum CallEvent {
    /// Progress.
    Progress(pb::Progress),
    /// Log line.
    Log(pb::Log),
}

#[derive(Debug)]
enum BreakerState {
    Closed { failures: u32 },
    Open { until: Instant },
    HalfOpen,
}

struct Handle {
    info: Executor,
    /// The gRPC contract's client, or the MCP upstream's session holder.
    client: Option<ExecutorClient<Channel>>,
    upstream: Option<Arc<crate::upstream::Upstream>>,
    permits: Arc<Semaphore>,
    breaker: Mutex<BreakerState>,
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

/// Breaker state values for the metrics gauge.
fn state_value(state: &BreakerState) -> f64 {
    match state {
        BreakerState::Closed { .. } => 0.0,
        BreakerState::HalfOpen => 1.0,
        BreakerState::Open { .. } => 2.0,
    }
}

// === impl Handle ===

impl Handle {
    /// Admits a call or refuses it (open breaker). A half-open breaker admits one probe.
    fn admit(&self) -> bool {
        let mut state = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
        match *state {
            BreakerState::Closed { .. } => true,
            BreakerState::Open { until } if Instant::now() >= until => {
                *state = BreakerState::HalfOpen;
                tracing::info!(executor = %self.info.name, "circuit breaker half-open: probing");
                true
            }
            BreakerState::Open { .. } | BreakerState::HalfOpen => false,
        }
    }

    fn record(&self, ok: bool, settings: &BreakerSettings) {
        let mut state = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
        let next = match (&*state, ok) {
            (_, true) => BreakerState::Closed { failures: 0 },
            (BreakerState::Closed { failures }, false) if failures + 1 < settings.failures => {
                BreakerState::Closed {
                    failures: failures + 1,
                }
            }
            (
                BreakerState::Closed { .. } | BreakerState::HalfOpen | BreakerState::Open { .. },
                false,
            ) => BreakerState::Open {
                until: Instant::now() + settings.cooldown,
            },
        };
        if matches!(next, BreakerState::Open { .. }) && !matches!(*state, BreakerState::Open { .. })
        {
            tracing::warn!(executor = %self.info.name, "circuit breaker open");
        }
        if matches!(next, BreakerState::Closed { .. }) && matches!(*state, BreakerState::HalfOpen) {
            tracing::info!(executor = %self.info.name, "circuit breaker closed");
        }
        metrics::gauge!("tp_edge_breaker_state", "executor" => self.info.name.clone())
            .set(state_value(&next));
        *state = next;
    }
}

/// Whether a failure says something about the executor's health (as opposed to the call).
fn counts_against_executor(error: &ForwardError) -> bool {
    match error {
        ForwardError::Timeout { .. } | ForwardError::Unreachable { .. } => true,
        ForwardError::Failed { code, .. } => matches!(
            code,
            Code::Internal | Code::Unavailable | Code::Unknown | Code::DataLoss
        ),
        ForwardError::BreakerOpen(_) | ForwardError::Unsupported(_) => false,
    }
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

    fn handle(&self, info: &Executor) -> Result<Arc<Handle>, ForwardError> {
        let mut handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(handle) = handles.get(&info.name)
            && handle.info == *info
        {
            return Ok(Arc::clone(handle));
        }
        let (client, upstream) = match info.protocol {
            ExecutorProtocol::Grpc => {
                let endpoint = Endpoint::from_shared(info.endpoint.clone())
                    .map_err(|e| ForwardError::Unreachable {
                        executor: info.name.clone(),
                        message: e.to_string(),
                    })?
                    .connect_timeout(self.settings.connect_timeout)
                    .tcp_nodelay(true)
                    .http2_keep_alive_interval(Duration::from_secs(15))
                    .keep_alive_timeout(Duration::from_secs(5));
                (
                    Some(
                        ExecutorClient::new(endpoint.connect_lazy())
                            .max_decoding_message_size(32 * 1024 * 1024),
                    ),
                    None,
                )
            }
            ExecutorProtocol::Mcp => (
                None,
                Some(Arc::new(crate::upstream::Upstream::new(info.clone()))),
            ),
        };
        let handle = Arc::new(Handle {
            info: info.clone(),
            client,
            upstream,
            permits: Arc::new(Semaphore::new(info.max_concurrency as usize)),
            breaker: Mutex::new(BreakerState::Closed { failures: 0 }),
        });
        handles.insert(info.name.clone(), Arc::clone(&handle));
        Ok(handle)
    }

    /// Calls the executor: waits for a concurrency slot, honours the breaker and the
    /// deadline (the executor's timeout, capped by `deadline`), relays events through
    /// `on_event`, retries once on a connect error when `idempotent`.
    pub async fn invoke(
        &self,
        info: &Executor,
        request: pb::InvokeRequest,
        deadline: Instant,
        idempotent: bool,
        on_event: &mut (dyn FnMut(CallEvent) + Send),
    ) -> Result<Reply, ForwardError> {
        let handle = self.handle(info)?;
        let executor_deadline = Instant::now() + Duration::from_millis(u64::from(info.timeout_ms));
        let deadline = deadline.min(executor_deadline);
        let timeout_error = || ForwardError::Timeout {
            executor: info.name.clone(),
            timeout_ms: u64::from(info.timeout_ms),
        };
        if !handle.admit() {
            metrics::counter!("tp_edge_executor_calls_total", "executor" => info.name.clone(), "outcome" => "breaker_open").increment(1);
            return Err(ForwardError::BreakerOpen(info.name.clone()));
        }
        let permit =
            tokio::time::timeout_at(deadline.into(), Arc::clone(&handle.permits).acquire_owned())
                .await
                .map_err(|_| timeout_error())?
                .map_err(|_| ForwardError::Unreachable {
                    executor: info.name.clone(),
                    message: "shutting down".into(),
                })?;
        let mut attempt = 0;
        // Only an idempotent call may be sent twice; the others are not copied.
        let mut request = Some(request);
        let result = loop {
            attempt += 1;
            let this_attempt = if idempotent && attempt == 1 {
                request.clone()
            } else {
                request.take()
            };
            let Some(this_attempt) = this_attempt else {
                break Err(timeout_error());
            };
            let outcome = tokio::time::timeout_at(
                deadline.into(),
                call(&handle, this_attempt, deadline, on_event),
            )
            .await;
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(_) => Err(timeout_error()),
            };
            match outcome {
                Err(ForwardError::Unreachable { .. })
                    if idempotent && attempt == 1 && Instant::now() < deadline =>
                {
                    metrics::counter!("tp_edge_executor_retries_total", "executor" => info.name.clone()).increment(1);
                    continue;
                }
                other => break other,
            }
        };
        drop(permit);
        let ok = match &result {
            Ok(_) => true,
            Err(error) => !counts_against_executor(error),
        };
        handle.record(ok, &self.settings);
        let outcome = match &result {
            Ok(r) if r.is_error() => "tool_error",
            Ok(Reply::InputRequired(_)) => "input_required",
            Ok(_) => "ok",
            Err(ForwardError::Timeout { .. }) => "timeout",
            Err(ForwardError::Unreachable { .. }) => "unreachable",
            Err(_) => "failed",
        };
        metrics::counter!("tp_edge_executor_calls_total", "executor" => info.name.clone(), "outcome" => outcome).increment(1);
        result
    }
}

async fn call(
    handle: &Handle,
    request: pb::InvokeRequest,
    deadline: Instant,
    on_event: &mut (dyn FnMut(CallEvent) + Send),
) -> Result<Reply, ForwardError> {
    let name = &handle.info.name;
    let timeout_ms = u64::from(handle.info.timeout_ms);
    if let Some(upstream) = &handle.upstream {
        let arguments = request.arguments.as_ref().and_then(|arguments| {
            match tp_proto::json::from_struct(arguments) {
                serde_json::Value::Object(map) => Some(map),
                _ => None,
            }
        });
        return upstream
            .call(&request.tool, arguments, on_event)
            .await
            .map(Reply::Done)
            .map_err(|error| match error {
                crate::upstream::UpstreamError::Unreachable(message) => ForwardError::Unreachable {
                    executor: name.clone(),
                    message,
                },
                crate::upstream::UpstreamError::Failed(message) => ForwardError::Failed {
                    executor: name.clone(),
                    code: Code::Unknown,
                    message,
                },
            });
    }
    let Some(mut client) = handle.client.clone() else {
        return Err(ForwardError::Unsupported(name.clone()));
    };
    let mut grpc_request = tonic::Request::new(request);
    grpc_request.set_timeout(deadline.saturating_duration_since(Instant::now()));
    let mut stream = client
        .invoke(grpc_request)
        .await
        .map_err(|status| classify(name, timeout_ms, status))?
        .into_inner();
    while let Some(event) = stream.next().await {
        let event = event.map_err(|status| classify(name, timeout_ms, status))?;
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
        executor: name.clone(),
        code: Code::Internal,
        message: "the executor ended its stream without a result".into(),
    })
}

fn classify(executor: &str, timeout_ms: u64, status: tonic::Status) -> ForwardError {
    match status.code() {
        // Transport failures surface as Unavailable/Unknown before any response.
        Code::Unavailable => ForwardError::Unreachable {
            executor: executor.to_owned(),
            message: status.message().to_owned(),
        },
        Code::DeadlineExceeded | Code::Cancelled => ForwardError::Timeout {
            executor: executor.to_owned(),
            timeout_ms,
        },
        code => ForwardError::Failed {
            executor: executor.to_owned(),
            code,
            message: status.message().to_owned(),
        },
    }
}
