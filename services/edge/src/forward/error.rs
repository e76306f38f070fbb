//! Why a forwarded call produced no result ([`ForwardError`]): how each failure is classified
//! from the executor's gRPC status, shown to the caller, audited, and whether it counts
//! against the executor's breakers.

use tonic::Code;

/// Why a call did not produce a result. All of these are reported to the model as
/// `isError: true` results with [`ForwardError::caller_message`]; none is a JSON-RPC error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ForwardError {
    /// A breaker is open (the tool's for everyone, or the caller's own).
    #[error("circuit breaker open for {tool}")]
    BreakerOpen {
        /// The tool called.
        tool: String,
    },
    /// The deadline passed.
    #[error("{tool} did not answer within {timeout_ms} ms")]
    Timeout {
        /// The tool called.
        tool: String,
        /// The deadline it had, in milliseconds.
        timeout_ms: u64,
    },
    /// The executor could not be reached.
    #[error("executor {executor:?} unreachable for {tool}: {}", tp_telemetry::redact::urls(.message))]
    Unreachable {
        /// The tool called.
        tool: String,
        /// The executor that could not be reached.
        executor: String,
        /// Details (logged, never shown to callers).
        message: String,
    },
    /// The connection to the executor broke while the call was on it: the executor may or
    /// may not have run it.
    #[error("connection to executor {executor:?} lost during {tool}: {}", tp_telemetry::redact::urls(.message))]
    ConnectionLost {
        /// The tool called.
        tool: String,
        /// The executor whose connection broke.
        executor: String,
        /// Details (logged, never shown to callers).
        message: String,
    },
    /// The executor refused or failed the call.
    #[error("executor {executor:?} failed {tool} ({code:?}): {}", tp_telemetry::redact::urls(.message))]
    Failed {
        /// The tool called.
        tool: String,
        /// The executor that failed it.
        executor: String,
        /// gRPC code.
        code: Code,
        /// The executor's message (shown to callers only when the caller caused it).
        message: String,
    },
    /// The executor speaks a protocol this edge does not.
    #[error("executor {executor:?} uses a protocol this edge does not support")]
    Unsupported {
        /// The tool called.
        tool: String,
        /// The executor named in the catalogue.
        executor: String,
    },
}

/// Whether a gRPC code says the caller's input was refused (as opposed to the executor
/// failing): such errors are shown to the caller and never count against a breaker.
fn caused_by_caller(code: Code) -> bool {
    match code {
        Code::InvalidArgument
        | Code::NotFound
        | Code::AlreadyExists
        | Code::PermissionDenied
        | Code::FailedPrecondition
        | Code::OutOfRange
        | Code::ResourceExhausted
        | Code::Aborted => true,
        Code::Ok
        | Code::Cancelled
        | Code::Unknown
        | Code::DeadlineExceeded
        | Code::Unimplemented
        | Code::Internal
        | Code::Unavailable
        | Code::DataLoss
        | Code::Unauthenticated => false,
    }
}

impl tp_registry::HasErrorCode for ForwardError {
    fn code(&self) -> tp_registry::ErrorCode {
        use tp_registry::ErrorCode;
        match self {
            ForwardError::BreakerOpen { .. }
            | ForwardError::Unreachable { .. }
            | ForwardError::ConnectionLost { .. } => ErrorCode::Unavailable,
            ForwardError::Timeout { .. } => ErrorCode::Timeout,
            ForwardError::Failed { code, .. } => {
                tp_proto::status::code_from_status(&tonic::Status::new(*code, ""))
            }
            ForwardError::Unsupported { .. } => ErrorCode::FailedPrecondition,
        }
    }
}

impl ForwardError {
    /// The audit trail's short code for the failure: `breaker_open`, `timeout`,
    /// `unreachable`, `unsupported`, or `executor_<grpc code>` (`executor_invalid_argument`).
    pub fn audit_code(&self) -> String {
        match self {
            ForwardError::BreakerOpen { .. } => "breaker_open".into(),
            ForwardError::Timeout { .. } => "timeout".into(),
            ForwardError::Unreachable { .. } => "unreachable".into(),
            ForwardError::ConnectionLost { .. } => "connection_lost".into(),
            ForwardError::Unsupported { .. } => "unsupported".into(),
            ForwardError::Failed { code, .. } => {
                let mut name = String::from("executor");
                for c in format!("{code:?}").chars() {
                    if c.is_ascii_uppercase() {
                        name.push('_');
                    }
                    name.push(c.to_ascii_lowercase());
                }
                name
            }
        }
    }

