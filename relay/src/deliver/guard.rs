//! The address guard: deliveries never connect to a loopback, private,
//! link-local, CGNAT, unspecified, multicast or reserved address (nor an
//! IPv6 form that carries one: IPv4-mapped `::ffff:a.b.c.d`, NAT64
//! `64:ff9b::a.b.c.d`, IPv4-compatible `::a.b.c.d`, 6to4 `2002:AABB:CCDD::`)
//! unless `allow_destination_cidrs` covers it. The cloud metadata address,
//! 169.254.169.254, is link-local.
//!
//! The check is made on the address actually connected to, at every
//! connection: the HTTP client's resolver ([`super::resolver`]) drops
//! refused addresses from every lookup, and a URL whose host is an IP
//! literal (which no resolver sees) is checked before every request. At
//! start, [`check_destinations`] refuses a destination whose IP literal is
//! refused, or whose name resolves to a refused address (a name that does
//! not resolve then is left to the per-connection check).
//! [`AddressGuard::check_destination`] is the one check for a destination
//! added while running.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::config::value::HttpUrl;
use crate::config::{Config, ConfigError};

/// How long a start-time lookup may take before the name is left to the
/// per-connection check.
const LOOKUP_AT_START: Duration = Duration::from_secs(3);

/// A kind of address deliveries do not go to unless allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Range {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// RFC 1918 (10/8, 172.16/12, 192.168/16) and IPv6 unique local (fc00::/7).
    Private,
    /// 169.254.0.0/16 (the cloud metadata address among them), fe80::/10.
    LinkLocal,
    /// Carrier-grade NAT, 100.64.0.0/10.
    Cgnat,
    /// 0.0.0.0/8 ("this network"; 0.0.0.0 reaches the host itself), ::.
    Unspecified,
    /// Multicast and reserved: 224.0.0.0/4, 240.0.0.0/4 (the broadcast
    /// address among them), 192.0.0.0/24, 198.18.0.0/15, ff00::/8.
    Reserved,
}

impl Range {
    /// Its name in messages.
    fn name(self) -> &'static str {
        match self {
            Range::Loopback => "loopback",
            Range::Private => "private",
            Range::LinkLocal => "link-local",
            Range::Cgnat => "CGNAT",
            Range::Unspecified => "unspecified",
            Range::Reserved => "multicast or reserved",
        }
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

const fn v6(first: u16, len: u8) -> Ipv6Net {
    Ipv6Net::new_assert(Ipv6Addr::new(first, 0, 0, 0, 0, 0, 0, 0), len)
}

/// The refused IPv4 ranges.
const REFUSED_V4: [(Ipv4Net, Range); 11] = [
    (v4(127, 0, 0, 0, 8), Range::Loopback),
    (v4(10, 0, 0, 0, 8), Range::Private),
    (v4(172, 16, 0, 0, 12), Range::Private),
    (v4(192, 168, 0, 0, 16), Range::Private),
    (v4(169, 254, 0, 0, 16), Range::LinkLocal),
    (v4(100, 64, 0, 0, 10), Range::Cgnat),
    (v4(0, 0, 0, 0, 8), Range::Unspecified),
    (v4(224, 0, 0, 0, 4), Range::Reserved),
    (v4(240, 0, 0, 0, 4), Range::Reserved),
    (v4(192, 0, 0, 0, 24), Range::Reserved),
    (v4(198, 18, 0, 0, 15), Range::Reserved),
];

/// The refused IPv6 ranges (IPv4-mapped addresses are checked as IPv4).
const REFUSED_V6: [(Ipv6Net, Range); 5] = [
    (
        Ipv6Net::new_assert(Ipv6Addr::LOCALHOST, 128),
        Range::Loopback,
    ),
    (v6(0xfc00, 7), Range::Private),
    (v6(0xfe80, 10), Range::LinkLocal),
    (v6(0xff00, 8), Range::Reserved),
    (
        Ipv6Net::new_assert(Ipv6Addr::UNSPECIFIED, 128),
        Range::Unspecified,
    ),
];

/// The refused range `ip` is in, with the range as a CIDR; `None` for an
/// address deliveries may go to. An IPv6 address that carries an IPv4 one
/// (mapped, NAT64, compatible, 6to4) is classified as that IPv4 address.
pub(crate) fn classify(ip: IpAddr) -> Option<(Range, IpNet)> {
    let v4 = |a: Ipv4Addr| {
        REFUSED_V4
            .iter()
            .find(|(net, _)| net.contains(&a))
            .map(|(net, r)| (*r, IpNet::V4(*net)))
    };
    match ip.to_canonical() {
        IpAddr::V4(a) => v4(a),
        IpAddr::V6(a) => REFUSED_V6
            .iter()
            .find(|(net, _)| net.contains(&a))
            .map(|(net, r)| (*r, IpNet::V6(*net)))
            .or_else(|| carried_v4(a).and_then(v4)),
    }
}

/// The IPv4 address an IPv6 one carries: NAT64's well-known prefix
/// `64:ff9b::/96` and the IPv4-compatible `::/96` in their last 32 bits,
/// 6to4 `2002::/16` in bits 16 to 48.
fn carried_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = a.segments();
    let last = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] | [0, 0, 0, 0, 0, 0, _, _] => Some(last),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

