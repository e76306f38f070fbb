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
//! Usage: `bash scripts/bench.sh [--quick] [--tenants N] [--seconds S] [--only SCENARIO,…]`
//! (builds the release binaries, then runs this). `tp-bench bare PORT FILE` is the baseline
//! server it starts. Layout: [`world`] builds what every scenario runs in, [`scenarios`] has one
//! function per scenario, [`wiki`] the wiki's (with a stack of its own), [`load`] drives wrk
//! and prints the table.
#![allow(
    clippy::too_many_lines,
    reason = "a benchmark scenario reads as one measurement, like the crates' benches"
)]

mod load;
mod scenarios;
mod wiki;
mod world;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use crate::scenarios::{Run, Scenario};

#[derive(Debug, Parser)]
#[command(
    name = "tp-bench",
    about = "Load benchmarks of the Toolplane edge, with baselines measured in the same run."
)]
struct Cli {
    /// Shorter runs: at most 5,000 bulk tenants, 2 s per load run, fewer calls and writes.
    #[arg(long)]
    quick: bool,
    /// Bulk tenants, each with a key (default 100,000; 5,000 with --quick).
    #[arg(long)]
    tenants: Option<usize>,
    /// Seconds per load run (default 5; 2 with --quick).
    #[arg(long)]
    seconds: Option<u64>,
    /// Only these scenarios (comma-separated), in the usual order.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Scenario>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The baseline server: answers every request with the bytes in FILE, as JSON.
    Bare {
        /// Port on 127.0.0.1.
        port: u16,
        /// The answer.
        file: PathBuf,
    },
    /// The floor of a `tools/call` through any axum + tonic proxy: reads each request, sends
    /// the executor at URL a signed `Invoke` of `discover_apis` (tenant `acme`), waits for its
    /// result, and answers with the bytes in FILE. None of the edge's own work is done.
    BareProxy {
        /// Port on 127.0.0.1.
        port: u16,
        /// The answer.
        file: PathBuf,
        /// The executor's gRPC URL (`http://127.0.0.1:PORT`).
        executor: String,
        /// The fleet's edge token, from which the executor key is derived.
        edge_token_file: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::Bare { port, file }) => return bare(*port, file),
        Some(Command::BareProxy {
            port,
            file,
            executor,
            edge_token_file,
        }) => return bare_proxy(*port, file, executor, edge_token_file),
        None => {}
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(cli))
}

