//! `tp-edge`: the MCP edge.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use figment::providers::Serialized;
use tp_edge::config;

/// The Toolplane MCP edge.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// TOML configuration file (keys: docs/configuration.md).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Listen address.
    #[arg(long)]
    listen: Option<String>,
    /// Control-plane URL (repeat for several replicas).
    #[arg(long = "control-plane")]
    control_plane: Vec<String>,
    /// File holding the edge token.
    #[arg(long)]
    edge_token_file: Option<String>,
    /// Redis URL.
    #[arg(long)]
    redis_url: Option<String>,
    /// Edge name for logs and audit records.
    #[arg(long)]
    name: Option<String>,
    /// Log format, `text` or `json` (`log.format`; overrides the file and environment).
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
    /// Once listening, write the bound address here.
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Load and validate the configuration (file, environment, flags), print a summary and exit.
    #[arg(long)]
    check_config: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut figment = config::figment(args.config.as_deref());
    if let Some(listen) = &args.listen {
        figment = figment.merge(Serialized::default("listen", listen));
    }
    if !args.control_plane.is_empty() {
        figment = figment.merge(Serialized::default("control_plane", &args.control_plane));
    }
    if let Some(file) = &args.edge_token_file {
        figment = figment.merge(Serialized::default("edge_token_file", file));
    }
    if let Some(url) = &args.redis_url {
        figment = figment.merge(Serialized::default("redis_url", url));
    }
    if let Some(name) = &args.name {
        figment = figment.merge(Serialized::default("name", name));
    }
    if let Some(format) = &args.log_format {
        figment = figment.merge(Serialized::default("log.format", format));
    }
    let config = config::load(figment)?;
    if args.check_config {
        println!(
            "tp-edge: configuration is valid: listen {}, control plane {}, redis {}, page size {}",
            config.listen,
            config.control_plane.join(","),
            if config.redis_url.is_some() {
                "on"
            } else {
                "off"
            },
            config.mcp.page_size,
        );
        return Ok(());
    }
    let _telemetry = tp_telemetry::init(&config.log_level, config.log_json, "toolplane-edge");
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
