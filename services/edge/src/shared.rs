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
    /// Commands that failed, ever (a cluster connection is rebuilt when this moves).
    failures: std::sync::atomic::AtomicU64,
}

/// Where the shared cache lives and how to reach it (`redis_url`, `cache.redis_*`).
#[derive(Debug, Clone, Default)]
pub struct RedisSettings {
    /// `redis://` or `rediss://` (TLS) URLs: one server, or seed nodes of a cluster.
    pub urls: Vec<String>,
    /// A Redis Cluster: keys spread over its shards by slot, failovers followed.
    pub cluster: bool,
    /// Non-empty: `urls` are Redis Sentinels, asked where this primary is (again after every
    /// failure, so that a failover is followed).
    pub sentinel_master: String,
    /// PEM file of the CA that signs the servers' certificates (`rediss://`); empty = the
    /// system's roots.
    pub ca_file: String,
    /// PEM client certificate and key for servers that require one (`tls-auth-clients yes`).
    pub cert_file: String,
    /// The client certificate's key.
    pub key_file: String,
    /// Key prefix.
    pub prefix: String,
    /// Command timeout.
    pub timeout: Duration,
}

enum Backend {
    Redis {
        /// A client per seed URL (the pub/sub listener tries them in turn).
        clients: Vec<redis::Client>,
        connection: RwLock<Option<Conn>>,
        cluster: bool,
        /// The sentinels that say where the primary is (`cache.redis_sentinel_master`).
        sentinel: Option<Arc<Sentinels>>,
    },
    Memory(Memory),
}

