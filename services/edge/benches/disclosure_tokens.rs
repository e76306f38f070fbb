//! Token budgets of progressive disclosure, counted with a real tokenizer (tiktoken's
//! `o200k_base`, bundled by tiktoken-rs): the demo catalogue (34 tools, the globex tenant that
//! sees them all) and a generated catalogue of 382 tools in 49 categories.
//!
//! Run: `cargo bench -p tp-edge --bench disclosure_tokens` (or `cargo bench --workspace --bench
//! disclosure_tokens`). Prints a table and checks the targets of docs/disclosure.md; exits 1 when
//! a target is missed.
#![allow(
    clippy::too_many_lines,
    reason = "a benchmark reads as one measurement"
)]

use rmcp::model::ListToolsResult;
use serde_json::{Value, json};
use tiktoken_rs::CoreBPE;
mod common;

use tp_edge::disclosure::{self, meta_tools};
use tp_edge::registry::EdgeTool;
use tp_registry::{State, demo::DemoWorld, resolve};

struct Figures {
    largest: Vec<(usize, String)>,
    action_max: Option<(usize, String)>,
    tools: usize,
    full_list: usize,
    progressive_list: usize,
    capabilities: usize,
    category_max: usize,
    schema_max: usize,
    schema_median: usize,
}

fn tokens(bpe: &CoreBPE, text: &str) -> usize {
    bpe.encode_with_special_tokens(text).len()
}

