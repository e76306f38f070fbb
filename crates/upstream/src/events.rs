//! What executors send while a call runs, whichever protocol they speak (the gRPC `Executor`
//! contract or an MCP upstream): the lowest layer of the call path, so that forwarding and
//! each kind of executor depend on it and not on each other.

use tp_proto::pb;

/// A progress or log event relayed during a call.
#[derive(Debug, Clone)]
pub enum CallEvent {
    /// A progress notification of the call, for the caller's progress token.
    Progress(pb::Progress),
    /// Log line.
    Log(pb::Log),
}
