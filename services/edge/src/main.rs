//! `tp-edge`: the MCP edge.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use figment::providers::Serialized;
use serde::Serialize;
use tp_edge::config;

/// The Toolplane MCP edge.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// TOML configuration file (keys: docs/configuration.md).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Settings given as flags: the last layer of the configuration (defaults < file <
    /// environment < flags), merged by figment as one provider.
    #[command(flatten)]
    settings: Flags,
    /// Once listening, write the bound address here.
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Load and validate the configuration (file, environment, flags), print a summary and exit.
    #[arg(long)]
    check_config: bool,
}

/// The configuration keys a flag can set; a flag not given sets nothing.
#[derive(Debug, clap::Args, Serialize)]
struct Flags {
    /// Listen address.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<String>,
    /// Control-plane URL (repeat for several replicas).
    #[arg(long = "control-plane")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    control_plane: Vec<String>,
    /// File holding the edge token.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    edge_token_file: Option<String>,
    /// Redis for the shared cache and fleet-wide rate limits (`redis://host:port`).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    redis_url: Option<String>,
    /// Edge name for logs and audit records.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[command(flatten)]
    #[serde(skip_serializing_if = "tp_telemetry::LogFlags::is_empty")]
    log: tp_telemetry::LogFlags,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let figment =
        config::figment(args.config.as_deref()).merge(Serialized::defaults(&args.settings));
    let config = config::load(figment)?;
    if args.check_config {
        println!(
            "tp-edge: configuration is valid: listen {}, control plane {}, redis {}, page size {}",
            config.listen,
            config.control_plane.join(","),
            if config.redis.is_some() { "on" } else { "off" },
            config.mcp.paging.page_size,
        );
        return Ok(());
    }
    let _telemetry = config.log.init("toolplane-edge");
    let edge = tp_edge::start_with(
        config,
        tp_telemetry::shutdown_signal(),
        tp_telemetry::shutdown_signal,
    )
    .await?;
    if let Some(path) = &args.ready_file {
        let tmp = path.with_extension("tmp");
        // The MCP address on the first line, the admin listener's on the second.
        let admin = edge.admin_addr.map(|a| a.to_string()).unwrap_or_default();
        std::fs::write(&tmp, format!("{}\n{admin}\n", edge.addr))
            .context("writing the ready file")?;
        std::fs::rename(&tmp, path).context("writing the ready file")?;
    }
    edge.task.await.context("server task")??;
    Ok(())
}
