//! One table from [`ErrorCode`] to gRPC codes and HTTP statuses, and domain errors as rich
//! gRPC statuses (`google.rpc.BadRequest` / `PreconditionFailure` details).

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};
pub use tp_registry::ErrorCode;
use tp_registry::{DomainError, HasErrorCode};

/// The gRPC code of an error class.
pub fn grpc_code(code: ErrorCode) -> Code {
    match code {
        ErrorCode::InvalidArgument => Code::InvalidArgument,
        ErrorCode::NotFound => Code::NotFound,
        ErrorCode::AlreadyExists => Code::AlreadyExists,
        ErrorCode::FailedPrecondition => Code::FailedPrecondition,
        ErrorCode::PermissionDenied => Code::PermissionDenied,
        ErrorCode::Unauthenticated => Code::Unauthenticated,
        ErrorCode::ResourceExhausted => Code::ResourceExhausted,
        ErrorCode::Unavailable => Code::Unavailable,
        ErrorCode::Timeout => Code::DeadlineExceeded,
        ErrorCode::Internal => Code::Internal,
    }
}

/// The HTTP status of an error class.
pub fn http_status(code: ErrorCode) -> http::StatusCode {
    match code {
        ErrorCode::InvalidArgument => http::StatusCode::BAD_REQUEST,
        ErrorCode::NotFound => http::StatusCode::NOT_FOUND,
        ErrorCode::AlreadyExists => http::StatusCode::CONFLICT,
        ErrorCode::FailedPrecondition => http::StatusCode::CONFLICT,
        ErrorCode::PermissionDenied => http::StatusCode::FORBIDDEN,
        ErrorCode::Unauthenticated => http::StatusCode::UNAUTHORIZED,
        ErrorCode::ResourceExhausted => http::StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::Unavailable => http::StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Timeout => http::StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::Internal => http::StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The error class of a gRPC status (for clients of the control plane and executors).
pub fn code_from_status(status: &Status) -> ErrorCode {
    match status.code() {
        Code::InvalidArgument | Code::OutOfRange => ErrorCode::InvalidArgument,
        Code::NotFound => ErrorCode::NotFound,
        Code::AlreadyExists | Code::Aborted => ErrorCode::AlreadyExists,
        Code::FailedPrecondition => ErrorCode::FailedPrecondition,
        Code::PermissionDenied => ErrorCode::PermissionDenied,
        Code::Unauthenticated => ErrorCode::Unauthenticated,
        Code::ResourceExhausted => ErrorCode::ResourceExhausted,
        Code::Unavailable | Code::Cancelled => ErrorCode::Unavailable,
        Code::DeadlineExceeded => ErrorCode::Timeout,
        Code::Ok | Code::Unknown | Code::Unimplemented | Code::Internal | Code::DataLoss => {
            ErrorCode::Internal
        }
    }
}

/// The status of any coded error: its class's gRPC code and its message. (Domain errors use
/// [`to_status`], which adds their field and precondition details.)
pub fn status_of<E: HasErrorCode + std::fmt::Display>(error: &E) -> Status {
    Status::new(grpc_code(error.code()), error.to_string())
}

/// The status of class `code`, told as `message`: how a service refuses a request with no
/// domain error to carry (every gRPC error goes through the class table, never a code picked
/// at the call site).
pub fn error(code: ErrorCode, message: impl Into<String>) -> Status {
    Status::new(grpc_code(code), message.into())
}

/// `OUT_OF_RANGE`: a change-stream revision ahead of the log (a replica that lost its tail).
/// The one gRPC code outside the class table: a watcher must tell it from a bad argument,
/// to start again from a snapshot.
pub fn revision_ahead(message: impl Into<String>) -> Status {
    Status::new(Code::OutOfRange, message.into())
}

/// Converts any coded error to a status; domain errors carry their field violations and
/// precondition failures as standard error details.
pub fn to_status(error: &DomainError) -> Status {
    let code = grpc_code(error.code());
    let mut details = ErrorDetails::new();
    let mut has_details = false;
    for violation in &error.violations {
        details.add_bad_request_violation(violation.field.clone(), violation.description.clone());
        has_details = true;
    }
    for precondition in &error.preconditions {
        details.add_precondition_failure_violation(
            precondition.kind.clone(),
            precondition.subject.clone(),
            precondition.description.clone(),
        );
        has_details = true;
    }
    if has_details {
        Status::with_error_details(code, error.message.clone(), details)
    } else {
        Status::new(code, error.message.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_violations_travel_as_bad_request_details() {
        let error = DomainError::invalid("tool.name", "must not be empty");
        let status = to_status(&error);
        assert_eq!(status.code(), Code::InvalidArgument);
        let details = status.get_error_details();
        let bad_request = details.bad_request().unwrap();
        assert_eq!(bad_request.field_violations[0].field, "tool.name");
        assert_eq!(code_from_status(&status), ErrorCode::InvalidArgument);
    }

    #[test]
    fn preconditions_travel_as_precondition_failures() {
        let error = DomainError::precondition("TOOL_CEILING", "policy/ceiling", "ceiling reached");
        let status = to_status(&error);
        assert_eq!(status.code(), Code::FailedPrecondition);
        let details = status.get_error_details();
        assert_eq!(
            details.precondition_failure().unwrap().violations[0].r#type,
            "TOOL_CEILING"
        );
    }

    #[test]
    fn every_code_maps_both_ways() {
        for code in ErrorCode::ALL {
            let status = Status::new(grpc_code(code), "x");
            assert_eq!(code_from_status(&status), code);
            assert!(http_status(code).is_client_error() || http_status(code).is_server_error());
        }
    }

    /// `INVALID_ARGUMENT` for `Code::InvalidArgument`.
    fn grpc_name(code: Code) -> String {
        let mut name = String::new();
        for (i, c) in format!("{code:?}").chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                name.push('_');
            }
            name.push(c.to_ascii_uppercase());
        }
        name
    }

    /// The rows of the Markdown table under `heading` in docs/errors.md, as cells.
    fn table(doc: &str, heading: &str) -> Vec<Vec<String>> {
        let section = doc
            .split("\n## ")
            .find(|s| s.starts_with(heading))
            .unwrap_or_else(|| panic!("no section {heading:?}"));
        section
            .lines()
            .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
            .skip(1)
            .map(|l| {
                l.trim_matches('|')
                    .split(" | ")
                    .map(|c| c.trim().to_owned())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn docs_errors_md_is_the_table() {
        use crate::Fault;
        let doc = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/errors.md"));
        let rows = table(doc, "What MCP clients get from the edge");
        assert_eq!(rows.len(), Fault::ALL.len(), "one row per fault");
        for (row, fault) in rows.iter().zip(Fault::ALL) {
            let expected = [
                fault.name().to_owned(),
                fault
                    .jsonrpc()
                    .map_or_else(|| "—".to_owned(), |c| c.to_string()),
                format!(
                    "{} / {} / {}",
                    fault.http_status(true),
                    fault.http_status(false),
                    fault.http_status_at_2026_07_28()
                ),
                grpc_name(grpc_code(fault.class())),
            ];
            assert_eq!(row[..4], expected, "docs/errors.md row for {fault:?}");
        }
        let rows = table(doc, "Classes, across gRPC");
        assert_eq!(rows.len(), ErrorCode::ALL.len());
        for (row, code) in rows.iter().zip(ErrorCode::ALL) {
            let expected = [
                format!("{code:?}"),
                grpc_name(grpc_code(code)),
                http_status(code).as_u16().to_string(),
            ];
            assert_eq!(row[..3], expected, "docs/errors.md row for {code:?}");
        }
    }
}
