//! `tp-bench`: the edge against its physical limit and against the executor it fronts, in one
//! run on loopback. Every figure is printed next to a baseline measured in the same run,
//! because the machine is shared and noisy: ratios, not absolute times.
//!
//! Servers (control plane, edges, executor, Redis, the bare baseline) are pinned to core 0,
//! each with one runtime worker (`scripts/bench.sh` sets `TOKIO_WORKER_THREADS=1`); the load
//! generator (`wrk`, from Debian's packages) and this process to core 1. For the `tools/call`
//! comparison the executor moves to core 1, for the direct calls and the calls through the edge
//! alike.
//!
//! Usage: `bash scripts/bench.sh [--quick] [--tenants N] [--seconds S]` (builds the release
//! binaries, then runs this). `tp-bench bare PORT FILE` is the baseline server it starts.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tp_proto::json::to_struct;
use tp_proto::pb;
use tp_test_support::{
    ControlPlaneProcess, EdgeProcess, ExecutorProcess, McpHttp, Process, RedisProcess, binary,
    free_port, wait_for_port,
};

const LEGACY: &str = "2025-11-25";
const STATELESS: &str = "2026-07-28";
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

struct Options {
    quick: bool,
    tenants: usize,
    seconds: u64,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        quick: false,
        tenants: 100_000,
        seconds: 5,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => {
                options.quick = true;
                options.tenants = options.tenants.min(5_000);
                options.seconds = 2;
            }
            "--tenants" => options.tenants = it.next().context("--tenants N")?.parse()?,
            "--seconds" => options.seconds = it.next().context("--seconds S")?.parse()?,
            other => bail!("unknown argument {other:?} (--quick, --tenants N, --seconds S)"),
        }
    }
    Ok(options)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("bare") {
        return bare(&args[2..]);
    }
    let options = parse(&args[1..])?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(options))
}

/// The baseline: an axum server that answers every request with the bytes in FILE (the edge's
/// own warm answer), as `application/json`.
fn bare(args: &[String]) -> anyhow::Result<()> {
    let port: u16 = args.first().context("bare PORT FILE")?.parse()?;
    let body = bytes_of(args.get(1).context("bare PORT FILE")?)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let body = axum::body::Bytes::from(body);
        let app = axum::Router::new().fallback(move || {
            let body = body.clone();
            async move {
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    body,
                )
            }
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        axum::serve(listener, app).await?;
        Ok(())
    })
}

fn bytes_of(path: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {path}"))
}

/// Pins a process (all its threads) to one core.
fn pin(pid: u32, core: u32) {
    let _ = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &core.to_string(), &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status();
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn ensure_wrk() -> anyhow::Result<()> {
    if std::process::Command::new("wrk").arg("-v").output().is_ok() {
        return Ok(());
    }
    eprintln!("installing wrk from Debian's packages");
    let status = std::process::Command::new("apt-get")
        .args(["install", "-y", "-qq", "wrk"])
        .status()?;
    if !status.success() {
        bail!("wrk is missing and apt-get could not install it");
    }
    Ok(())
}

/// One wrk run's figures.
#[derive(Debug, Clone, Default)]
struct Load {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    errors: u64,
    requests: u64,
}

/// How wrk sends requests.
#[derive(Clone)]
struct Script<'a> {
    body: &'a str,
    headers: Vec<(&'a str, String)>,
    /// Rotate `Authorization: Bearer <key>` over this file's lines.
    keys: Option<&'a Path>,
    random: bool,
}

fn lua(script: &Script<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "local body = [==[{}]==]", script.body);
    out.push_str("local headers = {}\n");
    for (name, value) in &script.headers {
        let _ = writeln!(out, "headers[\"{name}\"] = [==[{value}]==]");
    }
    let _ = writeln!(
        out,
        "local keys = {{}}\nlocal kf = [==[{}]==]\nif kf ~= \"\" then for line in io.lines(kf) do keys[#keys + 1] = line end end",
        script
            .keys
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "local i = 0\nlocal random = {}\nmath.randomseed(42)",
        script.random
    );
    out.push_str(
        "request = function()\n  if #keys > 0 then\n    if random then i = math.random(#keys) else i = (i % #keys) + 1 end\n    headers[\"Authorization\"] = \"Bearer \" .. keys[i]\n  end\n  return wrk.format(\"POST\", nil, headers, body)\nend\n",
    );
    out.push_str(
        "done = function(summary, latency, requests)\n  local e = summary.errors\n  io.write(string.format('WRKJSON {\"requests\":%d,\"duration_us\":%d,\"errors\":%d,\"p50_us\":%d,\"p99_us\":%d}\\n', summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout + e.status, latency:percentile(50), latency:percentile(99)))\nend\n",
    );
    out
}

