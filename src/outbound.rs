//! Requests quarry sends: the TLS set-up every outbound client needs, and, for URLs its users
//! give (webhook receivers), which destinations they may reach.
//!
//! A user-given URL is assumed to point inside the network quarry runs in. Only *global*
//! addresses are reached by default: loopback, private (RFC 1918), shared (CGNAT), link-local
//! (cloud metadata services live there), unique-local, multicast, unspecified, documentation,
//! benchmarking and reserved ranges are refused, as are IPv6 forms that embed such an IPv4
//! address (mapped, NAT64, 6to4). Operators opt internal receivers in with a list of networks
//! (`webhooks.allowed_networks`).
//!
//! The check is made twice: on an address literal when a subscription is created (a clear 400),
//! and on every address a host name resolves to when a request connects ([`FilteringResolver`],
//! given to the HTTP client), so a name that resolves differently later (DNS rebinding) is
//! checked on the addresses actually dialled. The client follows no redirects and uses no proxy,
//! so the address checked is the address connected to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

/// Installs rustls' `ring` backend as the process-wide default crypto provider. Idempotent:
/// a provider installed earlier (by us or anyone else) is kept.
///
/// Every reqwest `Client` in the process needs this before it is built (reqwest is compiled
/// with `rustls-no-provider`), including test clients.
pub fn install_tls_provider() {
    // `Err` only means a default is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Which destinations outbound requests may reach.
#[derive(Clone, Debug, Default)]
pub struct Destinations {
    /// Networks reachable although not global (`webhooks.allowed_networks`).
    allowed: Arc<[IpNet]>,
}

/// Why a destination is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "{0} is not a public address (loopback, private, link-local or otherwise internal); \
         list its network in webhooks.allowed_networks to allow it"
    )]
    Internal(IpAddr),
    #[error(
        "`{0}` resolves only to addresses that are not public; list their network in webhooks.allowed_networks to allow them"
    )]
    InternalName(String),
}

impl Destinations {
    pub fn new(allowed: Vec<IpNet>) -> Self {
        Self {
            allowed: allowed.into(),
        }
    }

    /// Whether `ip` may be reached: a global address, or one in an allowed network.
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        is_global(ip) || self.allowed.iter().any(|net| net.contains(&ip))
    }

    /// Checks a URL's host when it is an address literal (names are checked when they are
    /// resolved, [`FilteringResolver`]).
    ///
    /// # Errors
    /// [`Refused::Internal`] for a literal that is not permitted.
    pub fn check_url(&self, url: &url::Url) -> Result<(), Refused> {
        let ip = match url.host() {
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
            _ => return Ok(()),
        };
        if self.permits(ip) {
            Ok(())
        } else {
            Err(Refused::Internal(ip))
        }
    }

    /// A resolver for the HTTP client that drops every address this policy does not permit.
    pub fn resolver(&self) -> Arc<FilteringResolver> {
        Arc::new(FilteringResolver {
            destinations: self.clone(),
        })
    }
}

/// An IPv4 address written in IPv6 (`::ffff:a.b.c.d`) is the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// Whether `ip` is globally reachable (the IANA special-purpose registries' "globally
/// reachable" column, for the ranges that matter to a server; IPv4 inside NAT64, 6to4 and
/// IPv4-compatible IPv6 addresses is judged as IPv4).
pub fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => is_global_v6(v6),
    }
}

fn is_global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0 // "this network", unspecified
        || a == 10 // private
        || a == 127 // loopback
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 169 && b == 254) // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // documentation
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast (deprecated)
        || (a == 192 && b == 168) // private
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // documentation
        || (a == 203 && b == 0 && c == 113) // documentation
        || a >= 224) // multicast, reserved, broadcast
}

