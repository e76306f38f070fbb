//! `tp-control-plane`: serves the catalogue, policy, tenants, executors and the change stream.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use figment::providers::Serialized;
use serde::Serialize;
use tp_control_plane::{ControlPlane, config};

/// The Toolplane control plane.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// TOML configuration file (keys: see docs/configuration.md).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Settings given as flags: the last layer of the configuration (defaults < file <
    /// environment < flags), merged by figment as one provider.
    #[command(flatten)]
    settings: Flags,
    /// Once listening, write the bound address to this file (for launchers and tests that
    /// listen on port 0).
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Load and validate the configuration (file, environment, flags), print a summary and exit.
    #[arg(long)]
    check_config: bool,
}

/// The configuration keys a flag can set; a flag not given sets nothing.
#[derive(Debug, clap::Args, Serialize)]
struct Flags {
    /// Listen address (overrides the file and environment).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<String>,
    /// Data directory (overrides the file and environment).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    #[serde(skip_serializing_if = "BootstrapFlags::is_empty")]
    bootstrap: BootstrapFlags,
    #[command(flatten)]
    #[serde(skip_serializing_if = "tp_telemetry::LogFlags::is_empty")]
    log: tp_telemetry::LogFlags,
}

/// `[bootstrap]` keys given as flags.
#[derive(Debug, clap::Args, Serialize)]
struct BootstrapFlags {
    /// Seed the demo world into an empty store (`bootstrap.demo`).
    #[arg(long = "demo")]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    demo: bool,
}

impl BootstrapFlags {
    fn is_empty(&self) -> bool {
        !self.demo
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let figment =
        config::figment(args.config.as_deref()).merge(Serialized::defaults(&args.settings));
    let config = config::load(figment)?;
    if args.check_config {
        println!(
            "tp-control-plane: configuration is valid: listen {}, store {}, demo {}",
            config.listen,
            if config.postgres_url.is_some() {
                "postgres".to_owned()
            } else {
                format!("sqlite {}", config.sqlite_path.display())
            },
            config.bootstrap.demo,
        );
        if let Some(oidc) = &config.admin_oidc {
            println!("{}", oidc.summary());
        }
        return Ok(());
    }
    let _telemetry = config.log.init("toolplane-control-plane");
    let control_plane = ControlPlane::start(&config, tp_telemetry::shutdown_signal()).await?;
    if let Some(path) = &args.ready_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{}\n", control_plane.addr))
            .context("writing the ready file")?;
        std::fs::rename(&tmp, path).context("writing the ready file")?;
    }
    let token_hint = if config.admin_token.is_some() {
        "from configuration".to_owned()
    } else {
        format!("in {}", config.data_dir.join("admin-token").display())
    };
    tracing::info!(addr = %control_plane.addr, admin_token = %token_hint, "ready");
    control_plane.task.await.context("server task")??;
    tracing::info!("stopped");
    Ok(())
}
