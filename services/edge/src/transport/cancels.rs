//! `notifications/cancelled`: a client stops one of its own calls.
//!
//! A call in flight is registered under a key made of who called (tenant and key), the
//! 2025-xx session it belongs to (none for 2026-07-28 requests) and its JSON-RPC id, hashed:
//! only the caller that made a call can name it, and ids that restart in every session do not
//! collide. The notification may reach any edge: the one holding the call cancels it at once;
//! another publishes the key on Redis (`<prefix>cancel`), where every edge listens. Cancelling
//! ends the executor call — a gRPC executor sees its stream reset, an MCP upstream receives
//! `notifications/cancelled` — records the call as `tool_error` / `cancelled`, and sends the
//! client no answer (the stream ends), as the MCP specification asks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::shared::Shared;

/// The calls in flight on this edge that a client may cancel.
#[derive(Debug)]
pub struct Cancels {
    /// key → (registration number, token).
    running: Mutex<HashMap<String, (u64, CancellationToken)>>,
    next: std::sync::atomic::AtomicU64,
    shared: Option<Arc<Shared>>,
}

/// A registered call: cancelled through [`Cancels::cancel`]; unregistered when dropped.
#[derive(Debug)]
pub struct Running {
    key: String,
    number: u64,
    /// Cancelled when the client cancels the call.
    pub token: CancellationToken,
    cancels: Arc<Cancels>,
}

/// What a call's `parts.extensions` carries so that the call can watch for its cancellation.
#[derive(Debug, Clone)]
pub struct CallCancel(pub CancellationToken);

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = self
            .cancels
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Only this registration's (a later call under the same key replaced it).
        if running
            .get(&self.key)
            .is_some_and(|(n, _)| *n == self.number)
        {
            running.remove(&self.key);
        }
    }
}

/// The key of a call: who called, in which session, with which id.
pub fn key(tenant: &str, key_id: &str, session: &str, id: &serde_json::Value) -> String {
    let id = id.to_string();
    let mut parts: [&[u8]; 8] = [b"\0"; 8];
    for (at, part) in [tenant, key_id, session, &id].into_iter().enumerate() {
        parts[at * 2] = part.as_bytes();
    }
    tp_proto::digest::hex(&tp_proto::digest::sha256(&parts))
}

impl Cancels {
    /// Calls of one edge; with Redis, cancellations that land on other replicas reach it.
    pub fn new(shared: Option<Arc<Shared>>) -> Arc<Cancels> {
        let cancels = Arc::new(Cancels {
            running: Mutex::new(HashMap::new()),
            next: std::sync::atomic::AtomicU64::new(0),
            shared: shared.clone(),
        });
        if let Some(shared) = shared {
            let weak = Arc::downgrade(&cancels);
            shared.listen(shared.key(&["cancel"]), move |payload| {
                let Some(cancels) = weak.upgrade() else {
                    return false;
                };
                if let Ok(key) = std::str::from_utf8(payload) {
                    cancels.cancel_here(key);
                }
                true
            });
        }
        cancels
    }

    /// Registers a call under `key`.
    pub fn register(self: &Arc<Self>, key: String) -> Running {
        let token = CancellationToken::new();
        let number = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), (number, token.clone()));
        Running {
            key,
            number,
            token,
            cancels: Arc::clone(self),
        }
    }

    fn cancel_here(&self, key: &str) -> bool {
        let token = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        match token {
            Some((_, token)) => {
                token.cancel();
                metrics::counter!("tp_edge_calls_cancelled_total").increment(1);
                true
            }
            None => false,
        }
    }

    /// Cancels the call `key` here or, through Redis, on the edge that runs it. A call that
    /// already ended (or never was) is ignored, as the specification says.
    pub async fn cancel(&self, key: &str) {
        if self.cancel_here(key) {
            return;
        }
        if let Some(shared) = &self.shared {
            let _ = shared
                .publish(&shared.key(&["cancel"]), key.as_bytes())
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn only_the_callers_own_key_cancels_its_call() {
        let cancels = Cancels::new(None);
        let mine = key("acme", "key_1", "", &json!(7));
        let running = cancels.register(mine.clone());
        // Another key, another session, another id: nothing happens.
        for other in [
            key("acme", "key_2", "", &json!(7)),
            key("acme", "key_1", "s1", &json!(7)),
            key("acme", "key_1", "", &json!("7")),
            key("globex", "key_1", "", &json!(7)),
        ] {
            cancels.cancel(&other).await;
            assert!(!running.token.is_cancelled());
        }
        cancels.cancel(&mine).await;
        assert!(running.token.is_cancelled());
        drop(running);
        assert!(cancels.running.lock().unwrap().is_empty());
    }

    #[test]
    fn the_key_is_the_hex_sha256_every_edge_version_publishes() {
        // Edges of two versions share the Redis channel during a rolling upgrade: the key's
        // form (lowercase hex SHA-256 of the NUL-terminated parts) must not change.
        use sha2::Digest as _;
        let expected = hex::encode(sha2::Sha256::digest(b"acme\0key_1\0s1\0\"7\"\0"));
        assert_eq!(key("acme", "key_1", "s1", &json!("7")), expected);
    }

    #[tokio::test]
    async fn a_cancellation_crosses_edges_through_the_shared_cache() {
        let shared = Shared::memory("t:");
        let (a, b) = (
            Cancels::new(Some(Arc::clone(&shared))),
            Cancels::new(Some(shared)),
        );
        let k = key("acme", "key_1", "", &json!(1));
        let running = a.register(k.clone());
        tokio::task::yield_now().await;
        b.cancel(&k).await;
        tokio::time::timeout(std::time::Duration::from_secs(2), running.token.cancelled())
            .await
            .expect("cancelled on the other edge");
    }
}
