//! `toolplane up`: the whole stack in one process on embedded defaults — the control plane
//! (SQLite under the data dir), the demo executor, the wiki service and one MCP edge (in-process cache; Redis
//! only when a URL is given) — seeded with the demo world on first start. Prints how to
//! connect and writes the same to `<data-dir>/credentials.json` (mode 0600). Ctrl-C or SIGTERM
//! stops everything; a second `up` reuses the data and the keys.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use figment::providers::Serialized;
use serde_json::{Value, json};
use tokio::sync::watch;
use tp_proto::pb;

use tp_client::Admin;

/// `up [--data-dir D] [--mcp-listen A] [--grpc-listen A] [--executor-listen A] [--redis-url U]`
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Where the SQLite database, tokens and credentials live.
    #[arg(long, default_value = ".toolplane")]
    pub data_dir: PathBuf,
    /// MCP edge listen address (MCP at /mcp).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub mcp_listen: String,
    /// Control-plane gRPC listen address.
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub grpc_listen: String,
    /// Demo executor listen address.
    #[arg(long, default_value = "127.0.0.1:50053")]
    pub executor_listen: String,
    /// Wiki service listen address (`client_wiki`; pages under `<data-dir>/wiki/{tenant}`).
    #[arg(long, default_value = "127.0.0.1:50052")]
    pub wiki_listen: String,
    /// The edge's admin listener (`/metrics`); keep it off the network clients reach.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub admin_listen: String,
    /// Redis for the edge's shared cache and rate limits (default: in-process only).
    #[arg(long, env = "TOOLPLANE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Do not seed the demo world into an empty store.
    #[arg(long)]
    pub no_demo: bool,
    /// Log format: `text` (coloured on a terminal, never with NO_COLOR) or `json`.
    #[arg(long, env = "TOOLPLANE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// Once everything is ready, write the MCP address here (for launchers and tests).
    #[arg(long, hide = true)]
    pub ready_file: Option<PathBuf>,
}

/// The label of the keys `up` issues (still the name `up` had when it lived in the CLI:
/// keys issued then are recognised, and revoked, by the same label).
const UP_LABEL: &str = "toolplanectl up";

/// Demo tenants and roles that get a key each.
const DEMO_TENANTS: [&str; 3] = ["acme", "globex", "initech"];
const DEMO_ROLES: [&str; 2] = ["collector", "executor"];

