//! Which addresses tools may connect to. Whatever a session's networking policy allows by
//! name, the addresses a name resolves to must be public: loopback, private, link-local,
//! shared (CGNAT), unique-local and other special ranges would reach this server, its
//! database, the host's neighbours or a cloud metadata service. The addresses of this host's
//! own interfaces are refused too, public ones included: on a host with a public address,
//! anything listening on `0.0.0.0` (this server's `/metrics`, a database) would otherwise be
//! one hop away. An intranet deployment turns the check off with `MAST_ALLOW_PRIVATE_NETWORK=1`.
//!
//! Connections are made to the checked addresses themselves (never by re-resolving the
//! name), so a name that changes its answer between the check and the connect gains nothing.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a reading of the host's interface addresses is trusted: addresses come and go
/// (DHCP, a new interface), so the list is re-read at most this often, on demand.
const LOCAL_REFRESH: Duration = Duration::from_secs(5);

/// The last reading of the host's interface addresses.
static LOCAL: Mutex<Option<(Instant, Arc<HashSet<IpAddr>>)>> = Mutex::new(None);

/// Reads the addresses bound to this host's interfaces (in this network namespace).
fn read_local_addresses() -> std::io::Result<HashSet<IpAddr>> {
    Ok(if_addrs::get_if_addrs()?
        .into_iter()
        .map(|i| i.ip())
        .collect())
}

/// The addresses bound to this host's interfaces, re-read when the last reading is older than
/// [`LOCAL_REFRESH`]. A failed reading keeps the previous one (and is logged).
fn local_addresses() -> Arc<HashSet<IpAddr>> {
    let mut last = LOCAL.lock().expect("local addresses lock");
    if let Some((at, addrs)) = last.as_ref()
        && at.elapsed() < LOCAL_REFRESH
    {
        return addrs.clone();
    }
    let addrs = match read_local_addresses() {
        Ok(found) => Arc::new(found),
        Err(e) => {
            tracing::warn!(error = %e, "could not read this host's interface addresses");
            last.as_ref().map(|(_, a)| a.clone()).unwrap_or_default()
        }
    };
    *last = Some((Instant::now(), addrs.clone()));
    addrs
}

/// The IPv4 address an IPv6 address stands for (mapped, compatible, NAT64 or 6to4), if any.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if s[..6] == [0; 6] || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]) {
        return Some(embedded(s[6], s[7]));
    }
    (s[0] == 0x2002).then(|| embedded(s[1], s[2]))
}

/// Whether `ip` (or the IPv4 address it embeds) is one of `local`'s addresses.
fn is_local_in(ip: IpAddr, local: &HashSet<IpAddr>) -> bool {
    local.contains(&ip)
        || matches!(ip, IpAddr::V6(v6) if embedded_v4(v6).is_some_and(|v4| local.contains(&IpAddr::V4(v4))))
}

/// Whether `ip` is bound to one of this host's own interfaces.
pub fn is_local(ip: IpAddr) -> bool {
    is_local_in(ip, &local_addresses())
}

/// Whether an IPv4 address is on the public internet.
fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

/// Whether an IPv6 address is on the public internet; addresses embedding an IPv4 address
/// (mapped, compatible, NAT64, 6to4) are judged by that address.
fn public_v6(ip: Ipv6Addr) -> bool {
    // `::` and `::1` count as IPv4-compatible 0.0.0.0 and 0.0.0.1: "this network".
    if let Some(v4) = embedded_v4(ip) {
        return public_v4(v4);
    }
    let s = ip.segments();
    !(ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2001 && s[1] == 0)) // Teredo: tunnels to anywhere
}

/// Whether `ip` is a public internet address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

/// One entry of the operator's private allowlist (`MAST_ALLOW_PRIVATE_HOSTS`): a host name
/// whose addresses may be internal (a package mirror on the intranet), or an address range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrivateAllow {
    /// A host name (lower case, no trailing dot); `*.corp.net` also matches subdomains.
    Host(String),
    /// An address range: the network address and its prefix length.
    Net(IpAddr, u8),
}

