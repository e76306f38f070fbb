//! The wire contract of Toolplane: code generated from `proto/toolplane/v1/*.proto`, the
//! descriptor set for gRPC reflection, conversions between protobuf messages and the domain
//! types of `tp-registry`, and the one table mapping error codes to gRPC and HTTP statuses.

pub mod clock;
pub mod codec;
pub mod convert;
pub mod digest;
pub mod fault;
pub mod invoke_auth;
pub mod json;
pub mod keys;
mod redact;
pub mod status;

/// Generated messages, clients and servers of package `toolplane.v1`.
#[allow(
    missing_docs,
    unreachable_pub,
    clippy::all,
    clippy::too_many_lines,
    missing_debug_implementations
)]
pub mod pb {
    tonic::include_proto!("toolplane.v1");
}

/// Encoded `FileDescriptorSet` of every Toolplane proto (with imports and comments), for
/// tonic-reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/toolplane_descriptor.bin"));

pub use fault::{Fault, jsonrpc};
pub use status::{code_from_status, http_status, to_status};
