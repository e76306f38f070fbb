//! End-to-end tests: the project's binaries as real processes over real sockets.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions panic on setup failures by design"
)]

mod admin_fuzz;
mod clients;
mod conformance;
mod control_plane;
mod control_plane_errors;
mod deploy;
mod disclosure;
mod docs;
mod edge;
mod fleet;
mod hostile;
mod postgres;
mod up;
mod wiki;
