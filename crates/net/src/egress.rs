//! Where a Toolplane process may connect when the address comes from someone other than the
//! operator's own configuration (a URL a tenant gave the wiki, a token issuer's key set): public
//! unicast addresses only, checked at connection time for every address a name resolves to (so
//! DNS rebinding cannot slip past a check made earlier), and for literal addresses in URLs.

use std::net::{IpAddr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether an address may be fetched: a public unicast address and nothing else.
///
/// - IPv4: not in any block of IANA's IPv4 Special-Purpose Address Registry (loopback,
///   private, shared 100.64/10, link-local, benchmarking 198.18/15, documentation, the 6to4
///   relay anycast, 0/8, 240/4, broadcast, …), nor multicast.
/// - IPv6: only global unicast (2000::/3, the IANA IPv6 Address Space registry) is ever public
///   — which leaves out IPv4-compatible (::/96) and IPv4-mapped addresses, NAT64 (64:ff9b::/96,
///   64:ff9b:1::/48), discard-only 100::/64, site-local fec0::/10, unique-local, link-local and
///   multicast — and within it nothing in IANA's IPv6 Special-Purpose Address Registry (Teredo
///   and the other 2001::/23 assignments, documentation 2001:db8::/32 and 3fff::/20, 6to4
///   2002::/16, …).
///
/// The registries come from the `iprfc` crate's checked-in IANA snapshots (see its
/// `RFC6890` aggregate), not from a hand list.
pub fn is_public(ip: IpAddr) -> bool {
    let special = iprfc::RFC6890.contains(&ip);
    match ip {
        IpAddr::V4(v4) => !special && !v4.is_multicast() && !v4.is_broadcast(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xe000) == 0x2000 && !special,
    }
}

/// A resolver that keeps only the public addresses of a name (all of them when
/// `allow_private`); a name with none fails to resolve.
#[derive(Debug)]
pub struct GuardedResolver {
    /// Keep every address (tests, a provider on the operator's own network).
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = addresses
                .into_iter()
                .filter(|a| allow_private || is_public(a.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(format!("{host} resolves only to non-public addresses").into());
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// Refuses URLs whose host is a literal non-public IP (name resolution is checked later).
pub fn literal_refusal(url: &reqwest::Url, allow_private: bool) -> Option<String> {
    let host = url.host_str()?;
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    (!allow_private && !is_public(ip)).then(|| format!("{ip} is not a public address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_public_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "198.18.0.1",
            "198.19.255.254",
            "192.0.0.8",
            "192.88.99.1",
            "240.0.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "fec0::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "100::1",
            "2001:db8::1",
            "3fff::1",
            "ff02::1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "1.1.1.1",
            "8.8.8.8",
            "2606:4700::1111",
            "2a00:1450:4001::1",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }
}
