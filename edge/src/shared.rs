//! The fleet-shared cache in Redis (L2) and fleet-wide counters. Every operation is bounded by
//! a timeout and never fails the request: Redis down means "miss" (and `/readyz` reports it).
//!
//! [`Shared::memory`] stands in for Redis inside one process — the same operations on a map
//! and an in-process channel, and a switch that takes it "down" — so the router's in-memory
//! tests cover the L2 path (several edges over one cache, a cache that fails) without a
//! server; every process-level suite uses a real `redis-server`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::RwLock;

/// Redis as the edge uses it.
pub struct Shared {
    backend: Backend,
    prefix: String,
    timeout: Duration,
    healthy: AtomicBool,
}

enum Backend {
    Redis {
        client: redis::Client,
        connection: RwLock<Option<ConnectionManager>>,
    },
    Memory(Memory),
}

/// The in-process stand-in ([`Shared::memory`]).
struct Memory {
    entries: std::sync::Mutex<HashMap<String, (Vec<u8>, Instant)>>,
    messages: tokio::sync::broadcast::Sender<(String, Vec<u8>)>,
    down: AtomicBool,
}

impl Memory {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Vec<u8>, Instant)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("prefix", &self.prefix)
            .field("healthy", &self.healthy())
            .finish()
    }
}

// === impl Shared ===

