//! A resolved registry as the edge serves it: tools in name order with their MCP form
//! precomputed, argument validators compiled on first use, and the executors they route to.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use prost::Message;
use rmcp::model::{JsonObject, Tool as McpTool, ToolAnnotations};
use serde_json::Value;
use tp_proto::pb;
use tp_registry::{Disclosure, Executor, ResolvedTool};

/// One tool of a registry.
pub struct EdgeTool {
    /// The resolved tool (schema already projected to the role).
    pub resolved: ResolvedTool,
    /// Its `tools/list` entry.
    pub mcp: McpTool,
    validator: OnceLock<Result<Arc<jsonschema::Validator>, String>>,
}

impl std::fmt::Debug for EdgeTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeTool")
            .field("name", &self.resolved.name)
            .finish_non_exhaustive()
    }
}

/// The registry of one (tenant, role) at one revision.
#[derive(Debug)]
pub struct Registry {
    /// Tenant.
    pub tenant: String,
    /// Role.
    pub role: String,
    /// Control-plane revision it was resolved at.
    pub revision: u64,
    /// Tools, in name order.
    pub tools: Vec<EdgeTool>,
    index: HashMap<String, usize>,
    /// Executors by name.
    pub executors: HashMap<String, Executor>,
    /// Disclosure settings of the tenant.
    pub disclosure: Disclosure,
    /// Tool calls per minute (0 = unlimited).
    pub rate_limit_per_minute: u32,
    /// Live tools in the whole catalogue.
    pub catalogue_size: u32,
    /// The tenant's lint webhook (passed to executors in the call context).
    pub lint_webhook: String,
    /// The protobuf encoding (what the shared cache stores).
    pub encoded: Vec<u8>,
    /// Whether `tools/list` shows the meta-tools (and pinned tools) instead of every tool.
    pub progressive: bool,
    /// What `tools/list` shows, in name order (built once per registry).
    pub listing: Vec<McpTool>,
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
    let mut mcp = McpTool::new(
        tool.name.clone(),
        description,
        Arc::new(to_object(&tool.input_schema)),
    );
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
        }
    }

    /// The compiled argument validator (compiled once per registry entry).
    pub fn validator(&self) -> Result<Arc<jsonschema::Validator>, String> {
        self.validator
            .get_or_init(|| {
                jsonschema::validator_for(&self.resolved.input_schema)
                    .map(Arc::new)
                    .map_err(|e| format!("the tool's input schema does not compile: {e}"))
            })
            .clone()
    }

    /// Whether retries on connect errors are safe (the idempotent annotation).
    pub fn idempotent(&self) -> bool {
        self.resolved.annotations.idempotent == Some(true)
    }
}

// === impl Registry ===

impl Registry {
    /// Builds the edge form of a resolved registry.
    pub fn from_pb(registry: pb::ResolvedRegistry) -> Registry {
        let encoded = registry.encode_to_vec();
        let tools: Vec<EdgeTool> = registry
            .tools
            .iter()
            .map(|t| EdgeTool::new(ResolvedTool::from(t)))
            .collect();
        let index = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.resolved.name.clone(), i))
            .collect();
        let executors = registry
            .executors
            .iter()
            .map(|e| (e.name.clone(), Executor::from(e)))
            .collect();
        let disclosure = registry
            .disclosure
            .as_ref()
            .map(Disclosure::from)
            .unwrap_or_default();
        let progressive = disclosure.is_progressive(tools.len());
        let listing = crate::disclosure::listing(&tools, progressive, &disclosure.pinned);
        Registry {
            tenant: registry.tenant,
            role: registry.role,
            revision: registry.revision,
            tools,
            index,
            executors,
            disclosure,
            rate_limit_per_minute: registry.rate_limit_per_minute,
            catalogue_size: registry.catalogue_size,
            lint_webhook: registry.lint_webhook,
            encoded,
            progressive,
            listing,
        }
    }

    /// Decodes the shared-cache form.
    pub fn decode(bytes: &[u8]) -> Option<Registry> {
        pb::ResolvedRegistry::decode(bytes)
            .ok()
            .map(Registry::from_pb)
    }

    /// A tool the caller may see, by name.
    pub fn tool(&self, name: &str) -> Option<&EdgeTool> {
        self.index.get(name).map(|&i| &self.tools[i])
    }
}
