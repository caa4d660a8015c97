//! The AT Protocol as svc uses it: DID and handle resolution, the XRPC client (getRecord,
//! createSession, refreshSession, createRecord, and any query or procedure), and the session
//! store. Async, so that the backfill and the command line share it (a command blocks on it).

mod dns;
mod identity;
mod reach;
pub mod secret_file;
mod session;
mod xrpc;

pub use dns::HandleDns;
pub use identity::{
    LabelerService, Located, ResolvedDid, Resolver, did_document_url, is_loopback_host, method_key,
    pds_endpoint, service_endpoint, signing_key,
};
pub use reach::{CrossHostRedirect, Reach, RefusedAddress};
pub use reqwest::{Client, Url};
pub use session::{Session, SessionStore, SessionSummary};
pub use xrpc::{CreatedRecord, FetchedRecord, Login, Method, Xrpc};

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum AtprotoError {
    #[error("{0}")]
    Invalid(String),
    #[error("{url}: {message}")]
    Http { url: String, message: String },
    /// The server answered with an XRPC error.
    #[error("{url}: {status} {error}: {message}")]
    Xrpc {
        url: String,
        status: u16,
        error: String,
        message: String,
        /// How long the server asked to be left alone (`Retry-After` on a 429 or 503).
        retry_after: Option<Duration>,
    },
    /// A peer answered a request that is not XRPC (a DID document) with an error status.
    #[error("{url}: {message}")]
    Status {
        url: String,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("{path}: {message}")]
    Store { path: String, message: String },
    /// An address the client does not reach (see [`Reach`]).
    #[error("{url}: {message}")]
    Refused { url: String, message: String },
    /// The peer's answer is longer than svc reads of that kind of answer.
    #[error("{url}: the answer is over {}, the most read of {what}; refused", in_units(*limit))]
    TooLarge {
        url: String,
        what: &'static str,
        limit: usize,
    },
}

