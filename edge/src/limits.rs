//! Per-tenant rate limits shared by the fleet: a fixed one-minute window counted in Redis
//! (`INCR` + `EXPIRE`), or in process when Redis is absent or down.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use moka::sync::Cache;

use crate::shared::Shared;

/// Counts calls per tenant and minute.
pub struct RateLimiter {
    shared: Option<Arc<Shared>>,
    local: Cache<(String, u64), Arc<std::sync::atomic::AtomicU64>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("shared", &self.shared.is_some())
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

// === impl RateLimiter ===

impl RateLimiter {
    /// A limiter that counts in Redis when it can.
    pub fn new(shared: Option<Arc<Shared>>) -> RateLimiter {
        RateLimiter {
            shared,
            local: Cache::builder()
                .max_capacity(200_000)
                .time_to_live(Duration::from_secs(120))
                .build(),
        }
    }

    /// Counts one call of `tenant`; refuses it beyond `limit` per minute (0 = unlimited).
    pub async fn check(&self, tenant: &str, limit: u32) -> Result<(), Limited> {
        if limit == 0 {
            return Ok(());
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let window = now / 60;
        let retry_after_secs = 60 - now % 60;
        let shared_count = match &self.shared {
            Some(shared) => {
                shared
                    .incr_window(
                        &shared.key(&["rl", tenant, &window.to_string()]),
                        Duration::from_secs(120),
                    )
                    .await
            }
            None => None,
        };
        let count = match shared_count {
            Some(count) => count,
            None => {
                let counter = self.local.get_with((tenant.to_owned(), window), || {
                    Arc::new(std::sync::atomic::AtomicU64::new(0))
                });
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
            }
        };
        if count > u64::from(limit) {
            metrics::counter!("tp_edge_rate_limited_total").increment(1);
            Err(Limited {
                limit,
                retry_after_secs,
            })
        } else {
            Ok(())
        }
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
}
