//! `tp-demo-executor`: serves the demo catalogue's tools (and the conformance and test tools)
//! over the `toolplane.v1.Executor` gRPC contract.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// The demo executor.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:50053")]
    listen: String,
    /// Write the bound address here once listening.
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Validate the flags, print a summary and exit.
    #[arg(long)]
    check_config: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let listen: std::net::SocketAddr = args.listen.parse().with_context(|| {
        format!(
            "--listen: {:?} is not an address like 127.0.0.1:50053",
            args.listen
        )
    })?;
    if args.check_config {
        println!("tp-demo-executor: configuration is valid: listen {listen}");
        return Ok(());
    }
    tp_telemetry::init("info", false);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    if let Some(path) = &args.ready_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{addr}\n"))?;
        std::fs::rename(&tmp, path)?;
    }
    tracing::info!(%addr, "demo executor listening");
    tp_demo_executor::serve(listener, tp_telemetry::shutdown_signal()).await
}
