//! The transport's `Host` check (DNS rebinding): a request is answered only when its one
//! `Host` header names a host of `mcp.allowed_hosts`.

use axum::http::{HeaderMap, header};

/// The hosts the edge answers (`mcp.allowed_hosts`), read once: `*` allows every host, an
/// entry without a port any port; an entry no `Host` header could match matches nothing.
#[derive(Debug, Clone)]
pub struct AllowedHosts {
    any: bool,
    /// (name, port) of each entry.
    entries: Vec<(String, Option<u16>)>,
}

impl AllowedHosts {
    /// The entries of `mcp.allowed_hosts`.
    pub fn new(allowed: &[String]) -> AllowedHosts {
        AllowedHosts {
            any: allowed.iter().any(|h| h.trim() == "*"),
            entries: allowed
                .iter()
                .filter_map(|entry| split_host(entry.trim()))
                .map(|(name, port)| (name.to_owned(), port))
                .collect(),
        }
    }
}

/// The `Host` check of the transport, for the one `Host` header a well-formed request has.
/// Compared without allocating: it runs on every request.
pub fn host_allowed(headers: &HeaderMap, allowed: &AllowedHosts) -> bool {
    if allowed.any {
        return true;
    }
    let mut hosts = headers.get_all(header::HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return false;
    };
    let Some((name, port)) = host.to_str().ok().and_then(split_host) else {
        return false;
    };
    allowed.entries.iter().any(|(entry_name, entry_port)| {
        entry_name.eq_ignore_ascii_case(name) && entry_port.is_none_or(|p| port == Some(p))
    })
}

/// `host[:port]`, `[v6]` or `[v6]:port` (a bare IPv6 address, `::1`, is a host without a port),
/// as (host without brackets, port); `None` for what no `Host` header may hold.
fn split_host(authority: &str) -> Option<(&str, Option<u16>)> {
    if authority.is_empty()
        || authority
            .bytes()
            .any(|b| b.is_ascii_whitespace() || matches!(b, b'/' | b'?' | b'#' | b'@'))
    {
        return None;
    }
    if let Some(rest) = authority.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        return match after {
            "" => Some((name, None)),
            port => Some((name, Some(port.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match authority.split_once(':') {
        None => Some((authority, None)),
        // Two colons or more: a bare IPv6 address.
        Some((_, rest)) if rest.contains(':') => Some((authority, None)),
        Some((name, port)) => Some((name, Some(port.parse().ok()?))),
    }
}
