//! End-to-end tests: the project's binaries as real processes over real sockets.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions panic on setup failures by design"
)]
#![allow(
    clippy::too_many_lines,
    reason = "an end-to-end test reads as one story, setup to assertions"
)]

mod admin_fuzz;
mod admin_oidc;
mod admins;
mod adversarial;
mod approvals;
mod ask;
mod audit;
mod claude_code;
mod clients;
mod conformance;
mod connections;
mod containers;
mod control_plane;
mod control_plane_errors;
mod deploy;
mod direct_call;
mod disclosure;
mod docs;
mod drift;
mod edge;
mod fast_list;
mod faults;
mod fleet;
mod fuzz_mcp;
mod hostile;
mod lifecycle;
mod metrics;
mod oauth;
mod otel;
mod postgres;
mod redis;
mod rng;
mod rolling;
mod search;
mod tls;
mod transport_rules;
mod trust;
mod trust_control;
mod trust_edge;
mod trust_wiki;
mod up;
mod upstream;
mod wiki;
mod wiki_eval;
