//! Which addresses a client connects to. What the network names (a `did:web` host, the PDS a
//! DID document names, where a peer redirects) could point a public service at its own
//! private network: its cloud's metadata address, an admin port on loopback, a database on
//! 10.0.0.0/8. With [`Reach::PublicOnly`] such addresses are refused where the connection is
//! made, after name resolution (so a name that resolves to a public address once and to a
//! private one later gains nothing), and redirects are not followed to another host.
//! Addresses the operator gives are trusted as given and use [`Reach::Anywhere`].

use crate::{AtprotoError, AtprotoResult};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Url, redirect};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Redirects followed at most, on one host.
const REDIRECTS_AT_MOST: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reach {
    /// Every address (the operator's own peers; the command line, which acts for the person
    /// running it; private networks and tests).
    #[default]
    Anywhere,
    /// Public unicast addresses only, and no redirect to another host.
    PublicOnly,
}

impl Reach {
    /// Whether `url` may be asked for: its host, when an address, is one this reach allows
    /// (a name is checked when it is resolved).
    pub fn check(self, url: &str) -> AtprotoResult<()> {
        if self == Reach::Anywhere {
            return Ok(());
        }
        let parsed = Url::parse(url)
            .map_err(|error| AtprotoError::Invalid(format!("{url}: not a URL: {error}")))?;
        let Some(host) = parsed.host_str() else {
            return Err(AtprotoError::Invalid(format!("{url}: names no host")));
        };
        // A name is checked when it is resolved.
        let Ok(address) = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        else {
            return Ok(());
        };
        match refusal(address) {
            None => Ok(()),
            Some(kind) => Err(AtprotoError::Refused {
                url: url.to_string(),
                message: RefusedAddress {
                    host: address.to_string(),
                    address,
                    kind,
                }
                .to_string(),
            }),
        }
    }

    /// An HTTP client that connects only where this reach allows, giving up on a request
    /// after `timeout` (see [`crate::http_client`]).
    pub fn client(self, timeout: Duration) -> AtprotoResult<reqwest::Client> {
        let builder = crate::client_builder(timeout);
        let builder = match self {
            Reach::Anywhere => builder,
            Reach::PublicOnly => builder
                .dns_resolver(Arc::new(PublicAddresses))
                .redirect(redirect::Policy::custom(same_host_redirects)),
        };
        crate::build_client(builder)
    }

    /// A TCP connection to `url`'s host and port for a client that resolves nothing itself
    /// (a WebSocket): the host resolved here, an address this reach does not allow refused as
    /// the HTTP clients refuse it, and the connection made to a kept address, so that no
    /// second resolution can rebind the name. TLS, if any, is the caller's, on the URL's host.
    pub async fn connect(self, url: &str) -> AtprotoResult<tokio::net::TcpStream> {
        let parsed = Url::parse(url)
            .map_err(|error| AtprotoError::Invalid(format!("{url}: not a URL: {error}")))?;
        let (Some(host), Some(port)) = (parsed.host(), parsed.port_or_known_default()) else {
            return Err(AtprotoError::Invalid(format!(
                "{url}: names no host and port"
            )));
        };
        let refused = |refused: RefusedAddress| AtprotoError::Refused {
            url: url.to_string(),
            message: refused.to_string(),
        };
        let addresses = match host {
            url::Host::Ipv4(ip) => self.allowed(ip.to_string(), vec![(ip, port).into()]),
            url::Host::Ipv6(ip) => self.allowed(ip.to_string(), vec![(ip, port).into()]),
            url::Host::Domain(name) => {
                let resolved = tokio::net::lookup_host((name, port)).await.map_err(|e| {
                    AtprotoError::Http {
                        url: url.to_string(),
                        message: format!("resolving {name}: {e}"),
                    }
                })?;
                self.allowed(name.to_string(), resolved.collect())
            }
        };
        connect_first(url, addresses.map_err(refused)?).await
    }

