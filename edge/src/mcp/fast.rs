//! The warm `tools/list` fast path: pages serialised once per registry body and protocol
//! generation, answered with the caller's JSON-RPC id spliced in, without the MCP transport.
//!
//! The answer to `tools/list` differs between tenants with the same body, and between requests,
//! only in the JSON-RPC `id`, so each page is kept as the bytes before the id and the bytes after
//! it (built with rmcp's own types and serialiser, so they are the transport's bytes). The fast
//! path takes only requests whose every header and field the transport would accept as they are
//! (see [`eligible`]); anything else — a foreign `Host`, an unknown protocol version, a cursor
//! this edge did not issue — goes on, to be answered or refused.
//! `tests/fast_list.rs` checks the two paths answer the same bytes and statuses.

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use serde_json::{Map, Value};

use crate::config::RawMcp;
pub use crate::transport::pages::{Generation, Pages, answer, id_bytes};

/// `MCP-Protocol-Version` (a constant: looking a header up by a `&str` parses the name).
pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Session-Id` (2025-xx sessions).
pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// `Mcp-Method` (2026-07-28).
pub const METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name` (2026-07-28).
pub const NAME: HeaderName = HeaderName::from_static("mcp-name");

/// The protocol generation the transport would serve this request as, when the fast path may
/// answer it: an allowed `Host` (an `Origin` was checked before), both media types accepted,
/// and either a legacy version header with no per-request version, or
/// 2026-07-28 in the header, in `_meta` and `Mcp-Method: tools/list` with no `Mcp-Name`.
pub fn eligible(
    headers: &HeaderMap,
    params: Option<&Map<String, Value>>,
    mcp: &RawMcp,
) -> Option<Generation> {
    eligible_for(headers, params, mcp, "tools/list", None)
}

/// The protocol generation the transport would serve a `method` request as (`name`: the tool
/// of a `tools/call`), when the edge's own path may answer it: the rules of [`eligible`], with
/// `Mcp-Method: method` and `Mcp-Name: name` (a tool's, prompt's or resource's) at 2026-07-28.
/// SEP-2243 `Mcp-Param-*` headers are the handler's to check against the caller's tool
/// (`crate::mcp::params`): the transport does not know per-tenant tools.
pub fn eligible_for(
    headers: &HeaderMap,
    params: Option<&Map<String, Value>>,
    mcp: &RawMcp,
    method: &str,
    name: Option<&str>,
) -> Option<Generation> {
    // A browser's `Origin` has been checked by the edge's service (the one Origin rule,
    // `mcp.allowed_origins`) before any path sees the request.
    if !host_allowed(headers, &mcp.allowed_hosts) {
        return None;
    }
    if !accepts_json_and_sse(headers) {
        return None;
    }
    let mut versions = headers.get_all(&PROTOCOL_VERSION).iter();
    let version = match (versions.next(), versions.next()) {
        (None, _) => None,
        (Some(version), None) => Some(version.to_str().ok()?),
        (Some(_), Some(_)) => return None,
    };
    let meta = match params.and_then(|p| p.get("_meta")) {
        None => None,
        Some(Value::Object(meta)) => Some(meta),
        Some(_) => return None,
    };
    let meta_version = match meta.and_then(|m| m.get("io.modelcontextprotocol/protocolVersion")) {
        None => None,
        Some(Value::String(v)) => Some(v.as_str()),
        Some(_) => return None,
    };
    // 2026-07-28 requests must declare their capabilities, in a shape the transport reads.
    let capabilities_declared = meta
        .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
        .is_some_and(|c| {
            c.is_object()
                && <rmcp::model::ClientCapabilities as serde::Deserialize>::deserialize(c).is_ok()
        });
    let mcp_method = headers.get(&METHOD).map(HeaderValue::to_str);
    match (version, meta_version) {
        (None | Some("2025-03-26" | "2025-06-18" | "2025-11-25"), None) => {
            (mcp_method.is_none() && !headers.contains_key(&NAME)).then_some(Generation::Legacy)
        }
        (Some("2026-07-28"), Some("2026-07-28")) => {
            let mut names = headers.get_all(&NAME).iter();
            let name_matches = match (name, names.next(), names.next()) {
                (None, None, _) => true,
                // As sent, or SEP-2243's `=?base64?…?=` for a name a header cannot carry.
                (Some(name), Some(header), None) => header
                    .to_str()
                    .ok()
                    .and_then(super::params::decode)
                    .is_some_and(|decoded| decoded == name),
                _ => false,
            };
            (capabilities_declared
                && mcp_method.is_some_and(|m| m.is_ok_and(|m| m == method))
                && headers.get_all(&METHOD).iter().count() == 1
                && name_matches)
                .then_some(Generation::Stateless)
        }
        _ => None,
    }
}

/// `params.cursor` as the fast path reads it: `Some(None)` without one, `None` for a shape it
/// leaves to the transport.
pub fn cursor(params: Option<&Map<String, Value>>) -> Option<Option<&str>> {
    match params.and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(cursor)) => Some(Some(cursor)),
        Some(_) => None,
    }
}

fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        // Quality values (a `q=0` refuses a type) and quoted parameters are the transport's
        // to read.
        if value.contains("q=") || value.contains('"') {
            return false;
        }
        for item in value.split(',') {
            let essence = item.split(';').next().unwrap_or("").trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// The `Host` check of the transport (an entry without a port allows any port), for the one
/// `Host` header a well-formed request has; `["*"]` allows every host. Compared without
/// allocating: it runs on every warm `tools/list`.
pub(crate) fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    if allowed.iter().any(|h| h == "*") {
        return true;
    }
    let mut hosts = headers.get_all(header::HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return false;
    };
    let Some((name, port)) = host.to_str().ok().and_then(split_host) else {
        return false;
    };
    allowed.iter().any(|entry| match split_host(entry.trim()) {
        Some((entry_name, entry_port)) => {
            entry_name.eq_ignore_ascii_case(name) && entry_port.is_none_or(|p| port == Some(p))
        }
        None => false,
    })
}

/// `host[:port]`, `[v6]` or `[v6]:port` (a bare IPv6 address, `::1`, is a host without a port),
/// as (host without brackets, port); `None` for what no `Host` header may hold.
fn split_host(authority: &str) -> Option<(&str, Option<u16>)> {
    if authority.is_empty()
        || authority
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b"/?#@".contains(&b))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn eligibility() {
        let mcp = RawMcp::default();
        let base = [
            ("host", "127.0.0.1:8080"),
            ("accept", "application/json, text/event-stream"),
        ];
        let legacy = |extra: &[(&'static str, &str)]| {
            let mut all = base.to_vec();
            all.extend_from_slice(extra);
            eligible(&headers(&all), None, &mcp)
        };
        assert_eq!(legacy(&[]), Some(Generation::Legacy));
        assert_eq!(
            legacy(&[("mcp-protocol-version", "2025-11-25")]),
            Some(Generation::Legacy)
        );
        assert_eq!(legacy(&[("mcp-protocol-version", "2024-11-05")]), None);
        assert_eq!(legacy(&[("mcp-protocol-version", "2026-07-28")]), None);
        // The Origin is the service's to check, before any path.
        assert_eq!(
            legacy(&[("origin", "http://127.0.0.1:8080")]),
            Some(Generation::Legacy)
        );
        assert_eq!(legacy(&[("mcp-method", "tools/list")]), None);
        let mut wrong_host = base.to_vec();
        wrong_host[0] = ("host", "evil.example.com");
        assert_eq!(eligible(&headers(&wrong_host), None, &mcp), None);
        let mut only_json = base.to_vec();
        only_json[1] = ("accept", "application/json");
        assert_eq!(eligible(&headers(&only_json), None, &mcp), None);

        let bare_meta = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
        let meta = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                    "io.modelcontextprotocol/clientCapabilities": {}}});
        let params = meta.as_object();
        let mut stateless = base.to_vec();
        stateless.push(("mcp-protocol-version", "2026-07-28"));
        assert_eq!(eligible(&headers(&stateless), params, &mcp), None);
        let mut with_method = stateless.clone();
        with_method.push(("mcp-method", "tools/list"));
        // Capabilities are required at 2026-07-28.
        assert_eq!(
            eligible(&headers(&with_method), bare_meta.as_object(), &mcp),
            None
        );
        stateless.push(("mcp-method", "tools/list"));
        assert_eq!(
            eligible(&headers(&stateless), params, &mcp),
            Some(Generation::Stateless)
        );
        stateless.push(("mcp-name", "x"));
        assert_eq!(eligible(&headers(&stateless), params, &mcp), None);
        // A tools/call names its tool in Mcp-Name, as sent or as SEP-2243 Base64.
        let mut call = base.to_vec();
        call.push(("mcp-protocol-version", "2026-07-28"));
        call.push(("mcp-method", "tools/call"));
        let named = |name: &'static str| {
            let mut all = call.clone();
            all.push(("mcp-name", name));
            eligible_for(&headers(&all), params, &mcp, "tools/call", Some("echo"))
        };
        assert_eq!(named("echo"), Some(Generation::Stateless));
        assert_eq!(named("=?base64?ZWNobw==?="), Some(Generation::Stateless));
        assert_eq!(named("=?base64?ZWNobw?="), None);
        assert_eq!(named("other"), None);
        // A per-request version under a legacy header is the transport's to judge.
        let mut mixed = base.to_vec();
        mixed.push(("mcp-protocol-version", "2025-11-25"));
        assert_eq!(eligible(&headers(&mixed), params, &mcp), None);
    }

    #[test]
    fn hosts() {
        let allowed = vec![
            "localhost".to_owned(),
            "::1".to_owned(),
            "edge.internal:9000".to_owned(),
        ];
        let ok = |host: &str| host_allowed(&headers(&[("host", host)]), &allowed);
        assert!(ok("localhost") && ok("LOCALHOST:8080") && ok("[::1]:8080"));
        assert!(ok("edge.internal:9000"));
        assert!(!ok("edge.internal:9001") && !ok("edge.internal") && !ok("127.0.0.1"));
        assert!(!host_allowed(&HeaderMap::new(), &allowed));
        assert!(!ok("localhost:99999") && !ok("user@localhost") && !ok("[::1"));
        assert!(!ok("localhost:") && !ok(""));
        assert!(host_allowed(&HeaderMap::new(), &["*".to_owned()]));
    }
}
