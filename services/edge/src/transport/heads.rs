//! The request headers the edge reads, found in one pass over a request's headers
//! ([`Heads::read`]) before anything else looks at them: the access log (request id, session),
//! the Host and Origin checks, the in-flight budget (`Content-Length`), authentication, the
//! media types and the transport's rules. Looked up by name one at a time, they cost a dozen
//! hashed lookups per request; read once, one walk over the request's few headers.
//!
//! Only what the edge reads is kept, and of a header that must come once, whether it came
//! more than once (the checks that refuse a repeated header read that).

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};

use super::session::SESSION_ID;

/// The header a request id travels in, both ways.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// `MCP-Protocol-Version` (a constant: looking a header up by a `&str` parses the name).
pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Method` (2026-07-28).
pub const METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name` (2026-07-28).
pub const NAME: HeaderName = HeaderName::from_static("mcp-name");

/// One header as the edge reads it: its first value, and whether more came.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    first: Option<HeaderValue>,
    repeated: bool,
}

impl Seen {
    /// The first value, if the header came.
    pub fn first(&self) -> Option<&HeaderValue> {
        self.first.as_ref()
    }

    /// Whether the header came at all.
    pub fn is_present(&self) -> bool {
        self.first.is_some()
    }

    /// Whether the header came more than once.
    pub fn is_repeated(&self) -> bool {
        self.repeated
    }

    /// The value of a header that may come once; `Err(())` when it came more than once.
    #[allow(
        clippy::result_unit_err,
        reason = "one reason only: the caller names the header"
    )]
    pub fn single(&self) -> Result<Option<&HeaderValue>, ()> {
        if self.repeated {
            Err(())
        } else {
            Ok(self.first.as_ref())
        }
    }

    fn see(&mut self, value: &HeaderValue) {
        if self.first.is_none() {
            self.first = Some(value.clone());
        } else {
            self.repeated = true;
        }
    }
}

/// What the edge reads of a request's headers (see the module).
#[derive(Debug, Default, Clone)]
pub struct Heads {
    /// `Host`: the authority the Host check and the Origin check compare.
    pub host: Seen,
    /// `Authorization`: the caller's bearer credential.
    pub authorization: Seen,
    /// `Origin`: present only when a browser sends the request.
    pub origin: Seen,
    /// `Content-Length`: what the in-flight budget reserves and the body buffer is sized by.
    pub content_length: Seen,
    /// `Content-Type`: a POST must carry JSON.
    pub content_type: Seen,
    /// `Accept`: its lines joined into one list, as HTTP reads a repeated list header
    /// (RFC 9110, 5.3).
    pub accept: Seen,
    /// `Mcp-Session-Id` (2025-xx).
    pub session_id: Seen,
    /// `MCP-Protocol-Version`.
    pub protocol_version: Seen,
    /// `Mcp-Method` (2026-07-28).
    pub method: Seen,
    /// `Mcp-Name` (2026-07-28).
    pub name: Seen,
    /// `X-Request-Id`.
    pub request_id: Seen,
}

impl Heads {
    /// The headers of `headers` the edge reads, in one pass.
    pub fn read(headers: &HeaderMap) -> Heads {
        let mut heads = Heads::default();
        for (name, value) in headers {
            let seen = if name == header::HOST {
                &mut heads.host
            } else if name == header::AUTHORIZATION {
                &mut heads.authorization
            } else if name == header::CONTENT_TYPE {
                &mut heads.content_type
            } else if name == header::CONTENT_LENGTH {
                &mut heads.content_length
            } else if name == header::ACCEPT {
                if heads.accept.is_present() {
                    heads.accept.first = joined(heads.accept.first.take(), value);
                    heads.accept.repeated = true;
                    continue;
                }
                &mut heads.accept
            } else if name == header::ORIGIN {
                &mut heads.origin
            } else if name == PROTOCOL_VERSION {
                &mut heads.protocol_version
            } else if name == METHOD {
                &mut heads.method
            } else if name == NAME {
                &mut heads.name
            } else if name == SESSION_ID {
                &mut heads.session_id
            } else if name == REQUEST_ID {
                &mut heads.request_id
            } else {
                continue;
            };
            seen.see(value);
        }
        heads
    }
}

/// Two lines of a list header as one (`a, b`). A line that is not text is left out, as it is
/// when the lines are read one by one.
fn joined(first: Option<HeaderValue>, next: &HeaderValue) -> Option<HeaderValue> {
    let Some(first) = first.filter(|first| first.to_str().is_ok()) else {
        return Some(next.clone());
    };
    if next.to_str().is_err() {
        return Some(first);
    }
    let mut both = Vec::with_capacity(first.len() + 2 + next.len());
    both.extend_from_slice(first.as_bytes());
    both.extend_from_slice(b", ");
    both.extend_from_slice(next.as_bytes());
    Some(HeaderValue::from_bytes(&both).unwrap_or(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&'static str, &str)]) -> Heads {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        Heads::read(&map)
    }

    #[test]
    fn every_header_the_edge_reads_is_found_with_its_first_value() {
        let heads = read(&[
            ("host", "localhost:8080"),
            ("authorization", "Bearer k"),
            ("origin", "http://localhost:8080"),
            ("content-length", "12"),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-session-id", "s"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
            ("x-request-id", "r-1"),
            ("user-agent", "test"),
        ]);
        let first = |seen: &Seen| seen.first().unwrap().to_str().unwrap().to_owned();
        assert_eq!(first(&heads.host), "localhost:8080");
        assert_eq!(first(&heads.authorization), "Bearer k");
        assert_eq!(first(&heads.origin), "http://localhost:8080");
        assert_eq!(first(&heads.content_length), "12");
        assert_eq!(first(&heads.content_type), "application/json");
        assert_eq!(first(&heads.accept), "application/json, text/event-stream");
        assert_eq!(first(&heads.session_id), "s");
        assert_eq!(first(&heads.protocol_version), "2026-07-28");
        assert_eq!(first(&heads.method), "tools/call");
        assert_eq!(first(&heads.name), "echo");
        assert_eq!(first(&heads.request_id), "r-1");
        assert!(!heads.host.is_repeated());
        assert_eq!(heads.host.single().unwrap().unwrap(), "localhost:8080");
    }

    #[test]
    fn a_repeated_header_is_marked_and_a_repeated_accept_is_one_list() {
        let heads = read(&[
            ("authorization", "Bearer a"),
            ("authorization", "Bearer b"),
            ("accept", "application/json"),
            ("accept", "text/event-stream"),
            ("accept", "text/plain"),
        ]);
        assert!(heads.authorization.is_repeated());
        assert!(heads.authorization.single().is_err());
        assert_eq!(heads.authorization.first().unwrap(), "Bearer a");
        assert_eq!(
            heads.accept.first().unwrap(),
            "application/json, text/event-stream, text/plain"
        );
        assert!(!heads.host.is_present());
        assert_eq!(heads.host.single(), Ok(None));
    }
}
