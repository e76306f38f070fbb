//! Lint: each rule is one function over the tenant's pages, its `index.md` and the claims of
//! its search index, returning typed [`Finding`]s.
//!
//! | Rule | Severity | What |
//! |---|---|---|
//! | `contradiction` | error | two sources give one attribute of one entity different values (beyond 0.5 %) for the same year |
//! | `stale_claim` | warning | a source's value of an attribute is superseded by a newer source's different value, more than `staleness_days` newer |
//! | `broken_link` | error | a `[[link]]` to a page that does not exist |
//! | `front_matter` | error | missing `title` / `type` / `updated`, or a type that does not match the folder |
//! | `orphan` | warning | a source that shares no entity or concept with any other and that nothing links to; a synthesis nothing links to |
//! | `undocumented_concept` | info | a phrase among the key phrases of three or more sources, with no concept page |
//! | `missing_cross_reference` | info | a page names an entity or concept that has a page without linking it |
//! | `index_drift` | warning | a page missing from `index.md`, or an index entry without a page |

pub mod rules;

use serde_json::{Value, json};

use crate::index::FoundClaim;
use crate::page::Pages;

pub use rules::RULES;

/// A lint rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// Two values of one attribute for one year.
    Contradiction,
    /// A value superseded by a newer source.
    StaleClaim,
    /// A link to nothing.
    BrokenLink,
    /// Front matter missing or wrong.
    FrontMatter,
    /// A page nothing connects to.
    Orphan,
    /// A recurring phrase with no page.
    UndocumentedConcept,
    /// A name with a page, not linked.
    MissingCrossReference,
    /// `index.md` out of step with the pages.
    IndexDrift,
}

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Wrong.
    Error,
    /// Probably wrong.
    Warning,
    /// Worth a look.
    Info,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule that found it.
    pub rule: Rule,
    /// How much it matters.
    pub severity: Severity,
    /// The page it is about (path under `wiki/`).
    pub page: String,
    /// What was found.
    pub evidence: String,
    /// What to do.
    pub suggestion: String,
}

impl Rule {
    /// The rule's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Contradiction => "contradiction",
            Rule::StaleClaim => "stale_claim",
            Rule::BrokenLink => "broken_link",
            Rule::FrontMatter => "front_matter",
            Rule::Orphan => "orphan",
            Rule::UndocumentedConcept => "undocumented_concept",
            Rule::MissingCrossReference => "missing_cross_reference",
            Rule::IndexDrift => "index_drift",
        }
    }
}

impl Severity {
    /// The severity's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

impl Finding {
    /// The finding as reported.
    pub fn to_json(&self) -> Value {
        json!({
            "rule": self.rule.name(),
            "severity": self.severity.name(),
            "page": format!("wiki/{}", self.page),
            "evidence": self.evidence,
            "suggestion": self.suggestion,
        })
    }
}

/// What the rules read.
#[derive(Debug)]
pub struct Input<'a> {
    /// Every page.
    pub pages: &'a Pages,
    /// `index.md`.
    pub index: &'a str,
    /// Every claim in the search index.
    pub claims: &'a [FoundClaim],
    /// Claims this much older than a newer value are stale.
    pub staleness_days: u32,
}

/// Runs every rule; `progress` hears each rule's end.
pub fn run(input: &Input<'_>, progress: &dyn Fn(usize, usize, &str)) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (i, (name, rule)) in RULES.iter().enumerate() {
        findings.extend(rule(input));
        progress(i + 1, RULES.len(), name);
    }
    findings.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then(a.rule.cmp(&b.rule))
            .then(a.page.cmp(&b.page))
            .then(a.evidence.cmp(&b.evidence))
    });
    findings.dedup();
    findings
}
