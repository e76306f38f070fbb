//! The Toolplane MCP edge: a stateless Streamable HTTP server (rmcp) that shows every tenant
//! and role exactly its tools and forwards calls to executors.
//!
//! Reading order: [`app`] (HTTP: router, auth, the JSON-RPC check, the warm `tools/list` path)
//! and [`access`] (a log line per request) → [`mcp`] (the handler; one call, the meta-tools,
//! the relay of progress; [`mcp::fast`] precomputed pages, [`mcp::session`]
//! sealed 2025-xx sessions, [`mcp::ask`] questions on a call's stream, [`mcp::input`]
//! 2026-07-28 input-required) → [`cache`] (L1/L2/L3) → [`versions`] + [`watch`] (push
//! invalidation) → [`forward`] (executors: deadlines, breakers, limits; [`upstream`] for MCP
//! servers as executors) → [`limits`], [`audit`].

pub mod access;
pub mod app;
pub mod audit;
pub mod cache;
pub mod config;
pub mod control;
pub mod disclosure;
pub mod events;
pub mod forward;
pub mod identity;
pub mod limits;
pub mod mcp;
pub mod oauth;
pub mod registry;
pub mod shared;
pub mod state;
pub mod tool;
pub mod transport;
pub mod upstream;
pub mod versions;
pub mod watch;

#[cfg(test)]
mod layering_tests;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::task::JoinHandle;

pub use config::EdgeConfig;
pub use state::EdgeState;

/// A running edge.
#[derive(Debug)]
pub struct Edge {
    /// The bound address (MCP, health).
    pub addr: SocketAddr,
    /// The admin listener's address (`/metrics`, health), when one is configured.
    pub admin_addr: Option<SocketAddr>,
    /// Its state.
    pub state: Arc<EdgeState>,
    /// The server task.
    pub task: JoinHandle<anyhow::Result<()>>,
}

/// How long a stopping edge lets in-flight requests finish before it closes their connections.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Binds, starts the background tasks and serves until `shutdown` resolves.
pub async fn start(
    config: EdgeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Edge> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    let admin_listener = match config.admin_listen {
        Some(admin) => Some(
            tokio::net::TcpListener::bind(admin)
                .await
                .with_context(|| format!("binding the admin listener {admin}"))?,
        ),
        None => None,
    };
    let admin_addr = admin_listener
        .as_ref()
        .map(tokio::net::TcpListener::local_addr)
        .transpose()?;
    let state = EdgeState::start(config)?;
    let service = app::service(Arc::clone(&state));
    // Shutting down (SIGTERM): stop accepting, end long-lived streams (subscriptions, legacy
    // notification streams) so the drain does not wait for clients to hang up, and let requests
    // in flight finish and be answered; what still runs after DRAIN is cancelled.
    let token = state.shutdown.clone();
    let abort = state.abort.clone();
    let stopping = token.clone();
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!(
            drain_secs = DRAIN.as_secs(),
            "stopping: no new connections; finishing requests in flight"
        );
        token.cancel();
        tokio::time::sleep(DRAIN).await;
        abort.cancel();
    });
    if let Some(admin_listener) = admin_listener {
        let admin = app::admin_router(Arc::clone(&state));
        let stopping = stopping.clone();
        tokio::spawn(async move {
            let served = axum::serve(admin_listener, admin)
                .with_graceful_shutdown(async move { stopping.cancelled().await })
                .await;
            if let Err(error) = served {
                tracing::warn!(%error, "the admin listener stopped");
            }
        });
    }
    let limits = state.config.http.clone();
    let tls = match &state.config.tls {
        Some(files) => {
            let tls =
                tp_net::tls::ReloadingTls::load(files.clone(), &[b"http/1.1"]).context("tls")?;
            tls.spawn_reloader(tp_net::tls::RELOAD_EVERY);
            Some(tls)
        }
        None => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let task = tokio::spawn(async move {
        tp_net::serve_http1_tls(
            listener,
            service,
            &limits,
            async move { stopping.cancelled().await },
            DRAIN,
            tls,
        )
        .await
        .context("serving HTTP")
    });
    let admin = admin_addr.map_or_else(|| "none".to_owned(), |a| a.to_string());
    tracing::info!(%addr, %admin, "edge listening on {scheme}://{addr}/mcp");
    Ok(Edge {
        addr,
        admin_addr,
        state,
        task,
    })
}