impl PrivateAllow {
    /// Parses a comma-separated list of host names, addresses and CIDR ranges.
    pub fn parse_list(s: &str) -> Result<Vec<PrivateAllow>, String> {
        s.split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (addr, len) = match e.split_once('/') {
                    Some((a, l)) => (a, Some(l)),
                    None => (e, None),
                };
                if let Ok(ip) = addr
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                {
                    let max = if ip.is_ipv4() { 32 } else { 128 };
                    let len = match len {
                        Some(l) => l.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(|| {
                            format!("`{e}`: the prefix length must be 0 to {max}")
                        })?,
                        None => max,
                    };
                    return Ok(PrivateAllow::Net(ip, len));
                }
                let host = e.trim_end_matches('.').to_ascii_lowercase();
                let bare = host.strip_prefix("*.").unwrap_or(&host);
                if len.is_some()
                    || bare.is_empty()
                    || !bare
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
                {
                    return Err(format!(
                        "`{e}` is not a host name, an address or a CIDR range"
                    ));
                }
                Ok(PrivateAllow::Host(host))
            })
            .collect()
    }

    fn matches_host(&self, host: &str) -> bool {
        match self {
            PrivateAllow::Host(h) => match h.strip_prefix("*.") {
                Some(suffix) => host == suffix || host.ends_with(&format!(".{suffix}")),
                None => h == host,
            },
            PrivateAllow::Net(..) => false,
        }
    }

    fn matches_ip(&self, ip: IpAddr) -> bool {
        let PrivateAllow::Net(net, len) = self else {
            return false;
        };
        let (a, b, bits) = match (net, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => (u32::from(*n) as u128, u32::from(i) as u128, 32),
            (IpAddr::V6(n), IpAddr::V6(i)) => (u128::from(*n), u128::from(i), 128),
            _ => return false,
        };
        let shift = bits - u32::from(*len);
        shift >= bits || (a >> shift) == (b >> shift)
    }
}

/// The address check tools connect through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetGuard {
    /// Loopback, private and link-local addresses may be reached too.
    pub allow_private: bool,
    /// Internal hosts and ranges that may be reached anyway (`MAST_ALLOW_PRIVATE_HOSTS`):
    /// narrower than `allow_private`, for a package mirror on the intranet. Fixed for the
    /// life of the process, so the guard stays a cheap copy.
    pub allow: &'static [PrivateAllow],
}

