//! Per-tenant rate limits shared by the fleet: a fixed one-minute window counted in Redis
//! (`INCR` + `EXPIRE`), or in process when the edge has no Redis.
//!
//! While a configured Redis is unreachable, `cache.rate_limits_when_redis_down` decides:
//! `share` (the default) counts in process against the limit divided by the fleet size the
//! edge last saw — every edge adds one to a five-second counter in Redis each window, so the
//! previous window's count is the number of live edges —, `closed` refuses every call of a
//! rate-limited tenant, `local` counts the whole limit in process on each edge.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use quick_cache::sync::Cache;

use crate::shared::Shared;

/// The fleet-size counter's window.
const FLEET_WINDOW_SECS: u64 = 5;

/// What a tenant's limit does while Redis is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenRedisDown {
    /// The limit divided by the last known fleet size, counted in process.
    Share,
    /// Every call of a rate-limited tenant refused.
    Closed,
    /// The whole limit counted in process on each edge.
    Local,
}

/// Counts calls per tenant and minute.
pub struct RateLimiter {
    shared: Option<Arc<Shared>>,
    local: Cache<(String, u64), Arc<AtomicU64>>,
    when_down: WhenRedisDown,
    /// Edges seen counting in Redis in the last complete window (at least 1).
    fleet: Arc<AtomicU64>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("shared", &self.shared.is_some())
            .field("when_down", &self.when_down)
            .field("fleet", &self.fleet.load(Ordering::Relaxed))
            .finish()
    }
}

/// A refused call: how long until the window resets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// The limit per minute.
    pub limit: u32,
    /// Seconds until the next window.
    pub retry_after_secs: u64,
}

use tp_proto::clock::now_secs;

// === impl RateLimiter ===

impl RateLimiter {
    /// A limiter that counts in Redis when it can (`share` while Redis is down).
    pub fn new(shared: Option<Arc<Shared>>) -> RateLimiter {
        RateLimiter::with_policy(shared, WhenRedisDown::Share)
    }

    /// A limiter with `when_down` as its policy while Redis is down.
    pub fn with_policy(shared: Option<Arc<Shared>>, when_down: WhenRedisDown) -> RateLimiter {
        RateLimiter {
            shared,
            // Old windows are never read again: they leave as the newest fill the slab.
            local: Cache::new(200_000),
            when_down,
            fleet: Arc::new(AtomicU64::new(1)),
        }
    }

    /// Counts this edge into the fleet-size counter every second (one increment per window)
    /// and reads the previous window's count; runs until `stop`.
    pub fn spawn_fleet_count(&self, stop: tokio_util::sync::CancellationToken) {
        let Some(shared) = self.shared.clone() else {
            return;
        };
        let fleet = Arc::clone(&self.fleet);
        tokio::spawn(async move {
            let mut counted = u64::MAX;
            let mut ticker = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                let window = now_secs() / FLEET_WINDOW_SECS;
                if window == counted {
                    continue;
                }
                let key = |w: u64| shared.key(&["fleet", &w.to_string()]);
                if shared
                    .incr_window(&key(window), Duration::from_secs(FLEET_WINDOW_SECS * 6))
                    .await
                    .is_some()
                {
                    counted = window;
                    if let Some(edges) = shared.count(&key(window - 1)).await {
                        fleet.store(edges.max(1), Ordering::Relaxed);
                        metrics::gauge!("tp_edge_fleet_size").set(edges.max(1) as f64);
                    }
                }
            }
        });
    }

    /// The fleet size last seen (1 without Redis).
    pub fn fleet_size(&self) -> u64 {
        self.fleet.load(Ordering::Relaxed)
    }

    /// Counts one call of `tenant`; refuses it beyond `limit` per minute (0 = unlimited).
    pub async fn check(&self, tenant: &str, limit: u32) -> Result<(), Limited> {
        if limit == 0 {
            return Ok(());
        }
        let now = now_secs();
        let window = now / 60;
        let retry_after_secs = 60 - now % 60;
        let refused = || {
            metrics::counter!("tp_edge_rate_limited_total").increment(1);
            Err(Limited {
                limit,
                retry_after_secs,
            })
        };
        let (count, allowed) = match &self.shared {
            Some(shared) => match shared
                .incr_window(
                    &shared.key(&["rl", tenant, &window.to_string()]),
                    Duration::from_secs(120),
                )
                .await
            {
                Some(count) => (count, u64::from(limit)),
                None => {
                    metrics::counter!("tp_edge_rate_limit_degraded_total", "policy" => match self.when_down {
                        WhenRedisDown::Share => "share",
                        WhenRedisDown::Closed => "closed",
                        WhenRedisDown::Local => "local",
                    })
                    .increment(1);
                    match self.when_down {
                        WhenRedisDown::Closed => return refused(),
                        WhenRedisDown::Local => {
                            (self.count_locally(tenant, window), u64::from(limit))
                        }
                        WhenRedisDown::Share => (
                            self.count_locally(tenant, window),
                            u64::from(limit).div_ceil(self.fleet_size()),
                        ),
                    }
                }
            },
            None => (self.count_locally(tenant, window), u64::from(limit)),
        };
        if count > allowed { refused() } else { Ok(()) }
    }

    fn count_locally(&self, tenant: &str, window: u64) -> u64 {
        let key = (tenant.to_owned(), window);
        let counter = self
            .local
            .get_or_insert_with(&key, || {
                Ok::<_, std::convert::Infallible>(Arc::new(AtomicU64::new(0)))
            })
            .unwrap_or_else(|never| match never {});
        counter.fetch_add(1, Ordering::Relaxed) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn local_windows_refuse_beyond_the_limit() {
        let limiter = RateLimiter::new(None);
        for _ in 0..3 {
            limiter.check("acme", 3).await.unwrap();
        }
        let refused = limiter.check("acme", 3).await.unwrap_err();
        assert_eq!(refused.limit, 3);
        assert!(refused.retry_after_secs <= 60);
        limiter.check("globex", 3).await.unwrap();
        limiter.check("acme", 0).await.unwrap();
    }

    #[tokio::test]
    async fn with_redis_down_each_policy_holds() {
        let shared = Shared::memory("t");
        shared.set_down(true);
        let share = RateLimiter::with_policy(Some(Arc::clone(&shared)), WhenRedisDown::Share);
        share.fleet.store(2, Ordering::Relaxed);
        let mut allowed = 0;
        for _ in 0..10 {
            allowed += usize::from(share.check("acme", 10).await.is_ok());
        }
        assert_eq!(allowed, 5, "half the limit on each of two edges");
        let closed = RateLimiter::with_policy(Some(Arc::clone(&shared)), WhenRedisDown::Closed);
        assert!(closed.check("acme", 10).await.is_err());
        assert!(
            closed.check("acme", 0).await.is_ok(),
            "unlimited tenants are not touched"
        );
        let local = RateLimiter::with_policy(Some(shared), WhenRedisDown::Local);
        for _ in 0..10 {
            local.check("acme", 10).await.unwrap();
        }
        assert!(local.check("acme", 10).await.is_err());
    }
}