/// Runs wrk (one thread, pinned to core 1) against `url`.
fn wrk(dir: &Path, url: &str, connections: u32, seconds: u64, script: &Script<'_>) -> Load {
    let path = dir.join(format!("wrk-{}.lua", free_port()));
    std::fs::write(&path, lua(script)).expect("lua script");
    let output = std::process::Command::new("taskset")
        .args(["-c", "1", "wrk", "-t1"])
        .arg(format!("-c{connections}"))
        .arg(format!("-d{seconds}s"))
        .arg("--timeout")
        .arg("10s")
        .arg("-s")
        .arg(&path)
        .arg(url)
        .output()
        .expect("wrk");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("WRKJSON "))
        .unwrap_or_else(|| panic!("wrk printed no summary:\n{stdout}"));
    let v: Value = serde_json::from_str(line).expect("wrk summary");
    let requests = v["requests"].as_u64().unwrap_or(0);
    let duration = v["duration_us"].as_f64().unwrap_or(1.0) / 1e6;
    Load {
        rps: requests as f64 / duration,
        p50_us: v["p50_us"].as_f64().unwrap_or(0.0),
        p99_us: v["p99_us"].as_f64().unwrap_or(0.0),
        errors: v["errors"].as_u64().unwrap_or(0),
        requests,
    }
}

fn list_body(version: &str) -> String {
    if version == STATELESS {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string()
    } else {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string()
    }
}

fn list_headers(version: &str, key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("Content-Type", "application/json".to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
        ("MCP-Protocol-Version", version.to_owned()),
    ];
    if version == STATELESS {
        headers.push(("Mcp-Method", "tools/list".to_owned()));
    }
    if let Some(key) = key {
        headers.push(("Authorization", format!("Bearer {key}")));
    }
    headers
}