/// Runs the stack until Ctrl-C or SIGTERM.
pub async fn up(args: UpArgs) -> anyhow::Result<i32> {
    let _telemetry = tp_telemetry::init("info", args.log_format == "json", "toolplane");
    // Before anything starts (or is created): a damaged credentials file or a port someone
    // holds stops `up` with a sentence, not half a stack, and leaves no empty data folder.
    let credentials_path = args.data_dir.join("credentials.json");
    let earlier = preflight(&args, &credentials_path)?;
    let stage = Stages::new(args.log_format == "json");
    let (stop_tx, stop_rx) = watch::channel(false);
    // The edge stops first and finishes the calls it holds; the services behind it stop after.
    let (edge_stop_tx, edge_stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };

    // 0. The fleet secret (the edge token, kept in the data dir) and the key the edge signs
    // executor calls with, derived from it: the executors accept only that.
    let edge_token = tp_control_plane::server::token_file(&args.data_dir.join("edge-token"))?;
    let executor_key = tp_proto::invoke_auth::ExecutorKey::derive(&edge_token);
    let executor_auth = tp_proto::invoke_auth::CallerAuth::keys(vec![executor_key]);

    // 1. The demo executor.
    stage.say("starting the demo executor");
    let listener = tokio::net::TcpListener::bind(&args.executor_listen)
        .await
        .with_context(|| format!("binding the demo executor to {}", args.executor_listen))?;
    let executor_addr = listener.local_addr()?;
    let executor_task = tokio::spawn(tp_demo_executor::serve(
        listener,
        executor_auth.clone(),
        stopped(),
    ));

    // 1b. The wiki service, with its pages under the data dir.
    stage.say("starting the wiki service");
    let listener = tokio::net::TcpListener::bind(&args.wiki_listen)
        .await
        .with_context(|| format!("binding the wiki service to {}", args.wiki_listen))?;
    let wiki_addr = listener.local_addr()?;
    let wiki = tp_wiki::WikiService::new(
        tp_wiki::Wiki::new(tp_wiki::Storage::local(&args.data_dir)?)
            .with_index_dir(args.data_dir.join("index")),
        tp_wiki::Fetcher::new(tp_wiki::FetchConfig::default())?,
        executor_auth,
    );
    let wiki_task = tokio::spawn(tp_wiki::serve(wiki, listener, stopped()));

    // 2. The control plane, seeded on first start.
    let cp_config = control_plane_config(&args, executor_addr, wiki_addr)?;
    stage.say(&format!(
        "opening the store under {} (a large store takes a few seconds)",
        args.data_dir.display()
    ));
    let control_plane = tp_control_plane::ControlPlane::start(&cp_config, stopped()).await?;
    let cp_url = format!("http://{}", control_plane.addr);
    let mut admin = Admin::connect(&cp_url, &control_plane.tokens.admin).await?;
    // The executors may listen elsewhere than when the world was seeded: point them here.
    point_executor(&mut admin, "demo", executor_addr).await?;
    point_executor(&mut admin, "wiki", wiki_addr).await?;

    // 3. One edge.
    stage.say("starting the MCP edge");
    let edge_config = edge_config(&args, &cp_url, &control_plane.tokens.edge)?;
    let edge = tp_edge::start(edge_config, {
        let mut rx = edge_stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    })
    .await?;

    // 4. Keys and how to connect.
    stage.say("checking the demo keys");
    let keys = demo_access(args.no_demo, &mut admin, &earlier).await?;
    stage.done();
    publish(&args, &credentials_path, edge.addr, &control_plane, &keys)?;

    tp_telemetry::shutdown_signal().await;
    tracing::info!("stopping");
    let _ = edge_stop_tx.send(true);
    let edge_result = edge.task.await;
    let _ = stop_tx.send(true);
    let (cp_result, executor_result, wiki_result) =
        tokio::join!(control_plane.task, executor_task, wiki_task);
    edge_result.context("edge task")??;
    cp_result.context("control-plane task")??;
    executor_result.context("executor task")??;
    wiki_result.context("wiki task")??;
    tracing::info!("stopped");
    Ok(0)
}

/// Before anything starts (or is created): a damaged credentials file or a port someone holds
/// stops `up` with a sentence, not half a stack, and leaves no empty data folder. The keys of
/// an earlier `up`, and the data folder created.
fn preflight(args: &UpArgs, credentials_path: &std::path::Path) -> anyhow::Result<Value> {
    let earlier = earlier_credentials(credentials_path)?;
    for (flag, addr) in [
        ("--mcp-listen", &args.mcp_listen),
        ("--grpc-listen", &args.grpc_listen),
        ("--executor-listen", &args.executor_listen),
        ("--wiki-listen", &args.wiki_listen),
        ("--admin-listen", &args.admin_listen),
    ] {
        crate::ports::check_free(flag, addr)?;
    }
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    Ok(earlier)
}

/// The control plane's configuration: the flags' addresses and data folder, the executors
/// where this process serves them, the demo world unless `--no-demo`.
fn control_plane_config(
    args: &UpArgs,
    executor_addr: SocketAddr,
    wiki_addr: SocketAddr,
) -> anyhow::Result<tp_control_plane::config::ControlPlaneConfig> {
    let mut figment = tp_control_plane::config::figment(None)
        .merge(Serialized::default("listen", &args.grpc_listen))
        .merge(Serialized::default("data_dir", &args.data_dir))
        .merge(Serialized::default(
            "bootstrap.demo_executor",
            format!("http://{executor_addr}"),
        ))
        .merge(Serialized::default(
            "bootstrap.wiki_executor",
            format!("http://{wiki_addr}"),
        ));
    if !args.no_demo {
        figment = figment.merge(Serialized::default("bootstrap.demo", true));
    }
    tp_control_plane::config::load(figment)
}

