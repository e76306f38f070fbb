//! ADRs and the ceiling they set: creating and updating ADRs, their transitions, and
//! amending the ceiling, which only an accepted ADR may do.

use super::*;

impl State {
    /// Records a new ADR.
    pub fn create_adr(&self, adr: Adr) -> DomainResult<Vec<Change>> {
        let adr = adr.validate()?;
        if self.adrs.contains_key(&adr.id) {
            return Err(DomainError::already_exists("ADR", &adr.id));
        }
        self.check_supersedes(&adr)?;
        Ok(vec![Change::put(Object::Adr(adr))])
    }

    /// Updates an ADR's title, date, links, summary and `supersedes` (not its status).
    pub fn update_adr(&self, adr: Adr) -> DomainResult<Vec<Change>> {
        let existing = self.adr(&adr.id)?;
        let mut updated = Adr {
            status: AdrStatus::Proposed,
            ..adr
        }
        .validate()?;
        updated.status = existing.status;
        self.check_supersedes(&updated)?;
        Ok(vec![Change::put(Object::Adr(updated))])
    }

    fn check_supersedes(&self, adr: &Adr) -> DomainResult<()> {
        if let Some(target) = adr.supersedes.as_deref()
            && !self.adrs.contains_key(target)
        {
            return Err(DomainError::invalid(
                "adr.supersedes",
                format!("unknown ADR {target:?}"),
            ));
        }
        Ok(())
    }

    /// Moves an ADR along its lifecycle. The ADR that holds the ceiling can only be
    /// superseded through [`State::amend_ceiling`].
    pub fn set_adr_status(&self, id: &str, status: AdrStatus) -> DomainResult<Vec<Change>> {
        let existing = self.adr(id)?;
        let updated = existing.transition(status)?;
        if status == AdrStatus::Superseded && self.policy.as_ref().is_some_and(|p| p.adr == id) {
            return Err(DomainError::precondition(
                "CEILING_ADR",
                format!("adrs/{id}"),
                format!(
                    "{id} sets the tool ceiling in force; supersede it with AmendCeiling citing the new ADR"
                ),
            ));
        }
        Ok(vec![Change::put(Object::Adr(updated))])
    }

    /// Changes the ceiling. The cited ADR must be accepted and supersede the ADR in force;
    /// the new value may not be below the number of live tools. The old ADR is marked
    /// superseded and the history keeps every value.
    pub fn amend_ceiling(&self, ceiling: u32, adr_id: &str) -> DomainResult<Vec<Change>> {
        check_ceiling_value(ceiling)?;
        let policy = self.policy()?;
        let adr = self
            .adrs
            .get(adr_id)
            .ok_or_else(|| DomainError::invalid("adr", format!("unknown ADR {adr_id:?}")))?;
        if adr.status != AdrStatus::Accepted {
            return Err(DomainError::precondition(
                "ADR_NOT_ACCEPTED",
                format!("adrs/{adr_id}"),
                format!(
                    "{adr_id} is {}; only an accepted ADR can amend the ceiling",
                    adr.status.as_str()
                ),
            ));
        }
        if adr.supersedes.as_deref() != Some(policy.adr.as_str()) {
            return Err(DomainError::precondition(
                "ADR_MUST_SUPERSEDE",
                format!("adrs/{adr_id}"),
                format!(
                    "{adr_id} must supersede {} (the ADR that set the ceiling in force); set its supersedes field",
                    policy.adr
                ),
            ));
        }
        let live = self.live_tool_count();
        if (ceiling as usize) < live {
            return Err(DomainError::precondition(
                "CEILING_BELOW_COUNT",
                "policy/ceiling",
                format!(
                    "a ceiling of {ceiling} is below the {live} live tools; retire or consolidate tools first"
                ),
            ));
        }
        let mut changes = Vec::new();
        if let Some(old) = self.adrs.get(&policy.adr)
            && old.status == AdrStatus::Accepted
        {
            changes.push(Change::put(Object::Adr(
                old.transition(AdrStatus::Superseded)?,
            )));
        }
        let mut history = policy.history.clone();
        history.push(CeilingChange {
            ceiling,
            adr: adr_id.to_owned(),
            date: adr.date.clone(),
            revision: self.revision + 1,
        });
        changes.push(Change::put(Object::Policy(Policy {
            ceiling,
            adr: adr_id.to_owned(),
            history,
        })));
        Ok(changes)
    }
}
