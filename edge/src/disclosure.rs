//! Progressive disclosure (ADR 0006): the meta-tools `capabilities`, `tool_schema`, `dispatch`
//! and `dispatch_parallel`, and what `tools/list` shows for a registry. Everything here is a
//! pure function of one (tenant, role, revision) registry, so it is built once per registry,
//! cached with it, and identical on every edge; no session state.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool as McpTool, ToolAnnotations};
use serde_json::{Value, json};

use crate::registry::EdgeTool;

/// `capabilities` lists tools per category when the registry has at most this many tools;
/// beyond it, categories with counts only unless a category is asked for.
pub const INLINE_TOOLS_LIMIT: usize = 60;
/// Most tools one `tool_schema` call may describe.
pub const MAX_SCHEMA_BATCH: usize = 20;
/// Most calls in one `dispatch_parallel`.
pub const MAX_PARALLEL_CALLS: usize = 16;
/// Calls of one `dispatch_parallel` running at once.
pub const PARALLEL_FAN_OUT: usize = 8;

/// Which meta-tool a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaTool {
    /// `capabilities`.
    Capabilities,
    /// `tool_schema`.
    ToolSchema,
    /// `dispatch`.
    Dispatch,
    /// `dispatch_parallel`.
    DispatchParallel,
}

impl MetaTool {
    /// The meta-tool called `name`, if any.
    pub fn parse(name: &str) -> Option<MetaTool> {
        match name {
            "capabilities" => Some(MetaTool::Capabilities),
            "tool_schema" => Some(MetaTool::ToolSchema),
            "dispatch" => Some(MetaTool::Dispatch),
            "dispatch_parallel" => Some(MetaTool::DispatchParallel),
            _ => None,
        }
    }
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The meta-tools' `tools/list` entries, in name order.
pub fn meta_tools() -> &'static [McpTool] {
    static TOOLS: OnceLock<Vec<McpTool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let read_only = ToolAnnotations::from_raw(None, Some(true), Some(false), Some(true), Some(false));
        vec![
            McpTool::new(
                "capabilities",
                "Start here. Lists the tools you can use, grouped by category, with one line each. \
                 For a large toolset it lists categories with counts; pass `category` to see that \
                 category's tools. Then get a tool's full input schema with `tool_schema` and run it \
                 with `dispatch` (or call it directly by name).",
                object(json!({
                    "type": "object",
                    "properties": {
                        "category": {"type": "string", "maxLength": 64, "description": "Only this category's tools."}
                    },
                    "additionalProperties": false
                })),
            )
            .with_annotations(read_only.clone()),
            McpTool::new(
                "dispatch",
                "Runs one of your tools by name with its arguments (exactly as calling it \
                 directly would). Use `tool_schema` first to learn its arguments.",
                object(json!({
                    "type": "object",
                    "properties": {
                        "tool": {"type": "string", "maxLength": 128, "description": "Tool name, from `capabilities`."},
                        "arguments": {"type": "object", "description": "Arguments matching the tool's input schema."}
                    },
                    "required": ["tool"],
                    "additionalProperties": false
                })),
            ),
            McpTool::new(
                "dispatch_parallel",
                "Runs up to 16 of your tools at once and returns every result (or error) in order. \
                 A call slower than `timeout_ms` is reported as timed out without holding the others.",
                object(json!({
                    "type": "object",
                    "properties": {
                        "calls": {
                            "type": "array", "minItems": 1, "maxItems": MAX_PARALLEL_CALLS,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "tool": {"type": "string", "maxLength": 128},
                                    "arguments": {"type": "object"}
                                },
                                "required": ["tool"],
                                "additionalProperties": false
                            }
                        },
                        "timeout_ms": {"type": "integer", "minimum": 1, "description": "Per-call deadline (at most the edge's request timeout)."}
                    },
                    "required": ["calls"],
                    "additionalProperties": false
                })),
            ),
            McpTool::new(
                "tool_schema",
                "Returns the full input schema (and output schema, annotations and examples) of \
                 one tool (`tool`) or several (`tools`, at most 20) that you can use.",
                object(json!({
                    "type": "object",
                    "properties": {
                        "tool": {"type": "string", "maxLength": 128},
                        "tools": {"type": "array", "items": {"type": "string", "maxLength": 128}, "minItems": 1, "maxItems": MAX_SCHEMA_BATCH}
                    },
                    "additionalProperties": false
                })),
            )
            .with_annotations(read_only),
        ]
    })
}

