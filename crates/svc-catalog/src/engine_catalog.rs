//! The `Catalog` over any engine: writes go to the rules' writer thread, reads to the engine's
//! read side by the engine's number for each query. A process writes only while it holds the
//! catalog's writer lock; until then (an indexer standing by) or for good (a query replica)
//! it follows the replication log to keep its change clock exact.

use crate::engine::{Engine, EngineReads};
use crate::keys_column::QueryIds;
use crate::replication_log::{Follower, LogSource};
use crate::writer::{WriterHandle, spawn_writer};
use crate::{
    AccountStatus, ApplyReport, CatalogError, CatalogFuture, CatalogRead, CatalogResult,
    CatalogRole, CatalogWrite, Change, ChangeClock, CursorPosition, Item, KindCounts, LabelBatch,
    LabelReport, LabelView, Page, PageRequest, PageWriter, RecordChange, RepositoryHead,
    ResyncEntry, ResyncSummary, Standing, StreamBounds, Subject, SyncWrites,
};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;
use svc_spec::{IndexSet, QueryId};
use svc_syntax::UnixMillis;
use svc_syntax::{AtUri, Did, Tid};
use tokio::sync::watch;

/// How often an indexer standing by tries the writer lock.
const STANDBY_RETRY: Duration = Duration::from_secs(1);

/// A catalog on one engine: its writer thread under the rules (once this process holds the
/// writer lock), and its reads.
pub struct EngineCatalog<R> {
    shared: Arc<Shared>,
    reads: R,
}

/// What the writer's start changes, seen by every request.
struct Shared {
    qids: Arc<RwLock<QueryIds>>,
    clock: Arc<ChangeClock>,
    writer: OnceLock<WriterHandle>,
    writing: watch::Sender<bool>,
    /// Stops the change-log follower (when this process becomes the writer).
    following: OnceLock<watch::Sender<bool>>,
    /// The follower's last propagation delay, milliseconds (-1: none yet).
    follow_delay_ms: Arc<AtomicI64>,
}

impl Shared {
    fn new(qids: QueryIds) -> Arc<Shared> {
        Arc::new(Shared {
            qids: Arc::new(RwLock::new(qids)),
            clock: Arc::new(ChangeClock::default()),
            writer: OnceLock::new(),
            writing: watch::Sender::new(false),
            following: OnceLock::new(),
            follow_delay_ms: Arc::new(AtomicI64::new(-1)),
        })
    }

    /// Readies the engine's storage (see `spawn_writer`) and starts its writer; every cached
    /// answer is dropped, as the follower is no longer what keeps the clock.
    fn become_writer<E: Engine>(&self, engine: E, queries: &IndexSet) -> CatalogResult<()> {
        let (handle, ids) = spawn_writer(engine, queries, Arc::clone(&self.clock))?;
        *self.qids.write().unwrap_or_else(|p| p.into_inner()) = ids;
        if let Some(stop) = self.following.get() {
            let _ = stop.send(true);
        }
        self.clock.touch_all();
        let _ = self.writer.set(handle);
        self.writing.send_replace(true);
        Ok(())
    }

    /// Follows the replication log on a thread of its own until this process becomes the writer.
    fn follow(&self, source: Arc<dyn LogSource>) -> CatalogResult<()> {
        let (stop, stopped) = watch::channel(false);
        let _ = self.following.set(stop);
        let follower = Follower::new(
            Arc::clone(&self.qids),
            Arc::clone(&self.clock),
            Arc::clone(&self.follow_delay_ms),
        );
        std::thread::Builder::new()
            .name("catalog-follower".into())
            .spawn(move || {
                let runtime = match crate::runtime::thread_runtime() {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        tracing::error!("the change-log follower cannot start: {error}");
                        return;
                    }
                };
                runtime.block_on(follower.run(source, stopped));
            })
            .map_err(|e| CatalogError::Storage(e.to_string()))?;
        Ok(())
    }
}

impl<R: EngineReads> EngineCatalog<R> {
    /// As an indexer: with the writer lock, readies the storage and starts the writer on the
    /// calling thread; without it, stands by (serving reads, following the replication log) and
    /// takes over as soon as the lock is free.
    pub(crate) fn start<E: Engine>(
        mut engine: E,
        queries: &IndexSet,
        reads: R,
        log: Arc<dyn LogSource>,
    ) -> CatalogResult<EngineCatalog<R>> {
        let shared = Shared::new(engine.query_ids());
        if engine.try_lock_writer()? {
            shared.become_writer(engine, queries)?;
            return Ok(EngineCatalog { shared, reads });
        }
        tracing::info!(
            "standing by: another indexer writes this catalog; taking over when it stops"
        );
        shared.follow(log)?;
        let standby = Arc::clone(&shared);
        let queries = queries.clone();
        std::thread::Builder::new()
            .name("catalog-standby".into())
            .spawn(move || stand_by(engine, &queries, &standby))
            .map_err(|e| CatalogError::Storage(e.to_string()))?;
        Ok(EngineCatalog { shared, reads })
    }

