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
    /// Folder holding `wiki/{tenant}/…` (the same data dir as `toolplane up`).
    #[arg(long, default_value = ".toolplane")]
    data_dir: PathBuf,
    /// Folder of the per-tenant search indexes (default `<data-dir>/index`). Local to each
    /// replica and rebuilt from the pages when missing or behind, so it needs no backup.
    #[arg(long)]
    index_dir: Option<PathBuf>,
    /// Keep pages in this S3-compatible bucket (R2, MinIO, S3) instead of the folder;
    /// credentials and region from the standard AWS_* environment variables.
    #[arg(long)]
    s3_bucket: Option<String>,
    /// Endpoint of the S3-compatible store (e.g. https://<account>.r2.cloudflarestorage.com).
    #[arg(long, requires = "s3_bucket")]
    s3_endpoint: Option<String>,
    /// Fetch URLs on loopback and private networks too (tests only).
    #[arg(long)]
    allow_private_urls: bool,
    /// Fetch plain http:// URLs too.
    #[arg(long)]
    allow_http: bool,
    /// Optional LLM engine: base URL of an OpenAI-compatible API (e.g. https://api.openai.com/v1).
    /// Without it the deterministic engine does everything.
    #[arg(long)]
    llm_url: Option<String>,
    /// Model for the LLM engine.
    #[arg(long, default_value = "gpt-4o-mini", requires = "llm_url")]
    llm_model: String,
    /// Environment variable holding the API key.
    #[arg(long, default_value = "OPENAI_API_KEY", requires = "llm_url")]
    llm_api_key_env: String,
    /// USD per 1,000 input tokens (for the cost cap).
    #[arg(long, default_value_t = 0.00015, requires = "llm_url")]
    llm_usd_per_1k_input: f64,
    /// USD per 1,000 output tokens (for the cost cap).
    #[arg(long, default_value_t = 0.0006, requires = "llm_url")]
    llm_usd_per_1k_output: f64,
    /// Keys the edges sign calls with (one `tpx_…` per line, re-read when the file changes;
    /// `toolplanectl executor-key` prints the fleet's). Unsigned calls are refused.
    #[arg(long, env = "TOOLPLANE_EXECUTOR_AUTH_KEY_FILE")]
    auth_key_file: Option<PathBuf>,
    /// The keys themselves (`tpx_…`, comma-separated), when no key file is given.
    #[arg(long, env = "TOOLPLANE_EXECUTOR_AUTH_KEY", hide_env_values = true)]
    auth_key: Option<String>,
    /// Accept unsigned calls (only where nothing but the edges can reach the wiki).
    #[arg(long)]
    allow_unsigned: bool,
    /// Most pages in one tenant's wiki.
    #[arg(long, default_value_t = tp_wiki::Quotas::default().max_pages)]
    max_pages_per_tenant: usize,
    /// Most bytes of page text in one tenant's wiki.
    #[arg(long, default_value_t = tp_wiki::Quotas::default().max_bytes)]
    max_bytes_per_tenant: usize,
    /// Most entity pages one ingest may create or update.
    #[arg(long, default_value_t = tp_wiki::Quotas::default().max_entities_per_ingest)]
    max_entities_per_ingest: usize,
    /// Once listening, write the bound address here.
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address.
    #[arg(long)]
    metrics_listen: Option<String>,
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
    /// Validate the flags, print a summary and exit.
    #[arg(long)]
    check_config: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let listen: std::net::SocketAddr = args.listen.parse().with_context(|| {
        format!(
            "--listen: {:?} is not an address like 127.0.0.1:50052",
            args.listen
        )
    })?;
    let auth = tp_proto::invoke_auth::CallerAuth::from_flags(
        args.auth_key_file.as_deref(),
        args.auth_key.as_deref(),
        args.allow_unsigned,
    )
    .map_err(anyhow::Error::msg)?;
    let metrics_listen = match &args.metrics_listen {
        Some(addr) => Some(addr.parse::<std::net::SocketAddr>().with_context(|| {
            format!("--metrics-listen: {addr:?} is not an address like 127.0.0.1:9092")
        })?),
        None => None,
    };
    if args.check_config {
        println!(
            "tp-wiki: configuration is valid: listen {listen}, pages in {}, llm {}",
            match &args.s3_bucket {
                Some(bucket) => format!("s3://{bucket}"),
                None => args.data_dir.join("wiki").display().to_string(),
            },
            args.llm_url.as_deref().unwrap_or("off"),
        );
        return Ok(());
    }
    let _telemetry = tp_telemetry::init("info", false, "toolplane-wiki");
    let tls = tls(&args)?;
    let (wiki, fetcher) = wiki(&args)?;
    let service = tp_wiki::WikiService::new(wiki, fetcher, auth);
    // Writes a killed process left half done are replayed before the service says it is
    // ready, so nothing reads a tenant's pages mid-write.
    service.recover().await;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    if let Some(metrics_listen) = metrics_listen {
        let metrics = tokio::net::TcpListener::bind(metrics_listen)
            .await
            .with_context(|| format!("binding --metrics-listen {metrics_listen}"))?;
        tracing::info!(addr = %metrics.local_addr()?, "metrics on /metrics");
        tp_telemetry::metrics::prometheus();
        tokio::spawn(tp_telemetry::metrics::serve_metrics(
            metrics,
            tp_telemetry::shutdown_signal(),
        ));
    }
    if let Some(path) = &args.ready_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{addr}\n"))?;
        std::fs::rename(&tmp, path)?;
    }
    tracing::info!(%addr, data_dir = %args.data_dir.display(), "wiki listening");
    tp_wiki::serve_tls(service, listener, tp_telemetry::shutdown_signal(), tls).await
}

