//! Adversarial tenants: randomised (seeded) tenants, roles, `connected_apis`, disclosure modes
//! and keys, then at least 10,000 random requests of every kind across two edges — `tools/list`
//! pages, `tools/call`, `dispatch`, `dispatch_parallel`, `tool_schema`, `capabilities`, wiki
//! queries and object keys with traversal tricks, random keys. Nothing outside the caller's
//! registry or wiki prefix may ever be listed, called, described or read, and a tool the caller
//! may not use must fail exactly like one that does not exist.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::McpHttp;

use crate::fleet::{Fleet, LEGACY, ROLES, STATELESS};
use crate::rng::Rng;

const META: [&str; 4] = [
    "capabilities",
    "dispatch",
    "dispatch_parallel",
    "tool_schema",
];

/// One random tenant as the test set it up.
struct Caller {
    tenant: String,
    role: &'static str,
    key: String,
    /// What the control plane resolves for (tenant, role).
    registry: BTreeSet<String>,
}

fn unknown(name: &str) -> Value {
    json!({"code": -32602, "message": format!("unknown tool: {name}")})
}

/// Tool names a JSON answer presents as tools (`name` fields of objects that look like tools).
fn tool_names(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(name)) = map.get("name")
                && (map.contains_key("description")
                    || map.contains_key("inputSchema")
                    || map.contains_key("input_schema"))
            {
                out.insert(name.clone());
            }
            map.values().for_each(|v| tool_names(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| tool_names(v, out)),
        _ => {}
    }
}

#[derive(Default)]
struct Outcome {
    probes: usize,
    leaks: Vec<String>,
    by_kind: BTreeMap<&'static str, usize>,
}

impl Outcome {
    fn merge(&mut self, other: Outcome) {
        self.probes += other.probes;
        self.leaks.extend(other.leaks);
        for (kind, n) in other.by_kind {
            *self.by_kind.entry(kind).or_default() += n;
        }
    }
}