fn key_for(seed: &str) -> String {
    format!("tpk_{}", hex::encode(Sha256::digest(seed.as_bytes())))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Rows of the final table.
#[derive(Default)]
struct Table {
    rows: Vec<[String; 7]>,
    notes: Vec<String>,
}

impl Table {
    fn load(&mut self, scenario: &str, load: &Load, baseline: Option<&Load>, rss: Option<f64>) {
        self.rows.push([
            scenario.to_owned(),
            format!("{:.0}", load.rps),
            format!("{:.0}", load.p50_us),
            format!("{:.0}", load.p99_us),
            load.errors.to_string(),
            baseline.map_or("—".into(), |b| format!("{:.2}×", load.rps / b.rps)),
            rss.map_or("—".into(), |r| format!("{r:.1}")),
        ]);
    }

    fn print(&self) {
        let headers = [
            "scenario",
            "req/s",
            "p50 µs",
            "p99 µs",
            "errors",
            "vs baseline",
            "edge RSS MiB",
        ];
        let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: Vec<String>| {
            let mut out = String::from("|");
            for (i, cell) in cells.iter().enumerate() {
                let pad = widths[i] - cell.chars().count();
                let _ = write!(out, " {cell}{} |", " ".repeat(pad));
            }
            out
        };
        println!(
            "{}",
            line(headers.iter().map(|h| (*h).to_owned()).collect())
        );
        println!(
            "|{}",
            widths
                .iter()
                .map(|w| format!("{}|", "-".repeat(w + 2)))
                .collect::<String>()
        );
        for row in &self.rows {
            println!("{}", line(row.to_vec()));
        }
        for note in &self.notes {
            println!("{note}");
        }
    }
}

async fn run(options: Options) -> anyhow::Result<()> {
    ensure_wrk()?;
    pin(std::process::id(), 1);
    let started = Instant::now();
    let dir = tempfile::tempdir()?;
    let seconds = options.seconds;
    let mut table = Table::default();

    // --- The world: the demo catalogue, grown to 382 and 2,000 tools for some tenants, an
    // echo tool, and `options.tenants` more tenants with a key each (imported in one commit).
    eprintln!("building the world ({} bulk tenants)", options.tenants);
    let seed_cp = ControlPlaneProcess::start(true).await;
    let executor = ExecutorProcess::start().await;
    pin(executor.process.pid().unwrap_or(0), 0);
    let mut admin = seed_cp.admin().await;
    admin
        .executors
        .upsert_executor(pb::UpsertExecutorRequest {
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
                    connected_apis: Some(pb::ConnectedApis { providers: apis }),
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
    for i in 0..options.tenants {
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
        "world: demo catalogue + echo + 1,966 bulk tools (ceiling 2,100), {} bulk tenants with a key each, imported and loaded in {:.1} s",
        options.tenants,
        import_started.elapsed().as_secs_f64()
    ));
    let redis = RedisProcess::start().await;
    pin(redis.process.pid().unwrap_or(0), 0);
    let edge_toml = "[mcp]\npage_size = 1000\nmax_in_flight = 100000\n";
    let edges = [
        EdgeProcess::start(&cp, &[cp.url()], Some(&redis.url()), edge_toml).await,
        EdgeProcess::start(&cp, &[cp.url()], Some(&redis.url()), edge_toml).await,
    ];
    for edge in &edges {
        pin(edge.process.pid().unwrap_or(0), 0);
        wait_synced(edge).await?;
    }
    let edge_url = |i: usize| format!("http://{}/mcp", edges[i].addr);

    // --- Warm tools/list, 34 tools, against the bare server returning the same bytes.
    eprintln!("warm tools/list");
    for version in [LEGACY, STATELESS] {
        let client = McpHttp::new(&edges[0].addr, Some(&named_keys["c34"]), version);
        let warm = client.request(1, "tools/list", json!({})).await;
        let tools = warm.result()["tools"].as_array().map_or(0, Vec::len);
        if tools != 34 {
            bail!("c34 lists {tools} tools, not 34: {}", warm.body);
        }
        let body_file = dir.path().join(format!("list-{version}.json"));
        std::fs::write(&body_file, warm.body.as_bytes())?;
        let port = free_port();
        let bare_process = Process::spawn(
            &std::env::current_exe()?,
            &[
                "bare".to_owned(),
                port.to_string(),
                body_file.display().to_string(),
            ],
            &dir.path().join("bare.log"),
            &[],
        );
        wait_for_port(port, "the bare server").await;
        pin(bare_process.pid().unwrap_or(0), 0);
        let body = list_body(version);
        for connections in [16, 64] {
            let base = wrk(
                dir.path(),
                &format!("http://127.0.0.1:{port}/mcp"),
                connections,
                seconds,
                &Script {
                    body: &body,
                    headers: list_headers(version, None),
                    keys: None,
                    random: false,
                },
            );
            let edge = wrk(
                dir.path(),
                &edge_url(0),
                connections,
                seconds,
                &Script {
                    body: &body,
                    headers: list_headers(version, Some(&named_keys["c34"])),
                    keys: None,
                    random: false,
                },
            );
            table.load(
                &format!("bare baseline, same bytes, {version}, {connections} conns"),
                &base,
                None,
                None,
            );
            table.load(
                &format!("edge warm tools/list (34), {version}, {connections} conns"),
                &edge,
                Some(&base),
                Some(rss_mib(edges[0].process.pid().unwrap_or(0))),
            );
        }
        let mut bare_process = bare_process;
        bare_process.kill9().await;
        table.notes.push(format!(
            "tools/list answer for 34 tools ({version}): {} bytes",
            warm.body.len()
        ));
    }

    // --- tools/call echo: through the edge vs the executor directly (sequential calls). The
    // executor moves to core 1 for both, so the edge has core 0 to itself, as it would with
    // executors on other hosts; the added latency is then the edge's work and one more hop.
    eprintln!("tools/call overhead");
    pin(executor.process.pid().unwrap_or(0), 1);
    let calls = if options.quick { 500 } else { 2_000 };
    let bench_client = McpHttp::new(&edges[0].addr, Some(&named_keys["bench"]), LEGACY);
    let mut through = Vec::with_capacity(calls);
    for i in 0..calls + 100 {
        let t = Instant::now();
        let reply = bench_client
            .call("echo", json!({"text": format!("call {i}")}))
            .await;
        if reply.result()["isError"] != false {
            bail!("echo through the edge failed: {}", reply.body);
        }
        if i >= 100 {
            through.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    let mut direct_client = pb::executor_client::ExecutorClient::new(
        tonic::transport::Endpoint::from_shared(executor.url())?
            .tcp_nodelay(true)
            .connect()
            .await?,
    );
    let mut direct = Vec::with_capacity(calls);
    for i in 0..calls + 100 {
        let t = Instant::now();
        let mut stream = direct_client
            .invoke(pb::InvokeRequest {
                tool: "echo".into(),
                arguments: to_struct(&json!({"text": format!("call {i}")})),
                tenant: "bench".into(),
                role: "collector".into(),
                request_id: format!("r{i}"),
                deadline_ms: u64::MAX / 2,
                ..Default::default()
            })
            .await?
            .into_inner();
        while let Some(event) = stream.next().await {
            if matches!(event?.event, Some(pb::invoke_event::Event::Result(_))) {
                break;
            }
        }
        if i >= 100 {
            direct.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    through.sort_by(f64::total_cmp);
    direct.sort_by(f64::total_cmp);
    let (tp50, tp99, dp50, dp99) = (
        percentile(&through, 50.0),
        percentile(&through, 99.0),
        percentile(&direct, 50.0),
        percentile(&direct, 99.0),
    );
    pin(executor.process.pid().unwrap_or(0), 0);
    table.notes.push(format!(
        "tools/call echo, {calls} sequential calls (executor on core 1, edge on core 0): through the edge p50 {tp50:.0} µs p99 {tp99:.0} µs; executor directly p50 {dp50:.0} µs p99 {dp99:.0} µs; added by the edge p50 {:.0} µs, p99 {:.0} µs (target: added p50 ≤ 150 µs)",
        tp50 - dp50,
        tp99 - dp99
    ));

    // --- Propagation: control-plane write → both edges serve the change.
    eprintln!("propagation");
    let writes = if options.quick { 50 } else { 200 };
    let prop: Vec<McpHttp> = (0..2)
        .map(|i| McpHttp::new(&edges[i].addr, Some(&named_keys["prop"]), LEGACY))
        .collect();
    let mut lags = Vec::with_capacity(writes);
    let mut tenant = cp
        .admin()
        .await
        .tenants
        .get_tenant(pb::GetTenantRequest { id: "prop".into() })
        .await?
        .into_inner();
    let mut writer = cp.admin().await;
    for i in 0..writes {
        let with_hubspot = i % 2 == 0;
        tenant.connected_apis = Some(pb::ConnectedApis {
            providers: if with_hubspot {
                vec!["google".into(), "hubspot".into()]
            } else {
                vec!["google".into()]
            },
        });
        let t = Instant::now();
        tenant = writer
            .tenants
            .update_tenant(pb::UpdateTenantRequest {
                tenant: Some(tenant.clone()),
            })
            .await?
            .into_inner();
        for client in &prop {
            loop {
                let reply = client.request(1, "tools/list", json!({})).await;
                let has = reply.body.contains("\"hubspot_crm\"");
                if has == with_hubspot {
                    break;
                }
                if t.elapsed() > Duration::from_secs(10) {
                    bail!("write {i} did not reach an edge in 10 s");
                }
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
        }
        lags.push(t.elapsed().as_secs_f64() * 1e3);
    }
    lags.sort_by(f64::total_cmp);
    table.notes.push(format!(
        "propagation, {writes} writes (connected_apis toggled), until both edges list the change: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 ≤ 100 ms)",
        percentile(&lags, 50.0),
        percentile(&lags, 99.0),
        lags.last().copied().unwrap_or(0.0)
    ));

    // --- Catalogue growth: 34, 382 and 2,000 tools.
    eprintln!("catalogue growth");
    for (tenant, tools) in [("c34", 34), ("c382", 382), ("c2000", 2000)] {
        let client = McpHttp::new(&edges[0].addr, Some(&named_keys[tenant]), LEGACY);
        let names = client.list_names().await;
        let first = client.request(1, "tools/list", json!({})).await;
        let load = wrk(
            dir.path(),
            &edge_url(0),
            16,
            seconds,
            &Script {
                body: &list_body(LEGACY),
                headers: list_headers(LEGACY, Some(&named_keys[tenant])),
                keys: None,
                random: false,
            },
        );
        table.load(
            &format!(
                "tools/list first page, {} tools ({} bytes)",
                names.len().max(tools),
                first.body.len()
            ),
            &load,
            None,
            Some(rss_mib(edges[0].process.pid().unwrap_or(0))),
        );
    }

    // --- Cold paths, over the bulk tenants' keys in turn.
    eprintln!("cold paths");
    let rotate = Script {
        body: &list_body(LEGACY),
        headers: list_headers(LEGACY, None),
        keys: Some(&keys_file),
        random: false,
    };
    // Fill Redis with every bulk tenant's identity and registry through a prewarming edge.
    let prewarm = EdgeProcess::start(
        &cp,
        &[cp.url()],
        Some(&redis.url()),
        "[cache]\nl1_registries = 1\nl1_identities = 1\n[mcp]\nmax_in_flight = 100000\n",
    )
    .await;
    pin(prewarm.process.pid().unwrap_or(0), 0);
    wait_synced(&prewarm).await?;
    // Every key once, 16 at a time: each lookup misses L1 (one entry) and Redis (empty), so
    // the control plane resolves it and Redis keeps it.
    let keys: Vec<String> = std::fs::read_to_string(&keys_file)?
        .lines()
        .map(str::to_owned)
        .collect();
    let filled = touch_every_key(&prewarm.addr, &keys).await;
    table.load(
        "cold: L1 and Redis miss → control plane (each key once; in-process client)",
        &filled,
        None,
        Some(rss_mib(prewarm.process.pid().unwrap_or(0))),
    );
    let l2 = wrk(
        dir.path(),
        &format!("http://{}/mcp", prewarm.addr),
        16,
        seconds,
        &rotate,
    );
    table.load(
        "cold: L1 miss → Redis hit (L1 holds 1 entry)",
        &l2,
        None,
        Some(rss_mib(prewarm.process.pid().unwrap_or(0))),
    );

    // --- Scale: every bulk tenant's registry in Redis, random access on a fresh edge.
    eprintln!("scale");
    let fresh = EdgeProcess::start(&cp, &[cp.url()], Some(&redis.url()), edge_toml).await;
    pin(fresh.process.pid().unwrap_or(0), 0);
    wait_synced(&fresh).await?;
    let fresh_rss = rss_mib(fresh.process.pid().unwrap_or(0));
    let random = Script {
        random: true,
        ..rotate.clone()
    };
    let scale = wrk(
        dir.path(),
        &format!("http://{}/mcp", fresh.addr),
        16,
        seconds * 2,
        &random,
    );
    let (_, metrics) = fresh.admin_get("/metrics").await;
    let lookups = |level: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| {
                l.starts_with("tp_edge_cache_lookups_total")
                    && l.contains("kind=\"registry\"")
                    && l.contains(&format!("level=\"{level}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let (l1, l2_hits, l3) = (lookups("l1"), lookups("l2"), lookups("l3"));
    if l1 + l2_hits + l3 == 0.0 {
        let sample: Vec<&str> = metrics
            .lines()
            .filter(|l| l.contains("cache_lookups") && !l.starts_with('#'))
            .collect();
        table.notes.push(format!(
            "(no registry lookups counted; metrics sample: {sample:?})"
        ));
    }
    let total = (l1 + l2_hits + l3).max(1.0);
    let scale_rss = rss_mib(fresh.process.pid().unwrap_or(0));
    table.load(
        &format!(
            "scale: {} tenants in Redis, random keys, fresh edge",
            options.tenants
        ),
        &scale,
        None,
        Some(scale_rss),
    );
    table.notes.push(format!(
        "scale: registry lookups L1 {:.1} %, Redis {:.1} %, control plane {:.1} %; edge RSS {scale_rss:.1} MiB after {} requests over {} tenants (target ≤ 100 MiB)",
        100.0 * l1 / total,
        100.0 * l2_hits / total,
        100.0 * l3 / total,
        scale.requests,
        options.tenants
    ));

    // Every tenant resident: each key once more on the same edge, then what the caches hold.
    let resident = touch_every_key(&fresh.addr, &keys).await;
    let resident_rss = rss_mib(fresh.process.pid().unwrap_or(0));
    let (_, ready) = fresh.get("/readyz").await;
    let ready: Value = serde_json::from_str(&ready).unwrap_or_default();
    let held = ready["cache"]["registries"].as_u64().unwrap_or(0);
    table.load(
        &format!(
            "resident: every one of {} tenants once more",
            options.tenants
        ),
        &resident,
        None,
        Some(resident_rss),
    );
    table.notes.push(format!(
        "resident: the edge's in-process cache holds {held} registries and {} identities; edge RSS {resident_rss:.1} MiB, {fresh_rss:.1} MiB when it started: {:.2} KiB per resident tenant",
        ready["cache"]["identities"].as_u64().unwrap_or(0),
        (resident_rss - fresh_rss) * 1024.0 / (held.max(1) as f64)
    ));

    println!(
        "\nToolplane edge benchmark ({} s per load run; servers on core 0, wrk -t1 on core 1; release build)\n",
        seconds
    );
    table.print();
    println!("\ntotal time {:.0} s", started.elapsed().as_secs_f64());
    let errors: u64 = table
        .rows
        .iter()
        .filter_map(|r| r[4].parse::<u64>().ok())
        .sum();
    if errors > 0 {
        bail!("{errors} errors across the scenarios");
    }
    Ok(())
}

/// Waits until an edge's watch stream has caught up with the control plane (otherwise it
/// serves through its degraded path and the figures measure that).
/// `tools/list` with every key once, 16 at a time, from this process.
async fn touch_every_key(addr: &str, keys: &[String]) -> Load {
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
        .buffer_unordered(16)
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

async fn wait_synced(edge: &EdgeProcess) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let (_, ready) = edge.get("/readyz").await;
        if ready.contains("\"watch_synced\":true") {
            return Ok(());
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

fn run_ctl(args: &[&str]) -> anyhow::Result<()> {
    let status = std::process::Command::new(binary("toolplanectl"))
        .args(args)
        .status()?;
    if !status.success() {
        bail!("toolplanectl {args:?} failed");
    }
    Ok(())
}
