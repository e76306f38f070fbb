//! Resolution: the registry a (tenant, role) sees.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::Tenant;
use crate::tool::{Annotations, Tool, ToolStatus, compose_schema, role_allowed};

/// The actions of a polymorphic tool that one role may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionSet {
    /// The discriminator property.
    pub discriminator: String,
    /// Allowed action names, in declaration order.
    pub allowed: Vec<String>,
}

/// A tool as one (tenant, role) sees it: schema projected to the role's actions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedTool {
    /// The name callers list and call.
    pub name: String,
    /// The catalogue's title (shown by clients that display one).
    pub title: String,
    /// What the tool does, as the catalogue says it.
    pub description: String,
    /// The catalogue category it is listed under.
    pub category: String,
    /// Provider (`None` = platform).
    pub provider: Option<String>,
    /// Input schema, pruned to the role's actions for polymorphic tools.
    pub input_schema: Value,
    /// The schema of `structuredContent`, when the tool declares one.
    pub output_schema: Option<Value>,
    /// MCP hints (read-only, destructive, idempotent, open-world).
    pub annotations: Annotations,
    /// Executor name.
    pub executor: String,
    /// Example calls, as the catalogue gives them.
    pub examples: Vec<String>,
    /// MCP client capabilities the tool needs.
    #[serde(default)]
    pub client_capabilities: Vec<String>,
    /// For polymorphic tools: the allowed actions.
    pub actions: Option<ActionSet>,
    /// Sunset date when deprecated.
    pub sunset: Option<String>,
}

/// Whether a tenant's `connected_apis` lets it see a tool of `provider` (ADR-039):
/// platform tools always; otherwise every tool when the list is absent, else listed providers.
pub fn tenant_sees_provider(tenant: &Tenant, provider: Option<&str>) -> bool {
    match (provider, &tenant.connected_apis) {
        (None, _) => true,
        (Some(_), None) => true,
        (Some(provider), Some(apis)) => apis.iter().any(|api| api == provider),
    }
}

/// The sentences and `;`-clauses of `text` that name none of `hidden` (action names written
/// in backticks, as tool descriptions name them): what a role is told of a polymorphic tool.
pub fn project_text(text: &str, hidden: &[&str]) -> String {
    if hidden.is_empty() {
        return text.to_owned();
    }
    let names = |piece: &str| hidden.iter().any(|h| piece.contains(&format!("`{h}`")));
    let mut out = String::new();
    for sentence in text.split_inclusive(". ") {
        let clauses: Vec<&str> = sentence.split_inclusive("; ").collect();
        let kept: Vec<&str> = clauses.iter().copied().filter(|c| !names(c)).collect();
        if kept.is_empty() {
            continue;
        }
        let mut joined = kept.concat();
        // A sentence whose last clause went keeps its own ending.
        if kept.len() < clauses.len() {
            let trimmed = joined
                .trim_end()
                .trim_end_matches(';')
                .trim_end()
                .to_owned();
            let ending = if sentence.trim_end().ends_with('.') {
                ". "
            } else {
                " "
            };
            joined = format!("{trimmed}{ending}");
        }
        out.push_str(&joined);
    }
    out.trim().to_owned()
}

/// `schema` without the properties marked `"x-roles": [...]` that exclude `role` (at its top
/// and in each `oneOf` branch), nor their names in `required`: an argument only some roles may
/// pass is not offered to the others.
pub fn project_properties(schema: &Value, role: &str) -> Value {
    let mut schema = schema.clone();
    strip_properties(&mut schema, role);
    if let Some(Value::Array(branches)) = schema.get_mut("oneOf") {
        for branch in branches {
            strip_properties(branch, role);
        }
    }
    schema
}

fn strip_properties(schema: &mut Value, role: &str) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let mut removed = Vec::new();
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.retain(|name, property| {
            let allowed = property
                .get("x-roles")
                .and_then(Value::as_array)
                .is_none_or(|roles| roles.iter().any(|r| r == role));
            if !allowed {
                removed.push(name.clone());
            }
            allowed
        });
    }
    if let Some(Value::Array(required)) = object.get_mut("required") {
        required.retain(|name| !removed.iter().any(|r| name == r));
    }
}

/// Projects one tool for a role; `None` when the role may not see it (or no action of it).
pub fn project(tool: &Tool, role: &str) -> Option<ResolvedTool> {
    if !tool.status.is_live() || !role_allowed(&tool.def.roles, role) {
        return None;
    }
    // A quarantined upstream change the policy hides: no registry lists the tool meanwhile.
    if tool.drift.as_ref().is_some_and(|drift| drift.hidden) {
        return None;
    }
    let (input_schema, actions) = match &tool.def.polymorphism {
        None => (tool.def.input_schema.clone(), None),
        Some(poly) => {
            let allowed: Vec<_> = poly
                .actions
                .iter()
                .filter(|action| role_allowed(&action.roles, role))
                .collect();
            if allowed.is_empty() {
                return None;
            }
            let schema = if allowed.len() == poly.actions.len() {
                tool.def.input_schema.clone()
            } else {
                compose_schema(&poly.discriminator, &allowed)
            };
            let set = ActionSet {
                discriminator: poly.discriminator.clone(),
                allowed: allowed.iter().map(|a| a.name.clone()).collect(),
            };
            (schema, Some(set))
        }
    };
    let input_schema = project_properties(&input_schema, role);
    // What the role is told names only what it may call.
    let hidden: Vec<&str> = tool
        .def
        .polymorphism
        .iter()
        .flat_map(|poly| poly.actions.iter())
        .filter(|action| !role_allowed(&action.roles, role))
        .map(|action| action.name.as_str())
        .collect();
    let discriminator = tool
        .def
        .polymorphism
        .as_ref()
        .map_or("", |poly| poly.discriminator.as_str());
    let examples: Vec<String> = tool
        .def
        .examples
        .iter()
        .filter(|example| {
            let compact: String = example.chars().filter(|c| !c.is_whitespace()).collect();
            !hidden
                .iter()
                .any(|h| compact.contains(&format!("\"{discriminator}\":\"{h}\"")))
        })
        .cloned()
        .collect();
    let sunset = match &tool.status {
        ToolStatus::Deprecated { sunset } => Some(sunset.clone()),
        ToolStatus::Active | ToolStatus::Retired => None,
    };
    Some(ResolvedTool {
        name: tool.def.name.clone(),
        title: tool.def.title.clone(),
        description: project_text(&tool.def.description, &hidden),
        category: tool.def.category.clone(),
        provider: tool.def.provider.clone(),
        input_schema,
        output_schema: tool.def.output_schema.clone(),
        annotations: tool.def.annotations.clone(),
        executor: tool.def.executor.clone(),
        examples,
        client_capabilities: tool.def.client_capabilities.clone(),
        actions,
        sunset,
    })
}

/// The registry of (tenant, role): every live tool the tenant's providers and the role's
/// visibility allow, polymorphic tools pruned to the role's actions, in name order.
/// A role the tenant does not allow sees nothing.
pub fn resolve(
    catalogue: &BTreeMap<String, Tool>,
    tenant: &Tenant,
    role: &str,
) -> Vec<ResolvedTool> {
    if !tenant.allows_role(role) {
        return Vec::new();
    }
    catalogue
        .values()
        .filter(|tool| tenant_sees_provider(tenant, tool.def.provider.as_deref()))
        .filter_map(|tool| project(tool, role))
        .collect()
}

#[cfg(test)]
mod tests;
