//! Who a request comes from, behind proxies the operator trusts. A connection from a trusted
//! proxy speaks for someone else: the client is the rightmost address of `X-Forwarded-For`
//! (else of RFC 7239 `Forwarded: for=`) that is not itself a trusted proxy, since each proxy
//! appends the address it saw and only the entries our own proxies appended can be believed.
//! Any other connection is its peer, whatever it sends: a forged header changes nothing.

use axum::http::HeaderMap;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

/// An address range: `10.0.0.0/8`, `2001:db8::/32`, or one address (`/32`, `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    bits: u8,
}

impl Cidr {
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = unmapped(address);
        match (self.network, address) {
            (IpAddr::V4(network), IpAddr::V4(address)) => {
                let shift = 32 - u32::from(self.bits);
                shift == 32 || u32::from(network) >> shift == u32::from(address) >> shift
            }
            (IpAddr::V6(network), IpAddr::V6(address)) => {
                let shift = 128 - u32::from(self.bits);
                shift == 128 || u128::from(network) >> shift == u128::from(address) >> shift
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Cidr, String> {
        let (address, bits) = match text.split_once('/') {
            Some((address, bits)) => (address, Some(bits)),
            None => (text, None),
        };
        let network = unmapped(
            address
                .parse::<IpAddr>()
                .map_err(|_| format!("{text:?} is not an address or an address range (CIDR)"))?,
        );
        let most = if network.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => most,
            Some(bits) => bits
                .parse::<u8>()
                .ok()
                .filter(|bits| *bits <= most)
                .ok_or_else(|| format!("{text:?}: the prefix must be a number from 0 to {most}"))?,
        };
        Ok(Cidr { network, bits })
    }
}

/// An IPv4-mapped IPv6 address as its IPv4 address.
fn unmapped(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The client's address, as the request tells it through `trusted` proxies; `Err` holds the
/// peer's when a forwarding header cannot be read.
pub(crate) fn client_address(
    peer: IpAddr,
    headers: &HeaderMap,
    trusted: &[Cidr],
) -> Result<IpAddr, IpAddr> {
    let is_trusted = |address: IpAddr| trusted.iter().any(|cidr| cidr.contains(address));
    if !is_trusted(peer) {
        return Ok(peer);
    }
    let hops = match forwarded_for(headers) {
        None => return Ok(peer),
        Some(Ok(hops)) if !hops.is_empty() => hops,
        Some(_) => return Err(peer),
    };
    // Every hop trusted: the first one, as far back as the chain goes.
    Ok(hops
        .iter()
        .rev()
        .copied()
        .find(|hop| !is_trusted(*hop))
        .unwrap_or(hops[0]))
}

/// The addresses the forwarding headers name, nearest last: `X-Forwarded-For` if sent, else
/// `Forwarded`'s `for=`; `None` without either, `Err` when one cannot be read.
fn forwarded_for(headers: &HeaderMap) -> Option<Result<Vec<IpAddr>, ()>> {
    let values = |name| -> Option<Result<Vec<String>, ()>> {
        let all: Vec<_> = headers.get_all(name).iter().collect();
        if all.is_empty() {
            return None;
        }
        let texts: Result<Vec<&str>, _> = all.iter().map(|value| value.to_str()).collect();
        Some(
            texts
                .map(|texts| texts.iter().map(|t| t.to_string()).collect())
                .map_err(|_| ()),
        )
    };
    if let Some(xff) = values("x-forwarded-for") {
        return Some(xff.and_then(|lines| hops(&lines, |entry| Some(entry.trim()))));
    }
    let forwarded = values("forwarded")?;
    Some(forwarded.and_then(|lines| hops(&lines, for_of)))
}

/// Each comma-separated entry of `lines`, read by `entry` into an address.
fn hops<'a>(
    lines: &'a [String],
    entry: impl Fn(&'a str) -> Option<&'a str>,
) -> Result<Vec<IpAddr>, ()> {
    lines
        .iter()
        .flat_map(|line| line.split(','))
        .map(|part| entry(part).and_then(address_of).ok_or(()))
        .collect()
}

/// The `for=` value of one `Forwarded` element, unquoted.
fn for_of(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        name.eq_ignore_ascii_case("for")
            .then(|| value.trim().trim_matches('"'))
    })
}

/// An address as proxies write it: bare, with a port, or bracketed IPv6 with or without one.
fn address_of(text: &str) -> Option<IpAddr> {
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|socket| socket.ip()))
        .or_else(|| text.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
        .map(unmapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ranges_hold_what_they_say() {
        let lan: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(lan.contains(ip("10.9.8.7")) && !lan.contains(ip("11.0.0.1")));
        assert!(lan.contains(ip("::ffff:10.1.1.1")));
        let one: Cidr = "::1".parse().unwrap();
        assert!(one.contains(ip("::1")) && !one.contains(ip("::2")));
        assert!(
            "0.0.0.0/0"
                .parse::<Cidr>()
                .unwrap()
                .contains(ip("203.0.113.9"))
        );
        for bad in ["10.0.0.0/33", "10.0.0/8", "nginx", "::/129", "10.0.0.0/x"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_trusted_peer_speaks_for_another() {
        let trusted: Vec<Cidr> = vec!["127.0.0.1".parse().unwrap(), "10.0.0.0/8".parse().unwrap()];
        let forged = headers(&[("x-forwarded-for", "192.0.2.1")]);
        // Not trusted: the peer, whatever it says.
        assert_eq!(
            client_address(ip("198.51.100.7"), &forged, &trusted),
            Ok(ip("198.51.100.7"))
        );
        // Trusted: the rightmost address that is not a trusted proxy.
        let chain = headers(&[("x-forwarded-for", "203.0.113.5, 192.0.2.1, 10.1.1.1")]);
        assert_eq!(
            client_address(ip("127.0.0.1"), &chain, &trusted),
            Ok(ip("192.0.2.1"))
        );
        // Two headers read as one list; ports and brackets are read.
        let split = headers(&[
            ("x-forwarded-for", "192.0.2.9:5555"),
            ("x-forwarded-for", "[::ffff:10.2.3.4]:8080"),
        ]);
        assert_eq!(
            client_address(ip("127.0.0.1"), &split, &trusted),
            Ok(ip("192.0.2.9"))
        );
        let rfc = headers(&[(
            "forwarded",
            "for=192.0.2.60;proto=http, For=\"[2001:db8::17]:4711\"",
        )]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &rfc, &trusted),
            Ok(ip("2001:db8::17"))
        );
        // No header: the proxy itself; an unreadable one: the peer, said so.
        assert_eq!(
            client_address(ip("127.0.0.1"), &headers(&[]), &trusted),
            Ok(ip("127.0.0.1"))
        );
        let garbled = headers(&[("x-forwarded-for", "192.0.2.1, unknown")]);
        assert_eq!(
            client_address(ip("127.0.0.1"), &garbled, &trusted),
            Err(ip("127.0.0.1"))
        );
        let hidden = headers(&[("forwarded", "for=_hidden")]);
        assert_eq!(
            client_address(ip("127.0.0.1"), &hidden, &trusted),
            Err(ip("127.0.0.1"))
        );
    }
}
