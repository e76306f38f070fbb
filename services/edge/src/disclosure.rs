//! Progressive disclosure (ADR 0006): the meta-tools `capabilities`, `tool_schema`, `dispatch`
//! and `dispatch_parallel`, and what `tools/list` shows for a registry. Everything here is a
//! pure function of one (tenant, role, revision) registry, so it is built once per registry,
//! cached with it, and identical on every edge; no session state.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use rmcp::model::Tool as McpTool;
use serde_json::{Value, json};

use crate::tool::EdgeTool;

mod args;
mod compact;
mod embed;
mod search;

pub use args::{
    Bounded, CapabilitiesArgs, Count, DispatchArgs, DispatchParallelArgs, Text, ToolSchemaArgs,
    decode, input_schema,
};
pub use compact::schema_text;
pub use embed::{
    EmbedError, Embedder, EmbeddingSettings, MAX_DOCUMENT_CHARS, RawSearch, ToolVectors, document,
    fuse,
};
pub use search::{
    DEFAULT_RESULTS, FIELDS, FUSION_DEPTH, FUSION_K, Hit, MAX_QUERY_CHARS, MAX_RESULTS,
    SearchIndex, Tuning,
};

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
    /// `capabilities`: categories, a category's tools, or a search.
    Capabilities,
    /// `tool_schema`: the signatures of one or more tools.
    ToolSchema,
    /// `dispatch`: one call, as `tools/call` would make it.
    Dispatch,
    /// `dispatch_parallel`: several calls at once, each answered on its own.
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