    /// As a query replica: reads only, following the replication log.
    pub(crate) fn reader(
        qids: QueryIds,
        reads: R,
        log: Arc<dyn LogSource>,
    ) -> CatalogResult<EngineCatalog<R>> {
        let shared = Shared::new(qids);
        shared.follow(log)?;
        Ok(EngineCatalog { shared, reads })
    }

    fn qid(&self, query: &QueryId) -> CatalogResult<i64> {
        self.shared
            .qids
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .qid(query)
    }

    fn writer(&self) -> CatalogResult<&WriterHandle> {
        self.shared.writer.get().ok_or(CatalogError::NotWriter)
    }
}

fn stand_by<E: Engine>(mut engine: E, queries: &IndexSet, shared: &Shared) {
    let mut failing = false;
    loop {
        std::thread::sleep(STANDBY_RETRY);
        match engine.try_lock_writer() {
            Ok(true) => break,
            Ok(false) => failing = false,
            Err(error) => {
                if !failing {
                    tracing::warn!("trying the catalog's writer lock: {error}");
                }
                failing = true;
            }
        }
    }
    tracing::info!("took over as the catalog's writer");
    if let Err(error) = shared.become_writer(engine, queries) {
        tracing::error!("taking over as the catalog's writer failed: {error}");
    }
}

/// A call to the writer thread, or `NotWriter` while this process does not hold the lock.
macro_rules! through_writer {
    ($catalog:expr, $call:ident($($arg:expr),*)) => {
        match $catalog.writer() {
            Ok(writer) => writer.$call($($arg),*),
            Err(error) => Box::pin(async { Err(error) }),
        }
    };
}

/// A read by the engine's number for the query.
macro_rules! by_query_number {
    ($catalog:expr, $query:expr, $call:ident($($arg:expr),*)) => {
        match $catalog.qid(&$query) {
            Ok(qid) => $catalog.reads.$call(qid, $($arg),*),
            Err(error) => Box::pin(async { Err(error) }),
        }
    };
}

impl<R: EngineReads> CatalogRead for EngineCatalog<R> {
    fn list(&self, query: QueryId, key: String, page: PageRequest) -> CatalogFuture<'_, Page> {
        by_query_number!(self, query, list(key, page))
    }

    fn write_list(
        &self,
        query: QueryId,
        key: String,
        page: PageRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        by_query_number!(self, query, write_list(key, page, writer))
    }

    fn count_keys(&self, query: QueryId, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>> {
        by_query_number!(self, query, count_keys(keys))
    }

    fn keys_under(
        &self,
        query: QueryId,
        prefixes: Vec<String>,
        limit: usize,
    ) -> CatalogFuture<'_, Vec<crate::KeyCounts>> {
        by_query_number!(self, query, keys_under(prefixes, limit))
    }

    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts> {
        self.reads.kind_counts()
    }

    fn activity(&self, since: UnixMillis) -> CatalogFuture<'_, crate::Activity> {
        self.reads.activity(since.0.div_euclid(60_000))
    }

    fn cursors(&self) -> CatalogFuture<'_, Vec<CursorPosition>> {
        self.reads.cursors()
    }

    fn get(&self, uri: AtUri) -> CatalogFuture<'_, Option<Item>> {
        self.reads.get(uri)
    }

    fn get_many(&self, uris: Vec<String>) -> CatalogFuture<'_, Vec<Option<Item>>> {
        self.reads.get_many(uris)
    }

    fn write_records(
        &self,
        uris: Vec<String>,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        self.reads.write_records(uris, writer)
    }

    fn held(&self, uris: Vec<String>) -> CatalogFuture<'_, Vec<String>> {
        self.reads.held(uris)
    }

    fn write_repository_records(
        &self,
        slice: crate::RepositorySlice,
        after: Option<String>,
        limit: usize,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        self.reads
            .write_repository_records(slice, after, limit, writer)
    }

    fn takedown(&self, subject: String) -> CatalogFuture<'_, Standing> {
        self.reads.takedown(subject)
    }

    fn labels(&self, subjects: Vec<String>, limit: usize) -> CatalogFuture<'_, Vec<LabelView>> {
        self.reads.labels(subjects, limit)
    }

    fn search(
        &self,
        request: crate::SearchRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        self.reads.search(request, writer)
    }

    fn indexer_heartbeat(&self) -> CatalogFuture<'_, Option<UnixMillis>> {
        self.reads.indexer_heartbeat()
    }

    fn changes_after(&self, seq: i64, limit: usize) -> CatalogFuture<'_, Vec<RecordChange>> {
        Box::pin(async move {
            let rows = self.reads.changes_after(seq, limit).await?;
            let ids = self.shared.qids.read().unwrap_or_else(|p| p.into_inner());
            Ok(rows.into_iter().map(|row| row.decode(&ids)).collect())
        })
    }

    fn change_bounds(&self) -> CatalogFuture<'_, StreamBounds> {
        self.reads.change_bounds()
    }

    fn clock(&self) -> &ChangeClock {
        &self.shared.clock
    }
}

