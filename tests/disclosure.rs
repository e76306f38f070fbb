//! Progressive disclosure end to end (ADR 0006): the meta-tools for every tenant and role,
//! through real edges, and `auto` flipping to progressive on every edge when a registry grows.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::{HttpReply, McpHttp, eventually};

use crate::fleet::{Fleet, LEGACY, ROLES, STATELESS, TENANTS};

async fn meta(client: &McpHttp, tool: &str, arguments: Value) -> HttpReply {
    client.call(tool, arguments).await
}

fn unknown(name: &str) -> Value {
    json!({"code": -32602, "message": format!("unknown tool: {name}")})
}

#[tokio::test]
async fn capabilities_and_tool_schema_show_exactly_the_callers_registry() {
    let fleet = Fleet::start(2, "").await;
    let catalogue = fleet.catalogue().await;
    let mut admin = fleet.cp.admin().await;
    let mut probes = 0;
    for (i, tenant) in TENANTS.iter().enumerate() {
        for role in ROLES {
            let client = fleet.client(
                i % 2,
                tenant,
                role,
                if i % 2 == 0 { LEGACY } else { STATELESS },
            );
            let registry = admin
                .tenants
                .preview_registry(pb::PreviewRegistryRequest {
                    tenant: (*tenant).into(),
                    role: role.into(),
                })
                .await
                .unwrap()
                .into_inner()
                .tools;
            let mut expected: Vec<String> = registry.iter().map(|t| t.name.clone()).collect();
            expected.sort();

            // capabilities: every visible tool once, nothing else.
            let reply = meta(&client, "capabilities", json!({})).await;
            let answer = &reply.result()["structuredContent"];
            let mut listed: Vec<String> = answer["categories"]
                .as_array()
                .unwrap_or_else(|| panic!("{tenant}/{role}: {}", reply.body))
                .iter()
                .flat_map(|c| c["tools"].as_array().unwrap().iter())
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect();
            listed.sort();
            assert_eq!(listed, expected, "{tenant}/{role}: capabilities");
            assert_eq!(answer["total_tools"], expected.len());

            // tool_schema: the role-projected schema the control plane resolved, in batches.
            for batch in registry.chunks(20) {
                let names: Vec<&str> = batch.iter().map(|t| t.name.as_str()).collect();
                let reply = meta(&client, "tool_schema", json!({"tools": names})).await;
                let schemas = reply.result()["structuredContent"]["tools"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{tenant}/{role}: {}", reply.body))
                    .clone();
                for (tool, schema) in batch.iter().zip(&schemas) {
                    assert_eq!(schema["name"], tool.name.as_str());
                    let resolved = tool
                        .input_schema
                        .as_ref()
                        .map(tp_proto::json::from_struct)
                        .unwrap();
                    assert_eq!(
                        schema["inputSchema"], resolved,
                        "{tenant}/{role}/{}",
                        tool.name
                    );
                }
            }

            // Hidden and unknown tools: the same error as tools/call, from both meta-tools.
            for name in catalogue
                .iter()
                .map(String::as_str)
                .filter(|n| !expected.iter().any(|e| e == n))
                .chain(["no_such_tool"])
            {
                probes += 2;
                let schema = meta(&client, "tool_schema", json!({"tool": name})).await;
                assert_eq!(
                    schema.error(),
                    &unknown(name),
                    "{tenant}/{role} tool_schema {name}"
                );
                let dispatched =
                    meta(&client, "dispatch", json!({"tool": name, "arguments": {}})).await;
                assert_eq!(
                    dispatched.error(),
                    &unknown(name),
                    "{tenant}/{role} dispatch {name}"
                );
            }
        }
    }
    println!("disclosure isolation: 8 (tenant, role) pairs, {probes} hidden-tool probes, 0 leaks");

    // Bad input to the meta-tools: clear -32602 errors.
    let client = fleet.client(0, "acme", "collector", LEGACY);
    for (tool, arguments, needle) in [
        (
            "capabilities",
            json!({"category": "nope"}),
            "unknown category",
        ),
        ("capabilities", json!({"extra": 1}), "unknown argument"),
        ("tool_schema", json!({}), "either `tool`"),
        (
            "tool_schema",
            json!({"tool": "gmail", "tools": ["gmail"]}),
            "either `tool`",
        ),
        (
            "tool_schema",
            json!({"tools": vec!["gmail"; 21]}),
            "1 to 20",
        ),
        ("dispatch", json!({"arguments": {}}), "`tool`"),
        (
            "dispatch",
            json!({"tool": "gmail", "arguments": []}),
            "`arguments`: invalid type: array, expected an object",
        ),
        (
            "dispatch",
            json!({"tool": "dispatch"}),
            "unknown tool: dispatch",
        ),
        ("dispatch_parallel", json!({"calls": []}), "1 to 16"),
        (
            "dispatch_parallel",
            json!({"calls": [{"tool": "gmail", "extra": 1}]}),
            "`calls[0]`: unknown argument `extra`",
        ),
        (
            "tool_schema",
            json!({"action": "query"}),
            "`action` goes with `tool`",
        ),
        (
            "dispatch_parallel",
            json!({"calls": vec![json!({"tool": "gmail"}); 17]}),
            "1 to 16",
        ),
        (
            "dispatch_parallel",
            json!({"calls": [{"tool": "gmail"}], "timeout_ms": 0}),
            "timeout_ms",
        ),
    ] {
        let reply = meta(&client, tool, arguments.clone()).await;
        assert_eq!(
            reply.error()["code"],
            -32602,
            "{tool} {arguments}: {}",
            reply.body
        );
        assert!(
            reply.error()["message"].as_str().unwrap().contains(needle),
            "{tool} {arguments}: {}",
            reply.body
        );
    }
}

#[tokio::test]
async fn dispatch_runs_exactly_like_tools_call() {
    let fleet = Fleet::start(1, "").await;
    let executor = fleet.client(0, "acme", "executor", LEGACY);
    // A forbidden action of a polymorphic tool: refused identically.
    let ingest =
        json!({"action": "ingest", "source": {"type": "text", "text": "x", "source_label": "y"}});
    let direct = executor.call("client_wiki", ingest.clone()).await;
    let dispatched = executor
        .call(
            "dispatch",
            json!({"tool": "client_wiki", "arguments": ingest}),
        )
        .await;
    assert_eq!(direct.error()["code"], -32602, "{}", direct.body);
    assert_eq!(dispatched.error(), direct.error());
    // Invalid arguments: the same validation error.
    let direct = executor.call("gmail", json!({"query": 7})).await;
    let dispatched = executor
        .call(
            "dispatch",
            json!({"tool": "gmail", "arguments": {"query": 7}}),
        )
        .await;
    assert!(
        direct.error()["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid arguments")
    );
    assert_eq!(dispatched.error(), direct.error());
    // A valid call: the same result.
    let direct = executor.call("gmail", json!({"query": "from:cfo"})).await;
    let dispatched = executor
        .call(
            "dispatch",
            json!({"tool": "gmail", "arguments": {"query": "from:cfo"}}),
        )
        .await;
    assert_eq!(direct.result()["isError"], false, "{}", direct.body);
    assert_eq!(dispatched.result(), direct.result());
    // Progress of a dispatched call reaches the client.
    let qa = fleet.client(0, "qa", "collector", LEGACY);
    let reply = qa
        .request(
            5,
            "tools/call",
            json!({"name": "dispatch", "arguments": {"tool": "test_tool_with_progress"}, "_meta": {"progressToken": "d1"}}),
        )
        .await;
    let progress = reply
        .notifications()
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .count();
    assert_eq!(progress, 3, "{}", reply.body);
}

#[tokio::test]
async fn dispatch_parallel_returns_every_result_and_cuts_slow_calls() {
    let fleet = Fleet::start(1, "").await;
    let client = fleet.client(0, "qa", "collector", STATELESS);
    let started = Instant::now();
    let reply = client
        .call(
            "dispatch_parallel",
            json!({"timeout_ms": 1000, "calls": [
                {"tool": "echo", "arguments": {"text": "one"}},
                {"tool": "fail", "arguments": {}},
                {"tool": "sleep", "arguments": {"ms": 5000}},
                {"tool": "gmail", "arguments": {"query": "x"}},
                {"tool": "echo", "arguments": {"text": 42}},
                {"tool": "echo", "arguments": {"text": "six"}},
            ]}),
        )
        .await;
    let took = started.elapsed();
    let results = reply.result()["structuredContent"]["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", reply.body))
        .clone();
    assert_eq!(results.len(), 6);
    assert_eq!(results[0]["isError"], false);
    assert_eq!(results[0]["content"][0]["text"], "[qa/collector] one");
    assert_eq!(
        results[1]["isError"], true,
        "executor failure stays a result"
    );
    // A call past `timeout_ms` is a tool error, like an executor that does not answer in
    // time, not a protocol error.
    assert_eq!(results[2]["isError"], true, "{}", results[2]);
    assert_eq!(
        results[2]["content"][0]["text"], "sleep did not answer within 1000 ms (timeout_ms)",
        "{}",
        results[2]
    );
    assert!(results[2].get("error").is_none(), "{}", results[2]);
    assert_eq!(
        results[3]["error"],
        json!({"code": -32602, "message": "unknown tool: gmail", "data": null})
    );
    assert_eq!(results[4]["error"]["code"], -32602);
    assert_eq!(results[5]["content"][0]["text"], "[qa/collector] six");
    assert!(
        took < Duration::from_secs(4),
        "the slow call held the batch for {took:?}"
    );
    println!("dispatch_parallel with a 5 s call and a 1 s timeout answered in {took:?}");
}

