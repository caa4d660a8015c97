//! Why a commit or a repository is not believed, by a reason that names it in metrics.

use crate::signing_keys::KeyCheckError;
use svc_repo::sync::SyncError;

/// Why something a source sent is not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A block does not hash to its CID.
    Cid,
    /// The commit is malformed or is not the one the event names.
    Commit,
    /// The tree does not prove the operations (or the records).
    Proof,
    Signature,
    /// The author's signing key could not be read.
    Key,
    /// The revision does not come after the repository's newest, or is in the future.
    Rev,
    /// The commit does not continue the repository's chain: a commit was missed.
    Chain,
    /// The repository waits for resynchronisation; its commits until then are not applied.
    Desynchronized,
    /// A repository holds more blocks, records or bytes than one may.
    Oversized,
}

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::Cid => "cid",
            Reason::Commit => "commit",
            Reason::Proof => "proof",
            Reason::Signature => "signature",
            Reason::Key => "key",
            Reason::Rev => "rev",
            Reason::Chain => "chain",
            Reason::Desynchronized => "desynchronized",
            Reason::Oversized => "oversized",
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Unverified {
    pub reason: Reason,
    pub message: String,
    /// Not a verdict: what was needed to check it could not be read just now (the author's
    /// DID document), and asking again later could settle it.
    pub transient: bool,
    /// How long the peer asked to be left alone, when it said.
    pub retry_after: Option<std::time::Duration>,
}

impl Unverified {
    pub fn new(reason: Reason, message: impl Into<String>) -> Unverified {
        Unverified {
            reason,
            message: message.into(),
            transient: false,
            retry_after: None,
        }
    }
}

impl From<SyncError> for Unverified {
    fn from(error: SyncError) -> Unverified {
        let reason = match error {
            SyncError::Cid(_) => Reason::Cid,
            SyncError::Commit(_) => Reason::Commit,
            SyncError::Proof(_) => Reason::Proof,
        };
        Unverified::new(reason, error.to_string())
    }
}

impl From<KeyCheckError> for Unverified {
    fn from(error: KeyCheckError) -> Unverified {
        let (reason, retry_after) = match &error {
            KeyCheckError::Key { retry_after, .. } => (Reason::Key, *retry_after),
            KeyCheckError::Signature(_) => (Reason::Signature, None),
        };
        Unverified {
            transient: error.is_transient(),
            retry_after,
            ..Unverified::new(reason, error.to_string())
        }
    }
}
