//! The AT Protocol as svc uses it: DID and handle resolution, the XRPC client (getRecord,
//! createSession, refreshSession, createRecord, and any query or procedure), and the session
//! store. Async, so that the backfill and the command line share it (a command blocks on it).

mod dns;
mod identity;
mod session;
mod xrpc;

pub use dns::HandleDns;
pub use identity::{ResolvedDid, Resolver, did_document_url, is_loopback_host, pds_endpoint};
pub use reqwest::{Client, Url};
pub use session::{Session, SessionStore, SessionSummary};
pub use xrpc::{CreatedRecord, FetchedRecord, Xrpc};

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
    },
    #[error("{path}: {message}")]
    Store { path: String, message: String },
}

impl AtprotoError {
    /// The XRPC error name, when the server gave one.
    pub fn xrpc_error(&self) -> Option<&str> {
        match self {
            AtprotoError::Xrpc { error, .. } => Some(error),
            _ => None,
        }
    }
}

pub type AtprotoResult<T> = Result<T, AtprotoError>;

/// Installs the process's TLS provider, ring (no OpenSSL, no aws-lc builds): reqwest and
/// tokio-tungstenite are built without one. Idempotent.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An HTTP client with the ring TLS provider, giving up on a request after `timeout`.
pub fn http_client(timeout: std::time::Duration) -> AtprotoResult<reqwest::Client> {
    install_crypto();
    reqwest::Client::builder()
        .timeout(timeout)
        .user_agent(concat!("svc/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| AtprotoError::Http {
            url: String::new(),
            message: e.to_string(),
        })
}