impl<R: EngineReads> CatalogWrite for EngineCatalog<R> {
    fn apply_synced(
        &self,
        changes: Vec<Change>,
        cursor: Option<CursorPosition>,
        sync: SyncWrites,
    ) -> CatalogFuture<'_, ApplyReport> {
        through_writer!(self, apply(changes, cursor, sync))
    }

    fn resync_due(&self, now: UnixMillis, limit: usize) -> CatalogFuture<'_, Vec<ResyncEntry>> {
        through_writer!(self, sync_read(move |engine| engine.resync_due(now, limit)))
    }

    fn resync_summary(&self) -> CatalogFuture<'_, ResyncSummary> {
        through_writer!(self, sync_read(|engine| engine.resync_summary()))
    }

    fn repository_heads(&self, limit: usize) -> CatalogFuture<'_, Vec<RepositoryHead>> {
        through_writer!(
            self,
            sync_read(move |engine| engine.repository_heads(limit))
        )
    }

    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>> {
        self.reads.cursor(source)
    }

    fn replace_repository(
        &self,
        did: Did,
        rev: Tid,
        records: Vec<Change>,
        applied_before: Vec<AtUri>,
        sync: SyncWrites,
    ) -> CatalogFuture<'_, ApplyReport> {
        through_writer!(
            self,
            replace_repository(did, rev, records, applied_before, sync)
        )
    }

    fn set_account(&self, did: Did, status: AccountStatus) -> CatalogFuture<'_, bool> {
        through_writer!(self, set_account(did, status))
    }

    fn take_down(&self, subject: Subject, reference: Option<String>) -> CatalogFuture<'_, bool> {
        let state = crate::engine::TakedownState::Applied { reference };
        through_writer!(self, set_takedown(subject, state))
    }

    fn lift_takedown(&self, subject: Subject) -> CatalogFuture<'_, bool> {
        through_writer!(
            self,
            set_takedown(subject, crate::engine::TakedownState::Lifted)
        )
    }

    fn apply_labels(&self, batch: LabelBatch) -> CatalogFuture<'_, LabelReport> {
        through_writer!(self, apply_labels(batch))
    }

    fn expire_labels(&self, now: UnixMillis) -> CatalogFuture<'_, usize> {
        through_writer!(self, expire_labels(now))
    }

    fn forget_labelers(&self, keep: Vec<svc_syntax::Did>) -> CatalogFuture<'_, Vec<String>> {
        through_writer!(self, forget_labelers(keep))
    }

    fn begin_bulk(&self) -> CatalogFuture<'_, bool> {
        through_writer!(self, begin_bulk())
    }

    fn finish_bulk(&self, cursor: Option<CursorPosition>) -> CatalogFuture<'_, ApplyReport> {
        through_writer!(self, finish_bulk(cursor))
    }
}

impl<R: EngineReads> CatalogRole for EngineCatalog<R> {
    fn writer_started(&self) -> CatalogFuture<'_, ()> {
        let mut writing = self.shared.writing.subscribe();
        Box::pin(async move {
            writing
                .wait_for(|writing| *writing)
                .await
                .map_err(|_| CatalogError::Closed)?;
            Ok(())
        })
    }

    fn is_writer(&self) -> bool {
        self.shared.writer.get().is_some()
    }

    fn heartbeat(&self, keep_changes: Duration) -> CatalogFuture<'_, ()> {
        through_writer!(self, heartbeat(keep_changes))
    }

    fn change_log_delay(&self) -> Option<Duration> {
        let delay = self.shared.follow_delay_ms.load(Ordering::Relaxed);
        u64::try_from(delay).ok().map(Duration::from_millis)
    }
}