/// TLS when `--tls-cert` and `--tls-key` are given (reloaded when the files change).
fn tls(args: &Args) -> anyhow::Result<Option<std::sync::Arc<tp_net::tls::ReloadingTls>>> {
    Ok(match (&args.tls_cert, &args.tls_key) {
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
    })
}

/// The wiki over its store (a folder, or an S3-compatible bucket), with its index, quotas and
/// optional LLM, and the fetcher of `ingest` URLs.
fn wiki(args: &Args) -> anyhow::Result<(tp_wiki::Wiki, tp_wiki::Fetcher)> {
    let storage = match &args.s3_bucket {
        Some(bucket) => {
            let mut builder =
                object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
            if let Some(endpoint) = &args.s3_endpoint {
                builder = builder
                    .with_endpoint(endpoint)
                    .with_allow_http(endpoint.starts_with("http://"));
            }
            tp_wiki::Storage::new(std::sync::Arc::new(
                builder
                    .build()
                    .context("configuring the S3-compatible store")?,
            ))
        }
        None => tp_wiki::Storage::local(&args.data_dir)
            .with_context(|| format!("opening {}", args.data_dir.display()))?,
    };
    let fetcher = tp_wiki::Fetcher::new(tp_wiki::FetchConfig {
        allow_private: args.allow_private_urls,
        allow_http: args.allow_http,
        ..Default::default()
    })?;
    let index_dir = args
        .index_dir
        .clone()
        .unwrap_or_else(|| args.data_dir.join("index"));
    let mut wiki = tp_wiki::Wiki::new(storage)
        .with_index_dir(index_dir)
        .with_quotas(tp_wiki::Quotas {
            max_pages: args.max_pages_per_tenant,
            max_bytes: args.max_bytes_per_tenant,
            max_entities_per_ingest: args.max_entities_per_ingest,
        });
    if let Some(base_url) = &args.llm_url {
        wiki = wiki.with_llm(
            tp_wiki::Llm::new(tp_wiki::LlmConfig {
                base_url: base_url.clone(),
                model: args.llm_model.clone(),
                api_key: std::env::var(&args.llm_api_key_env).ok(),
                usd_per_1k_input: args.llm_usd_per_1k_input,
                usd_per_1k_output: args.llm_usd_per_1k_output,
                max_output_tokens: 400,
                timeout: std::time::Duration::from_secs(60),
            })
            .map_err(anyhow::Error::msg)?,
        );
    }
    Ok((wiki, fetcher))
}
