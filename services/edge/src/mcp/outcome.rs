//! What a tool call produced, before it becomes an MCP response: shared by the call and its
//! approval.

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use tp_proto::pb;

/// What a tool call produced, before it becomes an MCP response.
pub(super) struct Outcome {
    pub(super) result: CallToolResponse,
    pub(super) audit: pb::CallOutcome,
    /// The audit trail's short code for a call that did not succeed.
    pub(super) code: String,
}

impl Outcome {
    pub(super) fn error(
        message: String,
        audit: pb::CallOutcome,
        code: impl Into<String>,
    ) -> Outcome {
        Outcome {
            result: CallToolResult::error(vec![ContentBlock::text(message)]).into(),
            audit,
            code: code.into(),
        }
    }
}