/// The baseline: an axum server that answers every request with the bytes in `file` (the
/// edge's own warm answer), as `application/json`. It reads each request's body first, as
/// any MCP server must: a handler that answers before the body has arrived makes hyper close
/// the connection (a race, one request in a few hundred on this machine), and the client's
/// reconnections were counted against the baseline until 2026-11-27.
fn bare(port: u16, file: &std::path::Path) -> anyhow::Result<()> {
    let body = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let body = axum::body::Bytes::from(body);
        let app = axum::Router::new().fallback(move |_request: axum::body::Bytes| {
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

/// One signed `Invoke` of `discover_apis` for tenant `acme`, its events read until the result:
/// whether one came.
async fn invoke_once(
    key: &tp_proto::invoke_auth::ExecutorKey,
    client: &mut tp_proto::pb::executor_client::ExecutorClient<tonic::transport::Channel>,
) -> bool {
    use tp_proto::pb;
    let request = pb::InvokeRequest {
        tool: "discover_apis".to_owned(),
        tenant: "acme".to_owned(),
        role: "collector".to_owned(),
        request_id: "bare-proxy".to_owned(),
        deadline_ms: tp_proto::clock::now_ms() + 10_000,
        arguments: Some(prost_types::Struct::default()),
        ..Default::default()
    };
    let mut request = tonic::Request::new(request);
    request.set_timeout(std::time::Duration::from_secs(10));
    key.sign_request("Invoke", &mut request);
    let Ok(response) = client.invoke(request).await else {
        return false;
    };
    let mut events = response.into_inner();
    while let Ok(Some(event)) = events.message().await {
        if let Some(pb::invoke_event::Event::Result(_)) = event.event {
            return true;
        }
    }
    false
}

/// The proxy baseline (see [`Command::BareProxy`]): per request what no MCP-to-gRPC proxy of
/// this stack can skip — the HTTP request read, one signed gRPC call to the executor with its
/// result read, the fixed answer written — and nothing else (no parse, no authentication, no
/// validation, no audit, no access line).
fn bare_proxy(
    port: u16,
    file: &std::path::Path,
    executor: &str,
    edge_token_file: &std::path::Path,
) -> anyhow::Result<()> {
    use tp_proto::pb;
    let body = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let token = std::fs::read_to_string(edge_token_file)
        .with_context(|| format!("reading {}", edge_token_file.display()))?;
    let key = std::sync::Arc::new(tp_proto::invoke_auth::ExecutorKey::derive(token.trim()));
    // A subscriber that takes nothing, as the edge's filter takes none of h2's and tonic's
    // spans: without one, `tracing` turns every span of theirs into a `log` record (13 k
    // instructions per call that no server with a subscriber pays).
    tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::default())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let executor = executor.to_owned();
    runtime.block_on(async move {
        let channel = tonic::transport::Endpoint::from_shared(executor)?.connect_lazy();
        let client = pb::executor_client::ExecutorClient::new(channel);
        let body = axum::body::Bytes::from(body);
        let app = axum::Router::new().fallback(move |_request: axum::body::Bytes| {
            let (body, key, mut client) = (body.clone(), key.clone(), client.clone());
            async move {
                let ok = invoke_once(&key, &mut client).await;
                // A failed executor call answers without a result, which the script refuses.
                let answer = if ok {
                    body
                } else {
                    axum::body::Bytes::from_static(b"{\"error\":\"the executor call failed\"}")
                };
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    answer,
                )
            }
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        axum::serve(listener, app).await?;
        Ok(())
    })
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    load::ensure_wrk()?;
    load::pin(std::process::id(), 1);
    let started = Instant::now();
    let tenants = match (cli.tenants, cli.quick) {
        (Some(n), _) => n,
        (None, true) => 5_000,
        (None, false) => 100_000,
    };
    let run = Run {
        seconds: cli.seconds.unwrap_or(if cli.quick { 2 } else { 5 }),
        quick: cli.quick,
    };
    let selected: Vec<Scenario> = if cli.only.is_empty() {
        <Scenario as clap::ValueEnum>::value_variants().to_vec()
    } else {
        <Scenario as clap::ValueEnum>::value_variants()
            .iter()
            .copied()
            .filter(|s| cli.only.contains(s))
            .collect()
    };
    let mut table = load::Table::default();
    // The wiki scenario brings a stack of its own: the world is built only for the others.
    let mut world = None;
    for scenario in selected {
        if scenario == Scenario::Wiki {
            wiki::run(run, &mut table).await?;
            continue;
        }
        let world = match &mut world {
            Some(world) => world,
            None => world.insert(world::build(tenants, &mut table).await?),
        };
        scenarios::run(scenario, world, run, &mut table).await?;
    }
    let build = if cfg!(debug_assertions) {
        "DEBUG build: these figures say nothing; use scripts/bench.sh"
    } else {
        "release build"
    };
    println!(
        "\nToolplane edge benchmark ({} s per load run; servers on core 0, wrk -t1 on core 1; {build})\n",
        run.seconds
    );
    table.print();
    println!("\ntotal time {:.0} s", started.elapsed().as_secs_f64());
    if !table.missed.is_empty() {
        bail!("goals missed: {}", table.missed.join("; "));
    }
    let errors = table.errors();
    if errors > 0 {
        bail!("{errors} errors across the scenarios");
    }
    Ok(())
}
