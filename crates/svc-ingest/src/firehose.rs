//! Live sources: Jetstream (JSON) and the repository firehose (`subscribeRepos`, DAG-CBOR),
//! picked by the shape of the `--firehose` URL, followed with cursors, reconnects and a
//! liveness check.

pub(crate) mod chains;
mod checks;
mod frames;
mod live;
mod session;
mod status;
mod verifier;

pub use frames::{Proof, decode_frame};
pub use live::run_live;
pub use status::{LiveConfig, LiveStatus};

/// The largest message a live source may send (and an imported line may be).
pub(crate) const MAX_MESSAGE_BYTES: usize = 8 << 20;

use crate::event::CommitEvent;
use svc_catalog::AccountStatus;

/// One thing a live source said.
#[derive(Debug, Clone)]
pub enum SourceEvent {
    Commit(CommitEvent),
    Account {
        did: svc_syntax::Did,
        status: AccountStatus,
    },
    Identity {
        did: svc_syntax::Did,
    },
    /// `#sync`: the repository's current commit, to compare with what svc holds of it.
    Sync(Box<svc_repo::sync::SyncEvent>),
    /// `#info` (e.g. `OutdatedCursor`).
    Info {
        name: String,
        message: String,
    },
    /// An error frame; the server closes the stream after it.
    Error {
        error: String,
        message: String,
    },
}

/// The events of one message, with the cursor it moves the source to.
#[derive(Debug, Clone)]
pub struct SourceMessage {
    pub events: Vec<SourceEvent>,
    pub cursor: Option<i64>,
    pub time_us: Option<i64>,
    /// What proves the commit events, for the source that carries proofs.
    pub proof: Proof,
}

impl SourceMessage {
    fn only(event: SourceEvent) -> SourceMessage {
        SourceMessage {
            events: vec![event],
            cursor: None,
            time_us: None,
            proof: Proof::NotNeeded,
        }
    }
}

/// Which protocol a firehose URL speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Jetstream,
    Repos,
}

/// Jetstream URLs end in `/subscribe`; a bare `ws(s)://host` or a path ending in
/// `com.atproto.sync.subscribeRepos` is the repository firehose.
pub fn source_kind(url: &str) -> Result<(SourceKind, String), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("{url}: not a URL"))?;
    if !matches!(scheme, "ws" | "wss" | "http" | "https") {
        return Err(format!(
            "{url}: the firehose must be a ws://, wss://, http:// or https:// URL"
        ));
    }
    let ws_scheme = match scheme {
        "http" => "ws",
        "https" => "wss",
        other => other,
    };
    let without_query = rest.split('?').next().unwrap_or(rest);
    let (host, path) = match without_query.split_once('/') {
        Some((host, path)) => (host, path.trim_end_matches('/')),
        None => (without_query, ""),
    };
    if host.is_empty() {
        return Err(format!("{url}: no host"));
    }
    if path.ends_with("subscribe") && !path.ends_with("subscribeRepos") {
        Ok((
            SourceKind::Jetstream,
            format!("{ws_scheme}://{host}/{path}"),
        ))
    } else if path.is_empty() || path.ends_with("com.atproto.sync.subscribeRepos") {
        Ok((
            SourceKind::Repos,
            format!("{ws_scheme}://{host}/xrpc/com.atproto.sync.subscribeRepos"),
        ))
    } else {
        Err(format!(
            "{url}: neither a Jetstream /subscribe URL nor a repository firehose"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_pick_the_protocol() {
        assert_eq!(
            source_kind("wss://jetstream2.us-east.bsky.network/subscribe").unwrap(),
            (
                SourceKind::Jetstream,
                "wss://jetstream2.us-east.bsky.network/subscribe".into()
            )
        );
        assert_eq!(
            source_kind("ws://127.0.0.1:2583").unwrap(),
            (
                SourceKind::Repos,
                "ws://127.0.0.1:2583/xrpc/com.atproto.sync.subscribeRepos".into()
            )
        );
        assert_eq!(
            source_kind("wss://bsky.network/xrpc/com.atproto.sync.subscribeRepos?cursor=5")
                .unwrap()
                .0,
            SourceKind::Repos
        );
        assert!(source_kind("ftp://x").is_err());
        assert!(source_kind("wss://host/other").is_err());
    }
}
