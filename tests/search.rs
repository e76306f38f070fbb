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

/// Registers a test tool of category `web` (on the demo executor) with `provider`.
async fn register(admin: &mut tp_client::Admin, name: &str, description: &str, provider: &str) {
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(pb::ToolSpec {
                name: name.into(),
                description: description.into(),
                category: "web".into(),
                provider: provider.into(),
                input_schema: to_struct(
                    &json!({"type": "object", "properties": {"place": {"type": "string"}}}),
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
    register(
        &mut admin,
        "tide_tables",
        "Predicts tide heights and times for a harbour.",
        "",
    )
    .await;
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

/// The embeddings endpoint of `tests/clients/embeddings.py` (all-MiniLM-L6-v2 from PyPI, run
/// with numpy), on a free port, requiring `key`. Killed when dropped.
struct Embeddings {
    child: std::process::Child,
    port: u16,
}

impl Embeddings {
    fn start(key: &str) -> Embeddings {
        use std::io::BufRead as _;
        let port = tp_test_support::free_port();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/embeddings.py");
        let mut child = std::process::Command::new(tp_test_support::embed_python())
            .arg(script)
            .arg(port.to_string())
            .args(["--api-key", key])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the embeddings endpoint");
        let mut line = String::new();
        let _ = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        assert!(line.starts_with("embeddings on"), "{line:?}");
        Embeddings { child, port }
    }

    /// Every text the endpoint was sent.
    async fn inputs(&self) -> Vec<String> {
        reqwest::get(format!("http://127.0.0.1:{}/inputs", self.port))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

impl Drop for Embeddings {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// With `[search] embeddings_url`, an edge fuses BM25F with an embeddings ranker: a task worded
/// with none of a tool's words finds it there and not on an edge without one. Only what the
/// caller may see is sent to the endpoint (a hidden tool's text never leaves the edge), the
/// endpoint's key is sent, and an endpoint that goes away leaves search working on BM25F alone.
#[tokio::test]
async fn an_embeddings_ranker_finds_by_meaning_sends_only_visible_tools_and_is_never_required() {
    let key = format!("emb-{}", std::process::id());
    let embeddings = Embeddings::start(&key);
    let mut fleet = Fleet::start(1, "").await;
    let mut admin = fleet.cp.admin().await;
    for (name, description, provider) in [
        (
            "geocode_address",
            "Converts a street address into geographic coordinates.",
            "",
        ),
        (
            "seismic_feed",
            "Reports recent earthquakes near a place, with magnitudes.",
            "testing",
        ),
    ] {
        register(&mut admin, name, description, provider).await;
    }
    let toml = format!(
        "[search]\nembeddings_url = \"http://127.0.0.1:{}/v1/embeddings\"\nembeddings_model = \"all-MiniLM-L6-v2\"\nembeddings_api_key_env = \"TP_TEST_EMBEDDINGS_KEY\"\nembeddings_timeout_ms = 3000\n",
        embeddings.port
    );
    let edge = tp_test_support::EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&fleet.redis.url()),
        &toml,
        &[("TP_TEST_EMBEDDINGS_KEY", key.clone())],
    )
    .await;
    fleet.edges.push(edge);
    // acme sees the first tool (no provider) and not the second (only qa connects `testing`).
    let visible = fleet.expected("acme", "collector").await;
    assert!(
        visible.contains(&"geocode_address".to_owned()),
        "{visible:?}"
    );
    assert!(!visible.contains(&"seismic_feed".to_owned()), "{visible:?}");
    let query = json!({"query": "what are the latitude and longitude of our office"});

    // Without the ranker the words do not meet.
    let plain = fleet.client(0, "acme", "collector", LEGACY);
    eventually(
        "the new tools on the plain edge",
        Duration::from_secs(10),
        || {
            let plain = plain.clone();
            async move {
                let reply = plain
                    .call("capabilities", json!({"query": "geocode_address"}))
                    .await;
                (names(&reply).first().map(String::as_str) == Some("geocode_address")).then_some(())
            }
        },
    )
    .await;
    let reply = plain.call("capabilities", query.clone()).await;
    assert_eq!(reply.result()["structuredContent"]["ranked_by"], "bm25f");
    assert!(
        !names(&reply).contains(&"geocode_address".to_owned()),
        "BM25F alone should not find it: {}",
        reply.body
    );

    // With it, the tool is found (once the registry's tools are embedded: the first searches
    // may answer with BM25F alone while that runs).
    let semantic = fleet.client(1, "acme", "collector", LEGACY);
    let started = Instant::now();
    // On 2026-07-28 a fused answer may be cached like any other; a fallback may not (the next
    // search may rank by meaning).
    let stateless = fleet.client(1, "acme", "collector", STATELESS);
    let found = eventually("a search by meaning", Duration::from_secs(90), || {
        let semantic = semantic.clone();
        let query = query.clone();
        async move {
            let reply = semantic.call("capabilities", query).await;
            (reply.result()["structuredContent"]["ranked_by"] == "bm25f+embeddings")
                .then(|| names(&reply))
        }
    })
    .await;
    assert!(
        found[..found.len().min(5)].contains(&"geocode_address".to_owned()),
        "in the first five by meaning: {found:?}"
    );
    let reply = stateless.call("capabilities", query.clone()).await;
    assert_eq!(
        reply.result()["structuredContent"]["ranked_by"],
        "bm25f+embeddings"
    );
    assert_eq!(
        reply.result()["_meta"]["cacheScope"],
        "private",
        "{}",
        reply.body
    );
    println!(
        "found by meaning after {:.1} s (the registry's tools embedded on the first search): {found:?}",
        started.elapsed().as_secs_f64()
    );
    // The hidden tool's text (tenant qa's provider) was never sent; acme's tools were.
    let sent = embeddings.inputs().await;
    assert!(
        sent.iter().any(|t| t.contains("geographic coordinates")),
        "the visible tool was embedded"
    );
    assert!(
        !sent.iter().any(|t| t.contains("earthquakes")),
        "a hidden tool's text left the edge"
    );
    let reply = semantic
        .call(
            "capabilities",
            json!({"query": "were there tremors near Tokyo today"}),
        )
        .await;
    assert!(
        !names(&reply).contains(&"seismic_feed".to_owned()),
        "{}",
        reply.body
    );

    // The endpoint goes away: search answers at once with BM25F alone, not an error.
    drop(embeddings);
    let started = Instant::now();
    let reply = semantic
        .call(
            "capabilities",
            json!({"query": "latitude of the harbour office"}),
        )
        .await;
    assert_eq!(
        reply.result()["structuredContent"]["ranked_by"],
        "bm25f",
        "{}",
        reply.body
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "within the timeout: {:?}",
        started.elapsed()
    );
    let reply = semantic.call("capabilities", query.clone()).await;
    assert_eq!(reply.result()["structuredContent"]["ranked_by"], "bm25f");
    let reply = stateless.call("capabilities", query).await;
    assert_eq!(reply.result()["structuredContent"]["ranked_by"], "bm25f");
    assert!(
        reply.result()["_meta"].get("cacheScope").is_none(),
        "a fallback is not cacheable: {}",
        reply.body
    );
}