#[tokio::test]
async fn auto_disclosure_flips_to_progressive_on_every_edge_when_the_registry_grows() {
    let fleet = Fleet::start(2, "").await;
    fleet
        .set_disclosure(
            "acme",
            pb::Disclosure {
                mode: pb::DisclosureMode::Auto as i32,
                threshold: 25,
                pinned: vec!["gmail".into()],
            },
        )
        .await;
    let registry = fleet.expected("acme", "collector").await;
    assert!(registry.len() <= 25, "{}", registry.len());
    let clients: Vec<McpHttp> = (0..2)
        .flat_map(|edge| {
            [LEGACY, STATELESS].map(|version| fleet.client(edge, "acme", "collector", version))
        })
        .collect();
    for client in &clients {
        eventually("the full registry", Duration::from_secs(5), || async {
            (client.list_names().await == registry).then_some(())
        })
        .await;
    }
    // Connect AWS: the registry passes the threshold, every edge switches to progressive.
    let mut admin = fleet.cp.admin().await;
    let mut tenant = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: "acme".into() })
        .await
        .unwrap()
        .into_inner();
    tenant.connected_apis = Some(pb::ConnectedApis {
        providers: vec![
            "google".into(),
            "hubspot".into(),
            "aws".into(),
            "microsoft".into(),
        ],
        ..Default::default()
    });
    let changed = Instant::now();
    admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest::replacing(tenant))
        .await
        .unwrap();
    let grown = fleet.expected("acme", "collector").await;
    assert!(grown.len() > 25, "{}", grown.len());
    let progressive = vec![
        "capabilities",
        "dispatch",
        "dispatch_parallel",
        "gmail",
        "tool_schema",
    ];
    for client in &clients {
        eventually("progressive listing", Duration::from_secs(2), || async {
            (client.list_names().await == progressive).then_some(())
        })
        .await;
    }
    println!(
        "auto → progressive on 2 edges × 2 protocol versions after {:?} ({} → {} tools)",
        changed.elapsed(),
        registry.len(),
        grown.len()
    );
    // Everything is still reachable: capabilities lists the grown registry, calls work.
    let reply = clients[0].call("capabilities", json!({})).await;
    assert_eq!(reply.result()["structuredContent"]["mode"], "progressive");
    assert_eq!(
        reply.result()["structuredContent"]["total_tools"],
        grown.len()
    );
    let call = clients[1].call("gmail", json!({"query": "x"})).await;
    assert_eq!(call.result()["isError"], false, "{}", call.body);
}
