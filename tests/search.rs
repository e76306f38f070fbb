//! Tool search (`capabilities {"query"}`, ADR 0014) through real edges (run as the trust
//! suite's T32):
//! - a caller finds only its own tools: a hidden tool, searched by its exact name and by its
//!   description, never appears, and the counts are the caller's registry's;
//! - a visible tool searched by its name comes first; a polymorphic tool shows only the actions
//!   the role may use;
//! - the answer is the same on every edge and protocol version, and on 2026-07-28 says it may
//!   be cached privately (`cacheScope`, `ttlMs`, the registry revision);
//! - a newly registered tool is found on both edges within the propagation time;
//! - bad arguments are -32602 with the reason.

use std::time::{Duration, Instant};

use serde_json::json;
use tp_proto::json::to_struct;
use tp_proto::pb;
use tp_test_support::eventually;

use crate::fleet::{Fleet, LEGACY, ROLES, STATELESS, TENANTS};

fn names(reply: &tp_test_support::HttpReply) -> Vec<String> {
    reply.result()["structuredContent"]["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("a search answer: {}", reply.body))
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The scenario; run by the trust suite as T32 (`trust_edge::t32`).
pub(crate) async fn a_search_finds_only_the_callers_tools_alike_on_every_edge() {
    let fleet = Fleet::start(2, "").await;
    let mut admin = fleet.cp.admin().await;
    let catalogue: Vec<pb::ToolSpec> = admin
        .catalog
        .list_tools(pb::ListToolsRequest {
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .tools
        .into_iter()
        .filter_map(|t| t.spec)
        .collect();
    let mut hidden_probes = 0;
    for tenant in TENANTS {
        for role in ROLES {
            let legacy = fleet.client(0, tenant, role, LEGACY);
            let stateless = fleet.client(1, tenant, role, STATELESS);
            let registry = admin
                .tenants
                .preview_registry(pb::PreviewRegistryRequest {
                    tenant: tenant.into(),
                    role: role.into(),
                })
                .await
                .unwrap()
                .into_inner()
                .tools;
            let visible: Vec<&str> = registry.iter().map(|t| t.name.as_str()).collect();
            for spec in &catalogue {
                let first_words: String = spec
                    .description
                    .split_whitespace()
                    .take(8)
                    .collect::<Vec<_>>()
                    .join(" ");
                for query in [spec.name.clone(), first_words] {
                    let reply = legacy
                        .call("capabilities", json!({"query": query, "limit": 20}))
                        .await;
                    let found = names(&reply);
                    assert!(
                        found.iter().all(|n| visible.contains(&n.as_str())),
                        "{tenant}/{role} {query:?}: {found:?} not all visible"
                    );
                    assert_eq!(
                        reply.result()["structuredContent"]["total_tools"],
                        visible.len(),
                        "{tenant}/{role}: counts are the caller's"
                    );
                    if visible.contains(&spec.name.as_str()) {
                        if query == spec.name {
                            assert_eq!(found.first(), Some(&spec.name), "{tenant}/{role}");
                        }
                    } else {
                        hidden_probes += 1;
                        assert!(!found.contains(&spec.name), "{tenant}/{role}: leak");
                    }
                    // The other edge, on the other protocol generation, answers the same.
                    if query == spec.name {
                        let other = stateless
                            .call("capabilities", json!({"query": query, "limit": 20}))
                            .await;
                        assert_eq!(names(&other), found, "{tenant}/{role} {query:?}");
                        let meta = &other.result()["_meta"];
                        assert_eq!(meta["cacheScope"], "private", "{}", other.body);
                        assert!(meta["ttlMs"].as_u64().is_some(), "{}", other.body);
                        assert!(meta["io.toolplane/revision"].as_u64().is_some());
                        assert!(
                            reply.result().get("_meta").is_none(),
                            "no cache hint before 2026-07-28: {}",
                            reply.body
                        );
                    }
                }
            }
        }
    }
    println!(
        "tool search isolation: 8 (tenant, role) pairs, {hidden_probes} hidden-tool searches, 0 leaks"
    );

    // A polymorphic tool shows the matching actions the role may use, and no others.
    let collector = fleet.client(0, "globex", "collector", LEGACY);
    let reply = collector
        .call(
            "capabilities",
            json!({"query": "ingest a source into the wiki"}),
        )
        .await;
    let wiki = reply.result()["structuredContent"]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "client_wiki")
        .cloned()
        .unwrap_or_else(|| panic!("client_wiki found: {}", reply.body));
    assert_eq!(wiki["actions"], json!(["ingest"]), "{wiki}");
    let executor = fleet.client(0, "globex", "executor", LEGACY);
    let reply = executor
        .call(
            "capabilities",
            json!({"query": "ingest a source into the wiki"}),
        )
        .await;
    for m in reply.result()["structuredContent"]["matches"]
        .as_array()
        .unwrap()
    {
        let actions = m["actions"].as_array().cloned().unwrap_or_default();
        assert!(
            !actions.contains(&json!("ingest")),
            "the executor role cannot ingest: {m}"
        );
    }
    let text = reply.result()["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Best ") || text.starts_with("No tool"),
        "{text}"
    );

    // Bad arguments: -32602, with the reason.
    for (arguments, needle) in [
        (json!({"query": ""}), "1 to 256 characters"),
        (json!({"query": "   "}), "more than whitespace"),
        (json!({"query": "x".repeat(257)}), "1 to 256 characters"),
        (json!({"query": "mail", "limit": 0}), "1 to 20"),
        (json!({"query": "mail", "limit": 21}), "1 to 20"),
        (json!({"query": "mail", "limit": "5"}), "limit"),
        (json!({"query": 5}), "query"),
        (json!({"limit": 5}), "`limit` goes with `query`"),
        (
            json!({"query": "mail", "category": "nope"}),
            "unknown category",
        ),
    ] {
        let reply = collector.call("capabilities", arguments.clone()).await;
        assert_eq!(reply.error()["code"], -32602, "{arguments}: {}", reply.body);
        assert!(
            reply.error()["message"].as_str().unwrap().contains(needle),
            "{arguments}: {}",
            reply.body
        );
    }
    // Nothing matches: an answer, not an error.
    let reply = collector
        .call("capabilities", json!({"query": "zzqx florbvant"}))
        .await;
    assert_eq!(names(&reply), Vec::<String>::new());
    assert!(
        reply.result()["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("No tool matches"),
        "{}",
        reply.body
    );

    // A new tool is found on both edges once its change arrives.
    let registered = Instant::now();
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(pb::ToolSpec {
                name: "tide_tables".into(),
                description: "Predicts tide heights and times for a harbour.".into(),
                category: "web".into(),
                provider: "".into(),
                input_schema: to_struct(
                    &json!({"type": "object", "properties": {"harbour": {"type": "string"}}}),
                ),
                executor: "demo".into(),
                admission: Some(pb::Admission {
                    adr: "ADR-100".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    for edge in 0..2 {
        let client = fleet.client(edge, "globex", "collector", LEGACY);
        eventually("the new tool to be found", Duration::from_secs(10), || {
            let client = client.clone();
            async move {
                let reply = client
                    .call(
                        "capabilities",
                        json!({"query": "when is high tide in the harbour"}),
                    )
                    .await;
                (names(&reply).first().map(String::as_str) == Some("tide_tables")).then_some(())
            }
        })
        .await;
    }
    println!(
        "a new tool found by search on both edges {:.0} ms after its registration",
        registered.elapsed().as_secs_f64() * 1000.0
    );
}