/// The edge's configuration: one local edge, behind no balancer — Ctrl-C stops it at once;
/// what its audit could not deliver waits under the data folder for the next `up`.
fn edge_config(
    args: &UpArgs,
    control_plane: &str,
    edge_token: &str,
) -> anyhow::Result<tp_edge::EdgeConfig> {
    let mut figment = tp_edge::config::figment(None)
        .merge(Serialized::default("listen", &args.mcp_listen))
        .merge(Serialized::default("admin_listen", &args.admin_listen))
        .merge(Serialized::default("control_plane", vec![control_plane]))
        .merge(Serialized::default("edge_token", edge_token))
        .merge(Serialized::default("name", "up"))
        .merge(Serialized::default("shutdown.grace_ms", 0))
        .merge(Serialized::default(
            "audit.spill_dir",
            args.data_dir.join("edge-audit"),
        ));
    if let Some(url) = &args.redis_url {
        figment = figment.merge(Serialized::default("redis_url", url));
    }
    tp_edge::config::load(figment)
}

/// Writes the credentials file (owner-only), prints how to connect, and writes the ready
/// file (the edge's address) when asked.
fn publish(
    args: &UpArgs,
    credentials_path: &std::path::Path,
    edge: SocketAddr,
    control_plane: &tp_control_plane::ControlPlane,
    keys: &[(String, String, String)],
) -> anyhow::Result<()> {
    let admin_token_file = args.data_dir.join("admin-token");
    let credentials = credentials(
        edge,
        control_plane.addr,
        keys,
        &control_plane.tokens.admin,
        &admin_token_file,
    );
    tp_control_plane::server::write_private(
        credentials_path,
        &serde_json::to_string_pretty(&credentials)?,
    )
    .with_context(|| format!("writing {}", credentials_path.display()))?;
    print_banner(&credentials, credentials_path);
    if let Some(path) = &args.ready_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{edge}\n"))?;
        std::fs::rename(&tmp, path)?;
    }
    Ok(())
}

/// Upserts an executor's endpoint to where this process serves it, keeping the rest.
async fn point_executor(admin: &mut Admin, name: &str, addr: SocketAddr) -> anyhow::Result<()> {
    let existing = admin
        .executors
        .list_executors(pb::ListExecutorsRequest::default())
        .await?
        .into_inner()
        .executors
        .into_iter()
        .find(|e| e.name == name);
    let Some(mut executor) = existing else {
        return Ok(());
    };
    let endpoint = format!("http://{addr}");
    if executor.endpoint != endpoint {
        executor.endpoint = endpoint;
        admin
            .executors
            .upsert_executor(pb::UpsertExecutorRequest {
                update_mask: None,
                executor: Some(executor),
            })
            .await?;
    }
    Ok(())
}

/// The credentials an earlier `up` wrote (`Null` when there are none). A file that is there
/// but damaged stops `up`: replacing it would issue new keys while the ones it listed stay
/// live with nothing pointing at them.
fn earlier_credentials(path: &Path) -> anyhow::Result<Value> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Value::Null),
        Err(error) => {
            return Err(error).with_context(|| format!("reading {}", path.display()));
        }
    };
    let parsed: Result<Value, String> =
        serde_json::from_str::<Value>(&text).map_err(|e| e.to_string());
    let problem = match &parsed {
        Err(error) => Some(error.clone()),
        Ok(value) if !value["keys"].is_array() => Some("it has no \"keys\" list".to_owned()),
        Ok(_) => None,
    };
    match (parsed, problem) {
        (Ok(value), None) => Ok(value),
        (_, problem) => anyhow::bail!(
            "{path} is damaged ({problem}); nothing was started or changed.\n  \
             The demo keys it listed may still be live. To start over, move it aside \
             (mv {path} {path}.damaged) and run `up` again: it issues new demo keys and revokes \
             the ones an earlier `up` issued, so none is left live with nothing pointing at it.",
            path = path.display(),
            problem = problem.unwrap_or_default()
        ),
    }
}