/// A connection the guard refused: the address and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The address.
    pub addr: IpAddr,
    /// Its range.
    pub range: Range,
    /// The range as a CIDR, for the allow list.
    pub net: IpNet,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is a {} address ({}) that allow_destination_cidrs does not cover",
            self.addr,
            self.range.name(),
            self.net
        )
    }
}

impl std::error::Error for Refused {}

/// Which addresses deliveries may connect to.
#[derive(Clone, Debug, Default)]
pub(crate) struct AddressGuard {
    allow: Vec<IpNet>,
}

impl AddressGuard {
    /// A guard refusing every range of [`classify`] that `allow` does not cover.
    pub(crate) fn new(allow: Vec<IpNet>) -> AddressGuard {
        AddressGuard { allow }
    }

    /// The guard of `cfg`'s `allow_destination_cidrs`.
    pub(crate) fn from_config(cfg: &Config) -> AddressGuard {
        let allow = cfg.settings.allow_destination_cidrs.clone();
        AddressGuard::new(allow.unwrap_or_default().0)
    }

    /// Whether a delivery may connect to `ip`.
    pub(crate) fn check(&self, ip: IpAddr) -> Result<(), Refused> {
        let Some((range, net)) = classify(ip) else {
            return Ok(());
        };
        let canonical = ip.to_canonical();
        if self
            .allow
            .iter()
            .any(|a| a.contains(&ip) || a.contains(&canonical))
        {
            return Ok(());
        }
        Err(Refused {
            addr: ip,
            range,
            net,
        })
    }

