//! What the benchmarks share: a generated catalogue of any size.
#![allow(dead_code, reason = "each benchmark uses part of it")]

use serde_json::json;
use tp_edge::registry::EdgeTool;
use tp_registry::{Annotations, ResolvedTool};

const WORDS: [&str; 24] = [
    "accounts",
    "invoices",
    "campaigns",
    "contacts",
    "tickets",
    "reports",
    "files",
    "events",
    "orders",
    "leads",
    "metrics",
    "documents",
    "messages",
    "tasks",
    "projects",
    "assets",
    "payments",
    "shipments",
    "subscriptions",
    "audiences",
    "forecasts",
    "budgets",
    "alerts",
    "records",
];
const VERBS: [&str; 8] = [
    "search",
    "get",
    "create",
    "update",
    "list",
    "export",
    "summarise",
    "sync",
];

/// `count` tools in `categories` categories with realistic descriptions and 2–6 typed
/// parameters, numbered from `first` (so two calls give distinct names).
pub(crate) fn generated(count: usize, categories: usize, first: usize) -> Vec<EdgeTool> {
    (first..first + count)
        .map(|i| {
            let category = format!("domain_{:02}", i % categories);
            let verb = VERBS[i % VERBS.len()];
            let noun = WORDS[(i * 7) % WORDS.len()];
            let mut properties = serde_json::Map::new();
            let mut required = Vec::new();
            for p in 0..(2 + i % 5) {
                let field = format!("{}_{}", WORDS[(i + p * 3) % WORDS.len()].trim_end_matches('s'), p);
                let schema = match p % 3 {
                    0 => json!({"type": "string", "maxLength": 500, "description": format!("The {field} to {verb}.")}),
                    1 => json!({"type": "integer", "minimum": 0, "maximum": 1000, "description": "How many results to return."}),
                    _ => json!({"type": "string", "enum": ["asc", "desc"], "description": "Sort order."}),
                };
                if p == 0 {
                    required.push(field.clone());
                }
                properties.insert(field, schema);
            }
            ResolvedTool {
                name: format!("{category}_{verb}_{noun}_{i}"),
                title: format!("{verb} {noun}"),
                description: format!(
                    "{} {noun} in the connected {category} system for the tenant. Returns matching {noun} with ids, owners and timestamps; paginate with the cursor it returns.",
                    capitalise(verb)
                ),
                category,
                provider: Some(format!("provider_{:02}", i % categories)),
                input_schema: json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false}),
                output_schema: None,
                annotations: Annotations::default(),
                executor: "demo".into(),
                examples: Vec::new(),
                client_capabilities: Vec::new(),
                actions: None,
                sunset: None,
            }
        })
        .map(EdgeTool::new)
        .collect()
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

/// Prints the missed targets and exits 1, or says all were met.
pub(crate) fn report(failed: &[String]) {
    if failed.is_empty() {
        println!("all targets met");
        return;
    }
    for miss in failed {
        println!("MISSED: {miss}");
    }
    std::process::exit(1);
}
