//! Tracing and metrics shared by every Toolplane binary. Tracing: an `EnvFilter` (from `RUST_LOG`
//! when set, else the configured level), text or JSON output on stderr, and OpenTelemetry
//! export over OTLP when the standard `OTEL_*` variables are set ([`trace`]).
//!
//! Text is coloured only on a terminal and never when `NO_COLOR` is set (<https://no-color.org>),
//! so log files hold no escape codes. `TOOLPLANE_LOG_FORMAT=json` turns JSON on for every
//! binary, including those without a `--log-format` flag of their own. rmcp's own line per
//! failed request is left out by default: the edge's access log carries each request once.

use std::io::IsTerminal as _;

pub mod metrics;
pub mod trace;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Directives added to the configured level unless `RUST_LOG` is set.
const QUIET: &str = "rmcp::service=error,tower_http=warn,h2=warn,hyper=warn";

/// Whether text logs on stderr should be coloured: a terminal, and no `NO_COLOR`.
pub fn colour() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

/// Whether `TOOLPLANE_LOG_FORMAT` asks for JSON.
pub fn json_from_env() -> bool {
    std::env::var("TOOLPLANE_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"))
}

/// What [`init`] set up that must live as long as the process: with OTLP export on, dropping
/// it flushes the spans still buffered.
#[derive(Debug, Default)]
#[must_use = "keep it until the process ends, or buffered spans are lost"]
pub struct Telemetry {
    _exporting: Option<trace::Exporting>,
}

/// Installs the global subscriber: logs on stderr, and OpenTelemetry spans exported over OTLP
/// as `service` when the `OTEL_*` variables ask for it ([`trace`]). Safe to call more than
/// once (later calls do nothing), so one process can host several components
/// (`toolplanectl up`).
pub fn init(level: &str, json: bool, service: &str) -> Telemetry {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{QUIET},{level}")));
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(colour())
        .with_writer(std::io::stderr);
    let logs = if json || json_from_env() {
        logs.json().boxed()
    } else {
        logs.boxed()
    };
    let (otel, exporting) = match trace::otlp(service) {
        Some((layer, exporting)) => (Some(layer), Some(exporting)),
        None => (None, None),
    };
    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(logs)
        .with(otel)
        .try_init()
        .is_ok();
    Telemetry {
        // A second call exports nothing of its own: its provider is dropped (and shut down).
        _exporting: exporting.filter(|_| installed),
    }
}

/// Resolves on Ctrl-C or SIGTERM (what orchestrators send to stop a process), for every
/// binary's graceful shutdown.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
