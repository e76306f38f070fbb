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
    /// A control plane the conformance hook `test_trigger_tool_change` may change the
    /// catalogue of (with --admin-token-file). Off by default.
    #[arg(long, requires = "admin_token_file")]
    control_plane: Option<String>,
    /// The admin token for --control-plane.
    #[arg(long, requires = "control_plane")]
    admin_token_file: Option<PathBuf>,
    /// Keys the edges sign calls with (one `tpx_…` per line, re-read when the file changes;
    /// `toolplanectl executor-key` prints the fleet's). Unsigned calls are refused.
    #[arg(long, env = "TOOLPLANE_EXECUTOR_AUTH_KEY_FILE")]
    auth_key_file: Option<PathBuf>,
    /// The keys themselves (`tpx_…`, comma-separated), when no key file is given.
    #[arg(long, env = "TOOLPLANE_EXECUTOR_AUTH_KEY", hide_env_values = true)]
    auth_key: Option<String>,
    /// Accept unsigned calls (only where nothing but the edges can reach the executor).
    #[arg(long)]
    allow_unsigned: bool,
    /// Serve gRPC over TLS with this PEM certificate chain (with --tls-key; reloaded when the
    /// files change).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by these PEM CAs (mutual TLS with the edges).
    #[arg(long, requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
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
    let admin = match (&args.control_plane, &args.admin_token_file) {
        (Some(url), Some(path)) => {
            let token = std::fs::read_to_string(path)
                .with_context(|| format!("--admin-token-file {}", path.display()))?;
            Some(
                tp_demo_executor::Admin::new(url, token.trim()).with_context(|| {
                    format!("--control-plane {url:?} is not a URL like http://127.0.0.1:50051")
                })?,
            )
        }
        _ => None,
    };
    let auth = tp_proto::invoke_auth::CallerAuth::from_flags(
        args.auth_key_file.as_deref(),
        args.auth_key.as_deref(),
        args.allow_unsigned,
    )
    .map_err(anyhow::Error::msg)?;
    if args.check_config {
        println!("tp-demo-executor: configuration is valid: listen {listen}");
        return Ok(());
    }
    let _telemetry = tp_telemetry::init("info", false, "toolplane-demo-executor");
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    if let Some(path) = &args.ready_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{addr}\n"))?;
        std::fs::rename(&tmp, path)?;
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let files = tp_net::tls::TlsFiles {
                cert_file: cert.clone(),
                key_file: key.clone(),
                client_ca_file: args.tls_client_ca.clone().unwrap_or_default(),
            };
            let tls = tp_net::tls::ReloadingTls::load(files, &[b"h2"]).context("--tls-cert")?;
            tls.spawn_reloader(tp_net::tls::RELOAD_EVERY);
            Some(tls)
        }
        _ => None,
    };
    tracing::info!(%addr, tls = tls.is_some(), "demo executor listening");
    tp_demo_executor::serve_tls(
        listener,
        tp_demo_executor::DemoExecutor::new(auth).with_admin(admin),
        tp_telemetry::shutdown_signal(),
        tls,
    )
    .await
}
