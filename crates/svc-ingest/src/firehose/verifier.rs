//! What the repository firehose's events must prove before anything of them applies: a
//! commit's blocks, tree proof and signature (svc-repo, and the author's key), then its place
//! in its repository's chain; a `#sync` event's signed commit against that chain. A broken
//! chain, or a commit that could not be checked for a reason a retry could undo, sends the
//! repository to be read whole (the resynchronisation queue), and what the chains reached goes
//! to the catalog with the cursor (see [`Verifier::take_sync`]).

use super::chains::{Followed, Step};
use crate::resync::{Resync, reasons};
use crate::unverified::Unverified;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use svc_catalog::{CatalogError, CatalogWrite, RepositoryHead, ResyncRequest, SyncWrites};
use svc_repo::dagcbor::CidBytes;
use svc_repo::sync::{CommitProof, SyncEvent};
use svc_syntax::{Did, Tid};

/// Heads loaded from the catalog at most (as many as the chains follow).
const MAX_HEADS: usize = 500_000;
/// How long a commit waits for its author's key to be read: past it, the commit is held back
/// and its repository read whole later, so a slow host delays the stream at most this long,
/// and then not again while it is left alone.
const KEY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A commit whose proof and signature hold, to be placed in its repository's chain.
#[derive(Debug)]
pub(super) struct Checked {
    pub did: Did,
    pub rev: Tid,
    data: CidBytes,
    since: Option<Tid>,
    prev_data: Option<CidBytes>,
}

pub(super) struct Verifier {
    resync: Arc<Resync>,
    /// What the commits taken since the last batch say of the repositories' synchronisation,
    /// for the next batch sent.
    pending: Mutex<SyncWrites>,
}

impl Verifier {
    /// Keys and chains are the resynchronisation's; the chains begin where the catalog's
    /// stored heads are.
    pub async fn start(
        resync: Arc<Resync>,
        catalog: &dyn CatalogWrite,
    ) -> Result<Verifier, CatalogError> {
        let verifier = Verifier {
            resync,
            pending: Mutex::new(SyncWrites::default()),
        };
        verifier.reload(catalog).await?;
        Ok(verifier)
    }

    /// Chains as the catalog stored them, forgetting what was followed in memory beyond: the
    /// source resumes from the stored cursor, before those commits.
    pub async fn reload(&self, catalog: &dyn CatalogWrite) -> Result<(), CatalogError> {
        let heads = catalog.repository_heads(MAX_HEADS).await?;
        tracing::info!(followed = heads.len(), "repository chains loaded");
        self.resync.chains.load(heads);
        *self.lock() = SyncWrites::default();
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SyncWrites> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What goes with the next batch: the heads reached (the newest of each repository) and
    /// the repositories owed a read.
    pub fn take_sync(&self) -> SyncWrites {
        let mut sync = std::mem::take(&mut *self.lock());
        if sync.heads.len() > 1 {
            // Heads come in stream order, so a repository's last is its newest.
            let mut newest: HashMap<Did, RepositoryHead> = HashMap::with_capacity(sync.heads.len());
            for head in sync.heads.drain(..) {
                newest.insert(head.did.clone(), head);
            }
            sync.heads = newest.into_values().collect();
        }
        sync
    }

    /// Whether every commit of the repository is verified (it is followed).
    pub fn follows(&self, repo: &str) -> bool {
        self.resync.chains.follows(repo)
    }

    /// What a commit proves on its own: its proof holds and its author signed it. Commits
    /// are checked so, many at once, on every core; [`Verifier::follow`] then takes them in
    /// order.
    pub async fn check(&self, proof: &CommitProof) -> Result<Checked, Unverified> {
        let commit = proof.check()?;
        self.resync.keys.verify_within(&commit, KEY_WAIT).await?;
        Ok(Checked {
            did: commit.did,
            rev: commit.rev,
            data: commit.data,
            since: proof.since.clone(),
            prev_data: proof.prev_data.clone(),
        })
    }

    /// Whether a checked commit, taken in the stream's order, continues its repository's
    /// chain. A commit that breaks it sends the repository to be read whole.
    pub fn follow(&self, commit: &Checked) -> Result<(), Unverified> {
        let step = Step {
            did: &commit.did,
            rev: &commit.rev,
            data: &commit.data,
            since: commit.since.as_ref(),
            prev_data: commit.prev_data.as_deref(),
        };
        match self.resync.chains.follow(step)? {
            Followed::Continues => {
                self.lock().heads.push(RepositoryHead {
                    did: commit.did.clone(),
                    rev: commit.rev.clone(),
                    data: commit.data.to_vec(),
                });
                Ok(())
            }
            Followed::Broke(why) => {
                self.queue(&commit.did, reasons::CHAIN);
                Err(why)
            }
        }
    }

    /// A commit of the repository could not be checked now (its author's key could not be
    /// read): its commits wait, and it is read whole once that can be done. Whether it was
    /// in step until now (the caller says so once, not for every commit that waits).
    pub fn owe(&self, did: &Did, missed: &Tid) -> bool {
        let in_step = self.resync.chains.wait_for_copy(did, Some(missed));
        self.queue(did, reasons::KEY);
        in_step
    }

    fn queue(&self, did: &Did, reason: &'static str) {
        self.resync
            .ingestor_metrics()
            .resync_queued
            .get_or_create(&crate::metrics::ReasonLabel { reason })
            .inc();
        self.lock().queued.push(ResyncRequest {
            did: did.clone(),
            reason: reason.into(),
        });
    }

    /// A `#sync` event: once its commit verifies, a followed repository whose tree is not the
    /// one svc holds is read whole.
    pub async fn sync_event(&self, event: &SyncEvent) -> Result<(), Unverified> {
        let commit = event.check()?;
        self.resync.keys.verify_within(&commit, KEY_WAIT).await?;
        let step = Step {
            did: &commit.did,
            rev: &commit.rev,
            data: &commit.data,
            since: None,
            prev_data: None,
        };
        if self.resync.chains.synced(step) {
            tracing::info!(did = %commit.did, rev = %commit.rev, "#sync moved the repository; resynchronising");
            self.queue(&commit.did, reasons::HOST);
        }
        Ok(())
    }

    /// The host says it lost the repository's chain (`desynchronized`, `throttled`): a
    /// followed repository is read whole from its own PDS.
    pub fn host_lost(&self, did: &Did) {
        if self.resync.chains.desynchronize(did) {
            self.queue(did, reasons::HOST);
        }
    }

    /// The account's key may have rotated (`#identity`): the next commit reads it again.
    pub fn identity_changed(&self, did: &Did) {
        self.resync.keys.forget(did);
    }

    /// A batch carrying queued repositories was committed: read them now.
    pub fn queued(&self) {
        self.resync.wake();
    }
}
