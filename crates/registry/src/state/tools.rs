//! The tool lifecycle: registering within the ceiling, updating, deprecating with a sunset
//! date, retiring and reactivating.

use super::*;

impl State {
    /// Registers a new active tool, inside the ceiling, passed by the admission lint and
    /// pinned as admitted by `by`.
    pub fn register_tool(&self, def: ToolDef, by: &str) -> DomainResult<Vec<Change>> {
        let def = def.validate(self)?;
        let findings = crate::lint::admit(&def)?;
        if self.tools.contains_key(&def.name) {
            return Err(DomainError::already_exists("tool", &def.name));
        }
        // `GMAIL` or `google-ads` beside `gmail` or `google_ads` would be two tools to the
        // catalogue and one to a model (or a reader).
        let key = crate::ident::tool_name_key(&def.name);
        if let Some(existing) = self
            .tools
            .keys()
            .find(|name| crate::ident::tool_name_key(name) == key)
        {
            return Err(DomainError::invalid(
                "tool.name",
                format!(
                    "{:?} differs from the existing tool {existing:?} only in letter case or separators ('-', '.', '_')",
                    def.name
                ),
            ));
        }
        policy::check_admit(self.policy()?, self.live_tool_count(), &def.name)?;
        Ok(vec![Change::put(Object::Tool(Tool {
            pin: Some(Pin::new(&def, by)),
            def,
            status: ToolStatus::Active,
            revision: 0,
            findings,
            drift: None,
        }))])
    }

    /// Replaces the definition of a live tool (its status is kept), passed by the admission
    /// lint; a changed definition is pinned again as admitted by `by`, an unchanged one keeps
    /// its pin.
    pub fn update_tool(&self, def: ToolDef, by: &str) -> DomainResult<Vec<Change>> {
        let def = def.validate(self)?;
        let findings = crate::lint::admit(&def)?;
        let existing = self.tool(&def.name)?;
        if !existing.status.is_live() {
            return Err(DomainError::precondition(
                "TOOL_RETIRED",
                format!("tools/{}", def.name),
                format!(
                    "tool {:?} is retired; reactivate it before updating it",
                    def.name
                ),
            ));
        }
        let widened = def.widens(&existing.def);
        if !widened.is_empty() && def.admission.adr.is_none() {
            return Err(DomainError::precondition(
                "WIDENING_NEEDS_ADR",
                format!("tools/{}", def.name),
                format!(
                    "this definition of {:?} reaches further than the admitted one ({}): name the accepted ADR that allows it (admission.adr)",
                    def.name,
                    widened.join("; ")
                ),
            ));
        }
        let pin = match &existing.pin {
            Some(pin) if pin.hash == def.content_hash() => pin.clone(),
            _ => Pin::new(&def, by),
        };
        // Admitting what the upstream now says ends its quarantine.
        let drift = existing
            .drift
            .clone()
            .filter(|drift| !def.differs_from(&drift.upstream).is_empty());
        Ok(vec![Change::put(Object::Tool(Tool {
            pin: Some(pin),
            def,
            status: existing.status.clone(),
            revision: existing.revision,
            findings,
            drift,
        }))])
    }

    /// Marks a live tool deprecated with a sunset date.
    pub fn deprecate_tool(&self, name: &str, sunset: &str) -> DomainResult<Vec<Change>> {
        check_date(sunset).map_err(|e| DomainError::invalid("sunset_date", e))?;
        let existing = self.tool(name)?;
        if !existing.status.is_live() {
            return Err(DomainError::precondition(
                "TOOL_RETIRED",
                format!("tools/{name}"),
                format!("tool {name:?} is retired and cannot be deprecated"),
            ));
        }
        let mut tool = existing.clone();
        tool.status = ToolStatus::Deprecated {
            sunset: sunset.to_owned(),
        };
        Ok(vec![Change::put(Object::Tool(tool))])
    }

    /// Retires every deprecated tool whose sunset date is before `today` (`YYYY-MM-DD`, UTC): a
    /// tool is "removed after" its sunset date. One change per tool; none when nothing is due.
    pub fn retire_sunsets(&self, today: &str) -> Vec<Change> {
        self.tools
            .values()
            .filter(|tool| matches!(&tool.status, ToolStatus::Deprecated { sunset } if sunset.as_str() < today))
            .map(|tool| {
                let mut tool = tool.clone();
                tool.status = ToolStatus::Retired;
                Change::put(Object::Tool(tool))
            })
            .collect()
    }

    /// Retires a tool: it stops counting against the ceiling and disappears from registries.
    pub fn retire_tool(&self, name: &str) -> DomainResult<Vec<Change>> {
        let existing = self.tool(name)?;
        if !existing.status.is_live() {
            return Err(DomainError::precondition(
                "TOOL_RETIRED",
                format!("tools/{name}"),
                format!("tool {name:?} is already retired"),
            ));
        }
        let mut tool = existing.clone();
        tool.status = ToolStatus::Retired;
        Ok(vec![Change::put(Object::Tool(tool))])
    }

    /// Makes a deprecated or retired tool active again (a retired one goes through the ceiling).
    pub fn reactivate_tool(&self, name: &str) -> DomainResult<Vec<Change>> {
        let existing = self.tool(name)?;
        match existing.status {
            ToolStatus::Active => {
                return Err(DomainError::precondition(
                    "TOOL_ACTIVE",
                    format!("tools/{name}"),
                    format!("tool {name:?} is already active"),
                ));
            }
            ToolStatus::Retired => {
                policy::check_admit(self.policy()?, self.live_tool_count(), name)?;
                // References may have gone since it was retired.
                existing.def.clone().validate(self)?;
            }
            ToolStatus::Deprecated { .. } => {}
        }
        let mut tool = existing.clone();
        tool.status = ToolStatus::Active;
        Ok(vec![Change::put(Object::Tool(tool))])
    }
}
