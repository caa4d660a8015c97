//! Reading whole the repositories the catalog owes a read: those whose chain broke, whose
//! commit could not be checked for a reason a retry could undo (the author's DID document
//! unreachable), and those a backfill listed. The queue lives in the catalog
//! (`svc_catalog::SyncWrites`), written with the cursor that moved past the event that put a
//! repository there, so a crash loses nothing; this reads it in small pages, so memory holds
//! only the reads under way whatever its size.
//!
//! Each repository is read from its own PDS, verified, and the catalog's records of it made
//! exactly those the copy proves, in the transaction that takes it out of the queue (and
//! stores its chain's new head). A read that fails for a reason a retry could undo is tried
//! again with exponential backoff and jitter (the peer's `Retry-After` honoured), without end;
//! a verdict on the data (a copy that does not verify, a DID the directory does not know, a
//! repository not found) takes it out, counted and logged. Reads are bounded in flight overall
//! and per host.

use crate::firehose::chains::Chains;
use crate::host_turns::HostTurns;
use crate::ingest::{Ingestor, Prepared};
use crate::peer::Client;
use crate::read_budget::{DEFAULT_READ_MEMORY_MB, ReadBudget};
use crate::repository_apply::apply_whole;
use crate::repository_read::AccountSaid;
use crate::repository_read::{ReadFailure, RepositoryCopy, RepositoryReader};
pub use crate::resync_progress::ResyncProgress;
use crate::signing_keys::SigningKeys;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svc_atproto::Xrpc;
use svc_catalog::{
    AccountStatus, ApplyReport, CatalogWrite, RepositoryHead, ResyncEntry, ResyncPostponed,
    ResyncRetry, SyncWrites,
};
use svc_syntax::{Did, UnixMillis};
use tokio::sync::{Notify, Semaphore, watch};

/// Repositories read at once, overall.
const AT_ONCE: usize = 16;
/// The first wait after a failed read; each failure doubles it, up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between two reads of one repository: a peer back from an outage is read
/// again within this.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// The queue is read at least this often.
const POLL: Duration = Duration::from_secs(1);
/// The queue is counted this often: a count walks the whole queue, on the writer's thread.
const COUNT_EVERY: Duration = Duration::from_secs(5);
/// Entries read from the queue at a poll beyond those in flight: those of busy hosts are
/// passed over, so what waits behind them is found.
const WINDOW: usize = 256;
/// The longest one repository's read may take in all, listing pages included: a peer that
/// answers just fast enough for each request cannot hold a slot for longer.
const WHOLE_READ_DEADLINE: Duration = Duration::from_secs(120);
/// A read that failed for a reason a retry could undo holds its slot this long more: a peer
/// that fails at once (a refused connection, an instant 503) is asked at most so often per
/// slot, and the queue's writes stay few.
const FAILURE_PAUSE: Duration = Duration::from_millis(100);
/// A read that succeeds after failures moves up what waits after failures (a peer is back),
/// at most this often.
const HURRY_EVERY: Duration = Duration::from_secs(2);

/// Why a repository is queued (the queue's `reason`).
pub mod reasons {
    /// Its chain of commits broke.
    pub const CHAIN: &str = "chain";
    /// A commit's author key could not be read.
    pub const KEY: &str = "key";
    /// Its host says it lost the repository's chain, or a `#sync` moved it.
    pub const HOST: &str = "host";
    /// A backfill listed it.
    pub const BACKFILL: &str = "backfill";
    /// An `#account` event said it was deleted: its records are hidden until its own PDS or
    /// DID document confirms it (then removed) or shows it alive (then read again).
    pub const DELETED: &str = "deleted";
    /// An `#account` event said it is active again: read again for what changed meanwhile.
    pub const REACTIVATED: &str = "reactivated";

    /// The reason as a metric's label (a queue written by hand may hold anything).
    pub fn label(reason: &str) -> &'static str {
        [CHAIN, KEY, HOST, BACKFILL, DELETED, REACTIVATED]
            .into_iter()
            .find(|known| *known == reason)
            .unwrap_or("other")
    }
}

/// What reading the queue works with; shared by the live source (whose chains it continues)
/// and the backfill (which fills it).
pub struct Resync {
    pub(crate) keys: Arc<SigningKeys>,
    pub(crate) chains: Arc<Chains>,
    reader: RepositoryReader,
    catalog: Arc<dyn CatalogWrite>,
    ingestor: Ingestor,
    progress: Arc<ResyncProgress>,
    /// The server a backfill lists from: asked for a repository whose DID document cannot
    /// be read or names no PDS.
    fallback: Mutex<Option<String>>,
    wake: Notify,
    slots: Arc<Semaphore>,
    turns: HostTurns,
    in_flight: Mutex<HashSet<Did>>,
    /// When a window of busy hosts' repositories was last moved later.
    passed_over: Mutex<Option<Instant>>,
    /// When what waits after failures was last moved up.
    hurried: Mutex<Option<Instant>>,
}