fn measure(bpe: &CoreBPE, tools: &[EdgeTool]) -> Figures {
    let full = ListToolsResult::with_all_items(tools.iter().map(|t| t.mcp.clone()).collect());
    let full_list = tokens(bpe, &serde_json::to_string(&full).unwrap_or_default());
    let progressive = ListToolsResult::with_all_items(disclosure::listing(tools, true, &[]));
    let progressive_list = tokens(
        bpe,
        &serde_json::to_string(&progressive).unwrap_or_default(),
    );
    let answer = disclosure::capabilities(tools, None, true).unwrap_or(Value::Null);
    let capabilities = tokens(bpe, &disclosure::capabilities_text(&answer));
    let category_max = answer["categories"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .map(|name| {
            let answer = disclosure::capabilities(tools, Some(name), true).unwrap_or(Value::Null);
            tokens(bpe, &disclosure::capabilities_text(&answer))
        })
        .max()
        .unwrap_or(0);
    let mut per_action: Vec<(usize, String)> = tools
        .iter()
        .flat_map(|t| {
            t.resolved
                .actions
                .iter()
                .flat_map(|set| set.allowed.iter())
                .filter_map(|action| {
                    let entry = disclosure::action_schema_entry(t, action)?;
                    let text = disclosure::schema_text(&json!({"tools": [entry]}));
                    Some((tokens(bpe, &text), format!("{}:{action}", t.resolved.name)))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    per_action.sort();
    let mut largest: Vec<(usize, String)> = tools
        .iter()
        .map(|t| {
            let entry = json!({"tools": [disclosure::schema_entry(t)]});
            (
                tokens(bpe, &disclosure::schema_text(&entry)),
                t.resolved.name.clone(),
            )
        })
        .collect();
    largest.sort();
    largest.reverse();
    let mut schemas: Vec<usize> = tools
        .iter()
        .map(|t| {
            let entry = json!({"tools": [disclosure::schema_entry(t)]});
            tokens(bpe, &disclosure::schema_text(&entry))
        })
        .collect();
    schemas.sort_unstable();
    Figures {
        largest: largest.into_iter().take(3).collect(),
        action_max: per_action.last().cloned(),
        tools: tools.len(),
        full_list,
        progressive_list,
        capabilities,
        category_max,
        schema_max: schemas.last().copied().unwrap_or(0),
        schema_median: schemas.get(schemas.len() / 2).copied().unwrap_or(0),
    }
}

fn demo_registry(tenant: &str, role: &str) -> Vec<EdgeTool> {
    let world = DemoWorld::load();
    let mut state = State::default();
    let writes = world
        .seed(&state)
        .unwrap_or_else(|e| panic!("seeding the demo world: {e:?}"));
    for (i, changes) in writes.iter().enumerate() {
        state.apply(i as u64 + 1, changes);
    }
    let tenant = state
        .tenants
        .get(tenant)
        .cloned()
        .unwrap_or_else(|| panic!("tenant {tenant}"));
    resolve(&state.tools, &tenant, role)
        .into_iter()
        .map(EdgeTool::new)
        .collect()
}

fn main() {
    let bpe = tiktoken_rs::o200k_base().unwrap_or_else(|e| panic!("tokenizer: {e}"));
    let demo = measure(&bpe, &demo_registry("globex", "collector"));
    let generated = measure(&bpe, &common::generated(382, 49, 0));
    println!("Token budgets (tiktoken o200k_base)");
    println!(
        "{:<26} {:>6} {:>10} {:>12} {:>13} {:>13} {:>11} {:>14} {:>10}",
        "catalogue",
        "tools",
        "full list",
        "progressive",
        "capabilities",
        "max category",
        "max schema",
        "median schema",
        "reduction"
    );
    let mut failed = Vec::new();
    for (name, f, cap_target) in [
        ("demo (globex, 34)", &demo, 300),
        ("generated (382 / 49)", &generated, 1000),
    ] {
        let progressive_total = f.progressive_list + f.capabilities;
        let reduction = 1.0 - progressive_total as f64 / f.full_list as f64;
        println!(
            "{:<26} {:>6} {:>10} {:>12} {:>13} {:>13} {:>11} {:>14} {:>9.1}%",
            name,
            f.tools,
            f.full_list,
            f.progressive_list,
            f.capabilities,
            f.category_max,
            f.schema_max,
            f.schema_median,
            reduction * 100.0
        );
        if f.capabilities > cap_target {
            failed.push(format!(
                "{name}: capabilities {} > {cap_target}",
                f.capabilities
            ));
        }
        if reduction < 0.80 {
            failed.push(format!("{name}: reduction {:.1}% < 80%", reduction * 100.0));
        }
    }
    println!("demo: largest tool_schema answers: {:?}", demo.largest);
    if let Some((tokens, which)) = &demo.action_max {
        println!("demo: largest single-action tool_schema answer: {tokens} tokens ({which})");
    }
    // Polymorphic tools are described per action (tool_schema {"tool", "action"}); a whole
    // polymorphic tool may exceed the single-tool budget, every plain tool and action may not.
    let over: Vec<&(usize, String)> = demo
        .largest
        .iter()
        .filter(|(tokens, name)| {
            *tokens > 300 && !["client_wiki", "agent_state"].contains(&name.as_str())
        })
        .collect();
    if !over.is_empty() {
        failed.push(format!("demo: plain tools over 300 tokens: {over:?}"));
    }
    if demo
        .action_max
        .as_ref()
        .is_some_and(|(tokens, _)| *tokens > 150)
    {
        failed.push(format!(
            "demo: an action schema over 150 tokens: {:?}",
            demo.action_max
        ));
    }
    // Role projection: the executor's client_wiki schema only offers `query`.
    let wiki = |role: &str| {
        demo_registry("globex", role)
            .iter()
            .find(|t| t.resolved.name == "client_wiki")
            .map(|t| {
                tokens(
                    &bpe,
                    &disclosure::schema_text(&json!({"tools": [disclosure::schema_entry(t)]})),
                )
            })
            .unwrap_or(0)
    };
    let (collector, executor) = (wiki("collector"), wiki("executor"));
    println!(
        "client_wiki tool_schema: collector {collector} tokens, executor {executor} tokens ({:.0}% of the collector's)",
        executor as f64 * 100.0 / collector.max(1) as f64
    );
    // Target 400 (issue 36): a polymorphic tool's description is cut to its first sentence
    // when each action has its own description.
    println!("client_wiki whole schema: {collector} tokens (target 400)");
    if collector > 400 {
        failed.push(format!(
            "client_wiki: the whole schema is {collector} tokens > 400"
        ));
    }
    if executor >= collector {
        failed.push("client_wiki: the executor's schema is not smaller".into());
    }
    println!(
        "meta-tools listed in progressive mode: {}",
        meta_tools().len()
    );
    // A search answer as an agent reads it (docs/disclosure.md shows this session).
    let globex = demo_registry("globex", "collector");
    let index = disclosure::SearchIndex::build(&globex);
    for query in [
        "send an email to a client",
        "how many sessions did the site get last week",
        "ask the wiki what changed in the brief",
    ] {
        let answer =
            disclosure::search_answer(&globex, &index, query, 5, None, None).unwrap_or(Value::Null);
        let text = disclosure::search_text(&answer);
        let n = tokens(&bpe, &text);
        println!("search {query:?}: {n} tokens\n{text}");
        if n > 300 {
            failed.push(format!("search answer for {query:?}: {n} tokens > 300"));
        }
    }
    common::report(&failed);
}