    /// The addresses of `host` this reach allows; refused when none is.
    fn allowed(
        self,
        host: String,
        resolved: Vec<SocketAddr>,
    ) -> Result<Vec<SocketAddr>, RefusedAddress> {
        match self {
            Reach::Anywhere => Ok(resolved),
            Reach::PublicOnly => public_only(host, resolved),
        }
    }
}

/// A connection to the first of `addresses` that takes one, each given
/// [`crate::CONNECT_TIMEOUT`].
async fn connect_first(
    url: &str,
    addresses: Vec<SocketAddr>,
) -> AtprotoResult<tokio::net::TcpStream> {
    let mut failure = format!("{url}: the host has no address");
    for address in addresses {
        let connecting = tokio::net::TcpStream::connect(address);
        match tokio::time::timeout(crate::CONNECT_TIMEOUT, connecting).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(error)) => failure = format!("connecting to {address}: {error}"),
            Err(_) => failure = format!("connecting to {address}: timed out"),
        }
    }
    Err(AtprotoError::Http {
        url: url.to_string(),
        message: failure,
    })
}

/// The public addresses among those `host` resolved to; refused, naming the first, when
/// there are none but others.
fn public_only(host: String, resolved: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, RefusedAddress> {
    let first_refused = resolved
        .iter()
        .find_map(|address| refusal(address.ip()).map(|kind| (address.ip(), kind)));
    let public: Vec<_> = resolved
        .into_iter()
        .filter(|address| refusal(address.ip()).is_none())
        .collect();
    match (public.is_empty(), first_refused) {
        (true, Some((address, kind))) => Err(RefusedAddress {
            host,
            address,
            kind,
        }),
        _ => Ok(public),
    }
}

/// An address's kind when it is not a public unicast one.
fn refusal(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(ip) => refusal_v4(ip),
        IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
            Some(mapped) => refusal_v4(mapped),
            None => refusal_v6(ip),
        },
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [first, second, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() || (first == 100 && (64..128).contains(&second)) {
        // 100.64.0.0/10 is the carrier-grade NAT's shared space: private in practice.
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_multicast() || ip.is_broadcast() {
        Some("multicast or broadcast")
    } else if ip.is_unspecified() || first == 0 {
        Some("unspecified")
    } else {
        None
    }
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_multicast() {
        Some("multicast or broadcast")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if first & 0xfe00 == 0xfc00 {
        Some("private")
    } else {
        None
    }
}

/// A host that resolves, or is, an address the reach does not allow.
#[derive(Debug, thiserror::Error)]
#[error(
    "{host} is {address}, a {kind} address, which svc serve does not reach when the network \
     names it (--allow-private-peers reaches it)"
)]
pub struct RefusedAddress {
    host: String,
    address: IpAddr,
    kind: &'static str,
}

/// A redirect to another host than the one asked.
#[derive(Debug, thiserror::Error)]
#[error("redirected from {from} to another host, {to}, which is not followed")]
pub struct CrossHostRedirect {
    from: String,
    to: String,
}

fn same_host_redirects(attempt: redirect::Attempt<'_>) -> redirect::Action {
    let Some(first) = attempt.previous().first() else {
        return attempt.follow();
    };
    let origin = |url: &Url| {
        (
            url.host_str().map(str::to_string),
            url.port_or_known_default(),
        )
    };
    if origin(first) != origin(attempt.url()) {
        let error = CrossHostRedirect {
            from: first.host_str().unwrap_or_default().to_string(),
            to: attempt.url().host_str().unwrap_or_default().to_string(),
        };
        return attempt.error(error);
    }
    if attempt.previous().len() > REDIRECTS_AT_MOST {
        return attempt.error(format!("more than {REDIRECTS_AT_MOST} redirects"));
    }
    attempt.follow()
}

/// The system's resolver, keeping only public addresses: the connection is made to what is
/// kept, so there is no second resolution to rebind.
struct PublicAddresses;

impl Resolve for PublicAddresses {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let resolved: Vec<_> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            match public_only(host, resolved) {
                Ok(public) => Ok(Box::new(public.into_iter()) as Addrs),
                Err(refused) => Err(Box::new(refused) as Box<dyn std::error::Error + Send + Sync>),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_link_local_and_mapped_addresses_are_refused() {
        for refused in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            let address: IpAddr = refused.parse().unwrap();
            assert!(refusal(address).is_some(), "{refused} was allowed");
        }
        for allowed in ["1.1.1.1", "8.8.8.8", "2606:4700::1111", "::ffff:1.1.1.1"] {
            let address: IpAddr = allowed.parse().unwrap();
            assert_eq!(refusal(address), None, "{allowed} was refused");
        }
    }

    #[test]
    fn literal_addresses_in_urls_are_checked_and_names_left_to_resolution() {
        let reach = Reach::PublicOnly;
        let refused = reach.check("https://169.254.169.254/latest/meta-data/");
        assert!(
            matches!(&refused, Err(AtprotoError::Refused { .. })),
            "{refused:?}"
        );
        assert!(refused.is_err_and(|error| !error.is_transient()));
        assert!(reach.check("http://[::1]:2583/xrpc").is_err());
        assert!(reach.check("https://pds.example.com").is_ok());
        assert!(reach.check("https://1.1.1.1/").is_ok());
        assert!(Reach::Anywhere.check("http://127.0.0.1:2583").is_ok());
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_at_connection() {
        crate::install_crypto();
        let client = Reach::PublicOnly.client(Duration::from_secs(5)).unwrap();
        let error = client
            .get("http://localhost:9/")
            .send()
            .await
            .expect_err("refused");
        let error = crate::http_error("http://localhost:9/", error);
        assert!(
            matches!(&error, AtprotoError::Refused { message, .. }
                if message.contains("loopback")),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_connection_made_here_passes_the_same_rule_by_name_or_literal() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        for url in [
            format!("ws://localhost:{port}/xrpc/com.atproto.label.subscribeLabels"),
            format!("ws://127.0.0.1:{port}/"),
            format!("wss://[::ffff:127.0.0.1]:{port}/"),
        ] {
            let refused = Reach::PublicOnly.connect(&url).await;
            assert!(
                matches!(&refused, Err(AtprotoError::Refused { message, .. })
                    if message.contains("loopback")),
                "{url}: {refused:?}"
            );
        }
        let url = format!("ws://localhost:{port}/");
        let connected = Reach::Anywhere.connect(&url).await.expect("connected");
        let (accepted, _) = listener.accept().await.unwrap();
        assert_eq!(
            connected.local_addr().unwrap(),
            accepted.peer_addr().unwrap()
        );
    }

    /// A server answering every request with `answer` and counting them.
    async fn answering(answer: String) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&asked);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head).await;
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        (url, asked)
    }

    #[tokio::test]
    async fn a_redirect_to_another_host_is_not_followed() {
        crate::install_crypto();
        let (elsewhere, asked) =
            answering("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}".into()).await;
        let (redirecting, _) = answering(format!(
            "HTTP/1.1 302 Found\r\nlocation: {elsewhere}/latest/meta-data/\r\ncontent-length: 0\r\n\r\n"
        ))
        .await;
        let client = crate::build_client(
            crate::client_builder(Duration::from_secs(5))
                .redirect(redirect::Policy::custom(same_host_redirects)),
        )
        .unwrap();
        let url = format!("{redirecting}/.well-known/did.json");
        let error = client.get(&url).send().await.expect_err("not followed");
        let error = crate::http_error(&url, error);
        assert!(
            matches!(&error, AtprotoError::Refused { message, .. }
                if message.contains("another host")),
            "{error}"
        );
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
}