/// What reading one repository came to.
enum Outcome {
    Read,
    /// A newer commit came while it was read: read it again soon.
    Moved,
    /// Its host is reading all it may: passed over until it has a turn.
    HostBusy,
    /// A deletion was to be confirmed, and the account's own peers say this of it.
    Account(AccountStatus),
    Failed(ReadFailure),
}

impl Resync {
    /// `plc`: the directory the authors' DID documents are read from; `verify`: whole
    /// repositories are verified (else listed, unverified); `collections`: what is read.
    /// The memory every whole read in flight shares, in bytes (else the default's).
    pub fn with_read_memory(mut self, bytes: usize) -> Resync {
        self.reader.budget = ReadBudget::new(bytes, self.ingestor.shared_metrics());
        self
    }

    pub fn new(
        plc: &str,
        reach: svc_atproto::Reach,
        verify: bool,
        collections: Vec<String>,
        catalog: Arc<dyn CatalogWrite>,
        ingestor: Ingestor,
        progress: Arc<ResyncProgress>,
    ) -> Result<Resync, svc_atproto::AtprotoError> {
        let http = svc_atproto::http_client(svc_atproto::REQUEST_TIMEOUT)?;
        let web = reach.client(svc_atproto::REQUEST_TIMEOUT)?;
        let keys = Arc::new(SigningKeys::new(
            svc_atproto::Resolver::new(http, plc).reaching(reach, web),
        ));
        let whole_read = svc_atproto::REQUEST_TIMEOUT.saturating_mul(4);
        let network_client = Client::new(Xrpc::new(reach.client(whole_read)?), "");
        let operator_client = Client::new(Xrpc::new(svc_atproto::http_client(whole_read)?), "");
        let budget = ReadBudget::new(DEFAULT_READ_MEMORY_MB << 20, ingestor.shared_metrics());
        Ok(Resync {
            reader: RepositoryReader {
                keys: Arc::clone(&keys),
                client: network_client,
                operator_client,
                reach,
                verify,
                collections,
                budget,
            },
            keys,
            chains: Arc::new(Chains::default()),
            catalog,
            ingestor,
            progress,
            fallback: Mutex::new(None),
            wake: Notify::new(),
            slots: Arc::new(Semaphore::new(AT_ONCE)),
            turns: HostTurns::default(),
            in_flight: Mutex::new(HashSet::new()),
            passed_over: Mutex::new(None),
            hurried: Mutex::new(None),
        })
    }

    /// The backfill's skipped repositories, which readiness names.
    pub(crate) fn skips(&self) -> &crate::readiness::BackfillSkips {
        self.ingestor.writes().backfill_skips()
    }

    pub(crate) fn ingestor_metrics(&self) -> &crate::IngestMetrics {
        self.ingestor.metrics()
    }

    pub fn progress(&self) -> &Arc<ResyncProgress> {
        &self.progress
    }

    /// The server a backfill lists from, asked when a repository's own PDS cannot be found.
    pub fn set_fallback(&self, server: &str) {
        *lock(&self.fallback) = Some(server.trim_end_matches('/').to_string());
    }

