//! The edge's one `Watch` stream: applies every change to [`Versions`], resumes from the last
//! revision after a reconnect, detects a dead stream by missing heartbeats, and fails over
//! across control-plane replicas.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::broadcast;
use tonic::Code;
use tp_proto::pb;

use crate::cache::Caches;
use crate::control::ControlPlane;
use crate::versions::{Invalidated, Versions};

/// Watch settings.
#[derive(Debug, Clone, Copy)]
pub struct WatchSettings {
    /// Heartbeat period asked of the control plane.
    pub heartbeat_ms: u32,
    /// Dead after this long without a message.
    pub dead_after: Duration,
    /// Longest back-off.
    pub max_backoff: Duration,
}

/// What the rest of the edge hears about changes.
#[derive(Debug, Clone)]
pub struct ChangeNotice {
    /// The revision.
    pub revision: u64,
    /// Every registry changed.
    pub all: bool,
    /// These tenants changed.
    pub tenants: Vec<String>,
    /// Commit time at the control plane (unix ms), for lag metrics.
    pub committed_at_ms: u64,
}

/// Runs forever; spawn it.
pub async fn run(
    control: Arc<ControlPlane>,
    versions: Arc<Versions>,
    caches: Arc<Caches>,
    notices: broadcast::Sender<ChangeNotice>,
    settings: WatchSettings,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let since = versions.head();
        let (index, url, mut client) = control.current();
        let request = pb::WatchRequest {
            since_revision: since,
            heartbeat_ms: settings.heartbeat_ms,
        };
        let opened = tokio::time::timeout(settings.dead_after, client.watch(request)).await;
        let mut stream = match opened {
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) if status.code() == Code::OutOfRange => {
                tracing::warn!(control_plane = %url, since, "control plane is behind our revision; resynchronising");
                versions.reset();
                caches.clear();
                continue;
            }
            Ok(Err(status)) => {
                tracing::warn!(control_plane = %url, error = %status.message(), "watch failed to open");
                control.set_reachable(false);
                control.fail_over(index);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(settings.max_backoff);
                continue;
            }
            Err(_) => {
                tracing::warn!(control_plane = %url, "watch did not open in time");
                control.set_reachable(false);
                control.fail_over(index);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(settings.max_backoff);
                continue;
            }
        };
        tracing::info!(control_plane = %url, since, "watching the control plane");
        control.set_reachable(true);
        let mut last_message = Instant::now();
        loop {
            let next = tokio::time::timeout(settings.dead_after, stream.next()).await;
            let event = match next {
                Ok(Some(Ok(event))) => event,
                Ok(Some(Err(status)))
                    if status.code() == Code::Unavailable
                        && status.message().contains("shutting down") =>
                {
                    // An orderly stop (a rolling restart, or `up` stopping): not a fault.
                    tracing::info!(control_plane = %url, "the control plane is shutting down; reconnecting");
                    control.set_reachable(false);
                    break;
                }
                Ok(Some(Err(status))) => {
                    tracing::warn!(control_plane = %url, error = %status.message(), "watch stream failed");
                    control.set_reachable(false);
                    break;
                }
                Ok(None) => {
                    tracing::warn!(control_plane = %url, "watch stream ended");
                    break;
                }
                Err(_) => {
                    tracing::warn!(control_plane = %url, silent_for = ?last_message.elapsed(), "watch stream is dead (no heartbeat)");
                    metrics::counter!("tp_edge_watch_dead_total").increment(1);
                    // Until a stream opens again, lookups go to the caches first instead of
                    // waiting on a path that has gone silent.
                    control.set_reachable(false);
                    break;
                }
            };
            last_message = Instant::now();
            backoff = Duration::from_millis(50);
            match event.event {
                Some(pb::watch_event::Event::Change(change)) => {
                    let Invalidated { all, tenants } = versions.apply(&change);
                    for item in &change.items {
                        if item.kind == pb::ObjectKind::ApiKey as i32 {
                            caches.forget_key(&item.key, change.revision).await;
                        }
                    }
                    let now_ms = u64::try_from(
                        std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_millis())
                            .unwrap_or(0),
                    )
                    .unwrap_or(0);
                    metrics::gauge!("tp_edge_watch_revision").set(change.revision as f64);
                    metrics::histogram!("tp_edge_watch_lag_seconds")
                        .record(now_ms.saturating_sub(change.committed_at_ms) as f64 / 1000.0);
                    let _ = notices.send(ChangeNotice {
                        revision: change.revision,
                        all,
                        tenants,
                        committed_at_ms: change.committed_at_ms,
                    });
                }
                Some(pb::watch_event::Event::Heartbeat(beat)) => {
                    let head = versions.head();
                    metrics::gauge!("tp_edge_watch_behind_revisions")
                        .set(beat.revision.saturating_sub(head) as f64);
                    if beat.revision <= head && !versions.synced() {
                        tracing::info!(revision = head, "caught up with the control plane");
                        versions.set_synced(true);
                    }
                }
                None => {}
            }
        }
        versions.set_synced(false);
        control.fail_over(index);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(settings.max_backoff);
    }
}