fn is_global_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded_v4 = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_global_v4(v4);
    }
    if s[..6] == [0; 6] {
        // Unspecified, loopback and the deprecated IPv4-compatible addresses.
        return s[6] != 0 && is_global_v4(embedded_v4(s[6], s[7]));
    }
    match s[0] {
        // NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48).
        0x0064 if s[1] == 0xff9b => s[2] == 0 && is_global_v4(embedded_v4(s[6], s[7])),
        // 6to4: the IPv4 address in the next 32 bits.
        0x2002 => is_global_v4(embedded_v4(s[1], s[2])),
        // Teredo, ORCHID, documentation and the benchmarking range.
        0x2001 if s[1] == 0 || s[1] == 0x0db8 || (s[1] & 0xfff0) == 0x0010 || (s[1] & 0xfff0) == 0x0020 => false,
        0x2001 if s[1] == 0x0002 && s[2] == 0 => false,
        // Discard-only.
        0x0100 if s[1..4] == [0, 0, 0] => false,
        // Unique local (fc00::/7), link-local (fe80::/10), site-local (fec0::/10, deprecated),
        // multicast (ff00::/8).
        first => {
            !((first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first & 0xffc0) == 0xfec0
                || (first & 0xff00) == 0xff00)
        }
    }
}

/// A DNS resolver (the system's, through tokio) that keeps only permitted addresses: a name
/// that resolves to none fails to connect, before any byte is sent.
#[derive(Debug)]
pub struct FilteringResolver {
    destinations: Destinations,
}

impl reqwest::dns::Resolve for FilteringResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let destinations = self.destinations.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept: Vec<SocketAddr> = found.into_iter().filter(|a| destinations.permits(a.ip())).collect();
            if kept.is_empty() {
                return Err(Box::new(Refused::InternalName(host)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A URL as it may be shown in listings and logs: user information dropped and the query's
/// values replaced (they often carry a receiver's token).
pub fn redacted(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return "(unparsable URL)".to_owned();
    };
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    if parsed.query().is_some() {
        let names: Vec<String> = parsed.query_pairs().map(|(k, _)| k.into_owned()).collect();
        let mut query = parsed.query_pairs_mut();
        query.clear();
        for name in names {
            query.append_pair(&name, "redacted");
        }
    }
    parsed.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn internal_addresses_are_refused_and_public_ones_permitted() {
        let none = Destinations::default();
        for internal in [
            "127.0.0.1",
            "127.8.9.10",
            "0.0.0.0",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "198.18.0.1",
            "192.0.2.1",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:c0a8:0101::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "2001::1",
        ] {
            assert!(!none.permits(ip(internal)), "{internal} was permitted");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "169.255.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
        ] {
            assert!(none.permits(ip(public)), "{public} was refused");
        }
    }

    #[test]
    fn allowed_networks_opt_internal_receivers_in() {
        let allowed = Destinations::new(vec!["127.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()]);
        assert!(allowed.permits(ip("127.0.0.1")));
        assert!(
            allowed.permits(ip("::ffff:127.0.0.1")),
            "a mapped address is its IPv4 address"
        );
        assert!(allowed.permits(ip("fd00::5")));
        assert!(!allowed.permits(ip("10.0.0.1")));
        assert!(!allowed.permits(ip("::1")));
    }

    #[test]
    fn literals_in_urls_are_checked_and_names_left_to_the_resolver() {
        let none = Destinations::default();
        let check = |u: &str| none.check_url(&url::Url::parse(u).unwrap());
        assert_eq!(check("http://127.0.0.1:5432/"), Err(Refused::Internal(ip("127.0.0.1"))));
        assert_eq!(check("http://[::1]:6379/"), Err(Refused::Internal(ip("::1"))));
        assert!(check("http://169.254.169.254/latest/meta-data/").is_err());
        // The URL parser reads every IPv4 spelling as the address it is.
        assert!(check("http://2130706433/").is_err());
        assert!(check("http://0x7f.1/").is_err());
        assert!(check("https://8.8.8.8/hooks").is_ok());
        assert!(check("https://hooks.example.test/").is_ok());
    }

    #[test]
    fn urls_are_redacted_for_listings() {
        assert_eq!(
            redacted("https://h.test/hooks?token=s3cret&team=a"),
            "https://h.test/hooks?token=redacted&team=redacted"
        );
        assert_eq!(redacted("https://h.test/hooks"), "https://h.test/hooks");
    }
}