    /// The check for a destination being configured: its IP literal, or
    /// with `resolve` every address its name resolves to now. A name that
    /// does not resolve (DNS down, not yet published) passes: every
    /// connection is checked anyway.
    pub(crate) async fn check_destination(
        &self,
        url: &HttpUrl,
        resolve: bool,
    ) -> Result<(), Refused> {
        match host(url.as_str()) {
            Some(Host::Ip(ip)) => self.check(ip),
            Some(Host::Name(name)) if resolve => {
                let lookup = tokio::net::lookup_host((name.as_str(), 0));
                match tokio::time::timeout(LOOKUP_AT_START, lookup).await {
                    Ok(Ok(mut addrs)) => addrs.try_for_each(|a| self.check(a.ip())),
                    _ => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }
}

/// A URL's host: an IP literal or a name.
enum Host {
    Ip(IpAddr),
    Name(String),
}

/// The host of `url`, as the URL parser normalised it (so `2130706433`
/// and `0x7f.1` are the literal 127.0.0.1).
fn host(url: &str) -> Option<Host> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let text = parsed.host_str()?;
    let bare = text.trim_start_matches('[').trim_end_matches(']');
    Some(match bare.parse::<IpAddr>() {
        Ok(ip) => Host::Ip(ip),
        Err(_) => Host::Name(text.to_owned()),
    })
}

/// The IP address a URL's host is, if it is a literal.
pub(crate) fn ip_literal(url: &str) -> Option<IpAddr> {
    match host(url)? {
        Host::Ip(ip) => Some(ip),
        Host::Name(_) => None,
    }
}

/// Every configured destination the guard refuses, as configuration
/// errors naming the destination and the flag that would allow it.
pub(crate) async fn check_destinations(cfg: &Config, guard: &AddressGuard) -> Vec<ConfigError> {
    let resolve = cfg.settings.resolve_destinations_at_start;
    let mut errors = Vec::new();
    for d in &cfg.destinations {
        if let Err(refused) = guard.check_destination(&d.url, resolve).await {
            errors.push(ConfigError::new(
                format!("destinations.{}", d.name),
                Some(d.origin.clone()),
                format!(
                    "{}: {refused}: allow it with --allow-destination-cidr {} \
                     (allow_destination_cidrs), or deliver to a public address",
                    d.url, refused.net
                ),
            ));
        }
    }
    errors
}

/// The guard's refusal inside a failed request, if that is why it failed.
pub(crate) fn refusal(error: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(r) = e.downcast_ref::<Refused>() {
            return Some(*r);
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_refused_range_is_classified() {
        let cases = [
            ("127.0.0.1", Some(Range::Loopback)),
            ("127.255.0.9", Some(Range::Loopback)),
            ("::1", Some(Range::Loopback)),
            ("10.1.2.3", Some(Range::Private)),
            ("172.16.0.1", Some(Range::Private)),
            ("172.31.255.255", Some(Range::Private)),
            ("192.168.1.1", Some(Range::Private)),
            ("fd12:3456::1", Some(Range::Private)),
            ("fc00::1", Some(Range::Private)),
            ("169.254.169.254", Some(Range::LinkLocal)),
            ("fe80::1", Some(Range::LinkLocal)),
            ("febf::1", Some(Range::LinkLocal)),
            ("100.64.0.1", Some(Range::Cgnat)),
            ("100.127.255.255", Some(Range::Cgnat)),
            ("0.0.0.0", Some(Range::Unspecified)),
            ("::", Some(Range::Unspecified)),
            // IPv4-mapped IPv6 forms are their IPv4 address.
            ("::ffff:127.0.0.1", Some(Range::Loopback)),
            ("::ffff:10.0.0.1", Some(Range::Private)),
            ("::ffff:169.254.169.254", Some(Range::LinkLocal)),
            ("::ffff:100.64.1.1", Some(Range::Cgnat)),
            ("::ffff:0.0.0.0", Some(Range::Unspecified)),
            // NAT64, IPv4-compatible and 6to4 forms carry their IPv4 address.
            ("64:ff9b::a00:1", Some(Range::Private)),
            ("64:ff9b::a9fe:a9fe", Some(Range::LinkLocal)),
            ("::7f00:1", Some(Range::Loopback)),
            ("2002:c0a8:101::1", Some(Range::Private)),
            ("64:ff9b::808:808", None),
            ("2002:808:808::1", None),
            // Multicast and reserved.
            ("224.0.0.1", Some(Range::Reserved)),
            ("255.255.255.255", Some(Range::Reserved)),
            ("192.0.0.170", Some(Range::Reserved)),
            ("198.19.0.1", Some(Range::Reserved)),
            ("ff02::1", Some(Range::Reserved)),
            // Public addresses and the edges just outside each range.
            ("8.8.8.8", None),
            ("172.32.0.1", None),
            ("172.15.255.255", None),
            ("100.128.0.1", None),
            ("100.63.255.255", None),
            ("169.255.0.1", None),
            ("11.0.0.1", None),
            ("2606:4700::1111", None),
            ("fec0::1", None),
            ("::ffff:8.8.8.8", None),
        ];
        for (addr, want) in cases {
            assert_eq!(classify(ip(addr)).map(|c| c.0), want, "{addr}");
        }
        assert_eq!(
            classify(ip("169.254.169.254")).map(|c| c.1.to_string()),
            Some("169.254.0.0/16".to_owned())
        );
    }

    #[test]
    fn the_allow_list_covers_what_it_names() {
        let none = AddressGuard::default();
        assert!(none.check(ip("127.0.0.1")).is_err());
        assert!(none.check(ip("93.184.216.34")).is_ok());
        let guard = AddressGuard::new(vec![
            "127.0.0.0/8".parse().unwrap(),
            "10.1.0.0/16".parse().unwrap(),
            "fd00::/8".parse().unwrap(),
        ]);
        assert!(guard.check(ip("127.0.0.1")).is_ok());
        assert!(
            guard.check(ip("::ffff:127.0.0.1")).is_ok(),
            "mapped forms too"
        );
        assert!(guard.check(ip("10.1.200.3")).is_ok());
        assert!(guard.check(ip("fd00::5")).is_ok());
        let refused = guard.check(ip("10.2.0.1")).unwrap_err();
        assert_eq!(refused.range, Range::Private);
        assert_eq!(refused.net.to_string(), "10.0.0.0/8");
        assert!(guard.check(ip("::1")).is_err(), "127.0.0.0/8 is not ::1");
        assert!(guard.check(ip("169.254.169.254")).is_err());
        assert!(guard.check(ip("fc00::1")).is_err());
    }

    #[test]
    fn urls_are_checked_by_their_ip_literal() {
        let guard = AddressGuard::default();
        let check = |url: &str| ip_literal(url).map_or(Ok(()), |ip| guard.check(ip));
        assert!(check("http://127.0.0.1:9/x").is_err());
        assert!(check("http://[::ffff:a9fe:a9fe]/latest").is_err());
        assert!(check("http://2130706433/").is_err(), "127.0.0.1 in decimal");
        assert_eq!(ip_literal("https://receiver.example/x"), None);
        assert!(check("http://93.184.216.34/").is_ok());
    }

    #[tokio::test]
    async fn a_destination_is_checked_by_what_its_name_resolves_to() {
        let guard = AddressGuard::default();
        let url = |u: &str| <HttpUrl as crate::config::value::Value>::from_text(u).unwrap();
        let local = url("http://localhost:9/x");
        assert!(guard.check_destination(&local, true).await.is_err());
        assert!(guard.check_destination(&local, false).await.is_ok());
        let nowhere = url("http://no-such-host.invalid/x");
        assert!(guard.check_destination(&nowhere, true).await.is_ok());
    }
}
