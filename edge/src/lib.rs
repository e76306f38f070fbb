//! The Toolplane MCP edge: a stateless Streamable HTTP server (rmcp) that shows every tenant
//! and role exactly its tools and forwards calls to executors.
//!
//! Reading order: [`app`] (HTTP, auth) → [`mcp`] (list and call) → [`cache`] (L1/L2/L3) →
//! [`versions`] + [`watch`] (push invalidation) → [`forward`] (executors: deadlines,
//! breakers, limits; [`upstream`] for MCP servers as executors) → [`limits`], [`audit`].

pub mod app;
pub mod audit;
pub mod cache;
pub mod config;
pub mod control;
pub mod disclosure;
pub mod forward;
pub mod limits;
pub mod mcp;
pub mod registry;
pub mod shared;
pub mod state;
pub mod upstream;
pub mod versions;
pub mod watch;

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
    /// The bound address.
    pub addr: SocketAddr,
    /// Its state.
    pub state: Arc<EdgeState>,
    /// The server task.
    pub task: JoinHandle<anyhow::Result<()>>,
}

/// Binds, starts the background tasks and serves until `shutdown` resolves.
pub async fn start(
    config: EdgeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Edge> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    let state = EdgeState::start(config)?;
    let service = app::service(Arc::clone(&state));
    // Shutting down ends long-lived streams (subscriptions, legacy notification streams), so the
    // graceful drain does not wait for clients to hang up.
    let token = state.shutdown.clone();
    let shutdown = async move {
        shutdown.await;
        token.cancel();
    };
    let task = tokio::spawn(async move {
        // TCP_NODELAY: SSE answers are several small writes (Nagle + delayed ACK = 40 ms).
        use axum::serve::ListenerExt as _;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, tower::make::Shared::new(service))
            .with_graceful_shutdown(shutdown)
            .await
            .context("serving HTTP")
    });
    tracing::info!(%addr, "edge listening on http://{addr}/mcp");
    Ok(Edge { addr, state, task })
}