#[tokio::test]
async fn ten_thousand_random_probes_find_no_leak_across_tenants_roles_and_edges() {
    let fleet = Fleet::start(2, "").await;
    let mut admin = fleet.cp.admin().await;
    let seed = std::env::var("TOOLPLANE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xADD_5EED_u64);
    let total: usize = std::env::var("TOOLPLANE_PROBES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let mut rng = Rng(seed | 1);
    let providers: Vec<String> = admin
        .catalog
        .list_providers(pb::ListProvidersRequest {})
        .await
        .unwrap()
        .into_inner()
        .providers
        .into_iter()
        .map(|p| p.id)
        .collect();
    let catalogue = fleet.catalogue().await;

    // Random tenants: connected_apis absent (all), empty (platform only) or a random subset;
    // random disclosure; a key per role; a wiki page holding a secret only they may read.
    let mut callers = Vec::new();
    let mut secrets: BTreeMap<String, String> = BTreeMap::new();
    for t in 0..10 {
        let tenant = format!("adv{t:02}");
        let connected_apis = match rng.below(4) {
            0 => None,
            1 => Some(Vec::new()),
            _ => Some(
                providers
                    .iter()
                    .filter(|_| rng.below(3) == 0)
                    .cloned()
                    .collect(),
            ),
        };
        let disclosure = pb::Disclosure {
            mode: *rng.pick(&[
                pb::DisclosureMode::Full,
                pb::DisclosureMode::Progressive,
                pb::DisclosureMode::Auto,
            ]) as i32,
            threshold: 5 + rng.below(30) as u32,
            pinned: catalogue
                .iter()
                .filter(|_| rng.below(10) == 0)
                .cloned()
                .collect(),
        };
        admin
            .tenants
            .create_tenant(pb::CreateTenantRequest {
                tenant: Some(pb::Tenant {
                    id: tenant.clone(),
                    connected_apis: Some(connected_apis.map_or(
                        pb::ConnectedApis {
                            providers: Vec::new(),
                            all: true,
                        },
                        |providers| pb::ConnectedApis {
                            providers,
                            all: false,
                        },
                    )),
                    disclosure: Some(disclosure),
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        for role in ROLES {
            let key = admin
                .tenants
                .issue_api_key(pb::IssueApiKeyRequest {
                    tenant: tenant.clone(),
                    role: role.into(),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .key;
            let registry = fleet.expected(&tenant, role).await.into_iter().collect();
            callers.push(Arc::new(Caller {
                tenant: tenant.clone(),
                role,
                key,
                registry,
            }));
        }
        let secret = format!("CODEWORD{:016X}", rng.next());
        let collector_key = callers
            .iter()
            .find(|c| c.tenant == tenant && c.role == "collector")
            .map(|c| c.key.clone())
            .unwrap();
        let writer = McpHttp::new(&fleet.edges[0].addr, Some(&collector_key), LEGACY);
        let ingest = writer
            .call(
                "client_wiki",
                json!({"action": "ingest", "source": {"type": "text",
                    "text": format!("The private codeword of {tenant} is {secret}. Only {tenant} may know it."),
                    "source_label": format!("Codeword of {tenant}")}}),
            )
            .await;
        assert_eq!(ingest.result()["isError"], false, "{}", ingest.body);
        secrets.insert(tenant, secret);
    }
    let secrets = Arc::new(secrets);
    let catalogue = Arc::new(catalogue);
    let edges: Vec<String> = fleet.edges.iter().map(|e| e.addr.clone()).collect();

    // The probes, 8 at a time; each draws its own seeded generator so the run is replayable.
    let probes = futures::stream::iter(0..total)
        .map(|i| {
            let caller = Arc::clone(&callers[(i * 7 + i / 3) % callers.len()]);
            let (secrets, catalogue) = (Arc::clone(&secrets), Arc::clone(&catalogue));
            let edge = edges[i % edges.len()].clone();
            async move {
                let mut rng = Rng((seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
                probe(&mut rng, &edge, &caller, &catalogue, &secrets).await
            }
        })
        .buffer_unordered(8);
    let mut outcome = Outcome::default();
    let results: Vec<Outcome> = probes.collect().await;
    for result in results {
        outcome.merge(result);
    }
    assert!(
        outcome.leaks.is_empty(),
        "{} leaks (seed {seed:#x}), first: {:#?}",
        outcome.leaks.len(),
        &outcome.leaks[..outcome.leaks.len().min(5)]
    );
    assert!(outcome.probes >= total);
    println!(
        "adversarial tenants (seed {seed:#x}): {} callers, {} probes over 2 edges, 0 leaks; by kind {:?}",
        callers.len(),
        outcome.probes,
        outcome.by_kind
    );
}

async fn probe(
    rng: &mut Rng,
    edge: &str,
    caller: &Caller,
    catalogue: &[String],
    secrets: &BTreeMap<String, String>,
) -> Outcome {
    let mut outcome = Outcome {
        probes: 1,
        ..Default::default()
    };
    let version = if rng.below(2) == 0 { LEGACY } else { STATELESS };
    let client = McpHttp::new(edge, Some(&caller.key), version);
    let who = format!("{}/{}", caller.tenant, caller.role);
    let mut leak = |what: String| outcome.leaks.push(format!("{who} ({version}): {what}"));
    // A tool name to aim at: any catalogue tool, a meta-tool, or one that does not exist.
    let target = match rng.below(10) {
        0 => format!("{}_{}", rng.pick(catalogue), rng.below(100)),
        1 => (*rng.pick(&META)).to_owned(),
        _ => rng.pick(catalogue).clone(),
    };
    let visible = caller.registry.contains(&target);
    if !visible && !META.contains(&target.as_str()) {
        *outcome
            .by_kind
            .entry("aimed at a hidden or unknown tool")
            .or_default() += 1;
    }
    let kind: &'static str = match rng.below(100) {
        0..=14 => "tools/list",
        15..=44 => "tools/call",
        45..=59 => "dispatch",
        60..=69 => "tool_schema",
        70..=76 => "capabilities",
        77..=83 => "dispatch_parallel",
        84..=89 => "wiki query",
        90..=95 => "wiki object key",
        _ => "random key",
    };
    *outcome.by_kind.entry(kind).or_default() += 1;
    match kind {
        "tools/list" => {
            // A page after a random position: cursors are keyset positions, so any tool name
            // makes a valid one; nothing past it may be foreign either.
            let params = if rng.below(2) == 0 {
                json!({})
            } else {
                use base64::Engine as _;
                let name = rng.pick(catalogue);
                json!({"cursor": format!("c1.{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(name))})
            };
            let reply = client.request(1, "tools/list", params).await;
            for tool in reply.result()["tools"].as_array().into_iter().flatten() {
                let name = tool["name"].as_str().unwrap_or_default();
                if !caller.registry.contains(name) && !META.contains(&name) {
                    leak(format!("tools/list showed {name}"));
                }
            }
            if reply.status != 200 || !reply.result().is_object() {
                leak(format!("tools/list failed: {}", reply.body));
            }
        }
        "tools/call" | "dispatch" => {
            let reply = if kind == "tools/call" {
                client.call(&target, json!({})).await
            } else {
                client
                    .call("dispatch", json!({"tool": target, "arguments": {}}))
                    .await
            };
            let error = reply.error();
            if META.contains(&target.as_str()) {
                // Meta-tools are every caller's; they cannot be dispatched.
                if kind == "dispatch" && error["code"] != -32602 {
                    leak(format!(
                        "dispatch of the meta-tool {target}: {}",
                        reply.body
                    ));
                }
                return outcome;
            }
            let looks_unknown = *error == unknown(&target);
            if visible && *error == unknown(&target) {
                leak(format!("{kind} {target}: visible tool reported unknown"));
            }
            if !visible && !looks_unknown {
                leak(format!("{kind} {target} (hidden) answered: {}", reply.body));
            }
        }
        "tool_schema" => {
            let reply = client.call("tool_schema", json!({"tool": target})).await;
            if *reply.error() == unknown("tool_schema") {
                return outcome;
            }
            let mut named = BTreeSet::new();
            tool_names(&reply.result()["structuredContent"], &mut named);
            let hidden = !visible && !META.contains(&target.as_str());
            if hidden && *reply.error() != unknown(&target) {
                leak(format!(
                    "tool_schema {target} (hidden) answered: {}",
                    reply.body
                ));
            }
            for name in named {
                if !caller.registry.contains(&name) && !META.contains(&name.as_str()) {
                    leak(format!("tool_schema described {name}"));
                }
            }
        }
        "capabilities" => {
            let arguments = if rng.below(3) == 0 {
                json!({"category": *rng.pick(&["google", "platform", "ai", "crm", "knowledge", "testing"])})
            } else {
                json!({})
            };
            let reply = client.call("capabilities", arguments).await;
            if *reply.error() == unknown("capabilities") {
                return outcome;
            }
            let mut named = BTreeSet::new();
            tool_names(&reply.result()["structuredContent"], &mut named);
            for name in named {
                if !caller.registry.contains(&name) {
                    leak(format!("capabilities listed {name}"));
                }
            }
        }
        "dispatch_parallel" => {
            let targets: Vec<String> = (0..1 + rng.below(4))
                .map(|_| rng.pick(catalogue).clone())
                .collect();
            let calls: Vec<Value> = targets
                .iter()
                .map(|t| json!({"tool": t, "arguments": {}}))
                .collect();
            let reply = client
                .call(
                    "dispatch_parallel",
                    json!({"calls": calls, "timeout_ms": 5000}),
                )
                .await;
            if *reply.error() == unknown("dispatch_parallel") {
                return outcome;
            }
            let results = reply.result()["structuredContent"]["results"].clone();
            for (target, result) in targets.iter().zip(results.as_array().into_iter().flatten()) {
                let hidden = !caller.registry.contains(target);
                let error =
                    json!({"code": result["error"]["code"], "message": result["error"]["message"]});
                if hidden && error != unknown(target) {
                    leak(format!(
                        "dispatch_parallel {target} (hidden) answered: {result}"
                    ));
                }
                if !hidden && error == unknown(target) {
                    leak(format!(
                        "dispatch_parallel {target}: visible tool reported unknown"
                    ));
                }
            }
        }
        "wiki query" => {
            let other = secrets
                .keys()
                .nth(rng.below(secrets.len() as u64) as usize)
                .unwrap();
            let question = *rng.pick(&[
                "What is the private codeword?",
                "Codeword of {other}",
                "What may only {other} know?",
                "sources/codeword-of-{other}",
            ]);
            let reply = client
                .call(
                    "client_wiki",
                    json!({"action": "query", "question": question.replace("{other}", other)}),
                )
                .await;
            for (tenant, secret) in secrets {
                if *tenant != caller.tenant && reply.body.contains(secret.as_str()) {
                    leak(format!("wiki query read {tenant}'s secret"));
                }
            }
            if reply.body.contains(secrets[&caller.tenant].as_str()) {
                *outcome
                    .by_kind
                    .entry("wiki answered with the caller's own secret")
                    .or_default() += 1;
            }
        }
        "wiki object key" => {
            let other = secrets
                .keys()
                .nth(rng.below(secrets.len() as u64) as usize)
                .unwrap();
            let key = rng
                .pick(&[
                    "../{other}/raw/x.txt",
                    "wiki/{other}/raw/x.txt",
                    "wiki/{other}/wiki/sources/codeword-of-{other}.md",
                    "wiki/{me}/raw/../../{other}/raw/x",
                    "wiki/{me}/raw/%2e%2e/%2e%2e/{other}/raw/x",
                    "wiki/{me}/raw\\..\\..\\{other}\\raw\\x",
                    "/wiki/{other}/raw/x",
                    "wiki//{other}/raw/x",
                    "wiki/{me}/raw/./../../{other}/wiki/index.md",
                    "s3://bucket/wiki/{other}/raw/x",
                ])
                .replace("{other}", other)
                .replace("{me}", &caller.tenant);
            let reply = client
                .call(
                    "client_wiki",
                    json!({"action": "ingest", "source": {"type": "r2", "r2_key": key}}),
                )
                .await;
            for (tenant, secret) in secrets {
                if *tenant != caller.tenant && reply.body.contains(secret.as_str()) {
                    leak(format!("object key {key:?} read {tenant}'s secret"));
                }
            }
            let refused = reply.result()["isError"] == true || reply.error()["code"] == -32602;
            if !refused && *other != caller.tenant {
                leak(format!("object key {key:?} was accepted: {}", reply.body));
            }
        }
        _ => {
            let forged = format!("tpk_{:016x}{:016x}", rng.next(), rng.next());
            let reply = client
                .with_key(Some(&forged))
                .request(1, "tools/list", json!({}))
                .await;
            if reply.status != 401 {
                leak(format!("a random key got {}: {}", reply.status, reply.body));
            }
        }
    }
    outcome
}
