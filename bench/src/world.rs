//! The world every scenario runs in: the demo catalogue grown to 382 and 2,000 tools for some
//! tenants, an echo tool, and `tenants` more tenants with a key each (exported, grown and
//! imported in one commit); a control plane, Redis, the demo executor and two edges, each
//! pinned to core 0.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tp_proto::json::to_struct;
use tp_proto::pb;
use tp_test_support::{
    ControlPlaneProcess, EdgeProcess, ExecutorProcess, McpHttp, RedisProcess, binary,
};

use crate::load::{LEGACY, Load, Table, percentile, pin};

const DEMO_PROVIDERS: [&str; 8] = [
    "google",
    "microsoft",
    "aws",
    "salesforce",
    "hubspot",
    "linkedin",
    "meta",
    "dealcloud",
];

/// The edges' settings: big pages, no shedding in the way of the load.
pub(crate) const EDGE_TOML: &str = "[mcp]\npage_size = 1000\nmax_in_flight = 100000\n";

/// Everything the scenarios share; dropped at the end (every process stops).
pub(crate) struct World {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) cp: ControlPlaneProcess,
    pub(crate) executor: ExecutorProcess,
    pub(crate) redis: RedisProcess,
    pub(crate) edges: [EdgeProcess; 2],
    /// The key of each named tenant (c34, c382, c2000, bench, prop).
    pub(crate) named_keys: BTreeMap<String, String>,
    /// One bulk tenant's key per line.
    pub(crate) keys_file: PathBuf,
    /// How many bulk tenants.
    pub(crate) tenants: usize,
    /// Whether Redis holds every bulk tenant's identity and registry.
    pub(crate) redis_filled: bool,
}

impl World {
    /// `http://<edge i>/mcp`.
    pub(crate) fn edge_url(&self, i: usize) -> String {
        format!("http://{}/mcp", self.edges[i].addr)
    }

    /// The bulk tenants' keys.
    pub(crate) fn bulk_keys(&self) -> anyhow::Result<Vec<String>> {
        Ok(std::fs::read_to_string(&self.keys_file)?
            .lines()
            .map(str::to_owned)
            .collect())
    }
}

/// A bulk tenant's key (derived from its index, so the keys file can be rebuilt).
fn key_for(seed: &str) -> String {
    format!("tpk_{}", hex::encode(Sha256::digest(seed.as_bytes())))
}

