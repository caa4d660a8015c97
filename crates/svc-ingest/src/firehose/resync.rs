//! Resynchronising a repository whose chain broke: read it whole from its own PDS
//! (`com.atproto.sync.getRepo`), verify it as any repository read whole, and make the
//! catalog's records of it exactly those the repository proves, in one transaction; its chain
//! then continues from that commit. A few at once, in the background: the live stream goes on
//! meanwhile, and the repository's commits wait (they are not applied) until it is done.

use super::chains::Chains;
use crate::ingest::{Ingestor, Prepared};
use crate::signing_keys::SigningKeys;
use crate::verification::{Unverified, verify_repository};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use svc_atproto::{Method, Xrpc};
use svc_catalog::CatalogWrite;
use svc_syntax::Did;
use tokio::sync::{Semaphore, mpsc};

/// Repositories waiting at most; past it, one more is not resynchronised but forgotten (its
/// chain begins again at its next commit), and said so.
const MAX_WAITING: usize = 10_000;
/// Repositories read at once.
const AT_ONCE: usize = 4;
/// A whole repository read at most. Family records live in repositories of every size; a
/// larger one is not read, and its chain begins again.
pub const MAX_REPOSITORY_BYTES: usize = 256 << 20;
/// Attempts at one repository, with a doubling pause from the first.
const ATTEMPTS: u32 = 4;
const FIRST_PAUSE: Duration = Duration::from_secs(1);

/// The repositories waiting, shared with readiness: how many, and the first few by name.
#[derive(Debug, Default)]
pub struct Waiting(Mutex<BTreeSet<Did>>);

impl Waiting {
    const NAMED: usize = 3;

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<Did>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `2 repositories wait for resynchronisation: did:plc:a, did:plc:b`, or `None`.
    pub fn describe(&self) -> Option<String> {
        let waiting = self.lock();
        if waiting.is_empty() {
            return None;
        }
        let named: Vec<&str> = waiting.iter().take(Self::NAMED).map(Did::as_str).collect();
        let more = if waiting.len() > Self::NAMED {
            ", …"
        } else {
            ""
        };
        let (noun, verb) = match waiting.len() {
            1 => ("repository", "waits"),
            _ => ("repositories", "wait"),
        };
        Some(format!(
            "{} {noun} {verb} for resynchronisation: {}{more}",
            waiting.len(),
            named.join(", ")
        ))
    }
}

/// What resynchronising works with.
pub(super) struct Resync {
    pub keys: Arc<SigningKeys>,
    pub chains: Arc<Chains>,
    pub catalog: Arc<dyn CatalogWrite>,
    pub ingestor: Ingestor,
    pub waiting: Arc<Waiting>,
    /// The source the records are counted under in metrics.
    pub source: &'static str,
}

/// Where repositories to resynchronise are sent.
pub(super) struct ResyncQueue {
    requests: mpsc::Sender<Did>,
    chains: Arc<Chains>,
    waiting: Arc<Waiting>,
}

impl ResyncQueue {
    /// Starts the background resynchronisation.
    pub fn start(resync: Resync) -> ResyncQueue {
        let (requests, received) = mpsc::channel(MAX_WAITING);
        let queue = ResyncQueue {
            requests,
            chains: Arc::clone(&resync.chains),
            waiting: Arc::clone(&resync.waiting),
        };
        tokio::spawn(run(Arc::new(resync), received));
        queue
    }

    /// Asks for the repository to be read whole; it is already marked desynchronized.
    pub fn request(&self, did: Did) {
        self.waiting.lock().insert(did.clone());
        if let Err(error) = self.requests.try_send(did) {
            let did = match error {
                mpsc::error::TrySendError::Full(did) | mpsc::error::TrySendError::Closed(did) => {
                    did
                }
            };
            tracing::warn!(%did, "too many repositories wait for resynchronisation; its chain begins again");
            self.waiting.lock().remove(&did);
            self.chains.forget(&did);
        }
    }
}

async fn run(resync: Arc<Resync>, mut received: mpsc::Receiver<Did>) {
    let slots = Arc::new(Semaphore::new(AT_ONCE));
    while let Some(did) = received.recv().await {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let resync = Arc::clone(&resync);
        tokio::spawn(async move {
            resync.repository(&did).await;
            resync.waiting.lock().remove(&did);
            drop(slot);
        });
    }
}

impl Resync {
    /// Resynchronises one repository, trying again a few times (and reading it again when a
    /// newer commit came meanwhile); when it cannot, the repository's chain begins again at
    /// its next commit.
    async fn repository(&self, did: &Did) {
        let metrics = self.ingestor.metrics();
        let mut pause = FIRST_PAUSE;
        for attempt in 1..=ATTEMPTS {
            match self.read_and_replace(did).await {
                Ok(true) => {
                    metrics.resyncs.get_or_create(&outcome("done")).inc();
                    return;
                }
                Ok(false) if attempt < ATTEMPTS => {
                    tracing::info!(%did, "a newer commit came while the repository was read; reading it again");
                }
                Ok(false) => {
                    tracing::warn!(%did, "the repository kept moving while it was read; its chain begins again");
                }
                Err(error) if attempt == ATTEMPTS => {
                    tracing::warn!(%did, "resynchronisation failed, its chain begins again: {error}");
                }
                Err(error) => {
                    tracing::info!(%did, attempt, "resynchronisation failed, trying again: {error}");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
            }
        }
        metrics.resyncs.get_or_create(&outcome("failed")).inc();
        self.chains.forget(did);
    }

    /// Whether the chain continues from the copy read (`false`: it is already behind).
    async fn read_and_replace(&self, did: &Did) -> Result<bool, String> {
        let pds = self
            .keys
            .resolver()
            .pds_of(did)
            .await
            .map_err(|e| e.to_string())?;
        let http = svc_atproto::http_client(svc_atproto::REQUEST_TIMEOUT.saturating_mul(4))
            .map_err(|e| e.to_string())?;
        let car = Xrpc::new(http)
            .with_answer_limit(MAX_REPOSITORY_BYTES)
            .query_bytes(&pds, Method::GET_REPO, &[("did", did.as_str())])
            .await
            .map_err(|e| e.to_string())?;
        let repository = verify_repository(Some(&self.keys), &car, Some(did), |c| {
            self.ingestor.wants(c)
        })
        .await
        .map_err(|error: Unverified| {
            self.ingestor.metrics().count_unverified(error.reason);
            format!("{} ({})", error, error.reason.label())
        })?;
        let changes = repository
            .records
            .into_iter()
            .filter_map(|record| match self.ingestor.prepare(record) {
                Prepared::Change(change) => Some(change),
                Prepared::Invalid => {
                    self.ingestor.metrics().count(self.source, "invalid", 1);
                    None
                }
                Prepared::Ignored => None,
            })
            .collect();
        let report = self
            .catalog
            .replace_repository(did.clone(), repository.rev.clone(), changes)
            .await
            .map_err(|e| e.to_string())?;
        self.ingestor.metrics().count_report(self.source, &report);
        tracing::info!(%did, rev = %repository.rev, applied = report.applied, "repository resynchronised");
        Ok(self
            .chains
            .resynchronized(did, repository.rev, repository.data))
    }
}

fn outcome(outcome: &'static str) -> crate::metrics::OutcomeLabel {
    crate::metrics::OutcomeLabel { outcome }
}