impl Shared {
    /// Starts connecting in the background; the edge serves without Redis until it is up.
    pub fn connect(url: &str, prefix: &str, timeout: Duration) -> anyhow::Result<Arc<Shared>> {
        // TCP_NODELAY: commands from concurrent requests share one multiplexed connection;
        // with Nagle's algorithm a small write waits for the previous one's ACK, which the
        // server delays (40 ms), and every lookup behind it stalls.
        let info = redis::IntoConnectionInfo::into_connection_info(url)?
            .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
        let client = redis::Client::open(info)?;
        let shared = Arc::new(Shared {
            backend: Backend::Redis {
                client: client.clone(),
                connection: RwLock::new(None),
            },
            prefix: prefix.to_owned(),
            timeout,
            healthy: AtomicBool::new(false),
        });
        let background = Arc::clone(&shared);
        tokio::spawn(async move {
            let mut delay = Duration::from_millis(100);
            loop {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(Duration::from_secs(2)))
                    .set_response_timeout(Some(background.timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_secs(2));
                match client.get_connection_manager_with_config(config).await {
                    Ok(connection) => {
                        if let Backend::Redis {
                            connection: slot, ..
                        } = &background.backend
                        {
                            *slot.write().await = Some(connection);
                        }
                        background.healthy.store(true, Ordering::Relaxed);
                        tracing::info!("connected to redis");
                        // Keep readiness true to Redis's state even while every request is an
                        // L1 hit: one PING a second (the connection manager reconnects).
                        let weak = Arc::downgrade(&background);
                        drop(background);
                        loop {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            let Some(shared) = weak.upgrade() else { return };
                            shared
                                .run(
                                    "ping",
                                    async |c: &mut ConnectionManager| {
                                        redis::cmd("PING").query_async::<String>(c).await
                                    },
                                    |_| String::new(),
                                )
                                .await;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "redis unreachable; serving without the shared cache");
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(5));
                    }
                }
            }
        });
        Ok(shared)
    }

    /// An in-process stand-in for Redis (see the module): healthy until [`Shared::set_down`].
    pub fn memory(prefix: &str) -> Arc<Shared> {
        Arc::new(Shared {
            backend: Backend::Memory(Memory {
                entries: std::sync::Mutex::default(),
                messages: tokio::sync::broadcast::channel(1024).0,
                down: AtomicBool::new(false),
            }),
            prefix: prefix.to_owned(),
            timeout: Duration::from_millis(100),
            healthy: AtomicBool::new(true),
        })
    }

    /// Takes the in-process stand-in down (every operation fails, as when Redis is
    /// unreachable) or back up; no effect on Redis.
    pub fn set_down(&self, down: bool) {
        if let Backend::Memory(memory) = &self.backend {
            memory.down.store(down, Ordering::SeqCst);
        }
    }

    /// Whether the last command succeeded.
    pub fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// `prefix:part1:part2...`
    pub fn key(&self, parts: &[&str]) -> String {
        let mut key = self.prefix.clone();
        for part in parts {
            key.push(':');
            key.push_str(part);
        }
        key
    }

    /// One command: on Redis `redis`, on the stand-in `memory`; `None` when it fails.
    async fn run<T>(
        &self,
        op: &'static str,
        redis: impl AsyncFnOnce(&mut ConnectionManager) -> redis::RedisResult<T>,
        memory: impl FnOnce(&Memory) -> T,
    ) -> Option<T> {
        let connection = match &self.backend {
            Backend::Memory(stand_in) => {
                if stand_in.down.load(Ordering::SeqCst) {
                    self.failed(op, "the in-process cache is down");
                    return None;
                }
                self.healthy.store(true, Ordering::Relaxed);
                return Some(memory(stand_in));
            }
            Backend::Redis { connection, .. } => connection,
        };
        let f = redis;
        let mut connection = connection.read().await.clone()?;
        match tokio::time::timeout(self.timeout, f(&mut connection)).await {
            Ok(Ok(value)) => {
                self.healthy.store(true, Ordering::Relaxed);
                Some(value)
            }
            Ok(Err(error)) => {
                self.failed(op, &error.to_string());
                None
            }
            Err(_) => {
                self.failed(op, "timed out");
                None
            }
        }
    }

    /// Counts a failed command (and says so once, when the cache turns unhealthy).
    fn failed(&self, op: &'static str, error: &str) {
        if self.healthy.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                op,
                error,
                "redis command failed; continuing without the shared cache"
            );
        }
        metrics::counter!("tp_edge_redis_errors_total", "op" => op).increment(1);
    }

    /// GET.
    pub async fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.run(
            "get",
            async |c| c.get::<_, Option<Vec<u8>>>(key).await,
            |m| {
                let mut entries = m.entries();
                match entries.get(key) {
                    Some((value, expires)) if *expires > Instant::now() => Some(value.clone()),
                    Some(_) => {
                        entries.remove(key);
                        None
                    }
                    None => None,
                }
            },
        )
        .await
        .flatten()
    }

    /// The value of a counter that [`Shared::incr_window`] counts (0 when it does not exist);
    /// `None` when Redis does not answer.
    pub async fn count(&self, key: &str) -> Option<u64> {
        self.run(
            "get",
            async |c| {
                let value: Option<u64> = c.get(key).await?;
                Ok(value.unwrap_or(0))
            },
            |m| {
                let entries = m.entries();
                match entries.get(key) {
                    Some((value, expires)) if *expires > Instant::now() => {
                        u64::from_le_bytes(value.as_slice().try_into().unwrap_or([0; 8]))
                    }
                    _ => 0,
                }
            },
        )
        .await
    }

    /// SET with expiry.
    pub async fn set(&self, key: &str, value: &[u8], ttl: Duration) {
        let seconds = ttl.as_secs().max(1);
        let _ = self
            .run(
                "set",
                async |c| c.set_ex::<_, _, ()>(key, value, seconds).await,
                |m| {
                    m.entries()
                        .insert(key.to_owned(), (value.to_vec(), Instant::now() + ttl));
                },
            )
            .await;
    }

    /// Several SETs with expiry in one round trip.
    pub async fn set_many(&self, entries: &[(String, Vec<u8>)], ttl: Duration) {
        let seconds = ttl.as_secs().max(1);
        let _ = self
            .run(
                "set_many",
                async |c| {
                    let mut pipe = redis::pipe();
                    for (key, value) in entries {
                        pipe.set_ex(key, value, seconds).ignore();
                    }
                    pipe.query_async::<()>(c).await
                },
                |m| {
                    let expires = Instant::now() + ttl;
                    let mut stored = m.entries();
                    for (key, value) in entries {
                        stored.insert(key.clone(), (value.clone(), expires));
                    }
                },
            )
            .await;
    }

    /// PUBLISH; the number of subscribers that received the message.
    pub async fn publish(&self, channel: &str, payload: &[u8]) -> Option<u64> {
        self.run(
            "publish",
            async |c| c.publish::<_, _, u64>(channel, payload).await,
            |m| {
                m.messages
                    .send((channel.to_owned(), payload.to_vec()))
                    .map_or(0, |n| n as u64)
            },
        )
        .await
    }

    /// Calls `on_message` with every message published on `channel`, on a connection of its
    /// own that is reopened when it breaks, until `on_message` returns false.
    pub fn listen(
        &self,
        channel: String,
        mut on_message: impl FnMut(&[u8]) -> bool + Send + 'static,
    ) {
        use futures::StreamExt as _;
        let client = match &self.backend {
            Backend::Memory(memory) => {
                let mut messages = memory.messages.subscribe();
                tokio::spawn(async move {
                    loop {
                        match messages.recv().await {
                            Ok((on, payload)) if on == channel => {
                                if !on_message(&payload) {
                                    return;
                                }
                            }
                            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                        }
                    }
                });
                return;
            }
            Backend::Redis { client, .. } => client.clone(),
        };
        tokio::spawn(async move {
            let mut delay = Duration::from_millis(100);
            loop {
                match client.get_async_pubsub().await {
                    Ok(mut pubsub) => {
                        if pubsub.subscribe(&channel).await.is_ok() {
                            delay = Duration::from_millis(100);
                            let mut messages = pubsub.on_message();
                            while let Some(message) = messages.next().await {
                                if !on_message(message.get_payload_bytes()) {
                                    return;
                                }
                            }
                        }
                    }
                    Err(error) => {
                        tracing::debug!(%error, "redis subscription unavailable; retrying");
                    }
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        });
    }

    /// DEL.
    pub async fn del(&self, key: &str) {
        let _ = self
            .run(
                "del",
                async |c| c.del::<_, ()>(key).await,
                |m| {
                    m.entries().remove(key);
                },
            )
            .await;
    }

    /// Increments a counter that expires `ttl` after its creation; returns the new value.
    pub async fn incr_window(&self, key: &str, ttl: Duration) -> Option<u64> {
        let seconds = i64::try_from(ttl.as_secs().max(1)).unwrap_or(i64::MAX);
        self.run(
            "incr",
            async |c| {
                let (value, _): (u64, bool) = redis::pipe()
                    .atomic()
                    .incr(key, 1u64)
                    .expire(key, seconds)
                    .query_async(c)
                    .await?;
                Ok(value)
            },
            |m| {
                let now = Instant::now();
                let mut entries = m.entries();
                let entry = entries
                    .entry(key.to_owned())
                    .or_insert_with(|| (0u64.to_le_bytes().to_vec(), now + ttl));
                if entry.1 <= now {
                    entry.0 = 0u64.to_le_bytes().to_vec();
                }
                let value = u64::from_le_bytes(entry.0.as_slice().try_into().unwrap_or([0; 8])) + 1;
                // As the Redis pipeline does: INCR, then EXPIRE from now.
                *entry = (value.to_le_bytes().to_vec(), now + ttl);
                value
            },
        )
        .await
    }
}
