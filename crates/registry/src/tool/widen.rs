//! How a new definition of a tool reaches further than the admitted one: more actions, more
//! arguments, weaker hints, more callers. Such an update needs an accepted ADR, the discipline
//! of the ceiling (ADR 0012), whatever admitted the tool before.

use std::collections::BTreeSet;

use serde_json::Value;

use super::ToolDef;

fn action_names(def: &ToolDef) -> BTreeSet<&str> {
    def.polymorphism
        .iter()
        .flat_map(|p| p.actions.iter().map(|a| a.name.as_str()))
        .collect()
}

fn properties(schema: &Value) -> impl Iterator<Item = &str> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|properties| properties.keys().map(String::as_str))
}

/// Every argument a call may give: the top-level ones, and each action's (`action.arg`).
fn argument_names(def: &ToolDef) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = properties(&def.input_schema).map(str::to_owned).collect();
    for action in def.polymorphism.iter().flat_map(|p| &p.actions) {
        names.extend(properties(&action.schema).map(|name| format!("{}.{name}", action.name)));
    }
    names
}

/// Whether `new` lets more roles in than `old` (an empty list is every role).
fn more_roles(old: &[String], new: &[String]) -> bool {
    !old.is_empty() && (new.is_empty() || new.iter().any(|r| !old.contains(r)))
}

impl ToolDef {
    /// How `self`, a new definition of the tool, widens `old`; empty when it does not.
    pub fn widens(&self, old: &ToolDef) -> Vec<String> {
        let mut how = Vec::new();
        let old_actions = action_names(old);
        for added in action_names(self).difference(&old_actions) {
            how.push(format!("new action {added:?}"));
        }
        for added in argument_names(self).difference(&argument_names(old)) {
            how.push(format!("new argument {added:?}"));
        }
        let closed = |def: &ToolDef| {
            def.input_schema.get("additionalProperties") == Some(&Value::Bool(false))
        };
        if closed(old) && !closed(self) {
            how.push("arguments no longer closed (additionalProperties)".to_owned());
        }
        let (was, now) = (&old.annotations, &self.annotations);
        if was.read_only == Some(true) && now.read_only != Some(true) {
            how.push("no longer read-only".to_owned());
        }
        if was.destructive != Some(true) && now.destructive == Some(true) {
            how.push("now destructive".to_owned());
        }
        if was.open_world != Some(true) && now.open_world == Some(true) {
            how.push("now open-world".to_owned());
        }
        match (&old.provider, &self.provider) {
            (Some(_), None) => how.push("now a platform tool (every tenant sees it)".to_owned()),
            (Some(a), Some(b)) if a != b => how.push(format!("provider {a:?} changed to {b:?}")),
            _ => {}
        }
        if more_roles(&old.roles, &self.roles) {
            how.push("more roles may see it".to_owned());
        }
        let old_by_name = |name: &str| {
            old.polymorphism
                .iter()
                .flat_map(|p| p.actions.iter())
                .find(|a| a.name == name)
        };
        for action in self.polymorphism.iter().flat_map(|p| p.actions.iter()) {
            if let Some(before) = old_by_name(&action.name)
                && more_roles(&before.roles, &action.roles)
            {
                how.push(format!("more roles may use action {:?}", action.name));
            }
        }
        how
    }
}
