//! Circuit breakers of one (executor, tool): one shared by every tenant, which opens only when
//! at least two tenants are failing (so one tenant cannot open it for the others), and one per
//! tenant.

use std::collections::HashMap;
use std::time::Instant;

use super::BreakerSettings;

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
}

/// The breakers of one (executor, tool).
#[derive(Debug)]
pub(super) struct Breakers {
    pub(super) shared: BreakerState,
    /// Tenants among the shared breaker's current run of failures (two are enough).
    failing_tenants: Vec<String>,
    /// Tenants whose own breaker is not closed with zero failures.
    tenants: HashMap<String, BreakerState>,
}

impl Breakers {
    pub(super) fn new() -> Breakers {
        Breakers {
            shared: BreakerState::Closed { failures: 0 },
            failing_tenants: Vec::new(),
            tenants: HashMap::new(),
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

    pub(super) fn succeeded(&mut self, tenant: &str) {
        self.shared = BreakerState::Closed { failures: 0 };
        self.failing_tenants.clear();
        self.tenants.remove(tenant);
    }

    /// Records a failure; returns whether the shared breaker opened now.
    pub(super) fn failed(&mut self, tenant: &str, settings: &BreakerSettings) -> bool {
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
        if !self.failing_tenants.iter().any(|t| t == tenant) && self.failing_tenants.len() < 2 {
            self.failing_tenants.push(tenant.to_owned());
        }
        let was_open = matches!(self.shared, BreakerState::Open { .. });
        self.shared = match self.shared {
            BreakerState::Closed { failures }
                if failures + 1 < settings.failures || self.failing_tenants.len() < 2 =>
            {
                BreakerState::Closed {
                    failures: failures + 1,
                }
            }
            _ => open(),
        };
        !was_open && matches!(self.shared, BreakerState::Open { .. })
    }
}
