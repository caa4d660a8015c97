//! Why a commit or a repository is not believed, by a reason that names it in metrics, and a
//! whole repository (`getRepo`, a `.car` export) checked down to each record it holds: blocks,
//! tree, and the signature of its author's current key.

use crate::event::{Action, CommitEvent, record_json};
use crate::signing_keys::{KeyCheckError, SigningKeys};
use svc_repo::dagcbor::{self, Cid};
use svc_repo::snapshot::Snapshot;
use svc_repo::sync::SyncError;
use svc_syntax::{Did, Tid};

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

/// A repository read whole and verified: its signed head and the family records it proves.
#[derive(Debug)]
pub struct VerifiedRepository {
    pub did: Did,
    pub rev: Tid,
    /// The root of its tree.
    pub data: Cid,
    /// One create per record of a wanted collection, at the repository's revision.
    pub records: Vec<CommitEvent>,
}

/// Checks a whole repository's CAR: one root, each block its CID, the tree whole, the commit
/// signed by the key its author's document names (unless `keys` is `None`: verification is
/// off). When `did` is given, the repository must be its. The records of the collections
/// `wanted` says yes to come out as creates.
pub async fn verify_repository(
    keys: Option<&SigningKeys>,
    car: &[u8],
    did: Option<&Did>,
    wanted: impl Fn(&str) -> bool,
) -> Result<VerifiedRepository, Unverified> {
    let snapshot = Snapshot::read(car)?;
    let commit = &snapshot.commit;
    if let Some(did) = did.filter(|did| **did != commit.did) {
        return Err(Unverified::new(
            Reason::Commit,
            format!("the repository of {did} holds a commit of {}", commit.did),
        ));
    }
    if let Some(keys) = keys {
        keys.verify(commit).await?;
    }
    let rev = commit.rev.to_string();
    let records = snapshot
        .records(wanted)?
        .into_iter()
        .map(|record| CommitEvent {
            did: commit.did.to_string(),
            collection: record.collection.to_string(),
            rkey: record.rkey.to_string(),
            action: Action::Create,
            rev: rev.clone(),
            cid: Some(svc_syntax::cid_to_string(record.cid)),
            // A record that is not DAG-CBOR reaches validation as invalid, not unseen.
            record_json: dagcbor::decode_block(record.block)
                .ok()
                .map(|value| record_json(&value).to_string()),
            time_us: None,
        })
        .collect();
    Ok(VerifiedRepository {
        did: commit.did.clone(),
        rev: commit.rev.clone(),
        data: commit.data.clone(),
        records,
    })
}