impl NetGuard {
    /// Whether `host` (a name) is on the private allowlist.
    fn allows_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allow.iter().any(|a| a.matches_host(&host))
    }

    /// Refuses `ip` unless it is a public address of another host, or private addresses are
    /// allowed (all of them, or this one by the allowlist).
    pub fn check(&self, ip: IpAddr) -> Result<(), String> {
        if self.allow_private || self.allow.iter().any(|a| a.matches_ip(ip)) {
            Ok(())
        } else if !is_public(ip) {
            Err(format!(
                "{ip} is a loopback, private or otherwise internal address, which tools on this server may not reach"
            ))
        } else if is_local(ip) {
            Err(format!(
                "{ip} is an address of this server's own host, an internal address which tools on this server may not reach"
            ))
        } else {
            Ok(())
        }
    }

    /// Resolves `host` (a name or an IP literal, brackets allowed) and keeps the addresses
    /// that may be reached; an error when none may.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            self.check(ip)?;
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let found: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| format!("`{bare}` could not be resolved: {e}"))?
            .collect();
        if self.allows_host(bare) && !found.is_empty() {
            return Ok(found);
        }
        let mut refusal = None;
        let allowed: Vec<SocketAddr> = found
            .into_iter()
            .filter(|a| match self.check(a.ip()) {
                Ok(()) => true,
                Err(why) => {
                    refusal.get_or_insert(why);
                    false
                }
            })
            .collect();
        if allowed.is_empty() {
            return Err(match refusal {
                Some(why) => format!("`{bare}` resolves to {why}"),
                None => format!("`{bare}` has no addresses"),
            });
        }
        Ok(allowed)
    }

    /// Connects to the first reachable allowed address of `host`.
    pub async fn connect(&self, host: &str, port: u16) -> Result<tokio::net::TcpStream, String> {
        let mut last = String::new();
        for addr in self.resolve(host, port).await? {
            match tokio::net::TcpStream::connect(addr).await {
                Ok(s) => return Ok(s),
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        Err(format!("could not connect to `{host}` ({last})"))
    }
}

/// reqwest's resolver for `web_fetch`: only addresses the guard allows.
impl reqwest::dns::Resolve for NetGuard {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = *self;
        Box::pin(async move {
            let addrs = guard
                .resolve(name.as_str(), 0)
                .await
                .map_err(|why| -> Box<dyn std::error::Error + Send + Sync> { why.into() })?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(s: &str) -> bool {
        is_public(s.parse().unwrap())
    }

    #[test]
    fn internal_ranges_are_refused() {
        for ip in [
            "127.0.0.1",
            "127.9.9.9",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "255.255.255.255",
            "224.0.0.1",
            "240.0.0.1",
            "192.0.0.170",
            "::",
            "::1",
            "fd00::1",
            "fc00::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "2001::1",
            "2001:db8::1",
        ] {
            assert!(!public(ip), "{ip} should be internal");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "::ffff:1.1.1.1",
            "64:ff9b::808:808",
        ] {
            assert!(public(ip), "{ip} should be public");
        }
    }

    #[test]
    fn the_hosts_own_addresses_are_local_in_every_form() {
        let local: HashSet<IpAddr> = ["93.184.215.14", "2606:2800:21f::1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        for ip in [
            "93.184.215.14",
            "::ffff:93.184.215.14",
            "64:ff9b::5db8:d70e",
            "2002:5db8:d70e::1",
            "2606:2800:21f::1",
        ] {
            assert!(is_local_in(ip.parse().unwrap(), &local), "{ip}");
        }
        for ip in ["93.184.215.15", "2606:2800:21f::2", "1.1.1.1"] {
            assert!(!is_local_in(ip.parse().unwrap(), &local), "{ip}");
        }
    }

    #[test]
    fn the_guard_reads_this_hosts_interfaces() {
        // Loopback is on every host; whatever else is bound here is refused however public.
        assert!(local_addresses().contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)));
        let strict = NetGuard::default();
        for ip in read_local_addresses().unwrap() {
            assert!(strict.check(ip).is_err(), "{ip}");
        }
    }

    #[tokio::test]
    async fn resolution_keeps_only_allowed_addresses() {
        let strict = NetGuard::default();
        assert!(strict.resolve("127.0.0.1", 80).await.is_err());
        assert!(strict.resolve("[::1]", 80).await.is_err());
        let err = strict.resolve("localhost", 80).await.unwrap_err();
        assert!(err.contains("internal address"), "{err}");
        let open = NetGuard {
            allow_private: true,
            ..NetGuard::default()
        };
        assert_eq!(
            open.resolve("127.0.0.1", 80).await.unwrap(),
            vec!["127.0.0.1:80".parse().unwrap()]
        );
    }

    #[tokio::test]
    async fn the_private_allowlist_lets_named_hosts_and_ranges_through() {
        let allow = PrivateAllow::parse_list("localhost, 10.0.0.0/8,fd00::/16").unwrap();
        let guard = NetGuard {
            allow_private: false,
            allow: Box::leak(allow.into_boxed_slice()),
        };
        assert!(guard.check("10.1.2.3".parse().unwrap()).is_ok());
        assert!(guard.check("fd00::5".parse().unwrap()).is_ok());
        assert!(guard.check("192.168.1.1".parse().unwrap()).is_err());
        assert!(guard.check("127.0.0.1".parse().unwrap()).is_err());
        assert!(guard.resolve("localhost", 80).await.is_ok());
        assert!(PrivateAllow::parse_list("10.0.0.0/33").is_err());
        assert!(PrivateAllow::parse_list("bad host").is_err());
    }
}
