//! `tp-wiki`: the wiki executor (`client_wiki`) over gRPC.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// The Toolplane wiki service.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// gRPC listen address.
    #[arg(long, default_value = "127.0.0.1:50052")]
    listen: String,
    /// Folder holding `wiki/{tenant}/…` (ignored with --s3-bucket).
    #[arg(long, default_value = ".toolplane/wiki")]
    data_dir: PathBuf,
    /// Fetch URLs on loopback and private networks too (tests only).
    #[arg(long)]
    allow_private_urls: bool,
    /// Fetch plain http:// URLs too.
    #[arg(long)]
    allow_http: bool,
    /// Once listening, write the bound address here.
    #[arg(long)]
    ready_file: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tp_telemetry::init("info", false);
    let storage = tp_wiki::Storage::local(&args.data_dir)
        .with_context(|| format!("opening {}", args.data_dir.display()))?;
    let fetcher = tp_wiki::Fetcher::new(tp_wiki::FetchConfig {
        allow_private: args.allow_private_urls,
        allow_http: args.allow_http,
        ..Default::default()
    })?;
    let service = tp_wiki::WikiService::new(tp_wiki::Wiki::new(storage), fetcher);
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    if let Some(path) = &args.ready_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{addr}\n"))?;
        std::fs::rename(&tmp, path)?;
    }
    tracing::info!(%addr, data_dir = %args.data_dir.display(), "wiki listening");
    tp_wiki::serve(service, listener, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}
