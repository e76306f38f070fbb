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

/// How the edge watches the control plane's change stream.
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
    /// The control plane's revision after the change.
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
    let watcher = Watcher {
        control,
        versions,
        caches,
        notices,
        settings,
    };
    let mut backoff = Duration::from_millis(50);
    loop {
        let (index, url, client) = watcher.control.current();
        match watcher.open(url, client).await {
            Opened::Stream(stream) => {
                if watcher.follow(url, *stream).await {
                    backoff = Duration::from_millis(50);
                }
                watcher.versions.set_synced(false);
            }
            // The control plane lost the log's tail: start again from a snapshot.
            Opened::Behind => continue,
            Opened::Failed => watcher.control.set_reachable(false),
        }
        watcher.control.fail_over(index);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(watcher.settings.max_backoff);
    }
}

/// What opening the stream gave.
enum Opened {
    Stream(Box<tonic::Streaming<pb::WatchEvent>>),
    /// The control plane is behind the edge's revision (caches cleared).
    Behind,
    /// It did not open, or not in time.
    Failed,
}

/// What the watch loop holds.
struct Watcher {
    control: Arc<ControlPlane>,
    versions: Arc<Versions>,
    caches: Arc<Caches>,
    notices: broadcast::Sender<ChangeNotice>,
    settings: WatchSettings,
}

impl Watcher {
    /// Opens the stream from the edge's head revision.
    async fn open(&self, url: &str, mut client: crate::control::Client) -> Opened {
        let since = self.versions.head();
        let request = pb::WatchRequest {
            since_revision: since,
            heartbeat_ms: self.settings.heartbeat_ms,
        };
        match tokio::time::timeout(self.settings.dead_after, client.watch(request)).await {
            Ok(Ok(response)) => {
                tracing::info!(control_plane = %url, since, "watching the control plane");
                self.control.set_reachable(true);
                Opened::Stream(Box::new(response.into_inner()))
            }
            Ok(Err(status)) if status.code() == Code::OutOfRange => {
                tracing::warn!(control_plane = %url, since, "control plane is behind our revision; resynchronising");
                self.versions.reset();
                self.caches.clear();
                Opened::Behind
            }
            Ok(Err(status)) => {
                tracing::warn!(control_plane = %url, error = %status.message(), "watch failed to open");
                Opened::Failed
            }
            Err(_) => {
                tracing::warn!(control_plane = %url, "watch did not open in time");
                Opened::Failed
            }
        }
    }

    /// Applies the stream's events until it fails, ends or goes silent past `dead_after`;
    /// whether any event arrived.
    async fn follow(&self, url: &str, mut stream: tonic::Streaming<pb::WatchEvent>) -> bool {
        let mut last_message = Instant::now();
        let mut heard = false;
        loop {
            let event = match tokio::time::timeout(self.settings.dead_after, stream.next()).await {
                Ok(Some(Ok(event))) => event,
                Ok(Some(Err(status)))
                    if status.code() == Code::Unavailable
                        && status.message().contains("shutting down") =>
                {
                    // An orderly stop (a rolling restart, or `up` stopping): not a fault.
                    tracing::info!(control_plane = %url, "the control plane is shutting down; reconnecting");
                    self.control.set_reachable(false);
                    return heard;
                }
                Ok(Some(Err(status))) => {
                    tracing::warn!(control_plane = %url, error = %status.message(), "watch stream failed");
                    self.control.set_reachable(false);
                    return heard;
                }
                Ok(None) => {
                    tracing::warn!(control_plane = %url, "watch stream ended");
                    return heard;
                }
                Err(_) => {
                    tracing::warn!(control_plane = %url, silent_for = ?last_message.elapsed(), "watch stream is dead (no heartbeat)");
                    metrics::counter!("tp_edge_watch_dead_total").increment(1);
                    // Until a stream opens again, lookups go to the caches first instead of
                    // waiting on a path that has gone silent.
                    self.control.set_reachable(false);
                    return heard;
                }
            };
            last_message = Instant::now();
            heard = true;
            match event.event {
                Some(pb::watch_event::Event::Change(change)) => self.change(&change).await,
                Some(pb::watch_event::Event::Heartbeat(beat)) => self.heartbeat(&beat),
                None => {}
            }
        }
    }

    /// One committed change: versions bumped, revoked keys forgotten, the rest of the edge told.
    async fn change(&self, change: &pb::Change) {
        let Invalidated { all, tenants } = self.versions.apply(change);
        let keys: Vec<&str> = change
            .items
            .iter()
            .filter(|item| item.kind == pb::ObjectKind::ApiKey as i32)
            .map(|item| item.key.as_str())
            .collect();
        if !keys.is_empty() {
            self.caches.forget_keys(&keys, change.revision).await;
        }
        metrics::gauge!("tp_edge_watch_revision").set(change.revision as f64);
        metrics::histogram!("tp_edge_watch_lag_seconds").record(
            tp_proto::clock::now_ms().saturating_sub(change.committed_at_ms) as f64 / 1000.0,
        );
        let _ = self.notices.send(ChangeNotice {
            revision: change.revision,
            all,
            tenants,
            committed_at_ms: change.committed_at_ms,
        });
    }

    /// A heartbeat: how far behind the edge is, and whether it has caught up.
    fn heartbeat(&self, beat: &pb::Heartbeat) {
        let head = self.versions.head();
        metrics::gauge!("tp_edge_watch_behind_revisions")
            .set(beat.revision.saturating_sub(head) as f64);
        if beat.revision <= head && !self.versions.synced() {
            tracing::info!(revision = head, "caught up with the control plane");
            self.versions.set_synced(true);
        }
    }
}