/// One key per demo (tenant, role): reused from an earlier `credentials.json` while the control
/// plane still accepts it; otherwise a new one is issued and every other live key an earlier
/// `up` issued for that (tenant, role) is revoked, so no demo key is left live that no file
/// names.
async fn demo_keys(
    admin: &mut Admin,
    earlier: &Value,
) -> anyhow::Result<Vec<(String, String, String)>> {
    let mut keys = Vec::new();
    let mut revoked = 0;
    for tenant in DEMO_TENANTS {
        for role in DEMO_ROLES {
            let previous = earlier["keys"].as_array().and_then(|keys| {
                keys.iter()
                    .find(|k| k["tenant"] == tenant && k["role"] == role)
                    .and_then(|k| k["key"].as_str())
                    .map(str::to_owned)
            });
            let still_valid = match &previous {
                Some(key) => admin
                    .registry
                    .authenticate(pb::AuthenticateRequest {
                        key: key.clone(),
                        resource: String::new(),
                    })
                    .await
                    .is_ok_and(|identity| {
                        let identity = identity.into_inner();
                        identity.tenant == tenant && identity.role == role
                    }),
                None => false,
            };
            let key = match previous {
                Some(key) if still_valid => key,
                _ => {
                    match admin
                        .tenants
                        .issue_api_key(pb::IssueApiKeyRequest {
                            tenant: tenant.into(),
                            role: role.into(),
                            label: UP_LABEL.into(),
                            ..Default::default()
                        })
                        .await
                    {
                        Ok(issued) => {
                            let issued = issued.into_inner();
                            let id = issued.info.map(|i| i.id).unwrap_or_default();
                            revoked += revoke_earlier(admin, tenant, role, &id).await?;
                            issued.key
                        }
                        // The operator deleted the tenant or removed the role: no key for it.
                        Err(status) if status.code() == tonic::Code::NotFound => continue,
                        Err(status) if status.code() == tonic::Code::FailedPrecondition => continue,
                        Err(status) => return Err(status.into()),
                    }
                }
            };
            keys.push((tenant.to_owned(), role.to_owned(), key));
        }
    }
    if revoked > 0 {
        tracing::info!(
            revoked,
            "revoked the demo keys an earlier `up` issued that no credentials file names any more"
        );
    }
    Ok(keys)
}

/// The demo keys and the demo connection (none with `--no-demo`).
async fn demo_access(
    no_demo: bool,
    admin: &mut Admin,
    earlier: &Value,
) -> anyhow::Result<Vec<(String, String, String)>> {
    if no_demo {
        return Ok(Vec::new());
    }
    let keys = demo_keys(admin, earlier).await?;
    demo_connection(admin).await?;
    Ok(keys)
}

