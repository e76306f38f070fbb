//! Listener guards shared by every Toolplane server, so that no client — with or without a
//! key — can hold connections, file descriptors or request bodies open for long:
//!
//! - a **connection cap**: beyond `max_connections`, a new connection is closed as soon as it is
//!   accepted (and counted), instead of queueing behind the others;
//! - a **header deadline**: an HTTP/1 connection must send a complete request head within
//!   `header_read_timeout_ms` of being accepted, and again of finishing its previous request (so
//!   the same timer bounds idle keep-alive connections); a gRPC (HTTP/2) connection must send
//!   its first bytes within it;
//! - a **body deadline**: a request body must arrive in full within `body_read_timeout_ms` of its
//!   head ([`TimedBody`]);
//! - an **idle deadline** for gRPC connections: no request or response frame (HEADERS, DATA)
//!   either way for `idle_timeout_ms` closes the connection — keep-alive PINGs do not count;
//! - **keep-alive limits**: at most `max_requests_per_connection` requests per HTTP/1
//!   connection (the last answer says `Connection: close`).
//!
//! [`serve_http1`] is the edge's accept loop; [`grpc_incoming`] feeds tonic's
//! `serve_with_incoming_shutdown` with [`Guarded`] connections.

mod body;
pub mod dial;
pub mod egress;
mod grpc_conn;
mod io;
mod serve;
pub mod tls;

use serde::{Deserialize, Serialize};

pub use body::{BodyTimedOut, TimedBody, is_body_timeout};
pub use grpc_conn::GrpcConn;
pub use io::Guarded;
pub use serve::{
    Handler, IncomingRequest, TowerHandler, grpc_incoming, grpc_incoming_tls, serve_http1,
    serve_http1_tls,
};

/// Connection and request-read limits of one listener (the edge's `[http]`, the control
/// plane's `[grpc]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenerLimits {
    /// Most open connections; beyond, new connections are closed as soon as they are accepted.
    pub max_connections: usize,
    /// A connection must send a complete request head (HTTP/1) or its first bytes (gRPC) within
    /// this many milliseconds of being accepted; for HTTP/1 the same timer bounds how long an
    /// idle keep-alive connection may wait before its next request.
    pub header_read_timeout_ms: u64,
    /// A request body must arrive in full within this many milliseconds of its head.
    pub body_read_timeout_ms: u64,
    /// A gRPC connection that reads and writes nothing for this many milliseconds is closed.
    pub idle_timeout_ms: u64,
    /// Requests served on one HTTP/1 connection; the answer to the last says
    /// `Connection: close`.
    pub max_requests_per_connection: u32,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        ListenerLimits {
            max_connections: 8192,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            idle_timeout_ms: 300_000,
            max_requests_per_connection: 10_000,
        }
    }
}

impl ListenerLimits {
    /// Checks every field; `section` names the configuration section in the message.
    pub fn validate(&self, section: &str) -> Result<(), String> {
        if !(1..=1_000_000).contains(&self.max_connections) {
            return Err(format!(
                "{section}.max_connections: must be between 1 and 1000000"
            ));
        }
        for (key, value, min, max) in [
            (
                "header_read_timeout_ms",
                self.header_read_timeout_ms,
                100,
                600_000,
            ),
            (
                "body_read_timeout_ms",
                self.body_read_timeout_ms,
                100,
                3_600_000,
            ),
            ("idle_timeout_ms", self.idle_timeout_ms, 1_000, 86_400_000),
        ] {
            if !(min..=max).contains(&value) {
                return Err(format!(
                    "{section}.{key}: must be between {min} and {max} (milliseconds)"
                ));
            }
        }
        if self.max_requests_per_connection == 0 {
            return Err(format!(
                "{section}.max_requests_per_connection: must be at least 1"
            ));
        }
        Ok(())
    }

    /// `header_read_timeout_ms` as a duration.
    pub fn header_read_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.header_read_timeout_ms)
    }

    /// `body_read_timeout_ms` as a duration.
    pub fn body_read_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.body_read_timeout_ms)
    }

    /// `idle_timeout_ms` as a duration.
    pub fn idle_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.idle_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_name_their_key() {
        assert!(ListenerLimits::default().validate("http").is_ok());
        for (limits, needle) in [
            (
                ListenerLimits {
                    max_connections: 0,
                    ..Default::default()
                },
                "http.max_connections",
            ),
            (
                ListenerLimits {
                    header_read_timeout_ms: 1,
                    ..Default::default()
                },
                "http.header_read_timeout_ms",
            ),
            (
                ListenerLimits {
                    body_read_timeout_ms: 0,
                    ..Default::default()
                },
                "http.body_read_timeout_ms",
            ),
            (
                ListenerLimits {
                    max_requests_per_connection: 0,
                    ..Default::default()
                },
                "http.max_requests_per_connection",
            ),
        ] {
            let error = limits.validate("http").unwrap_err();
            assert!(error.contains(needle), "{error}");
        }
    }
}