/// Builds the world with `tenants` bulk tenants; adds a note on how long the import took.
pub(crate) async fn build(tenants: usize, table: &mut Table) -> anyhow::Result<World> {
    eprintln!("building the world ({tenants} bulk tenants)");
    let dir = tempfile::tempdir()?;
    let seed_cp = ControlPlaneProcess::start(true).await;
    let executor = ExecutorProcess::start().await;
    pin(executor.process.pid().unwrap_or(0), 0);
    let mut admin = seed_cp.admin().await;
    admin
        .executors
        .upsert_executor(pb::UpsertExecutorRequest {
            update_mask: None,
            executor: Some(pb::ExecutorInfo {
                name: "demo".into(),
                endpoint: executor.url(),
                timeout_ms: 10_000,
                max_concurrency: 256,
                ..Default::default()
            }),
        })
        .await?;
    admin
        .policy
        .create_adr(pb::CreateAdrRequest {
            adr: Some(pb::Adr {
                id: "ADR-900".into(),
                title: "Benchmark catalogue".into(),
                status: pb::AdrStatus::Accepted as i32,
                date: "2026-11-24".into(),
                supersedes: "ADR-007".into(),
                ..Default::default()
            }),
        })
        .await?;
    admin
        .policy
        .amend_ceiling(pb::AmendCeilingRequest {
            ceiling: 2_100,
            adr: "ADR-900".into(),
        })
        .await?;
    for provider in ["bench", "bulk1", "bulk2"] {
        admin
            .catalog
            .upsert_provider(pb::UpsertProviderRequest {
                provider: Some(pb::Provider {
                    id: provider.into(),
                    ..Default::default()
                }),
            })
            .await?;
    }
    let spec = |name: String, provider: &str, schema: Value, description: String| pb::ToolSpec {
        name,
        description,
        category: provider.into(),
        provider: provider.into(),
        input_schema: to_struct(&schema),
        executor: "demo".into(),
        admission: Some(pb::Admission {
            adr: "ADR-900".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(spec(
                "echo".into(),
                "bench",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
                "Echo the text back".into(),
            )),
        })
        .await?;
    let bulk: Vec<(String, &str)> = (0..348)
        .map(|i| (format!("bulk1_tool_{i:04}"), "bulk1"))
        .chain((0..1618).map(|i| (format!("bulk2_tool_{i:04}"), "bulk2")))
        .collect();
    let registered = futures::stream::iter(bulk)
        .map(|(name, provider)| {
            let mut catalog = admin.catalog.clone();
            let tool = spec(
                name.clone(),
                provider,
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "description": "What to look for"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                    "since": {"type": "string", "format": "date"}}, "required": ["query"]}),
                format!("Search the {name} records of the connected account and return the matching items with their identifiers and summaries."),
            );
            async move {
                catalog
                    .register_tool(pb::RegisterToolRequest { tool: Some(tool) })
                    .await
                    .is_ok()
            }
        })
        .buffer_unordered(8)
        .filter(|ok| futures::future::ready(*ok))
        .count()
        .await;
    if registered != 1966 {
        bail!("registered {registered} of 1,966 bulk tools");
    }
    let demo_apis: Vec<String> = DEMO_PROVIDERS.iter().map(|p| (*p).to_owned()).collect();
    let full = pb::Disclosure {
        mode: pb::DisclosureMode::Full as i32,
        ..Default::default()
    };
    let mut named_keys = BTreeMap::new();
    for (tenant, extra) in [
        ("c34", vec![]),
        ("c382", vec!["bulk1"]),
        ("c2000", vec!["bulk1", "bulk2"]),
        ("bench", vec!["bench"]),
        ("prop", vec![]),
    ] {
        let apis: Vec<String> = if tenant == "prop" {
            vec!["google".into()]
        } else if tenant == "bench" {
            vec!["bench".into(), "google".into()]
        } else {
            demo_apis
                .iter()
                .cloned()
                .chain(extra.iter().map(|e| (*e).to_owned()))
                .collect()
        };
        admin
            .tenants
            .create_tenant(pb::CreateTenantRequest {
                tenant: Some(pb::Tenant {
                    id: tenant.into(),
                    connected_apis: Some(pb::ConnectedApis {
                        providers: apis,
                        all: false,
                    }),
                    disclosure: Some(full.clone()),
                    ..Default::default()
                }),
            })
            .await?;
        let key = admin
            .tenants
            .issue_api_key(pb::IssueApiKeyRequest {
                tenant: tenant.into(),
                role: "collector".into(),
                ..Default::default()
            })
            .await?
            .into_inner()
            .key;
        named_keys.insert(tenant.to_owned(), key);
    }
    let mut seed_process = seed_cp.process;
    seed_process.terminate().await;

    // Export, add the bulk tenants and their keys, import into a fresh store.
    let world_dir = dir.path().join("world");
    std::fs::create_dir_all(&world_dir)?;
    let export = dir.path().join("export.json");
    run_ctl(&[
        "export",
        "--store-url",
        &format!(
            "sqlite://{}",
            seed_cp.data_dir.join("control-plane.db").display()
        ),
        "--out",
        &export.display().to_string(),
    ])?;
    let mut document: Value = serde_json::from_slice(&std::fs::read(&export)?)?;
    let keys_file = dir.path().join("bulk-keys.txt");
    let mut keys_text = String::new();
    let now = 1_763_900_000_000_u64;
    let objects = document["objects"].as_array_mut().context("objects")?;
    for i in 0..tenants {
        let id = format!("s{i:06}");
        let key = key_for(&format!("bench-{i}"));
        keys_text.push_str(&key);
        keys_text.push('\n');
        objects.push(serde_json::to_value(tp_registry::Object::Tenant(
            tp_registry::Tenant {
                id: id.clone(),
                display_name: String::new(),
                connected_apis: Some(vec!["google".into()]),
                roles: Vec::new(),
                disclosure: tp_registry::Disclosure::default(),
                rate_limit_per_minute: 0,
                lint_webhook: None,
                token_issuers: Vec::new(),
                approvals: Vec::new(),
                revision: 0,
                uid: format!("bench-{i}"),
            },
        ))?);
        objects.push(serde_json::to_value(tp_registry::Object::ApiKey(
            tp_registry::ApiKey {
                id: format!("key-{id}"),
                tenant: id,
                role: "collector".into(),
                hash: tp_proto::keys::hash(&key),
                label: "bench".into(),
                created_at: now,
                expires_at: None,
                revoked_at: None,
            },
        ))?);
    }
    std::fs::write(&keys_file, keys_text)?;
    let grown = dir.path().join("world.json");
    std::fs::write(&grown, serde_json::to_vec(&document)?)?;
    let import_started = Instant::now();
    run_ctl(&[
        "import",
        &grown.display().to_string(),
        "--store-url",
        &format!("sqlite://{}", world_dir.join("control-plane.db").display()),
    ])?;
    for token in ["admin-token", "edge-token"] {
        std::fs::copy(seed_cp.data_dir.join(token), world_dir.join(token))?;
    }
    let cp = ControlPlaneProcess::start_in(&world_dir, Vec::new()).await;
    pin(cp.process.pid().unwrap_or(0), 0);
    table.notes.push(format!(
        "world: demo catalogue + echo + 1,966 bulk tools (ceiling 2,100), {tenants} bulk tenants with a key each, imported and loaded in {:.1} s",
        import_started.elapsed().as_secs_f64()
    ));
    let redis = RedisProcess::start().await;
    pin(redis.process.pid().unwrap_or(0), 0);
    let edges = [
        EdgeProcess::start(&cp, &[cp.url()], Some(&redis.url()), EDGE_TOML).await,
        EdgeProcess::start(&cp, &[cp.url()], Some(&redis.url()), EDGE_TOML).await,
    ];
    for edge in &edges {
        pin(edge.process.pid().unwrap_or(0), 0);
        wait_synced(edge).await?;
    }
    Ok(World {
        dir,
        cp,
        executor,
        redis,
        edges,
        named_keys,
        keys_file,
        tenants,
        redis_filled: false,
    })
}

