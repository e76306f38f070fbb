//! The tool ceiling: the admission check and the count report.

use crate::error::{DomainError, DomainResult};
use crate::model::Policy;
use crate::tool::{Bucket, Tool};

/// Count, ceiling, headroom and buckets of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CeilingReport {
    /// The ceiling in force.
    pub ceiling: u32,
    /// The ADR that set it.
    pub adr: String,
    /// Live (active + deprecated) tools.
    pub count: u32,
    /// `ceiling - count` (0 when at the ceiling).
    pub headroom: u32,
    /// Live curated tools.
    pub curated: u32,
    /// Live platform tools.
    pub platform: u32,
    /// Live deprecated tools (counted in `count`).
    pub deprecated: u32,
    /// Retired tools (not counted).
    pub retired: u32,
}

/// Refuses to admit one more live tool when the live count has reached the ceiling. The
/// error names the ceiling, the count, the ADR in force and the ways out.
pub fn check_admit(policy: &Policy, live_count: usize, tool: &str) -> DomainResult<()> {
    if live_count < policy.ceiling as usize {
        return Ok(());
    }
    Err(DomainError::precondition(
        "TOOL_CEILING",
        "policy/ceiling",
        format!(
            "tool ceiling reached: {live_count} of {ceiling} tools registered, ceiling set by {adr}; \
             cannot admit {tool:?}. Ways out: consolidate it into an existing polymorphic tool \
             (one tool, several actions, as ADR-037 did), retire a tool, or amend the ceiling with \
             AmendCeiling citing a new accepted ADR that supersedes {adr}",
            ceiling = policy.ceiling,
            adr = policy.adr,
        ),
    ))
}

/// Builds the report over every tool of the catalogue.
pub fn report<'a>(policy: &Policy, tools: impl Iterator<Item = &'a Tool>) -> CeilingReport {
    let mut report = CeilingReport {
        ceiling: policy.ceiling,
        adr: policy.adr.clone(),
        count: 0,
        headroom: 0,
        curated: 0,
        platform: 0,
        deprecated: 0,
        retired: 0,
    };
    for tool in tools {
        if !tool.status.is_live() {
            report.retired += 1;
            continue;
        }
        report.count += 1;
        match tool.def.effective_bucket() {
            Bucket::Curated => report.curated += 1,
            Bucket::Platform => report.platform += 1,
        }
        if matches!(tool.status, crate::tool::ToolStatus::Deprecated { .. }) {
            report.deprecated += 1;
        }
    }
    report.headroom = report.ceiling.saturating_sub(report.count);
    report
}