/// The demo's connection (ADR 0015): acme's HubSpot credential, a made-up token, so that a call
/// of acme's HubSpot tools shows a tenant's credential reaching the executor (sealed to its
/// key; the demo names its fingerprint). Made once: a connection already there is kept, and a
/// demo world the operator changed (acme or hubspot gone) is left as it is.
async fn demo_connection(admin: &mut Admin) -> anyhow::Result<()> {
    let listed = admin
        .tenants
        .list_connections(pb::ListConnectionsRequest {
            tenant: "acme".into(),
        })
        .await;
    match listed {
        Ok(listed)
            if listed
                .get_ref()
                .connections
                .iter()
                .any(|c| c.provider == "hubspot") =>
        {
            return Ok(());
        }
        Ok(_) => {}
        Err(status) if status.code() == tonic::Code::NotFound => return Ok(()),
        Err(status) => return Err(status.into()),
    }
    let token: [u8; 16] = rand::random();
    let request = pb::ConnectProviderRequest {
        tenant: "acme".into(),
        provider: "hubspot".into(),
        credential: format!("demo-hubspot-{}", hex::encode(token)),
        expires_at: 0,
        user: String::new(),
    };
    match admin.tenants.connect_provider(request).await {
        Ok(_) => Ok(()),
        Err(status)
            if matches!(
                status.code(),
                tonic::Code::NotFound | tonic::Code::InvalidArgument
            ) =>
        {
            tracing::info!(reason = %status.message(), "no demo connection for acme");
            Ok(())
        }
        Err(status) => Err(status.into()),
    }
}

/// Revokes the live keys of (tenant, role) labelled as `up`'s other than `keep`.
async fn revoke_earlier(
    admin: &mut Admin,
    tenant: &str,
    role: &str,
    keep: &str,
) -> anyhow::Result<usize> {
    let listed = admin
        .tenants
        .list_api_keys(pb::ListApiKeysRequest {
            tenant: tenant.into(),
        })
        .await?
        .into_inner()
        .keys;
    let mut revoked = 0;
    for key in listed {
        if key.role == role && key.label == UP_LABEL && key.revoked_at == 0 && key.id != keep {
            admin
                .tenants
                .revoke_api_key(pb::RevokeApiKeyRequest { id: key.id })
                .await?;
            revoked += 1;
        }
    }
    Ok(revoked)
}

/// Prints what `up` is doing while it starts, with how long each step took: lines of its own
/// on stderr, or log events when the logs are JSON (so that stderr stays one format).
struct Stages {
    started: std::time::Instant,
    step: std::cell::Cell<std::time::Instant>,
    json: bool,
}

impl Stages {
    fn new(json: bool) -> Stages {
        let now = std::time::Instant::now();
        Stages {
            started: now,
            step: std::cell::Cell::new(now),
            json,
        }
    }

    fn line(&self, text: &str) {
        if self.json {
            tracing::info!(target: "toolplane::up", "{text}");
        } else {
            eprintln!("up: {text}");
        }
    }

    fn say(&self, what: &str) {
        let now = std::time::Instant::now();
        let last = self.step.replace(now);
        let slow = now.duration_since(last);
        if slow >= std::time::Duration::from_secs(1) {
            self.line(&format!("(that took {:.1} s)", slow.as_secs_f64()));
        }
        self.line(&format!("{what}…"));
    }

    fn done(&self) {
        self.line(&format!(
            "ready in {:.1} s",
            self.started.elapsed().as_secs_f64()
        ));
    }
}

fn credentials(
    mcp: SocketAddr,
    grpc: SocketAddr,
    keys: &[(String, String, String)],
    admin_token: &str,
    admin_token_file: &Path,
) -> Value {
    let mcp_url = format!("http://{mcp}/mcp");
    let example_key = keys
        .iter()
        .find(|(t, r, _)| t == "acme" && r == "collector")
        .or(keys.first())
        .map(|(_, _, k)| k.as_str())
        .unwrap_or("<key>");
    let curl = format!(
        "curl -s {mcp_url} -H 'Authorization: Bearer {example_key}' -H 'Content-Type: application/json' \
         -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-11-25' \
         -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}}'"
    );
    let grpcurl = format!(
        "grpcurl -plaintext -H \"authorization: Bearer $(cat {})\" {grpc} toolplane.v1.Policy/GetPolicy",
        admin_token_file.display()
    );
    json!({
        "mcp_url": mcp_url,
        "grpc_addr": grpc.to_string(),
        "admin_token": admin_token,
        "admin_token_file": admin_token_file.display().to_string(),
        "keys": keys.iter().map(|(tenant, role, key)| json!({"tenant": tenant, "role": role, "key": key})).collect::<Vec<_>>(),
        "curl": curl,
        "grpcurl": grpcurl,
        // Claude Code's `.mcp.json` (project scope), kept under its earlier name.
        "mcp_client_config": {
            "mcpServers": {
                "toolplane": {
                    "type": "http",
                    "url": mcp_url,
                    "headers": {"Authorization": format!("Bearer {example_key}")}
                }
            }
        },
        "clients": clients(&mcp_url, example_key),
    })
}

