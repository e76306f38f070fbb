//! End-to-end tests: the project's binaries as real processes over real sockets.

mod control_plane;
mod control_plane_errors;
mod edge;
mod fleet;
