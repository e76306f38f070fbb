//! Circuit breakers of one (executor, tool): one per tenant, and one shared by every tenant
//! that opens only when the executor is failing for several tenants at once — at least
//! `shared_tenants` of them have their own breaker open, and they are at least half of the
//! tenants that called the tool recently. One tenant, however many failing or slow calls it
//! sends, opens only its own breaker; an attacker holding fewer tenants than
//! `shared_tenants` cannot open the shared one either.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::BreakerSettings;

/// How long a tenant that called the tool counts among its recent callers.
const RECENT: Duration = Duration::from_secs(60);

/// Most recent callers remembered per (executor, tool) (the oldest are forgotten first).
const MAX_CALLERS: usize = 10_000;

#[derive(Debug, Clone, Copy)]
pub(super) enum BreakerState {
    Closed { failures: u32 },
    Open { until: Instant },
    HalfOpen,
}

impl BreakerState {
    /// Admits a call or refuses it; a half-open breaker admits one probe.
    pub(super) fn admit(&mut self) -> bool {
        match *self {
            BreakerState::Closed { .. } => true,
            BreakerState::Open { until } if Instant::now() >= until => {
                *self = BreakerState::HalfOpen;
                true
            }
            BreakerState::Open { .. } | BreakerState::HalfOpen => false,
        }
    }

    pub(super) fn value(self) -> f64 {
        match self {
            BreakerState::Closed { .. } => 0.0,
            BreakerState::HalfOpen => 1.0,
            BreakerState::Open { .. } => 2.0,
        }
    }

    fn is_closed(self) -> bool {
        matches!(self, BreakerState::Closed { .. })
    }
}

/// The breakers of one (executor, tool).
#[derive(Debug)]
pub(super) struct Breakers {
    pub(super) shared: BreakerState,
    /// Tenants whose own breaker is not closed with zero failures.
    pub(super) tenants: HashMap<String, BreakerState>,
    /// Tenants that called the tool, and when they last did.
    callers: HashMap<String, Instant>,
}

impl Breakers {
    pub(super) fn new() -> Breakers {
        Breakers {
            shared: BreakerState::Closed { failures: 0 },
            tenants: HashMap::new(),
            callers: HashMap::new(),
        }
    }

    pub(super) fn admit(&mut self, tenant: &str) -> bool {
        if !self.shared.admit() {
            return false;
        }
        match self.tenants.get_mut(tenant) {
            Some(own) => own.admit(),
            None => true,
        }
    }

    fn called(&mut self, tenant: &str) {
        let now = Instant::now();
        if self.callers.len() >= MAX_CALLERS && !self.callers.contains_key(tenant) {
            self.callers
                .retain(|_, at| now.duration_since(*at) < RECENT);
            if self.callers.len() >= MAX_CALLERS
                && let Some(oldest) = self
                    .callers
                    .iter()
                    .min_by_key(|(_, at)| **at)
                    .map(|(t, _)| t.clone())
            {
                self.callers.remove(&oldest);
            }
        }
        self.callers.insert(tenant.to_owned(), now);
    }

    pub(super) fn succeeded(&mut self, tenant: &str) {
        self.called(tenant);
        self.shared = BreakerState::Closed { failures: 0 };
        self.tenants.remove(tenant);
    }

    /// Records a failure; returns whether the shared breaker opened now.
    pub(super) fn failed(&mut self, tenant: &str, settings: &BreakerSettings) -> bool {
        self.called(tenant);
        let open = || BreakerState::Open {
            until: Instant::now() + settings.cooldown,
        };
        let own = self
            .tenants
            .entry(tenant.to_owned())
            .or_insert(BreakerState::Closed { failures: 0 });
        *own = match *own {
            BreakerState::Closed { failures } if failures + 1 < settings.failures => {
                BreakerState::Closed {
                    failures: failures + 1,
                }
            }
            _ => open(),
        };
        let was_open = matches!(self.shared, BreakerState::Open { .. });
        self.shared = match self.shared {
            // The probe of a half-open shared breaker failed: open again.
            BreakerState::HalfOpen => open(),
            BreakerState::Closed { .. } if self.failing_widely(settings) => open(),
            other => other,
        };
        !was_open && matches!(self.shared, BreakerState::Open { .. })
    }

    /// Whether enough tenants' own breakers are open to call the executor broken for all.
    fn failing_widely(&self, settings: &BreakerSettings) -> bool {
        let now = Instant::now();
        let failing = self.tenants.values().filter(|b| !b.is_closed()).count();
        let recent = self
            .callers
            .values()
            .filter(|at| now.duration_since(**at) < RECENT)
            .count();
        failing >= settings.shared_tenants.max(2) as usize && failing * 2 >= recent
    }
}
