//! gRPC handlers: decode → domain → engine → encode. Thin on purpose.

pub mod admins;
pub mod audit;
pub mod catalog;
pub mod connections;
pub mod executors;
pub mod policy;
pub mod registry;
pub mod tenants;

use tonic::Status;
use tp_registry::DomainError;

use crate::engine::EngineError;

/// Maps engine errors to statuses; store failures are logged and reported without internals.
pub(crate) fn status(error: EngineError) -> Status {
    match error {
        EngineError::Domain(error) => tp_proto::to_status(&error),
        EngineError::Store(error) => {
            tracing::error!(%error, "store failure");
            tp_proto::status::error(
                tp_registry::ErrorCode::Unavailable,
                "the control plane's store is unavailable; retry later",
            )
        }
    }
}

/// Maps a domain error.
pub(crate) fn domain(error: DomainError) -> Status {
    tp_proto::to_status(&error)
}

/// A required, non-empty string field.
pub(crate) fn required<'a>(field: &str, value: &'a str) -> Result<&'a str, Status> {
    if value.is_empty() {
        Err(domain(DomainError::invalid(field, "is required")))
    } else {
        Ok(value)
    }
}

/// A request's `page_size`: `default` for 0, refused above `max`.
pub(crate) fn page_size(value: u32, default: u32, max: u32) -> Result<u32, DomainError> {
    match value {
        0 => Ok(default),
        n if n > max => Err(DomainError::invalid(
            "page_size",
            format!("must be at most {max} (got {n})"),
        )),
        n => Ok(n),
    }
}