    /// Something was queued: read the queue now rather than at the next poll.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Reads the queue until shutdown.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            if let Err(error) = self.poll().await {
                tracing::warn!("reading the resynchronisation queue failed; waiting: {error}");
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(POLL) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// Notes the queue's state and starts reading what is due, as far as slots allow.
    async fn poll(self: &Arc<Self>) -> Result<(), svc_catalog::CatalogError> {
        if !self.progress.counted_within(COUNT_EVERY) {
            let summary = self.catalog.resync_summary().await?;
            let metrics = self.ingestor.metrics();
            metrics.resync_waiting.set(summary.waiting as i64);
            self.progress.observed(summary);
        }
        let free = self.slots.available_permits();
        if free == 0 {
            return Ok(());
        }
        let busy = lock(&self.in_flight).len();
        let due = self
            .catalog
            .resync_due(UnixMillis::now(), free + busy + WINDOW)
            .await?;
        let mut waiting_on_busy_hosts = Vec::new();
        for entry in due {
            if lock(&self.in_flight).contains(&entry.did) {
                continue;
            }
            if self.turns.is_busy(&entry.did) {
                waiting_on_busy_hosts.push(entry.did);
                continue;
            }
            let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
                break;
            };
            lock(&self.in_flight).insert(entry.did.clone());
            let resync = Arc::clone(self);
            tokio::spawn(async move {
                if !resync.settle(&entry).await {
                    tokio::time::sleep(FAILURE_PAUSE).await;
                }
                lock(&resync.in_flight).remove(&entry.did);
                drop(slot);
                resync.wake();
            });
        }
        if self.slots.available_permits() > 0 {
            self.pass_over(waiting_on_busy_hosts).await;
        }
        Ok(())
    }

    /// Slots are free and what is due is of busy hosts only: moved later, so that the
    /// entries behind it come into the window (at most once a poll, one write).
    async fn pass_over(&self, waiting: Vec<Did>) {
        if waiting.is_empty() {
            return;
        }
        {
            let mut passed = lock(&self.passed_over);
            if passed.is_some_and(|at| at.elapsed() < POLL) {
                return;
            }
            *passed = Some(Instant::now());
        }
        let postponed = waiting
            .into_iter()
            .map(|did| ResyncPostponed {
                did,
                // About the longest wait after failures: long enough for the window to move
                // on, and for a busy host's reads to end.
                due: after(backoff(u32::MAX)),
            })
            .collect();
        self.store(SyncWrites {
            postponed,
            ..SyncWrites::default()
        })
        .await;
    }

    /// Reads one repository and settles its entry: out of the queue, or back with a later
    /// time; `false` when the read failed for a reason a retry could undo.
    async fn settle(&self, entry: &ResyncEntry) -> bool {
        let metrics = self.ingestor.metrics();
        let did = &entry.did;
        let failure = match self.read(entry).await {
            Outcome::Read => {
                metrics.resyncs.get_or_create(&outcome("done")).inc();
                self.progress.read.fetch_add(1, Ordering::Relaxed);
                self.progress.settled();
                if entry.attempts > 0 {
                    self.hurry().await;
                }
                return true;
            }
            Outcome::Moved => {
                tracing::info!(%did, "a newer commit came while the repository was read; reading it again");
                let retry = ResyncRetry {
                    did: did.clone(),
                    due: after(FIRST_WAIT),
                    error: "a newer commit came while it was read".into(),
                };
                self.store(SyncWrites {
                    retried: vec![retry],
                    ..SyncWrites::default()
                })
                .await;
                return true;
            }
            // It stays due, and is passed over while its host is busy.
            Outcome::HostBusy => return true,
            Outcome::Account(status) => return self.settle_account(entry, status).await,
            Outcome::Failed(failure) => failure,
        };
        if failure.transient {
            self.retry_later(entry, &failure).await;
        } else {
            self.refuse(entry, &failure).await;
        }
        !failure.transient
    }

    /// A read failed before and succeeds now: the peers of what waits after failures may be
    /// back too, so the longest-waiting of them are tried now rather than at the end of
    /// their backoff (at most every [`HURRY_EVERY`]; a peer still down fails them again at
    /// once, and they go back to their schedule, one attempt further).
    async fn hurry(&self) {
        {
            let mut hurried = lock(&self.hurried);
            if hurried.is_some_and(|at| at.elapsed() < HURRY_EVERY) {
                return;
            }
            *hurried = Some(Instant::now());
        }
        self.store(SyncWrites {
            hurry: Some(UnixMillis::now()),
            ..SyncWrites::default()
        })
        .await;
        self.wake();
    }

    async fn retry_later(&self, entry: &ResyncEntry, failure: &ReadFailure) {
        let did = &entry.did;
        let metrics = self.ingestor.metrics();
        metrics.resyncs.get_or_create(&outcome("retried")).inc();
        let reason = reasons::label(&entry.reason);
        metrics
            .resync_retries
            .get_or_create(&crate::metrics::ReasonLabel { reason })
            .inc();
        let wait = backoff(entry.attempts).max(failure.retry_after.unwrap_or_default());
        // Once per repository, not once per attempt.
        if entry.attempts == 0 {
            tracing::warn!(%did, reason = %entry.reason, "cannot read the repository now, asking again later until it succeeds: {failure}");
        } else {
            tracing::debug!(%did, attempts = entry.attempts + 1, "reading the repository failed again: {failure}");
        }
        let retry = ResyncRetry {
            did: did.clone(),
            due: after(wait),
            error: failure.message.clone(),
        };
        self.store(SyncWrites {
            retried: vec![retry],
            ..SyncWrites::default()
        })
        .await;
    }

    async fn refuse(&self, entry: &ResyncEntry, failure: &ReadFailure) {
        let did = &entry.did;
        let metrics = self.ingestor.metrics();
        if let Some(reason) = failure.refused {
            metrics.count_unverified(reason);
        }
        metrics.resyncs.get_or_create(&outcome("refused")).inc();
        self.progress.refused.fetch_add(1, Ordering::Relaxed);
        self.progress.settled();
        if entry.reason == reasons::BACKFILL {
            self.ingestor.writes().backfill_skips().skipped(did);
            tracing::warn!(%did, "backfill skipped a repository: {failure}");
        } else {
            tracing::warn!(%did, "the repository cannot be read whole, its chain begins again: {failure}");
        }
        self.chains.forget(did);
        self.store(SyncWrites {
            done: vec![did.clone()],
            forgotten: vec![did.clone()],
            ..SyncWrites::default()
        })
        .await;
    }

    /// Writes what settles an entry, waiting out a failing catalog (a full disk) meanwhile:
    /// the entry stays queued until this lands, so a crash in between reads it again.
    async fn store(&self, sync: SyncWrites) {
        let mut wait = FIRST_WAIT;
        loop {
            match self
                .catalog
                .apply_synced(Vec::new(), None, sync.clone())
                .await
            {
                Ok(_) => return,
                Err(error) => {
                    tracing::error!(
                        "writing the resynchronisation queue failed; retrying: {error}"
                    );
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_WAIT);
                }
            }
        }
    }

    async fn read(&self, entry: &ResyncEntry) -> Outcome {
        let did = &entry.did;
        let fallback = match entry.reason.as_str() {
            reasons::BACKFILL => lock(&self.fallback).clone(),
            _ => None,
        };
        let confirming = entry.reason == reasons::DELETED;
        let pds = match self.reader.pds(did, fallback.as_deref()).await {
            Ok(pds) => pds,
            Err(failure) => return failed(confirming, failure),
        };
        let Some(turn) = self.turns.try_take(did, &pds.url) else {
            return Outcome::HostBusy;
        };
        let fetched =
            match tokio::time::timeout(WHOLE_READ_DEADLINE, self.reader.fetch(did, &pds)).await {
                Ok(Ok(fetched)) => fetched,
                Ok(Err(failure)) => return failed(confirming, failure),
                Err(_) => {
                    return Outcome::Failed(ReadFailure {
                        message: format!(
                            "{}: the read took longer than {} s in all",
                            pds.url,
                            WHOLE_READ_DEADLINE.as_secs()
                        ),
                        transient: true,
                        retry_after: None,
                        refused: None,
                        account: None,
                    });
                }
            };
        // The host is done with; waiting for memory to verify the copy is not its time.
        drop(turn);
        let (copy, _memory) = match self.reader.copy(did, fetched).await {
            Ok(copy) => copy,
            Err(failure) => return failed(confirming, failure),
        };
        if confirming {
            // Its PDS serves it: shown again, then made what the PDS holds. A crash between
            // the two leaves it queued, and it is read again.
            if let Err(error) = self
                .catalog
                .set_account(did.clone(), AccountStatus::Active)
                .await
            {
                return Outcome::Failed(catalog_failure(&error));
            }
        }
        match self.apply(did, copy).await {
            Ok(true) => Outcome::Read,
            Ok(false) => Outcome::Moved,
            Err(error) => Outcome::Failed(catalog_failure(&error)),
        }
    }

    /// A deletion confirmed by the account's own peers (or another status they give):
    /// stored, then out of the queue; `false` when the catalog could not be written.
    async fn settle_account(&self, entry: &ResyncEntry, status: AccountStatus) -> bool {
        let did = &entry.did;
        if let Err(error) = self.catalog.set_account(did.clone(), status.clone()).await {
            self.retry_later(entry, &catalog_failure(&error)).await;
            return false;
        }
        tracing::info!(%did, ?status, "the account's own PDS or DID document confirms its status");
        let metrics = self.ingestor.metrics();
        metrics.resyncs.get_or_create(&outcome("account")).inc();
        self.progress.settled();
        self.store(SyncWrites {
            done: vec![did.clone()],
            ..SyncWrites::default()
        })
        .await;
        true
    }

    /// Makes the catalog hold the copy and takes the repository out of the queue, in one
    /// transaction; `false` when the chain moved past the copy while it was read.
    async fn apply(
        &self,
        did: &Did,
        copy: RepositoryCopy,
    ) -> Result<bool, svc_catalog::CatalogError> {
        let report = match copy {
            RepositoryCopy::Whole(repository) => {
                let (rev, data) = (repository.rev.clone(), repository.data.clone());
                if !self.chains.resynchronized(did, rev.clone(), data.clone()) {
                    return Ok(false);
                }
                let sync = SyncWrites {
                    heads: vec![RepositoryHead {
                        did: did.clone(),
                        rev: rev.clone(),
                        data: data.to_vec(),
                    }],
                    done: vec![did.clone()],
                    ..SyncWrites::default()
                };
                let applied =
                    apply_whole(self.catalog.as_ref(), &self.ingestor, &repository, sync).await?;
                self.progress
                    .records
                    .fetch_add(applied.records, Ordering::Relaxed);
                self.progress
                    .invalid
                    .fetch_add(applied.invalid, Ordering::Relaxed);
                self.ingestor
                    .metrics()
                    .count(SOURCE, "invalid", applied.invalid);
                let report = applied.report;
                tracing::info!(%did, %rev, applied = report.applied, "repository read whole");
                report
            }
            RepositoryCopy::Listed(records) => {
                let changes = self.prepare(records);
                let sync = SyncWrites {
                    done: vec![did.clone()],
                    ..SyncWrites::default()
                };
                self.catalog.apply_synced(changes, None, sync).await?
            }
        };
        self.ingestor.writes().succeeded();
        self.counted(&report);
        Ok(true)
    }

    fn prepare(&self, records: Vec<crate::event::CommitEvent>) -> Vec<svc_catalog::Change> {
        let mut changes = Vec::with_capacity(records.len());
        self.progress
            .records
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        for record in records {
            match self.ingestor.prepare(record) {
                Prepared::Change(change) => changes.push(change),
                Prepared::Invalid => {
                    self.progress.invalid.fetch_add(1, Ordering::Relaxed);
                    self.ingestor.metrics().count(SOURCE, "invalid", 1);
                }
                Prepared::Ignored => {}
            }
        }
        changes
    }

    fn counted(&self, report: &ApplyReport) {
        self.progress
            .applied
            .fetch_add(report.applied, Ordering::Relaxed);
        self.progress
            .stale
            .fetch_add(report.stale, Ordering::Relaxed);
        self.ingestor.metrics().count_report(SOURCE, report);
    }
}