    /// Whether the failure says something about the executor's health (as opposed to the
    /// call's input).
    pub fn counts_against_executor(&self) -> bool {
        match self {
            ForwardError::Timeout { .. }
            | ForwardError::Unreachable { .. }
            | ForwardError::ConnectionLost { .. } => true,
            ForwardError::Failed { code, .. } => !caused_by_caller(*code),
            ForwardError::BreakerOpen { .. } | ForwardError::Unsupported { .. } => false,
        }
    }

    /// What the caller is told: the tool and what to do, never an executor's address,
    /// transport or internal error; `reference` (the call's request id) ties it to the log.
    pub fn caller_message(&self, reference: &str) -> String {
        match self {
            ForwardError::BreakerOpen { tool } => format!(
                "{tool} is failing; calls are refused for a few seconds (circuit breaker open)"
            ),
            ForwardError::Timeout { tool, timeout_ms } => {
                format!("{tool} did not answer within {timeout_ms} ms")
            }
            ForwardError::Unreachable { tool, .. } => {
                format!("{tool} is unavailable right now; retry shortly (reference {reference})")
            }
            ForwardError::ConnectionLost { tool, .. } => format!(
                "{tool} lost its executor's connection during the call; it may or may not have run, so check before you retry (reference {reference})"
            ),
            ForwardError::Failed {
                tool,
                code,
                message,
                ..
            } if caused_by_caller(*code) => format!(
                "{tool} refused the call: {}",
                tp_telemetry::redact::urls(message)
            ),
            ForwardError::Failed { tool, .. } | ForwardError::Unsupported { tool, .. } => {
                format!("{tool} failed with an internal error (reference {reference})")
            }
        }
    }

    pub(super) fn outcome(&self) -> &'static str {
        match self {
            ForwardError::Timeout { .. } => "timeout",
            ForwardError::Unreachable { .. } => "unreachable",
            ForwardError::ConnectionLost { .. } => "connection_lost",
            ForwardError::BreakerOpen { .. } => "breaker_open",
            ForwardError::Failed { code, .. } if caused_by_caller(*code) => "refused",
            ForwardError::Failed { .. } | ForwardError::Unsupported { .. } => "failed",
        }
    }
}

pub(super) fn classify(
    tool: &str,
    executor: &str,
    timeout_ms: u64,
    status: tonic::Status,
) -> ForwardError {
    match status.code() {
        // Transport failures surface as Unavailable/Unknown before any response.
        Code::Unavailable => ForwardError::Unreachable {
            tool: tool.to_owned(),
            executor: executor.to_owned(),
            message: status.message().to_owned(),
        },
        // hyper cancels a request whose connection closed before it could be sent ("operation
        // was canceled"): the executor never saw it. tonic's own deadline is Cancelled too,
        // as "Timeout expired".
        Code::Cancelled if !status.message().contains("Timeout expired") => {
            ForwardError::Unreachable {
                tool: tool.to_owned(),
                executor: executor.to_owned(),
                message: status.message().to_owned(),
            }
        }
        // The connection failed under the call (tonic says Unknown "transport error"): whether
        // the executor saw the call cannot be known.
        Code::Unknown if transport_failed(&status) => ForwardError::ConnectionLost {
            tool: tool.to_owned(),
            executor: executor.to_owned(),
            message: source_chain(&status),
        },
        Code::DeadlineExceeded | Code::Cancelled => ForwardError::Timeout {
            tool: tool.to_owned(),
            timeout_ms,
        },
        code => ForwardError::Failed {
            tool: tool.to_owned(),
            executor: executor.to_owned(),
            code,
            message: status.message().to_owned(),
        },
    }
}

/// Whether the status was made from the channel's own transport error (not sent by the
/// executor).
fn transport_failed(status: &tonic::Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<tonic::transport::Error>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// The status's message and the errors under it, for the log.
fn source_chain(status: &tonic::Status) -> String {
    let mut text = status.message().to_owned();
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        text.push_str(": ");
        text.push_str(&error.to_string());
        source = error.source();
    }
    text
}
