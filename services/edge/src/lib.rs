//! The Toolplane MCP edge: a stateless Streamable HTTP server (rmcp) that shows every tenant
//! and role exactly its tools and forwards calls to executors.
//!
//! Reading order: [`app`] (HTTP: the service's shared steps, then one request's stages — auth,
//! body, the one parse of [`transport::envelope`], session, rules, dispatch, where a warm
//! `tools/list` is answered from precomputed pages)
//! and [`access`] (a log line per request) → [`mcp`] (the handler; one call, the meta-tools,
//! the relay of progress) → [`transport`] (the rules every request passes, precomputed
//! `tools/list` pages, sealed 2025-xx sessions, questions on a call's stream, 2026-07-28
//! input-required state) → [`cache`] (L1/L2/L3) → [`versions`] + [`watch`] (push
//! invalidation) → [`forward`] (executors: deadlines, breakers, limits; the `tp-upstream` crate for MCP
//! servers as executors) → [`limits`], [`audit`].

pub mod access;
pub mod app;
pub mod audit;
pub mod cache;
pub mod config;
pub mod control;
pub mod credentials;
pub mod disclosure;
pub mod error;
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
pub mod versions;
pub mod watch;

#[cfg(test)]
mod layering_tests;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::Shutdown;
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
    /// The shared state its handlers serve from (caches, executors, audit).
    pub state: Arc<EdgeState>,
    /// The server task.
    pub task: JoinHandle<anyhow::Result<()>>,
}

/// Binds, starts the background tasks and serves until `shutdown` resolves, then leaves as
/// [`start_with`] says (with no way to cut the grace period short).
pub async fn start(
    config: EdgeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Edge> {
    start_with(config, shutdown, std::future::pending::<()>).await
}

/// Binds, starts the background tasks and serves until `shutdown` resolves; then leaves the
/// fleet without failing a request:
///
/// 1. `/readyz` answers 503 and every answer carries `Connection: close`, for
///    `shutdown.grace_ms` (or until the future `hurry()` makes resolves: a second signal), while
///    the edge still accepts and serves — balancers see it leave and send elsewhere;
/// 2. it stops accepting, ends long-lived streams, and lets requests in flight finish (at most
///    `shutdown.drain_secs`; then what still runs is cancelled);
/// 3. the audit records of those requests are delivered, or spilled (`audit.spill_dir`).
///
/// The server task ([`Edge::task`]) ends after step 3.
pub async fn start_with<H, F>(
    config: EdgeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    hurry: H,
) -> anyhow::Result<Edge>
where
    H: FnOnce() -> F + Send + 'static,
    F: Future<Output = ()> + Send,
{
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
    let drain = state.config.shutdown.drain;
    tokio::spawn(leave_on(&state, shutdown, hurry));
    let stopping = state.shutdown.clone();
    if let Some(admin_listener) = admin_listener {
        serve_admin(&state, admin_listener);
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
    let finishing = Arc::clone(&state);
    let task = tokio::spawn(async move {
        let served = tp_net::serve_http1_tls(
            listener,
            service,
            &limits,
            async move { stopping.cancelled().await },
            drain,
            tls,
        )
        .await
        .context("serving HTTP");
        // Every request is answered (or was cancelled): their audit records go now.
        finishing.finish_audit().await;
        served
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

/// Shutting down (SIGTERM) once `shutdown` resolves: first unready for the grace period (cut
/// short by `hurry`); then stop accepting, end long-lived streams (subscriptions, legacy
/// notification streams) so the drain does not wait for clients to hang up, and let requests
/// in flight finish and be answered; what still runs after the drain is cancelled.
fn leave_on<H, F>(
    state: &EdgeState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    hurry: H,
) -> impl Future<Output = ()> + Send + 'static
where
    H: FnOnce() -> F + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let Shutdown { grace, drain } = state.config.shutdown;
    let unready = state.unready.clone();
    let token = state.shutdown.clone();
    let abort = state.abort.clone();
    async move {
        shutdown.await;
        unready.cancel();
        if !grace.is_zero() {
            tracing::info!(
                grace_ms = grace.as_millis() as u64,
                "stopping: /readyz now answers 503 and connections close after each answer; still serving for the grace period (a second signal ends it)"
            );
            tokio::select! {
                () = tokio::time::sleep(grace) => {}
                () = hurry() => tracing::info!("a second signal: the grace period ends now"),
            }
        }
        tracing::info!(
            drain_secs = drain.as_secs(),
            "stopping: no new connections; finishing requests in flight"
        );
        token.cancel();
        tokio::time::sleep(drain).await;
        abort.cancel();
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` on the admin listener until the edge stops
/// accepting.
fn serve_admin(state: &Arc<EdgeState>, listener: tokio::net::TcpListener) {
    let admin = app::admin_router(Arc::clone(state));
    let stopping = state.shutdown.clone();
    tokio::spawn(async move {
        let served = axum::serve(listener, admin)
            .with_graceful_shutdown(async move { stopping.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "the admin listener stopped");
        }
    });
}
