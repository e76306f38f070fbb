//! One error-code table for every protocol (gRPC status, HTTP status, JSON-RPC), and the
//! domain error that carries it.

use std::fmt;

/// The restricted set of error classes Toolplane reports. Adding one is a design decision:
/// every protocol mapping (`tp-proto::status`) must be extended with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The request is malformed: a bad name, a bad schema, an unknown reference.
    InvalidArgument,
    /// The object does not exist (or is hidden from the caller).
    NotFound,
    /// An object with that identity already exists.
    AlreadyExists,
    /// The request is well-formed but the system is not in a state that allows it
    /// (the tool ceiling, an invalid ADR transition).
    FailedPrecondition,
    /// The caller is known but may not do this.
    PermissionDenied,
    /// The caller is not known (missing, unknown, revoked or expired credential).
    Unauthenticated,
    /// A quota or rate limit was hit.
    ResourceExhausted,
    /// A dependency is down; retrying later may succeed.
    Unavailable,
    /// A deadline passed.
    Timeout,
    /// A bug or an unexpected failure.
    Internal,
}

impl ErrorCode {
    /// Every class, in the order of `docs/errors.md`.
    pub const ALL: [ErrorCode; 10] = [
        ErrorCode::InvalidArgument,
        ErrorCode::NotFound,
        ErrorCode::AlreadyExists,
        ErrorCode::FailedPrecondition,
        ErrorCode::PermissionDenied,
        ErrorCode::Unauthenticated,
        ErrorCode::ResourceExhausted,
        ErrorCode::Unavailable,
        ErrorCode::Timeout,
        ErrorCode::Internal,
    ];
}

/// Implemented by every error type that crosses a process boundary.
pub trait HasErrorCode {
    /// The class of this error, used to pick the gRPC/HTTP/JSON-RPC code.
    fn code(&self) -> ErrorCode;
}

/// One problem with one field of a request (`google.rpc.BadRequest.FieldViolation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// Dotted path of the offending field, e.g. `tool.input_schema`.
    pub field: String,
    /// What is wrong with it, in words an operator can act on.
    pub description: String,
}

/// A failed precondition, for `google.rpc.PreconditionFailure` details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreconditionViolation {
    /// Machine-readable kind, e.g. `TOOL_CEILING`.
    pub kind: String,
    /// The subject the precondition is about, e.g. `policy/ceiling`.
    pub subject: String,
    /// Human description.
    pub description: String,
}

/// The error every domain operation returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainError {
    /// The error class.
    pub code: ErrorCode,
    /// A complete sentence describing the problem.
    pub message: String,
    /// Per-field problems (for `InvalidArgument`).
    pub violations: Vec<FieldViolation>,
    /// Precondition problems (for `FailedPrecondition`).
    pub preconditions: Vec<PreconditionViolation>,
}

/// Result alias for domain operations.
pub type DomainResult<T> = Result<T, DomainError>;

// === impl DomainError ===

impl DomainError {
    /// A bare error with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            violations: Vec::new(),
            preconditions: Vec::new(),
        }
    }

    /// `InvalidArgument` for one field.
    pub fn invalid(field: impl Into<String>, description: impl Into<String>) -> Self {
        let field = field.into();
        let description = description.into();
        Self {
            code: ErrorCode::InvalidArgument,
            message: format!("invalid {field}: {description}"),
            violations: vec![FieldViolation { field, description }],
            preconditions: Vec::new(),
        }
    }

    /// `InvalidArgument` from a list of violations (must be non-empty).
    pub fn invalid_many(violations: Vec<FieldViolation>) -> Self {
        debug_assert!(!violations.is_empty());
        let message = violations
            .iter()
            .map(|v| format!("{}: {}", v.field, v.description))
            .collect::<Vec<_>>()
            .join("; ");
        Self {
            code: ErrorCode::InvalidArgument,
            message: format!("invalid request: {message}"),
            violations,
            preconditions: Vec::new(),
        }
    }

    /// `NotFound` for an object of a kind.
    pub fn not_found(kind: &str, key: &str) -> Self {
        Self::new(ErrorCode::NotFound, format!("{kind} {key:?} not found"))
    }

    /// `AlreadyExists` for an object of a kind.
    pub fn already_exists(kind: &str, key: &str) -> Self {
        Self::new(
            ErrorCode::AlreadyExists,
            format!("{kind} {key:?} already exists"),
        )
    }

    /// `FailedPrecondition` with one precondition detail.
    pub fn precondition(
        kind: impl Into<String>,
        subject: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        Self {
            code: ErrorCode::FailedPrecondition,
            message: message.clone(),
            violations: Vec::new(),
            preconditions: vec![PreconditionViolation {
                kind: kind.into(),
                subject: subject.into(),
                description: message,
            }],
        }
    }
}

impl fmt::Display for DomainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DomainError {}

impl HasErrorCode for DomainError {
    fn code(&self) -> ErrorCode {
        self.code
    }
}

/// Collects field violations, then turns them into one error.
#[derive(Debug, Default)]
pub struct Violations(Vec<FieldViolation>);

// === impl Violations ===

impl Violations {
    /// Records one violation.
    pub fn add(&mut self, field: impl Into<String>, description: impl Into<String>) {
        self.0.push(FieldViolation {
            field: field.into(),
            description: description.into(),
        });
    }

    /// Records the violation of a check result, if any.
    pub fn check(&mut self, field: &str, result: Result<(), String>) {
        if let Err(description) = result {
            self.add(field, description);
        }
    }

    /// `Ok(())` when nothing was recorded, else one `InvalidArgument` error.
    pub fn finish(self) -> DomainResult<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DomainError::invalid_many(self.0))
        }
    }
}