impl AtprotoError {
    /// The XRPC error name, when the server gave one.
    pub fn xrpc_error(&self) -> Option<&str> {
        match self {
            AtprotoError::Xrpc { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Whether asking again later could succeed: no connection, no answer in time, a broken
    /// or unreadable answer, a server error, a rate limit. Anything else (a DID the directory
    /// does not know, a repository not found, an answer over its limit, a document that names
    /// no key) is the peer's verdict, and asking again gives the same.
    pub fn is_transient(&self) -> bool {
        match self {
            AtprotoError::Http { .. } => true,
            AtprotoError::Xrpc { status, .. } | AtprotoError::Status { status, .. } => {
                transient_status(*status)
            }
            AtprotoError::Invalid(_)
            | AtprotoError::Store { .. }
            | AtprotoError::Refused { .. }
            | AtprotoError::TooLarge { .. } => false,
        }
    }

    /// How long the peer asked to be left alone, when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AtprotoError::Xrpc { retry_after, .. } | AtprotoError::Status { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }
}

/// A status a server gives while it is down, overloaded or limiting its callers.
pub fn transient_status(status: u16) -> bool {
    status >= 500 || status == 429 || status == 408
}

/// The most of a `Retry-After` that is believed: a peer cannot park svc for hours.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// A `Retry-After` header in seconds (the date form is not used by the peers svc talks to,
/// and is taken as absent).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

pub type AtprotoResult<T> = Result<T, AtprotoError>;

/// How long one request to a peer may take in all: connecting, the answer's head and its
/// whole body (a peer that trickles its answer is cut off here too). A real answer takes a
/// fraction of this; a peer slower than this is treated as down.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to a peer (TCP and TLS) may take, within [`REQUEST_TIMEOUT`]: an
/// address that swallows the first packet is given up on sooner than a slow answer.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most read of a successful XRPC answer. The largest is a `listRecords` page: 100
/// records, and the reference PDS takes a record of at most 150 KiB (its JSON request limit),
/// so a real page stays under 15 MiB. A page is held whole while it is decoded, so this is
/// also what one page may cost in memory.
pub const MAX_XRPC_ANSWER_BYTES: usize = 16 << 20;
/// The most read of an XRPC error answer: its `error` and `message` are a few lines.
pub const MAX_ERROR_ANSWER_BYTES: usize = 64 << 10;
/// The most read of an answer about an identity: a DID document (a real one is 1-3 KiB, a
/// did:web one with many keys a few more), a handle's `/.well-known/atproto-did` (one DID, at
/// most 2 KiB) or a `resolveHandle` answer.
pub const MAX_IDENTITY_ANSWER_BYTES: usize = 64 << 10;

/// What a body of unannounced length is first given room for: most answers fit.
const FIRST_READ_BYTES: usize = 64 << 10;

/// `bytes` in KiB or MiB, as the limits are written.
fn in_units(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// A transport failure (no connection, no answer in time, a broken body) as an error naming
/// the peer once, and what failed ([`transport_failure`]).
pub(crate) fn http_error(url: &str, error: reqwest::Error) -> AtprotoError {
    let refused = causes(&error).into_iter().find_map(|cause| {
        let refused = cause
            .downcast_ref::<RefusedAddress>()
            .map(ToString::to_string);
        refused.or_else(|| {
            cause
                .downcast_ref::<CrossHostRedirect>()
                .map(ToString::to_string)
        })
    });
    if let Some(message) = refused {
        return AtprotoError::Refused {
            url: url.to_string(),
            message,
        };
    }
    AtprotoError::Http {
        url: url.to_string(),
        message: transport_failure(url, error),
    }
}

/// What failed in a request to `url` that got no whole answer, in the words a person acts on,
/// naming the host: `resolving no-such-host.invalid: name not found`, `connecting to
/// 127.0.0.1:9: connection refused`, `connecting to 10.0.0.1:443: timed out`, `TLS with
/// example.com:443: invalid peer certificate: UnknownIssuer`. reqwest's own text is "error
/// sending request", with the cause several sources down.
pub fn transport_failure(url: &str, error: reqwest::Error) -> String {
    let parsed = error.url().cloned().or_else(|| Url::parse(url).ok());
    let host = parsed
        .as_ref()
        .and_then(Url::host_str)
        .unwrap_or("the host")
        .to_string();
    let address = match parsed.as_ref().and_then(Url::port_or_known_default) {
        Some(port) => format!("{host}:{port}"),
        None => host.clone(),
    };
    let causes = causes(&error);
    // A failed handshake reaches reqwest as an I/O error carrying the TLS error.
    if let Some(tls) = causes
        .iter()
        .find_map(|cause| cause.downcast_ref::<rustls::Error>())
    {
        return format!("TLS with {address}: {tls}");
    }
    if error.is_dns() {
        return format!("resolving {host}: {}", name_failure(&causes));
    }
    if error.is_connect() {
        let io = causes
            .iter()
            .find_map(|cause| cause.downcast_ref::<std::io::Error>());
        return match io {
            Some(io) => format!("connecting to {address}: {}", io_failure(io)),
            None if error.is_timeout() => format!("connecting to {address}: timed out"),
            None => format!("connecting to {address}: {}", innermost(&causes)),
        };
    }
    if error.is_timeout() {
        return "timed out before the whole answer came".to_string();
    }
    let error = error.without_url();
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

/// Every cause below `error`, the errors an I/O error wraps included: its `source` skips
/// them, giving the wrapped error's own source instead (a TLS error arrives as an I/O error
/// wrapped in another).
fn causes(error: &reqwest::Error) -> Vec<&(dyn std::error::Error + 'static)> {
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        causes.push(cause);
        let mut wrapped = cause;
        while let Some(inner) = wrapped
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            let inner: &(dyn std::error::Error + 'static) = inner;
            causes.push(inner);
            wrapped = inner;
        }
        source = cause.source();
    }
    causes
}

fn innermost(causes: &[&(dyn std::error::Error + 'static)]) -> String {
    causes
        .last()
        .map_or_else(|| "failed".to_string(), |cause| cause.to_string())
}

/// Why a host name did not resolve, from the system resolver's words.
fn name_failure(causes: &[&(dyn std::error::Error + 'static)]) -> String {
    let said = innermost(causes);
    let said = said
        .strip_prefix("failed to lookup address information: ")
        .unwrap_or(&said);
    // getaddrinfo's EAI_NONAME and EAI_NODATA, as glibc and the BSDs word them.
    let not_found = [
        "Name or service not known",
        "No address associated with hostname",
        "nodename nor servname provided",
    ];
    if not_found.iter().any(|words| said.contains(words)) {
        "name not found".to_string()
    } else {
        said.to_string()
    }
}

fn io_failure(io: &std::io::Error) -> String {
    use std::io::ErrorKind;
    let said = match io.kind() {
        ErrorKind::ConnectionRefused => "connection refused",
        ErrorKind::ConnectionReset => "connection reset",
        ErrorKind::ConnectionAborted => "connection aborted",
        ErrorKind::TimedOut => "timed out",
        ErrorKind::HostUnreachable => "host unreachable",
        ErrorKind::NetworkUnreachable => "network unreachable",
        ErrorKind::AddrNotAvailable => "address not available",
        ErrorKind::PermissionDenied => "not permitted",
        _ => return io.to_string(),
    };
    said.to_string()
}

/// Reads an answer's body in chunks, refusing it as soon as it passes `limit` bytes (or
/// announces more): a peer cannot make svc hold more than `limit` of it.
pub async fn read_body(
    url: &str,
    response: reqwest::Response,
    what: &'static str,
    limit: usize,
) -> AtprotoResult<Vec<u8>> {
    read_body_paced(url, response, what, limit, Pace::LEAST).await
}

/// The least pace an answer's body must keep: after `grace`, `bytes_per_second` on average. A
/// peer that trickles its answer is cut there rather than at the request's whole time limit,
/// so that a few slow peers cannot hold every reader for minutes (the cut is a transport
/// failure, which a retry could undo).
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub grace: Duration,
    pub bytes_per_second: u64,
}

impl Pace {
    /// 10 s, then 16 KiB/s: a real answer is far faster; a 256 MiB repository at that pace
    /// would still meet the request's own time limit first.
    pub const LEAST: Pace = Pace {
        grace: Duration::from_secs(10),
        bytes_per_second: 16 << 10,
    };

    /// When the body must have more than `read` bytes.
    fn deadline(&self, started: tokio::time::Instant, read: usize) -> tokio::time::Instant {
        let earned = Duration::from_secs_f64(read as f64 / self.bytes_per_second.max(1) as f64);
        started + self.grace + earned
    }
}

/// [`read_body`] at a given least pace.
pub async fn read_body_paced(
    url: &str,
    response: reqwest::Response,
    what: &'static str,
    limit: usize,
    pace: Pace,
) -> AtprotoResult<Vec<u8>> {
    let mut chunks = BodyChunks::new(url, response, what, limit, pace)?;
    // The announced length is a hint within the limit, never trusted beyond it.
    let announced = chunks.announced().unwrap_or(0) as usize;
    let mut body = Vec::with_capacity(announced.max(FIRST_READ_BYTES));
    while let Some(chunk) = chunks.next().await? {
        let needed = body.len() + chunk.len();
        if needed > body.capacity() {
            // One step to the limit, of which only what is written becomes resident: doubling
            // would copy the body again and again, and leave each outgrown buffer behind.
            body.reserve_exact(limit - body.len());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An answer's body, chunk by chunk as it comes, for a reader that decides where each goes
/// (memory or disk): refused as soon as it passes `limit` bytes (or announces more), cut when
/// it comes slower than `pace`.
pub struct BodyChunks {
    url: String,
    response: reqwest::Response,
    what: &'static str,
    limit: usize,
    pace: Pace,
    started: tokio::time::Instant,
    read: usize,
}

impl BodyChunks {
    pub fn new(
        url: &str,
        response: reqwest::Response,
        what: &'static str,
        limit: usize,
        pace: Pace,
    ) -> AtprotoResult<BodyChunks> {
        let chunks = BodyChunks {
            url: url.to_string(),
            response,
            what,
            limit,
            pace,
            started: tokio::time::Instant::now(),
            read: 0,
        };
        match chunks.announced() {
            Some(announced) if announced > limit as u64 => Err(chunks.too_large()),
            _ => Ok(chunks),
        }
    }

    /// The length the peer announced (within the limit, or the body was refused).
    pub fn announced(&self) -> Option<u64> {
        self.response.content_length()
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The most this body may be.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The next chunk; `None` at the end of the body.
    pub async fn next(&mut self) -> AtprotoResult<Option<bytes::Bytes>> {
        let deadline = self.pace.deadline(self.started, self.read);
        let Ok(next) = tokio::time::timeout_at(deadline, self.response.chunk()).await else {
            return Err(AtprotoError::Http {
                url: self.url.clone(),
                message: format!(
                    "{} came slower than {} bytes/s ({} bytes in {:.0} s); cut",
                    self.what,
                    self.pace.bytes_per_second,
                    self.read,
                    self.started.elapsed().as_secs_f64()
                ),
            });
        };
        let Some(chunk) = next.map_err(|e| http_error(&self.url, e))? else {
            return Ok(None);
        };
        self.read += chunk.len();
        if self.read > self.limit {
            return Err(self.too_large());
        }
        Ok(Some(chunk))
    }

    fn too_large(&self) -> AtprotoError {
        AtprotoError::TooLarge {
            url: self.url.clone(),
            what: self.what,
            limit: self.limit,
        }
    }
}

/// Installs the process's TLS provider, ring (no OpenSSL, no aws-lc builds): reqwest and
/// tokio-tungstenite are built without one. Idempotent.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An HTTP client with the ring TLS provider, giving up on a request after `timeout` (the
/// whole request, body included) and on connecting after [`CONNECT_TIMEOUT`].
pub fn http_client(timeout: Duration) -> AtprotoResult<reqwest::Client> {
    build_client(client_builder(timeout))
}

fn client_builder(timeout: Duration) -> reqwest::ClientBuilder {
    install_crypto();
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(CONNECT_TIMEOUT.min(timeout))
        .user_agent(concat!("svc/", env!("CARGO_PKG_VERSION")))
}

fn build_client(builder: reqwest::ClientBuilder) -> AtprotoResult<reqwest::Client> {
    builder.build().map_err(|e| AtprotoError::Http {
        url: String::new(),
        message: e.to_string(),
    })
}

/// An HTTP client for an answer that does not end (a stream of events): no limit on the
/// whole request, but each read must come within `silence` (a stream's keep-alives do).
pub fn streaming_client(silence: Duration) -> AtprotoResult<reqwest::Client> {
    install_crypto();
    reqwest::Client::builder()
        .read_timeout(silence)
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("svc/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| AtprotoError::Http {
            url: String::new(),
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A server answering every connection with `head`, then `body` written `repeat` times
    /// (forever with `None`), then holding the connection open.
    async fn peer(head: &'static str, body: &'static [u8], repeat: Option<usize>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/answer", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = stream.read(&mut request).await;
                    stream.write_all(head.as_bytes()).await?;
                    let mut sent = 0;
                    while repeat.is_none_or(|n| sent < n) {
                        stream.write_all(body).await?;
                        sent += 1;
                    }
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    std::io::Result::Ok(())
                });
            }
        });
        url
    }

    async fn read(url: &str, timeout: Duration, limit: usize) -> AtprotoResult<Vec<u8>> {
        let http = http_client(timeout)?;
        let response = http.get(url).send().await.map_err(|e| http_error(url, e))?;
        read_body(url, response, "a test answer", limit).await
    }

    #[tokio::test]
    async fn a_body_slower_than_the_least_pace_is_cut_long_before_the_time_limit() {
        // One byte every 50 ms, for ever: 20 bytes/s.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/answer", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await?;
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request).await;
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                .await?;
            loop {
                stream.write_all(b" ").await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            #[allow(unreachable_code)]
            std::io::Result::Ok(())
        });
        let http = http_client(Duration::from_secs(30)).unwrap();
        let response = http.get(&url).send().await.unwrap();
        let pace = Pace {
            grace: Duration::from_millis(300),
            bytes_per_second: 1000,
        };
        let started = std::time::Instant::now();
        let error = read_body_paced(&url, response, "a test answer", 1 << 20, pace)
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(error.is_transient(), "{error}");
        assert!(
            error.to_string().contains("slower than 1000 bytes/s"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn an_endless_body_is_refused_at_the_limit() {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n";
        let url = peer(head, &[b' '; 4096], None).await;
        let error = read(&url, Duration::from_secs(30), 1 << 20)
            .await
            .unwrap_err();
        assert!(matches!(error, AtprotoError::TooLarge { .. }), "{error}");
        let message = error.to_string();
        assert!(message.contains(&url), "{message}");
        assert!(message.contains("1 MiB"), "{message}");
    }

    #[tokio::test]
    async fn an_announced_length_over_the_limit_is_refused_unread() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n";
        let url = peer(head, b"", Some(0)).await;
        let error = read(&url, Duration::from_secs(30), 64 << 10)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("64 KiB"), "{error}");
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n";
        let url = peer(head, b"{\"a\":1}\n", Some(1)).await;
        let body = read(&url, Duration::from_secs(30), 8).await.unwrap();
        assert_eq!(body, b"{\"a\":1}\n");
    }

    #[tokio::test]
    async fn an_answer_that_never_ends_times_out() {
        // The head, then a body that trickles: only the whole-request limit ends it.
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
        let url = peer(head, b"{", Some(1)).await;
        let started = std::time::Instant::now();
        let error = read(&url, Duration::from_millis(500), 1 << 20)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(error.to_string().contains("timed out"), "{error}");
    }
}