/// The meta-tools' `tools/list` entries, in name order; their input schemas come from the
/// argument types the edge decodes calls into ([`CapabilitiesArgs`] and the others).
pub fn meta_tools() -> &'static [McpTool] {
    static TOOLS: OnceLock<Vec<McpTool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        vec![
            McpTool::new(
                "capabilities",
                "Start here: your tools by category, one line each; or `query` (words) for the best matches.",
                input_schema::<CapabilitiesArgs>(),
            ),
            McpTool::new(
                "dispatch",
                "Run one of your tools.",
                input_schema::<DispatchArgs>(),
            ),
            McpTool::new(
                "dispatch_parallel",
                "Run up to 16 tools at once; results in order.",
                input_schema::<DispatchParallelArgs>(),
            ),
            McpTool::new(
                "tool_schema",
                "Input schema of `tool` (optionally one `action`) or of `tools`.",
                input_schema::<ToolSchemaArgs>(),
            ),
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

/// Registries of at most this many tools get a one-line summary per tool in the text of
/// `capabilities`; larger ones get names (the summaries stay in `structuredContent`, and a
/// `query` answers with them).
pub const SUMMARISED_TOOLS: usize = 20;

/// Longest one-line description in `capabilities`.
pub const ONE_LINE_CHARS: usize = 32;

/// The first sentence (or line) of a description, at most [`ONE_LINE_CHARS`] characters.
pub fn one_line(description: &str) -> String {
    summary(description, ONE_LINE_CHARS)
}

/// Where a description's lead sentence is, as a byte range: the first line that is neither blank
/// nor a heading (a line ending in `:`, such as "🎯 Purpose:" in descriptions written as
/// sections), after its list marker ("1. ", "- "), up to its first ". ". A description of
/// headings only leads with its first non-blank line.
pub fn lead_sentence(description: &str) -> std::ops::Range<usize> {
    let mut lines = Vec::new();
    let mut offset = 0;
    for line in description.split_inclusive('\n') {
        let start = offset + (line.len() - line.trim_start().len());
        offset += line.len();
        let end = start.max(offset - (line.len() - line.trim_end().len()));
        if start < end {
            lines.push(start..end);
        }
    }
    let Some(line) = lines
        .iter()
        .find(|l| !description[l.start..l.end].ends_with(':'))
        .or(lines.first())
    else {
        return 0..0;
    };
    let start = line.start + list_marker(&description[line.start..line.end]);
    let end = description[start..line.end]
        .find(". ")
        .map_or(line.end, |end| start + end);
    start..end
}

/// The length of a list marker ("1. ", "2) ", "- ", "* ", "• ") at the start of `line`.
fn list_marker(line: &str) -> usize {
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    let rest = &line[digits..];
    let marker = if digits > 0 {
        [". ", ") "].iter().find(|m| rest.starts_with(**m))
    } else {
        ["- ", "* ", "• "].iter().find(|m| rest.starts_with(**m))
    };
    marker.map_or(0, |m| {
        let after = &line[digits + m.len()..];
        digits + m.len() + (after.len() - after.trim_start().len())
    })
}

/// The lead sentence of a description ([`lead_sentence`]), at most `max` characters, cut at a
/// word.
pub fn summary(description: &str, max: usize) -> String {
    let sentence = description[lead_sentence(description)].trim_end_matches('.');
    if sentence.chars().count() <= max {
        return sentence.to_owned();
    }
    // Cut at a word boundary.
    let cut: String = sentence.chars().take(max.saturating_sub(1)).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    format!("{cut}…")
}

/// The `capabilities` answer as compact text, which is what a model reads (the same data is in
/// `structuredContent` for programs).
pub fn capabilities_text(answer: &Value) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let categories = answer["categories"].as_array().map_or(0, Vec::len) as u64;
    let total = answer["total_tools"].as_u64().unwrap_or(0);
    // Up to SUMMARISED_TOOLS tools, each with its one-line summary; beyond, names only (a
    // query finds tools by what they do, with summaries).
    let summarised = total <= SUMMARISED_TOOLS as u64
        || answer["categories"]
            .as_array()
            .is_some_and(|c| c.len() == 1);
    let mut text = format!(
        "{}, {}. Find by words: capabilities {{\"query\": \"...\"}}; schema: tool_schema; run: dispatch or call by name.\n",
        plural(total, "tool", "tools"),
        plural(categories, "category", "categories")
    );
    for category in answer["categories"].as_array().into_iter().flatten() {
        let name = category["name"].as_str().unwrap_or_default();
        match category["tools"].as_array() {
            // One line per category: `name: tool (summary); tool (summary)`.
            Some(tools) => {
                let entries: Vec<String> = tools
                    .iter()
                    .map(|tool| {
                        let name = tool["name"].as_str().unwrap_or_default();
                        match tool["description"].as_str().unwrap_or_default() {
                            summary if summarised && !summary.is_empty() => {
                                format!("{name} ({summary})")
                            }
                            _ => name.to_owned(),
                        }
                    })
                    .collect();
                text.push_str(&format!(
                    "{name}: {}\n",
                    entries.join(if summarised { "; " } else { ", " })
                ));
            }
            None => text.push_str(&format!("- {name} ({})\n", category["count"])),
        }
    }
    if answer["categories"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c.get("tools").is_none()))
    {
        text.push_str("Tools of one: capabilities {\"category\": NAME}\n");
    }
    text
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
        "capabilities {\"query\": WORDS} — the tools that best match what you need".to_owned(),
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

/// Longest summary of a tool in a search answer.
pub const SEARCH_SUMMARY_CHARS: usize = 60;

/// The `capabilities` answer to a query: the best matching tools (optionally of one
/// category), each with a one-line summary, its category and, for a polymorphic tool, the
/// matching actions. `None` when the category does not exist in this registry. With
/// `semantic` (the embeddings ranker's order of the tools, and its weight), the two rankings
/// are fused.
pub fn search_answer(
    tools: &[EdgeTool],
    index: &SearchIndex,
    query: &str,
    limit: usize,
    category: Option<&str>,
    semantic: Option<(&[usize], f32)>,
) -> Option<Value> {
    if let Some(category) = category
        && !tools.iter().any(|t| t.resolved.category == category)
    {
        return None;
    }
    let keep = |i: usize| category.is_none_or(|c| tools[i].resolved.category == c);
    let hits = match semantic {
        Some((order, weight)) => index.search_fused(query, limit, keep, order, weight),
        None => index.search(query, limit, keep),
    };
    let matches: Vec<Value> = hits
        .iter()
        .map(|hit| {
            let tool = &tools[hit.tool].resolved;
            let mut item = json!({
                "name": tool.name,
                "description": summary(&tool.description, SEARCH_SUMMARY_CHARS),
                "category": tool.category,
            });
            if !hit.actions.is_empty() {
                item["actions"] = json!(hit.actions);
            }
            item
        })
        .collect();
    Some(json!({
        "query": query,
        "total_tools": tools.len(),
        "ranked_by": if semantic.is_some() { "bm25f+embeddings" } else { "bm25f" },
        "matches": matches,
    }))
}