/// Waits until an edge's watch stream has caught up with the control plane (otherwise it
/// serves through its degraded path and the figures measure that); how long that took.
pub(crate) async fn wait_synced(edge: &EdgeProcess) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let (_, ready) = edge.get("/readyz").await;
        if ready.contains("\"watch_synced\":true") {
            return Ok(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!(
                "edge {} did not sync with the control plane in 60 s: {ready}",
                edge.addr
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `tools/list` with each of `keys` once, one at a time on one kept-alive connection: the
/// latency of a cold lookup itself, without queueing behind other requests.
pub(crate) async fn one_at_a_time(addr: &str, keys: &[String]) -> Load {
    let mut client = McpHttp::new(addr, None, LEGACY);
    let started = Instant::now();
    let mut latency = Vec::with_capacity(keys.len());
    let mut errors = 0;
    for key in keys {
        client.key = Some(key.clone());
        let t = Instant::now();
        let reply = client.request(1, "tools/list", json!({})).await;
        latency.push(t.elapsed().as_secs_f64() * 1e6);
        if reply.status != 200 || !reply.result()["tools"].is_array() {
            errors += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    latency.sort_by(f64::total_cmp);
    Load {
        rps: latency.len() as f64 / secs,
        p50_us: percentile(&latency, 50.0),
        p99_us: percentile(&latency, 99.0),
        errors,
        requests: latency.len() as u64,
    }
}

/// `tools/list` with every key once, `concurrency` at a time, from this process.
pub(crate) async fn touch_every_key(addr: &str, keys: &[String], concurrency: usize) -> Load {
    let started = Instant::now();
    let results: Vec<(f64, bool)> = futures::stream::iter(keys.iter().cloned())
        .map(|key| {
            let client = McpHttp::new(addr, Some(&key), LEGACY);
            async move {
                let t = Instant::now();
                let reply = client.request(1, "tools/list", json!({})).await;
                (
                    t.elapsed().as_secs_f64() * 1e6,
                    reply.status == 200 && reply.result()["tools"].is_array(),
                )
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let secs = started.elapsed().as_secs_f64();
    let mut latency: Vec<f64> = results.iter().map(|(l, _)| *l).collect();
    latency.sort_by(f64::total_cmp);
    Load {
        rps: results.len() as f64 / secs,
        p50_us: percentile(&latency, 50.0),
        p99_us: percentile(&latency, 99.0),
        errors: results.iter().filter(|(_, ok)| !ok).count() as u64,
        requests: results.len() as u64,
    }
}

fn run_ctl(args: &[&str]) -> anyhow::Result<()> {
    let status = std::process::Command::new(binary("toolplanectl"))
        .args(args)
        .status()?;
    if !status.success() {
        bail!("toolplanectl {args:?} failed");
    }
    Ok(())
}
