//! Who a client is, as the per-client limits count it (the request rate, change-stream
//! subscribers): not its exact address, which one host varies at will (every address of a
//! /64 of IPv6 is usually its own, and loopback has millions), but a prefix of it.

use crate::forwarded::{Cidr, client_address};
use axum::extract::{ConnectInfo, Request};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// How much of an address names one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientPrefixes {
    /// Leading bits of an IPv4 address, 0 to 32.
    pub v4: u8,
    /// Leading bits of an IPv6 address, 0 to 128.
    pub v6: u8,
}

impl Default for ClientPrefixes {
    /// A /24 of IPv4 and a /64 of IPv6: what one subscriber or host is commonly given.
    fn default() -> ClientPrefixes {
        ClientPrefixes { v4: 24, v6: 64 }
    }
}

/// A client as the per-client limits count it: its address's prefix. An IPv4-mapped IPv6
/// address counts as its IPv4 address, and every loopback address (`127.0.0.0/8`, `::1`) as
/// one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Client(IpAddr);

/// How requests' clients are told: how much of an address is one client, and the proxies
/// whose forwarding headers are believed.
#[derive(Debug, Clone, Default)]
pub struct ClientRules {
    pub prefixes: ClientPrefixes,
    pub trusted_proxies: Vec<Cidr>,
}

/// A request's client, and its whole address (for logs), as `every_request` tells them to
/// every per-client rule.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asking {
    pub client: Client,
    pub address: IpAddr,
    /// A trusted proxy's forwarding header could not be read: the peer stands for the client.
    pub unreadable: bool,
}

/// The client `every_request` told of a request, if its connection has a peer address.
pub(crate) fn client_of_request(request: &Request) -> Option<Client> {
    request
        .extensions()
        .get::<Asking>()
        .map(|asking| asking.client)
}

impl ClientRules {
    /// Who asks, when the connection has a peer address.
    pub(crate) fn of_request(&self, request: &Request) -> Option<Asking> {
        let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>()?;
        let told = client_address(peer.ip(), request.headers(), &self.trusted_proxies);
        let (address, unreadable) = match told {
            Ok(address) => (address, false),
            Err(peer) => (peer, true),
        };
        Some(Asking {
            client: Client::of(address, self.prefixes),
            address,
            unreadable,
        })
    }
}

impl Client {
    pub fn of(address: IpAddr, prefixes: ClientPrefixes) -> Client {
        let address = match address {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        if address.is_loopback() {
            return Client(IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        Client(match address {
            IpAddr::V4(v4) => {
                let bits = u32::from(v4) & mask32(prefixes.v4);
                IpAddr::V4(Ipv4Addr::from(bits))
            }
            IpAddr::V6(v6) => {
                let bits = u128::from(v6) & mask128(prefixes.v6);
                IpAddr::V6(Ipv6Addr::from(bits))
            }
        })
    }
}

fn mask32(bits: u8) -> u32 {
    match bits.min(32) {
        0 => 0,
        n => u32::MAX << (32 - u32::from(n)),
    }
}

fn mask128(bits: u8) -> u128 {
    match bits.min(128) {
        0 => 0,
        n => u128::MAX << (128 - u32::from(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(text: &str) -> Client {
        Client::of(text.parse().unwrap(), ClientPrefixes::default())
    }

    #[test]
    fn one_host_is_one_client_whatever_address_it_takes() {
        assert_eq!(client("192.0.2.1"), client("192.0.2.254"));
        assert_ne!(client("192.0.2.1"), client("192.0.3.1"));
        assert_eq!(client("2001:db8:1:2::1"), client("2001:db8:1:2:ffff::9"));
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        // Loopback, in every form, is one client; an IPv4-mapped address is its IPv4.
        assert_eq!(client("127.0.0.1"), client("::1"));
        assert_eq!(client("127.0.0.1"), client("127.9.9.9"));
        assert_eq!(client("::ffff:127.0.0.2"), client("::1"));
        assert_eq!(client("::ffff:192.0.2.7"), client("192.0.2.1"));
    }

    #[test]
    fn the_prefixes_are_as_configured() {
        let exact = ClientPrefixes { v4: 32, v6: 128 };
        let a = Client::of("192.0.2.1".parse().unwrap(), exact);
        let b = Client::of("192.0.2.2".parse().unwrap(), exact);
        assert_ne!(a, b);
        let everyone = ClientPrefixes { v4: 0, v6: 0 };
        let a = Client::of("192.0.2.1".parse().unwrap(), everyone);
        let b = Client::of("198.51.100.2".parse().unwrap(), everyone);
        assert_eq!(a, b);
    }
}