/// A search answer as compact text for the model.
pub fn search_text(answer: &Value) -> String {
    let matches = answer["matches"].as_array().map_or(&[][..], Vec::as_slice);
    let query = answer["query"].as_str().unwrap_or_default();
    if matches.is_empty() {
        return format!(
            "No tool matches \"{query}\". Try other words, or capabilities without a query for the categories.\n"
        );
    }
    let mut text = format!(
        "Best {} of {} tools for \"{query}\" (schema: tool_schema {{\"tools\": [...]}}; run: dispatch or call by name):\n",
        matches.len(),
        answer["total_tools"]
    );
    for m in matches {
        text.push_str(&format!(
            "{} [{}] {}",
            m["name"].as_str().unwrap_or_default(),
            m["category"].as_str().unwrap_or_default(),
            m["description"].as_str().unwrap_or_default()
        ));
        if let Some(actions) = m["actions"].as_array() {
            let actions: Vec<&str> = actions.iter().filter_map(Value::as_str).collect();
            text.push_str(&format!(" (actions: {})", actions.join(", ")));
        }
        text.push('\n');
    }
    text
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

/// The `tool_schema` entry of one tool, with the schema its calls are validated against (for
/// a polymorphic tool the `oneOf` of its actions, more precise than the one object `tools/list`
/// shows: this travels to the model as text, not as a tool definition).
pub fn schema_entry(tool: &EdgeTool) -> Value {
    let mut entry = json!({
        "name": tool.mcp.name,
        "description": tool.mcp.description,
        "inputSchema": tool.resolved.input_schema,
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

/// The `tool_schema` entry of one action of a polymorphic tool: the branch of its `oneOf`
/// whose discriminator is `action`. `None` when the tool has no such action for this role.
pub fn action_schema_entry(tool: &EdgeTool, action: &str) -> Option<Value> {
    let set = tool.resolved.actions.as_ref()?;
    if !set.allowed.iter().any(|a| a == action) {
        return None;
    }
    let branch = tool.resolved.input_schema["oneOf"]
        .as_array()?
        .iter()
        .find(|branch| branch["properties"][&set.discriminator]["const"] == action)?
        .clone();
    Some(json!({
        "name": tool.mcp.name,
        "action": action,
        "description": branch.get("description").cloned().unwrap_or(Value::Null),
        "inputSchema": branch,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_of_a_thing_is_said_in_the_singular() {
        let one = capabilities_text(
            &json!({"total_tools": 1, "categories": [{"name": "knowledge", "tools": []}]}),
        );
        assert!(one.starts_with("1 tool, 1 category."), "{one}");
        let many = capabilities_text(
            &json!({"total_tools": 34, "categories": [{"name": "a"}, {"name": "b"}]}),
        );
        assert!(many.starts_with("34 tools, 2 categories."), "{many}");
    }

    #[test]
    fn a_summary_leads_with_the_first_sentence_past_headings_and_list_markers() {
        let sectioned = "\n    🎯 Purpose:\n      1. Retrieves a paginated list of objects. Then more.\n\n    📦 Returns:\n      1. Objects.";
        assert_eq!(
            summary(sectioned, 80),
            "Retrieves a paginated list of objects"
        );
        assert_eq!(summary("Navigate to a URL", 80), "Navigate to a URL");
        assert_eq!(
            summary("Read a file. Then more.\nSecond line", 80),
            "Read a file"
        );
        assert_eq!(summary("- Lists issues.\n", 80), "Lists issues");
        // Only headings: the first one stands for the description.
        assert_eq!(summary("Purpose:\n", 80), "Purpose:");
        assert_eq!(summary("  \n \n", 80), "");
        assert_eq!(summary("", 80), "");
        // A number that is not a list marker stays.
        assert_eq!(summary("2024 results at most", 80), "2024 results at most");
    }
}
