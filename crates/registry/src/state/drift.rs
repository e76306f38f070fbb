//! Drift of MCP upstreams' tools: what the control plane saw upstream, against the admitted
//! definitions (docs/adr/0012-governed-tool-definitions.md).

use std::collections::BTreeMap;

use super::*;
use crate::tool::{Drift, UpstreamDefinition};

impl State {
    /// Records what the upstream of MCP executor `executor` says of its tools (`observed`, by
    /// catalogue name): a live tool whose admitted definition differs gets a [`Drift`]
    /// (`hidden` as the policy says), one that matches again loses it. Tools the upstream no
    /// longer lists, and upstream tools the catalogue does not have, are left alone (the
    /// first fail when called; the second are invisible until admitted). Writes only what
    /// changed: the same drift seen again is no change.
    pub fn record_drift(
        &self,
        executor: &str,
        observed: &BTreeMap<String, UpstreamDefinition>,
        hidden: bool,
    ) -> Vec<Change> {
        let mut changes = Vec::new();
        for tool in self.tools.values() {
            if tool.def.executor != executor || !tool.status.is_live() {
                continue;
            }
            let Some(seen) = observed.get(&tool.def.name) else {
                continue;
            };
            let fields = tool.def.differs_from(seen);
            let drift = (!fields.is_empty()).then(|| Drift {
                hash: seen.hash(),
                fields,
                upstream: seen.clone(),
                hidden,
                revision: 0,
            });
            let same = match (&tool.drift, &drift) {
                (None, None) => true,
                (Some(old), Some(new)) => old.hash == new.hash && old.hidden == new.hidden,
                _ => false,
            };
            if !same {
                let mut updated = tool.clone();
                updated.drift = drift;
                changes.push(Change::put(Object::Tool(updated)));
            }
        }
        changes
    }

    /// The tools of `executor` (every executor when `None`) whose upstream drifted.
    pub fn drifted(&self, executor: Option<&str>) -> Vec<&Tool> {
        self.tools
            .values()
            .filter(|tool| tool.drift.is_some())
            .filter(|tool| executor.is_none_or(|name| tool.def.executor == name))
            .collect()
    }
}
