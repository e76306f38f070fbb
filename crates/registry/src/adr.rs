//! Architecture decision records and their status transitions.

use serde::{Deserialize, Serialize};

use crate::error::{DomainError, DomainResult, Violations};
use crate::ident::{
    MAX_DESCRIPTION, MAX_LINK, MAX_LINKS, MAX_TITLE, check_adr_id, check_date, check_text,
};

/// Lifecycle of an ADR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdrStatus {
    /// Under discussion.
    Proposed,
    /// In force.
    Accepted,
    /// Replaced by a later ADR.
    Superseded,
    /// Declined.
    Rejected,
}

/// An ADR record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adr {
    /// Identifier such as `ADR-037`.
    pub id: String,
    /// The decision's title, as its record names it.
    pub title: String,
    /// Proposed, accepted, superseded or rejected (only an accepted ADR admits tools).
    pub status: AdrStatus,
    /// Decision date (`YYYY-MM-DD`).
    pub date: String,
    /// Links to the document, discussions, code.
    #[serde(default)]
    pub links: Vec<String>,
    /// The ADR this one supersedes, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    /// A short summary of the decision.
    #[serde(default)]
    pub summary: String,
}

// === impl AdrStatus ===

impl AdrStatus {
    /// Short name.
    pub fn as_str(self) -> &'static str {
        match self {
            AdrStatus::Proposed => "proposed",
            AdrStatus::Accepted => "accepted",
            AdrStatus::Superseded => "superseded",
            AdrStatus::Rejected => "rejected",
        }
    }

    /// Whether `self -> next` is a legal transition.
    pub fn can_become(self, next: AdrStatus) -> bool {
        matches!(
            (self, next),
            (AdrStatus::Proposed, AdrStatus::Accepted)
                | (AdrStatus::Proposed, AdrStatus::Rejected)
                | (AdrStatus::Accepted, AdrStatus::Superseded)
        )
    }
}

// === impl Adr ===

impl Adr {
    /// Validates the fields of a new or updated ADR (not the references to other ADRs).
    pub fn validate(mut self) -> DomainResult<Adr> {
        let mut v = Violations::default();
        v.check("adr.id", check_adr_id(&self.id));
        v.check("adr.title", check_text(&self.title, MAX_TITLE, true));
        v.check("adr.date", check_date(&self.date));
        v.check(
            "adr.summary",
            check_text(&self.summary, MAX_DESCRIPTION, false),
        );
        if self.links.len() > MAX_LINKS {
            v.add("adr.links", format!("at most {MAX_LINKS} links"));
        }
        for (i, link) in self.links.iter().enumerate() {
            v.check(&format!("adr.links[{i}]"), check_text(link, MAX_LINK, true));
        }
        if let Some(supersedes) = self.supersedes.as_deref() {
            v.check("adr.supersedes", check_adr_id(supersedes));
            if supersedes == self.id {
                v.add("adr.supersedes", "an ADR cannot supersede itself");
            }
        }
        if self.status == AdrStatus::Superseded {
            v.add(
                "adr.status",
                "an ADR is created proposed, accepted or rejected; it becomes superseded later",
            );
        }
        v.finish()?;
        self.title = self.title.trim().to_owned();
        Ok(self)
    }

    /// Returns the ADR with a new status, if the transition is legal.
    pub fn transition(&self, next: AdrStatus) -> DomainResult<Adr> {
        if !self.status.can_become(next) {
            return Err(DomainError::precondition(
                "ADR_TRANSITION",
                format!("adrs/{}", self.id),
                format!(
                    "ADR {} cannot go from {} to {} (allowed: proposed -> accepted | rejected, accepted -> superseded)",
                    self.id,
                    self.status.as_str(),
                    next.as_str()
                ),
            ));
        }
        let mut updated = self.clone();
        updated.status = next;
        Ok(updated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adr(status: AdrStatus) -> Adr {
        Adr {
            id: "ADR-037".into(),
            title: "One polymorphic client_wiki tool".into(),
            status,
            date: "2026-05-02".into(),
            links: vec![],
            supersedes: None,
            summary: String::new(),
        }
    }

    #[test]
    fn transitions() {
        use AdrStatus::*;
        let all = [Proposed, Accepted, Superseded, Rejected];
        let mut allowed = vec![];
        for from in all {
            for to in all {
                if from.can_become(to) {
                    allowed.push((from, to));
                }
            }
        }
        assert_eq!(
            allowed,
            vec![
                (Proposed, Accepted),
                (Proposed, Rejected),
                (Accepted, Superseded)
            ]
        );
        let err = adr(Rejected).transition(Accepted).unwrap_err();
        assert_eq!(err.code, crate::ErrorCode::FailedPrecondition);
        assert!(
            err.message.contains("rejected to accepted"),
            "{}",
            err.message
        );
    }

    #[test]
    fn validation() {
        use AdrStatus::*;
        assert!(adr(Accepted).validate().is_ok());
        let mut bad = adr(Superseded);
        bad.date = "2026-02-30".into();
        bad.supersedes = Some("ADR-037".into());
        let err = bad.validate().unwrap_err();
        let fields: Vec<_> = err.violations.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, vec!["adr.date", "adr.supersedes", "adr.status"]);
    }
}