/// What `tools/list` shows for a registry: its tools (full), or the meta-tools plus the
/// tenant's pinned tools (progressive), in name order.
pub fn listing(tools: &[EdgeTool], progressive: bool, pinned: &[String]) -> Vec<McpTool> {
    if !progressive {
        return tools.iter().map(|t| t.mcp.clone()).collect();
    }
    let mut listed: Vec<McpTool> = meta_tools().to_vec();
    listed.extend(
        tools
            .iter()
            .filter(|t| pinned.iter().any(|p| p == &t.resolved.name))
            .map(|t| t.mcp.clone()),
    );
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    listed
}

/// The first sentence (or line) of a description, at most 160 characters.
pub fn one_line(description: &str) -> String {
    let line = description.lines().next().unwrap_or_default().trim();
    let sentence = match line.find(". ") {
        Some(end) => &line[..=end],
        None => line,
    };
    if sentence.chars().count() <= 160 {
        sentence.to_owned()
    } else {
        let cut: String = sentence.chars().take(157).collect();
        format!("{cut}...")
    }
}

/// The `capabilities` answer for a registry, optionally narrowed to one category. `None` when
/// the category does not exist in this registry (the caller turns that into an error).
pub fn capabilities(
    tools: &[EdgeTool],
    category: Option<&str>,
    progressive: bool,
) -> Option<Value> {
    let mut by_category: BTreeMap<&str, Vec<&EdgeTool>> = BTreeMap::new();
    for tool in tools {
        by_category
            .entry(tool.resolved.category.as_str())
            .or_default()
            .push(tool);
    }
    if let Some(category) = category
        && !by_category.contains_key(category)
    {
        return None;
    }
    let inline = category.is_some() || tools.len() <= INLINE_TOOLS_LIMIT;
    let categories: Vec<Value> = by_category
        .iter()
        .filter(|(name, _)| category.is_none_or(|c| c == **name))
        .map(|(name, members)| {
            let mut entry = json!({
                "name": name,
                "count": members.len(),
                "summary": category_summary(members),
            });
            if inline {
                entry["tools"] = members
                    .iter()
                    .map(|tool| {
                        let mut item = json!({
                            "name": tool.resolved.name,
                            "description": one_line(&tool.resolved.description),
                        });
                        if let Some(example) = tool.resolved.examples.first() {
                            item["example"] = json!(example);
                        }
                        if let Some(actions) = &tool.resolved.actions {
                            item["actions"] = json!(actions.allowed);
                        }
                        item
                    })
                    .collect();
            }
            entry
        })
        .collect();
    let mut quick_actions = vec![
        "tool_schema {\"tool\": NAME} — full input schema of a tool".to_owned(),
        "dispatch {\"tool\": NAME, \"arguments\": {...}} — run a tool".to_owned(),
        "dispatch_parallel {\"calls\": [...]} — run several tools at once".to_owned(),
    ];
    if !inline {
        quick_actions.insert(
            0,
            "capabilities {\"category\": NAME} — the tools of one category".to_owned(),
        );
    }
    Some(json!({
        "mode": if progressive { "progressive" } else { "full" },
        "total_tools": tools.len(),
        "categories": categories,
        "quick_actions": quick_actions,
    }))
}

fn category_summary(members: &[&EdgeTool]) -> String {
    let names: Vec<&str> = members
        .iter()
        .take(4)
        .map(|t| t.resolved.name.as_str())
        .collect();
    let more = members.len().saturating_sub(names.len());
    if more > 0 {
        format!("{} and {more} more", names.join(", "))
    } else {
        names.join(", ")
    }
}

/// The `tool_schema` entry of one tool.
pub fn schema_entry(tool: &EdgeTool) -> Value {
    let mut entry = json!({
        "name": tool.mcp.name,
        "description": tool.mcp.description,
        "inputSchema": tool.mcp.input_schema,
    });
    if let Some(title) = &tool.mcp.title {
        entry["title"] = json!(title);
    }
    if let Some(output) = &tool.mcp.output_schema {
        entry["outputSchema"] = json!(output);
    }
    if let Some(annotations) = &tool.mcp.annotations {
        entry["annotations"] = json!(annotations);
    }
    if !tool.resolved.examples.is_empty() {
        entry["examples"] = json!(tool.resolved.examples);
    }
    entry
}