/// A connection to one Redis server, or to a cluster (routing each command by its key's slot
/// and following failovers). Both reconnect by themselves.
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl redis::aio::ConnectionLike for Conn {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// Redis Sentinels, asked where the primary is.
struct Sentinels(tokio::sync::Mutex<redis::sentinel::SentinelClient>);

impl Sentinels {
    /// A client of the primary the sentinels name now.
    async fn primary(&self) -> redis::RedisResult<redis::Client> {
        self.0.lock().await.async_get_client().await
    }
}

/// The TLS material in `settings`, read from its files.
fn certificates(settings: &RedisSettings) -> anyhow::Result<Option<redis::TlsCertificates>> {
    use anyhow::Context as _;
    let read = |what: &str, path: &str| {
        std::fs::read(path).with_context(|| format!("cache.redis_{what}: reading {path}"))
    };
    let root_cert = match settings.ca_file.as_str() {
        "" => None,
        path => Some(read("ca_file", path)?),
    };
    let client_tls = match (settings.cert_file.as_str(), settings.key_file.as_str()) {
        ("", "") => None,
        ("", _) | (_, "") => {
            anyhow::bail!("cache.redis_cert_file and cache.redis_key_file: set both, or neither")
        }
        (cert, key) => Some(redis::ClientTlsConfig {
            client_cert: read("cert_file", cert)?,
            client_key: read("key_file", key)?,
        }),
    };
    Ok(
        (root_cert.is_some() || client_tls.is_some()).then_some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }),
    )
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

    /// `key`'s value unless it has expired (an expired entry is dropped).
    fn live(&self, key: &str) -> Option<Vec<u8>> {
        let mut entries = self.entries();
        match entries.get(key) {
            Some((value, expires)) if *expires > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
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
    pub fn connect(settings: &RedisSettings) -> anyhow::Result<Arc<Shared>> {
        let dialer = Dialer::new(settings)?;
        let Some(client) = dialer.clients.first().cloned() else {
            anyhow::bail!("redis_url: no URL");
        };
        let shared = Arc::new(Shared {
            backend: Backend::Redis {
                clients: dialer.clients.clone(),
                connection: RwLock::new(None),
                cluster: settings.cluster,
                sentinel: dialer.sentinel.clone(),
            },
            prefix: settings.prefix.clone(),
            timeout: settings.timeout,
            healthy: AtomicBool::new(false),
            failures: std::sync::atomic::AtomicU64::new(0),
        });
        tokio::spawn(keep_connected(Arc::clone(&shared), dialer, client));
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
            failures: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Takes the in-process stand-in down (every operation fails, as when Redis is
    /// unreachable) or back up; no effect on Redis.
    pub fn set_down(&self, down: bool) {
        if let Backend::Memory(memory) = &self.backend {
            memory.down.store(down, Ordering::SeqCst);
        }
    }

    /// Whether the shared cache is a Redis Cluster (where a PUBLISH counts only the
    /// subscribers of the node that took it).
    pub fn is_cluster(&self) -> bool {
        matches!(self.backend, Backend::Redis { cluster: true, .. })
    }

    /// Whether the last command succeeded.
    pub fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// How many commands have failed since the cache was made.
    #[cfg(test)]
    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
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
        redis: impl AsyncFnOnce(&mut Conn) -> redis::RedisResult<T>,
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
        self.failures.fetch_add(1, Ordering::Relaxed);
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
            |m| m.live(key),
        )
        .await
        .flatten()
    }

    /// GETs of several keys in one round trip (a pipeline; on a cluster, one command per key,
    /// all at once), in the order of `keys`; `None` when it fails.
    pub async fn get_many(&self, keys: &[String]) -> Option<Vec<Option<Vec<u8>>>> {
        if keys.is_empty() {
            return Some(Vec::new());
        }
        self.run(
            "get_many",
            async |c| {
                if let Conn::Cluster(cluster) = c {
                    let gets = keys.iter().map(|key| {
                        let mut cluster = cluster.clone();
                        async move { cluster.get::<_, Option<Vec<u8>>>(key).await }
                    });
                    return futures::future::join_all(gets).await.into_iter().collect();
                }
                let mut pipe = redis::pipe();
                for key in keys {
                    pipe.get(key);
                }
                pipe.query_async::<Vec<Option<Vec<u8>>>>(c).await
            },
            |m| keys.iter().map(|key| m.live(key)).collect(),
        )
        .await
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
                    if let Conn::Cluster(cluster) = c {
                        // Keys of several slots: one command each, all at once.
                        let sets = entries.iter().map(|(key, value)| {
                            let mut cluster = cluster.clone();
                            async move { cluster.set_ex::<_, _, ()>(key, value, seconds).await }
                        });
                        for set in futures::future::join_all(sets).await {
                            set?;
                        }
                        return Ok(());
                    }
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
            Backend::Redis {
                clients, sentinel, ..
            } => (clients.clone(), sentinel.clone()),
        };
        let (client, sentinel) = client;
        // In a cluster a message published on any node reaches the subscribers of every node:
        // one subscription, on the first seed node that answers (the next when it fails).
        tokio::spawn(async move {
            let mut delay = Duration::from_millis(100);
            let mut turn = 0usize;
            loop {
                // Behind sentinels: on the primary they name now (a message published there
                // reaches its replicas' subscribers too).
                let client = match &sentinel {
                    Some(sentinel) => match sentinel.primary().await {
                        Ok(primary) => primary,
                        Err(error) => {
                            tracing::debug!(%error, "asking the sentinels for the primary failed; retrying");
                            tokio::time::sleep(delay).await;
                            delay = (delay * 2).min(Duration::from_secs(5));
                            continue;
                        }
                    },
                    None => client[turn % client.len()].clone(),
                };
                turn += 1;
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

    /// Deletes `key`, best effort: a failure is not returned to the caller.
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

    /// Deletes `keys` in one round trip (on a cluster, one command per key, all at once),
    /// best effort.
    pub async fn del_many(&self, keys: &[String]) {
        if keys.is_empty() {
            return;
        }
        let _ = self
            .run(
                "del_many",
                async |c| {
                    if let Conn::Cluster(cluster) = c {
                        let dels = keys.iter().map(|key| {
                            let mut cluster = cluster.clone();
                            async move { cluster.del::<_, ()>(key).await }
                        });
                        return futures::future::join_all(dels).await.into_iter().collect();
                    }
                    let mut pipe = redis::pipe();
                    for key in keys {
                        pipe.del(key).ignore();
                    }
                    pipe.query_async::<()>(c).await
                },
                |m| {
                    let mut entries = m.entries();
                    for key in keys {
                        entries.remove(key);
                    }
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

/// How the edge reaches Redis: one client per URL, a cluster client, or the sentinels.
struct Dialer {
    clients: Vec<redis::Client>,
    cluster: Option<redis::cluster::ClusterClient>,
    sentinel: Option<Arc<Sentinels>>,
    config: ConnectionManagerConfig,
}

impl Dialer {
    fn new(settings: &RedisSettings) -> anyhow::Result<Dialer> {
        // TCP_NODELAY: commands from concurrent requests share one multiplexed connection;
        // with Nagle's algorithm a small write waits for the previous one's ACK, which the
        // server delays (40 ms), and every lookup behind it stalls.
        let tcp = || redis::io::tcp::TcpSettings::default().set_nodelay(true);
        let certificates = certificates(settings)?;
        let mut clients = Vec::new();
        for url in &settings.urls {
            let info = redis::IntoConnectionInfo::into_connection_info(url.as_str())?
                .set_tcp_settings(tcp());
            clients.push(match &certificates {
                Some(certs) => redis::Client::build_with_tls(info, certs.clone())?,
                None => redis::Client::open(info)?,
            });
        }
        let cluster = if settings.cluster {
            let mut builder = redis::cluster::ClusterClientBuilder::new(settings.urls.clone())
                .tcp_settings(tcp())
                .connection_timeout(Duration::from_secs(2))
                .response_timeout(settings.timeout)
                .retries(2)
                .max_retry_wait(500);
            if let Some(certs) = &certificates {
                builder = builder.certs(certs.clone());
            }
            Some(builder.build()?)
        } else {
            None
        };
        let sentinel = if settings.sentinel_master.is_empty() {
            None
        } else {
            let nodes =
                redis::sentinel::SentinelNodeConnectionInfo::default().set_tcp_settings(tcp());
            Some(Arc::new(Sentinels(tokio::sync::Mutex::new(
                redis::sentinel::SentinelClient::build(
                    settings.urls.clone(),
                    settings.sentinel_master.clone(),
                    Some(nodes),
                    redis::sentinel::SentinelServerType::Master,
                )?,
            ))))
        };
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(settings.timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(2));
        Ok(Dialer {
            clients,
            cluster,
            sentinel,
            config,
        })
    }

    /// A connection: to the cluster, to the primary the sentinels name, or to `client`.
    async fn dial(&self, client: &redis::Client) -> redis::RedisResult<Conn> {
        match (&self.cluster, &self.sentinel) {
            (Some(cluster), _) => cluster.get_async_connection().await.map(Conn::Cluster),
            (None, Some(_)) => self.primary().await.map(Conn::Single),
            (None, None) => client
                .get_connection_manager_with_config(self.config.clone())
                .await
                .map(Conn::Single),
        }
    }

    /// A connection to the primary the sentinels name now.
    async fn primary(&self) -> redis::RedisResult<redis::aio::ConnectionManager> {
        let Some(sentinel) = &self.sentinel else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "no sentinels configured",
            )));
        };
        sentinel
            .primary()
            .await?
            .get_connection_manager_with_config(self.config.clone())
            .await
    }

    /// After commands failed in the last second: a cluster connection is made again from
    /// the seeds (a fresh slot map finds the replica that took over a dead primary's slots at
    /// once, where the old connection can take many seconds to notice); behind sentinels the
    /// edge asks where the primary is now and connects there (a connection manager would
    /// keep redialling the old one, or stay on it after it came back as a read-only replica).
    async fn redial(&self, shared: &Shared) {
        let fresh = match (&self.cluster, &self.sentinel) {
            (Some(cluster), _) => cluster.get_async_connection().await.map(Conn::Cluster),
            (None, Some(_)) => self.primary().await.map(Conn::Single),
            (None, None) => return,
        };
        match fresh {
            Ok(fresh) => {
                if let Backend::Redis { connection, .. } = &shared.backend {
                    *connection.write().await = Some(fresh);
                }
                metrics::counter!("tp_edge_redis_reconnects_total").increment(1);
            }
            Err(error) => {
                tracing::debug!(%error, "reconnecting to redis failed; retrying");
            }
        }
    }
}

/// Connects (retrying with a backoff up to 5 s), then keeps readiness true to Redis's state
/// even while every request is an L1 hit: one PING a second (the connection manager
/// reconnects), and a fresh connection after commands fail ([`Dialer::redial`]). Ends when
/// the edge drops its [`Shared`].
async fn keep_connected(shared: Arc<Shared>, dialer: Dialer, client: redis::Client) {
    let mut delay = Duration::from_millis(100);
    let connection = loop {
        match dialer.dial(&client).await {
            Ok(connection) => break connection,
            Err(error) => {
                tracing::warn!(%error, "redis unreachable; serving without the shared cache");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    };
    if let Backend::Redis {
        connection: slot, ..
    } = &shared.backend
    {
        *slot.write().await = Some(connection);
    }
    shared.healthy.store(true, Ordering::Relaxed);
    tracing::info!("connected to redis");
    let weak = Arc::downgrade(&shared);
    drop(shared);
    let mut failures = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Some(shared) = weak.upgrade() else { return };
        let now = shared.failures.load(Ordering::Relaxed);
        if now != failures {
            failures = now;
            dialer.redial(&shared).await;
        }
        shared
            .run(
                "ping",
                async |c: &mut Conn| redis::cmd("PING").query_async::<String>(c).await,
                |_| String::new(),
            )
            .await;
    }
}