/// The source name records read whole are counted under.
const SOURCE: &str = "resync";

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The wait after `attempts` failed reads: doubling from [`FIRST_WAIT`] up to [`MAX_WAIT`],
/// with jitter so that repositories that failed together are not asked again together.
fn backoff(attempts: u32) -> Duration {
    let base = FIRST_WAIT
        .saturating_mul(1 << attempts.min(16))
        .min(MAX_WAIT);
    let jitter = 0.5 + f64::from(svc_syntax::clock_noise() % 1000) / 1000.0;
    base.mul_f64(jitter)
}

/// What a failed read comes to: when a deletion is being confirmed, what the account's peers
/// say of the account settles it.
fn failed(confirming: bool, failure: ReadFailure) -> Outcome {
    match (confirming, &failure.account) {
        (true, Some(AccountSaid::Gone)) => Outcome::Account(AccountStatus::Deleted),
        (true, Some(AccountSaid::Inactive(status))) => {
            Outcome::Account(AccountStatus::Inactive((*status).to_string()))
        }
        _ => Outcome::Failed(failure),
    }
}

fn catalog_failure(error: &svc_catalog::CatalogError) -> ReadFailure {
    ReadFailure {
        message: format!("writing the catalog: {error}"),
        transient: true,
        retry_after: None,
        refused: None,
        account: None,
    }
}

fn after(wait: Duration) -> UnixMillis {
    UnixMillis(UnixMillis::now().0.saturating_add(wait.as_millis() as i64))
}

fn outcome(outcome: &'static str) -> crate::metrics::OutcomeLabel {
    crate::metrics::OutcomeLabel { outcome }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_a_cap_with_jitter() {
        for attempts in [0, 1, 3, 10, 40, u32::MAX] {
            let wait = backoff(attempts);
            let base = FIRST_WAIT
                .saturating_mul(1 << attempts.min(16))
                .min(MAX_WAIT);
            assert!(
                wait >= base / 2 && wait <= base.mul_f64(1.5),
                "{attempts}: {wait:?}"
            );
        }
        assert!(backoff(40) <= MAX_WAIT.mul_f64(1.5));
    }
}
