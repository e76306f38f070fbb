//! The demo world of the seeds (ADR-002, ADR-037, ADR-039, invariant #7): roles,
//! providers, executors, ADRs, the ceiling of 35, the 34-tool catalogue and three tenants.
//! Used by `toolplane up`, tests and benchmarks.

use serde::Deserialize;

use crate::adr::Adr;
use crate::error::DomainResult;
use crate::model::{Executor, Provider, Role, Tenant};
use crate::state::{Change, State};
use crate::tool::ToolDef;

const WORLD_JSON: &str = include_str!("../demo/world.json");

/// The ceiling record of the demo.
#[derive(Debug, Clone, Deserialize)]
pub struct DemoCeiling {
    /// The tool ceiling the demo world starts with.
    pub value: u32,
    /// ADR id (one of the demo ADRs).
    pub adr: String,
}

/// Everything the demo seeds, in the order it must be written.
#[derive(Debug, Clone, Deserialize)]
pub struct DemoWorld {
    /// The roles tenants' keys act with.
    pub roles: Vec<Role>,
    /// The providers tools belong to and tenants connect.
    pub providers: Vec<Provider>,
    /// Executors (endpoints are placeholders the launcher overrides).
    pub executors: Vec<Executor>,
    /// The architecture decision records that admit the tools.
    pub adrs: Vec<Adr>,
    /// The ceiling and the ADR that sets it.
    pub ceiling: DemoCeiling,
    /// The catalogue's tools.
    pub tools: Vec<ToolDef>,
    /// The demo tenants, with their connected APIs and disclosure.
    pub tenants: Vec<Tenant>,
}

// === impl DemoWorld ===

impl DemoWorld {
    /// Parses the bundled world.
    pub fn load() -> DemoWorld {
        match serde_json::from_str(WORLD_JSON) {
            Ok(world) => world,
            // The file is part of the crate and tested; a parse failure is a build defect.
            Err(error) => panic!("bundled demo/world.json is invalid: {error}"),
        }
    }

    /// Points the `demo` and `wiki` executors at the given endpoints.
    pub fn with_endpoints(mut self, demo: &str, wiki: &str) -> DemoWorld {
        for executor in &mut self.executors {
            match executor.name.as_str() {
                "demo" => executor.endpoint = demo.to_owned(),
                "wiki" => executor.endpoint = wiki.to_owned(),
                _ => {}
            }
        }
        self
    }

    /// The writes that seed the world into an empty state, in order. Each inner vector is
    /// produced against the state left by the previous ones, so this runs them on a copy.
    pub fn seed(&self, state: &State) -> DomainResult<Vec<Vec<Change>>> {
        let mut scratch = state.clone();
        let mut writes = Vec::new();
        let mut run = |scratch: &mut State, changes: Vec<Change>| {
            if !changes.is_empty() {
                let revision = scratch.revision + 1;
                scratch.apply(revision, &changes);
                writes.push(changes);
            }
        };
        for role in &self.roles {
            let changes = scratch.upsert_role(role.clone())?;
            run(&mut scratch, changes);
        }
        for provider in &self.providers {
            let changes = scratch.upsert_provider(provider.clone())?;
            run(&mut scratch, changes);
        }
        for executor in &self.executors {
            let changes = scratch.upsert_executor(executor.clone())?;
            run(&mut scratch, changes);
        }
        for adr in &self.adrs {
            if !scratch.adrs.contains_key(&adr.id) {
                let changes = scratch.create_adr(adr.clone())?;
                run(&mut scratch, changes);
            }
        }
        let ceiling_adr = self
            .adrs
            .iter()
            .find(|adr| adr.id == self.ceiling.adr)
            .cloned()
            .unwrap_or_else(|| panic!("demo ceiling ADR {} missing", self.ceiling.adr));
        let changes = scratch.init_policy(self.ceiling.value, ceiling_adr)?;
        run(&mut scratch, changes);
        for tool in &self.tools {
            let changes = scratch.register_tool(tool.clone(), "system")?;
            run(&mut scratch, changes);
        }
        for tenant in &self.tenants {
            let changes = scratch.create_tenant(tenant.clone())?;
            run(&mut scratch, changes);
        }
        Ok(writes)
    }

    /// A state holding the whole world (for tests and benchmarks).
    pub fn state(&self) -> DomainResult<State> {
        let mut state = State::default();
        for changes in self.seed(&State::default())? {
            let revision = state.revision + 1;
            state.apply(revision, &changes);
        }
        Ok(state)
    }
}
