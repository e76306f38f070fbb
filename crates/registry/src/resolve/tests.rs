use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::demo::DemoWorld;
use crate::state::State;
use crate::tool::{Action, Admission, Polymorphism, ToolDef};

fn demo() -> State {
    DemoWorld::load().state().unwrap()
}

fn names(tools: &[ResolvedTool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

const PROVIDER_LESS: [&str; 13] = [
    "agent_state",
    "ai_invoke",
    "batch",
    "call_api",
    "claude",
    "client_wiki",
    "context_explain",
    "context_query",
    "discover_apis",
    "llm_invoke",
    "search_knowledge",
    "submit_feedback",
    "web_fetch",
];

#[test]
fn a_google_and_hubspot_tenant_sees_platform_plus_those_providers() {
    let state = demo();
    let registry = resolve(&state.tools, &state.tenants["acme"], "collector");
    let mut expected: Vec<&str> = PROVIDER_LESS.to_vec();
    expected.extend([
        "gemini",
        "gmail",
        "google_ads",
        "google_analytics",
        "google_calendar",
        "google_search_console",
        "hubspot_crm",
        "hubspot_marketing",
    ]);
    expected.sort();
    assert_eq!(names(&registry), expected);
}

#[test]
fn a_tenant_without_connected_apis_sees_every_tool() {
    let state = demo();
    let registry = resolve(&state.tools, &state.tenants["globex"], "collector");
    assert_eq!(registry.len(), 34);
    let all: Vec<&str> = state.tools.keys().map(String::as_str).collect();
    assert_eq!(names(&registry), all);
}

#[test]
fn an_empty_list_means_platform_tools_only() {
    let state = demo();
    let registry = resolve(&state.tools, &state.tenants["initech"], "executor");
    assert_eq!(names(&registry), PROVIDER_LESS.to_vec());
}

#[test]
fn polymorphic_tools_are_pruned_to_the_role() {
    let state = demo();
    let tenant = &state.tenants["globex"];
    let for_executor = resolve(&state.tools, tenant, "executor");
    let wiki = for_executor
        .iter()
        .find(|t| t.name == "client_wiki")
        .unwrap();
    assert_eq!(
        wiki.actions.as_ref().unwrap().allowed,
        vec!["query", "synonyms"]
    );
    assert_eq!(
        wiki.input_schema["properties"]["action"]["enum"],
        json!(["query", "synonyms"])
    );
    assert_eq!(wiki.input_schema["oneOf"].as_array().unwrap().len(), 2);
    // The executor may read the synonym table, not change it: `set` is the collector's.
    let synonyms = wiki.input_schema["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|branch| branch["properties"]["action"]["const"] == "synonyms")
        .unwrap();
    assert!(synonyms["properties"].get("set").is_none(), "{synonyms}");
    let for_collector = resolve(&state.tools, tenant, "collector");
    let wiki = for_collector
        .iter()
        .find(|t| t.name == "client_wiki")
        .unwrap();
    assert_eq!(
        wiki.actions.as_ref().unwrap().allowed,
        vec!["ingest", "query", "lint", "synonyms"]
    );
    assert_eq!(wiki.input_schema["oneOf"].as_array().unwrap().len(), 4);
    let executor_bytes = serde_json::to_vec(
        &for_executor
            .iter()
            .find(|t| t.name == "client_wiki")
            .unwrap()
            .input_schema,
    )
    .unwrap();
    assert!(executor_bytes.len() < serde_json::to_vec(&wiki.input_schema).unwrap().len());
}

#[test]
fn role_restricted_tools_and_roles_without_actions_are_hidden() {
    let mut state = demo();
    let mut def = state.tools["gemini"].def.clone();
    def.roles = vec!["collector".into()];
    let changes = state.update_tool(def, "test").unwrap();
    state.apply(state.revision + 1, &changes);
    let tenant = &state.tenants["globex"];
    assert!(
        resolve(&state.tools, tenant, "collector")
            .iter()
            .any(|t| t.name == "gemini")
    );
    assert!(
        !resolve(&state.tools, tenant, "executor")
            .iter()
            .any(|t| t.name == "gemini")
    );
    // A role allowed no action of a polymorphic tool does not see it.
    let mut wiki = state.tools["client_wiki"].clone();
    for action in &mut wiki.def.polymorphism.as_mut().unwrap().actions {
        action.roles = vec!["collector".into()];
    }
    assert!(project(&wiki, "executor").is_none());
    assert!(project(&wiki, "collector").is_some());
}

#[test]
fn retired_tools_vanish_and_deprecated_ones_carry_their_sunset() {
    let mut state = demo();
    let changes = state.retire_tool("gmail").unwrap();
    state.apply(state.revision + 1, &changes);
    let changes = state.deprecate_tool("gemini", "2027-03-31").unwrap();
    state.apply(state.revision + 1, &changes);
    let registry = resolve(&state.tools, &state.tenants["acme"], "collector");
    assert!(!registry.iter().any(|t| t.name == "gmail"));
    let gemini = registry.iter().find(|t| t.name == "gemini").unwrap();
    assert_eq!(gemini.sunset.as_deref(), Some("2027-03-31"));
}

#[test]
fn a_role_the_tenant_does_not_allow_sees_nothing() {
    let state = demo();
    let mut tenant = state.tenants["globex"].clone();
    tenant.roles = vec!["collector".into()];
    assert!(resolve(&state.tools, &tenant, "executor").is_empty());
    assert_eq!(resolve(&state.tools, &tenant, "collector").len(), 34);
}

// --- properties ------------------------------------------------------------------------

const PROVIDERS: [&str; 4] = ["google", "hubspot", "aws", "meta"];
const ROLES: [&str; 3] = ["collector", "executor", "auditor"];

fn subset(pool: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
    proptest::sample::subsequence(pool.to_vec(), 0..=pool.len())
        .prop_map(|v| v.into_iter().map(str::to_owned).collect())
}

fn arb_tool(index: usize) -> impl Strategy<Value = Tool> {
    (
        proptest::option::of(proptest::sample::select(PROVIDERS.to_vec())),
        subset(&ROLES),
        proptest::option::of(proptest::collection::vec(subset(&ROLES), 1..4)),
        any::<bool>(),
    )
        .prop_map(move |(provider, roles, actions, retired)| {
            let polymorphism = actions.map(|action_roles| Polymorphism {
                discriminator: "action".into(),
                actions: action_roles
                    .into_iter()
                    .enumerate()
                    .map(|(i, roles)| Action {
                        name: format!("act{i}"),
                        description: String::new(),
                        schema: json!({"type": "object"}),
                        roles,
                    })
                    .collect(),
            });
            Tool {
                def: ToolDef {
                    name: format!("tool_{index:03}"),
                    title: String::new(),
                    description: "d".into(),
                    category: "c".into(),
                    provider: provider.map(str::to_owned),
                    input_schema: json!({"type": "object"}),
                    output_schema: None,
                    annotations: Default::default(),
                    executor: "demo".into(),
                    roles,
                    examples: vec![],
                    client_capabilities: vec![],
                    bucket: None,
                    admission: Admission::default(),
                    polymorphism,
                },
                status: if retired {
                    ToolStatus::Retired
                } else {
                    ToolStatus::Active
                },
                revision: 1,
                pin: None,
                findings: vec![],
                drift: None,
            }
        })
}

fn arb_catalogue() -> impl Strategy<Value = BTreeMap<String, Tool>> {
    (0usize..25).prop_flat_map(|n| {
        (0..n)
            .map(arb_tool)
            .collect::<Vec<_>>()
            .prop_map(|tools| tools.into_iter().map(|t| (t.def.name.clone(), t)).collect())
    })
}

proptest! {
    #[test]
    fn resolution_never_leaks_and_never_hides(
        catalogue in arb_catalogue(),
        connected in proptest::option::of(subset(&PROVIDERS)),
        tenant_roles in subset(&ROLES),
        role in proptest::sample::select(ROLES.to_vec()),
    ) {
        let mut tenant = Tenant::new("t");
        tenant.connected_apis = connected.clone();
        tenant.roles = tenant_roles.clone();
        let registry = resolve(&catalogue, &tenant, role);

        // Sorted, unique.
        let got: Vec<&str> = names(&registry);
        let mut sorted = got.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(&got, &sorted);

        for resolved in &registry {
            let tool = &catalogue[&resolved.name];
            prop_assert!(tool.status.is_live());
            if let (Some(provider), Some(apis)) = (&tool.def.provider, &connected) {
                prop_assert!(apis.contains(provider), "provider {} leaked", provider);
            }
            prop_assert!(tool.def.roles.is_empty() || tool.def.roles.iter().any(|r| r == role));
            prop_assert!(tenant_roles.is_empty() || tenant_roles.iter().any(|r| r == role));
            if let Some(set) = &resolved.actions {
                prop_assert!(!set.allowed.is_empty());
                let poly = tool.def.polymorphism.as_ref().unwrap();
                for name in &set.allowed {
                    let action = poly.actions.iter().find(|a| &a.name == name).unwrap();
                    prop_assert!(action.roles.is_empty() || action.roles.iter().any(|r| r == role));
                }
            }
        }
        // Completeness: every tool the rules allow is there.
        for tool in catalogue.values() {
            let provider_ok = match (&tool.def.provider, &connected) {
                (None, _) | (Some(_), None) => true,
                (Some(p), Some(apis)) => apis.contains(p),
            };
            let role_ok = (tool.def.roles.is_empty() || tool.def.roles.iter().any(|r| r == role))
                && (tenant_roles.is_empty() || tenant_roles.iter().any(|r| r == role));
            let action_ok = tool.def.polymorphism.as_ref().is_none_or(|p| {
                p.actions.iter().any(|a| a.roles.is_empty() || a.roles.iter().any(|r| r == role))
            });
            let expected = tool.status.is_live() && provider_ok && role_ok && action_ok;
            prop_assert_eq!(expected, got.contains(&tool.def.name.as_str()), "tool {}", tool.def.name);
        }
    }
}

#[test]
fn what_a_role_is_told_names_only_what_it_may_call() {
    let text = "Per-tenant compounding knowledge wiki. `ingest` adds a source (URL, text or stored file) and updates source, entity and concept pages; `query` answers with citations and can file the answer back; `lint` finds contradictions, orphans, stale claims and missing links.";
    let projected = super::project_text(text, &["ingest", "lint"]);
    assert_eq!(
        projected,
        "Per-tenant compounding knowledge wiki. `query` answers with citations and can file the answer back."
    );
    assert_eq!(super::project_text(text, &[]), text);
    let schema = serde_json::json!({"type": "object", "oneOf": [{"properties": {
        "question": {"type": "string"},
        "persist_output": {"type": "boolean", "x-roles": ["collector"]}},
        "required": ["question", "persist_output"]}]});
    let executor = super::project_properties(&schema, "executor");
    assert!(
        executor["oneOf"][0]["properties"]
            .get("persist_output")
            .is_none()
    );
    assert_eq!(
        executor["oneOf"][0]["required"],
        serde_json::json!(["question"])
    );
    let collector = super::project_properties(&schema, "collector");
    assert!(
        collector["oneOf"][0]["properties"]
            .get("persist_output")
            .is_some()
    );
}

#[test]
fn the_demo_wikis_executor_projection_names_no_write() {
    let state = crate::demo::DemoWorld::load().state().unwrap();
    let wiki = super::project(&state.tools["client_wiki"], "executor").unwrap();
    for word in ["`ingest`", "`lint`"] {
        assert!(!wiki.description.contains(word), "{}", wiki.description);
    }
    let schema = wiki.input_schema.to_string();
    for word in ["persist_output", "publish_report", "\"source\""] {
        assert!(!schema.contains(word), "{word} in {schema}");
    }
    assert!(
        wiki.examples
            .iter()
            .all(|e| !e.contains("ingest") && !e.contains("lint"))
    );
}
