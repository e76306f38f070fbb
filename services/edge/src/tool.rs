//! One tool as the edge serves it: the resolved tool (schema projected to the caller's role),
//! its `tools/list` entry precomputed, and its argument validator compiled on first use. The
//! bottom of the registry: the registry, progressive disclosure and the call pipeline build on
//! it, and it names none of them.

use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool as McpTool, ToolAnnotations};
use serde_json::Value;
use tp_registry::ResolvedTool;

/// One tool of a registry.
pub struct EdgeTool {
    /// The resolved tool (schema already projected to the role).
    pub resolved: ResolvedTool,
    /// Its `tools/list` entry.
    pub mcp: McpTool,
    validator: OnceLock<Result<Checker, String>>,
    /// A polymorphic tool's validator per action (its `oneOf` branch), compiled on first use:
    /// a call is checked against its action's branch, so a refusal says what that action
    /// needs rather than that no branch matched.
    branches: OnceLock<std::collections::HashMap<String, Checker>>,
}

/// A compiled validator and the schema it was compiled from (which a refusal reads for the
/// names it may quote), shared by every call: a call copies neither.
pub type Checker = (Arc<jsonschema::Validator>, Arc<Value>);

impl std::fmt::Debug for EdgeTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeTool")
            .field("name", &self.resolved.name)
            .finish_non_exhaustive()
    }
}

fn to_object(value: &Value) -> JsonObject {
    match value {
        Value::Object(map) => map.clone(),
        _ => JsonObject::new(),
    }
}

/// The MCP `Tool` of a resolved tool.
pub fn mcp_tool(tool: &ResolvedTool) -> McpTool {
    let description = match &tool.sunset {
        Some(sunset) => format!("{} (Deprecated: removed after {sunset}.)", tool.description),
        None => tool.description.clone(),
    };
    // A polymorphic tool is listed as one object schema (no top-level oneOf: the Anthropic
    // and OpenAI tool APIs refuse it); calls are still validated against its action's branch.
    let listed = tp_registry::listing::listed_schema(&tool.input_schema, tool.actions.is_some());
    let mut mcp = McpTool::new(tool.name.clone(), description, Arc::new(to_object(&listed)));
    if !tool.title.is_empty() {
        mcp = mcp.with_title(tool.title.clone());
    }
    if let Some(output) = &tool.output_schema {
        mcp = mcp.with_raw_output_schema(Arc::new(to_object(output)));
    }
    let a = &tool.annotations;
    if a.read_only.is_some()
        || a.destructive.is_some()
        || a.idempotent.is_some()
        || a.open_world.is_some()
    {
        let title = (!tool.title.is_empty()).then(|| tool.title.clone());
        mcp = mcp.with_annotations(ToolAnnotations::from_raw(
            title,
            a.read_only,
            a.destructive,
            a.idempotent,
            a.open_world,
        ));
    }
    mcp
}

// === impl EdgeTool ===

impl EdgeTool {
    /// The edge form of a resolved tool.
    pub fn new(resolved: ResolvedTool) -> EdgeTool {
        let mcp = mcp_tool(&resolved);
        EdgeTool {
            resolved,
            mcp,
            validator: OnceLock::new(),
            branches: OnceLock::new(),
        }
    }

    /// The compiled argument validator, with its schema (compiled once per registry entry).
    pub fn validator(&self) -> Result<Checker, String> {
        self.validator
            .get_or_init(|| {
                // The linear-time pattern engine: no argument can make a pattern backtrack.
                tp_registry::schema::linear_options()
                    .build(&self.resolved.input_schema)
                    .map(|validator| {
                        (
                            Arc::new(validator),
                            Arc::new(self.resolved.input_schema.clone()),
                        )
                    })
                    .map_err(|e| format!("the tool's input schema does not compile: {e}"))
            })
            .clone()
    }

    /// The validator of `action`'s branch of a polymorphic tool, with the branch's schema;
    /// `None` for a plain tool or an action without a branch of its own.
    pub fn branch(&self, action: &str) -> Option<Checker> {
        let set = self.resolved.actions.as_ref()?;
        let branch_of = |name: &str| {
            self.resolved.input_schema["oneOf"]
                .as_array()?
                .iter()
                .find(|b| b["properties"][&set.discriminator]["const"] == name)
                .cloned()
        };
        let branches = self.branches.get_or_init(|| {
            set.allowed
                .iter()
                .filter_map(|name| {
                    let schema = branch_of(name)?;
                    let validator = tp_registry::schema::linear_options().build(&schema).ok()?;
                    Some((name.clone(), (Arc::new(validator), Arc::new(schema))))
                })
                .collect()
        });
        branches.get(action).cloned()
    }

    /// Whether retries on connect errors are safe (the idempotent annotation).
    pub fn idempotent(&self) -> bool {
        self.resolved.annotations.idempotent == Some(true)
    }
}
