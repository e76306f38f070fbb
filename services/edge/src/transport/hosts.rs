//! The transport's `Host` check (DNS rebinding): a request is answered only when its one
//! `Host` header names a host of `mcp.allowed_hosts`.

use axum::http::Uri;

use super::heads::Heads;

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

/// The `Host` check of the transport, for the one `Host` header a well-formed request has —
/// and for the authority of an absolute request target (`POST http://host/mcp`), which
/// HTTP/1.1 says a server must use in place of `Host`. Compared without allocating: it runs
/// on every request.
pub fn host_allowed(heads: &Heads, uri: &Uri, allowed: &AllowedHosts) -> bool {
    if allowed.any {
        return true;
    }
    let Ok(Some(host)) = heads.host.single() else {
        return false;
    };
    let allowed_authority = |authority: &str| {
        let Some((name, port)) = split_host(authority) else {
            return false;
        };
        allowed.entries.iter().any(|(entry_name, entry_port)| {
            entry_name.eq_ignore_ascii_case(name) && entry_port.is_none_or(|p| port == Some(p))
        })
    };
    host.to_str().is_ok_and(allowed_authority)
        && uri
            .authority()
            .is_none_or(|a| allowed_authority(a.as_str()))
}

/// Headers a request must not carry twice, and an absolute request target that disagrees
/// with `Host`: the name of what contradicts itself, if anything (answered 400 before any
/// other check, so that a proxy in front and the edge never read different values).
pub fn contradiction(heads: &Heads, uri: &Uri) -> Option<&'static str> {
    if heads.authorization.is_repeated() {
        return Some("more than one Authorization header");
    }
    if heads.host.is_repeated() {
        return Some("more than one Host header");
    }
    let authority = uri.authority()?;
    let host = heads.host.first()?.to_str().ok()?;
    (!authority.as_str().eq_ignore_ascii_case(host))
        .then_some("the request target names another host than the Host header")
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
