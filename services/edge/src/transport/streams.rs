//! Long-lived streams (the 2025-xx `GET /mcp` notification stream, 2026-07-28
//! `subscriptions/listen`) hold a connection each for as long as they are open. So that no
//! caller can take an edge's connections with them, each open stream holds a slot of its
//! key's limit (`mcp.max_streams_per_key`) and of its tenant's (`mcp.max_streams_per_tenant`,
//! by default a quarter of `http.max_connections`), and ends after `mcp.max_stream_secs` (the
//! client opens a new one, as MCP clients do when a stream ends).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The open streams of an edge, by key and by tenant.
#[derive(Debug)]
pub struct Streams {
    per_key: usize,
    per_tenant: usize,
    /// How long a stream stays open.
    pub lifetime: Duration,
    open: Mutex<HashMap<(bool, String), usize>>,
}

/// One open stream's slots; released when dropped (when the stream ends).
#[derive(Debug)]
pub struct StreamSlot {
    streams: Arc<Streams>,
    key: Option<String>,
    tenant: String,
}

/// Why a stream was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRefusal {
    /// The key has `mcp.max_streams_per_key` open.
    Key(usize),
    /// The tenant has `mcp.max_streams_per_tenant` open.
    Tenant(usize),
}

impl std::fmt::Display for StreamRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamRefusal::Key(n) => write!(
                f,
                "this key already holds {n} open streams (mcp.max_streams_per_key): close one first"
            ),
            StreamRefusal::Tenant(n) => write!(
                f,
                "this tenant already holds {n} open streams (mcp.max_streams_per_tenant): close one first"
            ),
        }
    }
}

impl Streams {
    /// At most `per_key` streams per key and `per_tenant` per tenant, each open for `lifetime`.
    pub fn new(per_key: usize, per_tenant: usize, lifetime: Duration) -> Arc<Streams> {
        Arc::new(Streams {
            per_key: per_key.max(1),
            per_tenant: per_tenant.max(1),
            lifetime,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for a stream of `tenant` opened with key `key_id` (empty for a caller without a
    /// key: then only the tenant's limit applies).
    pub fn open(self: &Arc<Self>, tenant: &str, key_id: &str) -> Result<StreamSlot, StreamRefusal> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let tenant_key = (false, tenant.to_owned());
        let key = (!key_id.is_empty()).then(|| (true, format!("{tenant}\0{key_id}")));
        if let Some(key) = &key
            && open.get(key).copied().unwrap_or(0) >= self.per_key
        {
            metrics::counter!("tp_edge_streams_refused_total", "limit" => "key").increment(1);
            return Err(StreamRefusal::Key(self.per_key));
        }
        if open.get(&tenant_key).copied().unwrap_or(0) >= self.per_tenant {
            metrics::counter!("tp_edge_streams_refused_total", "limit" => "tenant").increment(1);
            return Err(StreamRefusal::Tenant(self.per_tenant));
        }
        *open.entry(tenant_key).or_default() += 1;
        if let Some(key) = &key {
            *open.entry(key.clone()).or_default() += 1;
        }
        metrics::gauge!("tp_edge_open_streams").increment(1.0);
        Ok(StreamSlot {
            streams: Arc::clone(self),
            key: key.map(|(_, k)| k),
            tenant: tenant.to_owned(),
        })
    }

    /// Streams `tenant` holds open.
    pub fn of_tenant(&self, tenant: &str) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.get(&(false, tenant.to_owned())).copied().unwrap_or(0)
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut release = |entry: (bool, String)| {
            if let Some(count) = open.get_mut(&entry) {
                *count -= 1;
                if *count == 0 {
                    open.remove(&entry);
                }
            }
        };
        release((false, std::mem::take(&mut self.tenant)));
        if let Some(key) = self.key.take() {
            release((true, key));
        }
        metrics::gauge!("tp_edge_open_streams").decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_and_a_tenant_hold_at_most_their_share() {
        let streams = Streams::new(2, 3, Duration::from_secs(60));
        let a = streams.open("acme", "key_a").unwrap();
        let _b = streams.open("acme", "key_a").unwrap();
        assert_eq!(
            streams.open("acme", "key_a").unwrap_err(),
            StreamRefusal::Key(2)
        );
        let _c = streams.open("acme", "key_b").unwrap();
        assert_eq!(
            streams.open("acme", "key_c").unwrap_err(),
            StreamRefusal::Tenant(3)
        );
        // Another tenant is untouched; a closed stream gives its slots back.
        let _g = streams.open("globex", "key_g").unwrap();
        drop(a);
        assert_eq!(streams.of_tenant("acme"), 2);
        let _d = streams.open("acme", "key_c").unwrap();
    }
}
