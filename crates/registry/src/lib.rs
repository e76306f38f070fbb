//! The Toolplane domain, pure and synchronous: tools and polymorphic actions, the
//! catalogue state and its mutations, the ADR-bound tool ceiling, tenants, roles, keys,
//! executors, registry resolution per (tenant, role), and the catalogue as a document.
//!
//! No I/O, no clock, no randomness: callers pass in what they need (`now`, generated
//! ids and key hashes). Everything here is unit- and property-tested.

pub mod admin;
pub mod adr;
pub mod connection;
pub mod demo;
pub mod docs;
pub mod error;
pub mod ident;
pub mod lint;
pub mod listing;
pub mod model;
pub mod policy;
pub mod resolve;
pub mod schema;
pub mod state;
pub mod strict;
pub mod tokens;
pub mod tool;

pub use admin::{Access, AdminCaller, AdminScope, AdminToken};
pub use adr::{Adr, AdrStatus};
pub use connection::{Connection, ConnectionKind, MAX_USER, Sealed, check_user};
pub use error::{
    DomainError, DomainResult, ErrorCode, FieldViolation, HasErrorCode, PreconditionViolation,
};
pub use model::{
    ApiKey, ApprovalCondition, ApprovalRule, CeilingChange, Disclosure, DisclosureMode, Executor,
    ExecutorProtocol, Policy, Provider, Role, Tenant, TokenExchange,
};
pub use policy::CeilingReport;
pub use resolve::{ActionSet, ResolvedTool, project, resolve};
pub use state::{Change, Object, ObjectKind, State};
pub use tokens::{GroupRole, TokenIssuer, TokenRefusal};
pub use tool::{
    Action, Admission, Annotations, Bucket, META_TOOLS, Polymorphism, Tool, ToolDef, ToolStatus,
};
