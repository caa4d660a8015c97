//! What the repository firehose's events must prove before anything of them applies: a
//! commit's blocks, tree proof and signature (svc-repo, and the author's key), then its place
//! in its repository's chain; a `#sync` event's signed commit against that chain. A broken
//! chain sends the repository to be read whole again.

use super::chains::{Chains, Followed, Step};
use super::resync::{Resync, ResyncQueue, Waiting};
use crate::ingest::Ingestor;
use crate::signing_keys::SigningKeys;
use crate::verification::Unverified;
use std::sync::Arc;
use svc_catalog::CatalogWrite;
use svc_repo::dagcbor::Cid;
use svc_repo::sync::{CommitProof, SyncEvent};
use svc_syntax::{Did, Tid};

/// A commit whose proof and signature hold, to be placed in its repository's chain.
#[derive(Debug)]
pub(super) struct Checked {
    pub did: Did,
    pub rev: Tid,
    data: Cid,
    since: Option<Tid>,
    prev_data: Option<Cid>,
}

pub(super) struct Verifier {
    keys: Arc<SigningKeys>,
    chains: Arc<Chains>,
    resyncs: ResyncQueue,
}

impl Verifier {
    /// Keys come from DID documents through the PLC directory at `plc`; repositories are
    /// resynchronised into `catalog` in the background.
    pub fn start(
        plc: &str,
        catalog: Arc<dyn CatalogWrite>,
        ingestor: Ingestor,
        waiting: Arc<Waiting>,
        source: &'static str,
    ) -> Result<Verifier, String> {
        let http =
            svc_atproto::http_client(svc_atproto::REQUEST_TIMEOUT).map_err(|e| e.to_string())?;
        let keys = Arc::new(SigningKeys::new(svc_atproto::Resolver::new(http, plc)));
        let chains = Arc::new(Chains::default());
        let resyncs = ResyncQueue::start(Resync {
            keys: Arc::clone(&keys),
            chains: Arc::clone(&chains),
            catalog,
            ingestor,
            waiting,
            source,
        });
        Ok(Verifier {
            keys,
            chains,
            resyncs,
        })
    }

    /// Whether every commit of the repository is verified (it is followed).
    pub fn follows(&self, repo: &str) -> bool {
        self.chains.follows(repo)
    }

    /// What a commit proves on its own: its proof holds and its author signed it. Commits
    /// are checked so, many at once, on every core; [`Verifier::follow`] then takes them in
    /// order.
    pub async fn check(&self, proof: &CommitProof) -> Result<Checked, Unverified> {
        let commit = proof.check()?;
        self.keys.verify(&commit).await?;
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
        match self.chains.follow(step)? {
            Followed::Continues => Ok(()),
            Followed::Broke(why) => {
                self.resyncs.request(commit.did.clone());
                Err(why)
            }
        }
    }

    /// A `#sync` event: once its commit verifies, a followed repository whose tree is not the
    /// one svc holds is read whole.
    pub async fn sync_event(&self, event: &SyncEvent) -> Result<(), Unverified> {
        let commit = event.check()?;
        self.keys.verify(&commit).await?;
        let step = Step {
            did: &commit.did,
            rev: &commit.rev,
            data: &commit.data,
            since: None,
            prev_data: None,
        };
        if self.chains.synced(step) {
            tracing::info!(did = %commit.did, rev = %commit.rev, "#sync moved the repository; resynchronising");
            self.resyncs.request(commit.did.clone());
        }
        Ok(())
    }

    /// The host says it lost the repository's chain (`desynchronized`, `throttled`): a
    /// followed repository is read whole from its own PDS.
    pub fn host_lost(&self, did: &Did) {
        if self.chains.desynchronize(did) {
            self.resyncs.request(did.clone());
        }
    }

    /// The account's key may have rotated (`#identity`): the next commit reads it again.
    pub fn identity_changed(&self, did: &Did) {
        self.keys.forget(did);
    }
}