/// How each MCP client connects, in its own configuration format. Claude Desktop's config file
/// takes stdio servers only, so it goes through the `mcp-remote` bridge (npm).
fn clients(mcp_url: &str, key: &str) -> Value {
    let bearer = format!("Bearer {key}");
    json!({
        "claude_code": {
            "command": format!(
                "claude mcp add --transport http toolplane {mcp_url} --header \"Authorization: {bearer}\""
            ),
        },
        "cursor": {
            "file": "~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
            "config": {"mcpServers": {"toolplane": {"url": mcp_url, "headers": {"Authorization": bearer}}}},
        },
        "vscode": {
            "file": ".vscode/mcp.json",
            "config": {"servers": {"toolplane": {"type": "http", "url": mcp_url, "headers": {"Authorization": bearer}}}},
        },
        "claude_desktop": {
            "file": "claude_desktop_config.json (stdio only: through the mcp-remote bridge)",
            "config": {"mcpServers": {"toolplane": {
                "command": "npx",
                "args": ["-y", "mcp-remote", mcp_url, "--header", "Authorization:${AUTH_HEADER}", "--transport", "http-only"],
                "env": {"AUTH_HEADER": bearer},
            }}},
        },
    })
}

fn print_banner(credentials: &Value, path: &Path) {
    let mut text = String::new();
    text.push_str("\nToolplane is up.\n\n");
    text.push_str(&format!(
        "  MCP (Streamable HTTP): {}\n",
        credentials["mcp_url"].as_str().unwrap_or_default()
    ));
    text.push_str(&format!(
        "  Control plane (gRPC):  {}   admin token in {}\n\n",
        credentials["grpc_addr"].as_str().unwrap_or_default(),
        credentials["admin_token_file"].as_str().unwrap_or_default()
    ));
    if let Some(keys) = credentials["keys"].as_array().filter(|k| !k.is_empty()) {
        text.push_str("  Demo keys:\n");
        for key in keys {
            text.push_str(&format!(
                "    {:<8} {:<10} {}\n",
                key["tenant"].as_str().unwrap_or_default(),
                key["role"].as_str().unwrap_or_default(),
                key["key"].as_str().unwrap_or_default()
            ));
        }
        text.push('\n');
    }
    text.push_str(&format!(
        "  Try it:\n    {}\n    {}\n\n",
        credentials["curl"].as_str().unwrap_or_default(),
        credentials["grpcurl"].as_str().unwrap_or_default()
    ));
    let clients = &credentials["clients"];
    text.push_str(&format!(
        "  Claude Code:\n    {}\n\n",
        clients["claude_code"]["command"]
            .as_str()
            .unwrap_or_default()
    ));
    for (name, key) in [
        ("Cursor", "cursor"),
        ("VS Code", "vscode"),
        ("Claude Desktop", "claude_desktop"),
    ] {
        text.push_str(&format!(
            "  {name}, in {}:\n{}\n\n",
            clients[key]["file"].as_str().unwrap_or_default(),
            serde_json::to_string_pretty(&clients[key]["config"]).unwrap_or_default()
        ));
    }
    text.push_str(
        "  acme's HubSpot tools run with acme's own (demo) credential for HubSpot: see it with\n    toolplanectl tenants connections acme\n\n",
    );
    text.push_str(&format!(
        "  All of the above is in {} (mode 0600). Ctrl-C stops everything.\n",
        path.display()
    ));
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}
