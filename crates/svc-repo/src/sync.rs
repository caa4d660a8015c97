//! A firehose `#commit` event checked as Sync 1.1 asks, short of the signature (whose key
//! comes from the author's DID document, through the network): the CAR slice's root is the
//! event's commit, every block hashes to its CID, the commit names the event's repository
//! and revision, and the operations, undone on the slice's partial tree, give the event's
//! `prevData`. What fails says why, by a reason that names it in metrics.

use crate::commit::{Commit, CommitError};
use crate::dagcbor::{Blocks, CidBytes, check_block};
use crate::mst::{MstError, Op, check_commit_proof};
use svc_syntax::{Did, Tid};

/// What a `#commit` event carries to prove its ops, as read from its frame.
#[derive(Debug, Clone)]
pub struct CommitProof {
    pub repo: Did,
    pub rev: Tid,
    /// The revision of the repository's commit before this one, when the event names one.
    pub since: Option<Tid>,
    /// The event's `commit` link.
    pub commit: CidBytes,
    /// The roots the slice's header names.
    pub roots: Vec<CidBytes>,
    pub blocks: Blocks,
    pub ops: Vec<Op>,
    /// The tree's root before the commit; absent from events before Sync 1.1.
    pub prev_data: Option<CidBytes>,
}

/// Why an event is not applied; `label` names it in metrics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    #[error("a block is not its CID: {0}")]
    Cid(String),
    #[error("the commit: {0}")]
    Commit(String),
    #[error("the proof: {0}")]
    Proof(String),
}

impl SyncError {
    pub fn label(&self) -> &'static str {
        match self {
            SyncError::Cid(_) => "cid",
            SyncError::Commit(_) => "commit",
            SyncError::Proof(_) => "proof",
        }
    }
}

impl From<CommitError> for SyncError {
    fn from(error: CommitError) -> SyncError {
        SyncError::Commit(error.to_string())
    }
}

impl From<MstError> for SyncError {
    fn from(error: MstError) -> SyncError {
        SyncError::Proof(error.to_string())
    }
}

impl CommitProof {
    /// Checks everything but the signature; the commit, for its signature to be checked next.
    pub fn check(&self) -> Result<Commit, SyncError> {
        if self.roots != [self.commit.clone()] {
            return Err(SyncError::Commit(
                "the slice's root is not the event's commit".into(),
            ));
        }
        let commit = head(&self.repo, &self.rev, &self.commit, &self.blocks)?;
        let prev_data = self
            .prev_data
            .as_deref()
            .ok_or_else(|| SyncError::Proof("no prevData (an event before Sync 1.1)".into()))?;
        check_commit_proof(&self.blocks, &commit.data, prev_data, &self.ops)?;
        Ok(commit)
    }
}

/// A `#sync` event: a repository's current signed commit, alone in its CAR slice, which a
/// consumer compares with what it holds.
#[derive(Debug, Clone)]
pub struct SyncEvent {
    pub repo: Did,
    pub rev: Tid,
    pub roots: Vec<CidBytes>,
    pub blocks: Blocks,
}

impl SyncEvent {
    /// Checks everything but the signature; the commit, for its signature to be checked next.
    pub fn check(&self) -> Result<Commit, SyncError> {
        let [root] = self.roots.as_slice() else {
            return Err(SyncError::Commit("the slice has no single root".into()));
        };
        head(&self.repo, &self.rev, root, &self.blocks)
    }
}

/// The commit at `root`, once every block hashes to its CID and the commit is the one the
/// event says: of its repository, at its revision.
fn head(repo: &Did, rev: &Tid, root: &[u8], blocks: &Blocks) -> Result<Commit, SyncError> {
    for (cid, block) in blocks {
        check_block(cid, block).map_err(|e| SyncError::Cid(e.to_string()))?;
    }
    let block = blocks
        .get(root)
        .ok_or_else(|| SyncError::Commit("its block is not in the slice".into()))?;
    let commit = Commit::decode(block)?;
    if commit.did != *repo {
        return Err(SyncError::Commit(format!(
            "signed for {}, sent as {repo}",
            commit.did
        )));
    }
    if commit.rev != *rev {
        return Err(SyncError::Commit(format!(
            "revision {}, sent as {rev}",
            commit.rev
        )));
    }
    Ok(commit)
}
