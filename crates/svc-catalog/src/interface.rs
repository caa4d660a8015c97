//! The catalog as its users see it, in three parts: what reads it (the server, every read
//! path), what writes it (the sources) and what the process's role in it is (writer lock,
//! heartbeat, following the replication log). Async so that a networked backend (PostgreSQL) fits
//! behind it; the embedded SQLite backend runs its work on blocking threads.

use crate::{
    AccountStatus, ApplyReport, Change, ChangeClock, CursorPosition, Item, KindCounts, LabelBatch,
    LabelReport, LabelView, Page, PageRequest, PageWriter, RecordChange, Refusal, RepositoryHead,
    ResyncEntry, ResyncSummary, SearchRequest, Standing, StreamBounds, Subject, SyncWrites,
};
use std::future::Future;
use std::pin::Pin;
use svc_spec::QueryId;
use svc_syntax::UnixMillis;
use svc_syntax::{AtUri, Did, Tid};

#[derive(Debug, Clone, thiserror::Error)]
pub enum CatalogError {
    #[error("storage: {0}")]
    Storage(String),
    #[error("unknown query {0}")]
    UnknownQuery(String),
    #[error("the catalog has shut down")]
    Closed,
    /// The storage cannot be reached (a database server down or restarting); worth retrying.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The store refused a value for what it holds (a data exception, a constraint, a
    /// program limit): that change's failure, never worth retrying as it is.
    #[error("storage refused the value ({}): {message}", reason.label())]
    Refused { reason: Refusal, message: String },
    /// This process does not write the catalog (a query replica, or an indexer standing by).
    #[error("this process does not write the catalog")]
    NotWriter,
}

pub type CatalogResult<T> = Result<T, CatalogError>;
pub type CatalogFuture<'a, T> = Pin<Box<dyn Future<Output = CatalogResult<T>> + Send + 'a>>;

/// Keys of a query with how many records each holds.
pub type KeyCounts = Vec<(String, u64)>;

/// Reading the catalog: pages, counts, single records and the indexer's heartbeat. All the
/// server holds.
pub trait CatalogRead: Send + Sync {
    /// A page of the records under one key of a query, in uri order.
    fn list(&self, query: QueryId, key: String, page: PageRequest) -> CatalogFuture<'_, Page>;

    /// The same page as [`CatalogRead::list`], handed to `writer` as it is read; returns what
    /// the writer wrote.
    fn write_list(
        &self,
        query: QueryId,
        key: String,
        page: PageRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>>;

    /// How many records are under each key of a query.
    fn count_keys(&self, query: QueryId, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>>;

    /// For each prefix, the keys of a query that begin with it, in key order, each with how
    /// many records are under it; at most `limit` for each prefix.
    fn keys_under(
        &self,
        query: QueryId,
        prefixes: Vec<String>,
        limit: usize,
    ) -> CatalogFuture<'_, Vec<KeyCounts>>;

    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts>;

    /// Where each source that wrote the catalog stands, by source name.
    fn cursors(&self) -> CatalogFuture<'_, Vec<CursorPosition>>;

    /// The record stored at a uri, if any and its account is active.
    fn get(&self, uri: AtUri) -> CatalogFuture<'_, Option<Item>>;

    /// The records stored at each uri, in order, in one read (the change stream's items, the
    /// explorer's links), as [`CatalogRead::get`] reads them.
    fn get_many(&self, uris: Vec<String>) -> CatalogFuture<'_, Vec<Option<Item>>>;

    /// The records stored at each uri (as [`CatalogRead::get`] reads them) handed to `writer`
    /// one at a time as they are read, in no set order; `total` is how many were found and
    /// `more` is false. Returns what the writer wrote.
    fn write_records(
        &self,
        uris: Vec<String>,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>>;

    /// Those of `uris` that name a record [`CatalogRead::get`] would read, found without
    /// reading the records (the explorer's links).
    fn held(&self, uris: Vec<String>) -> CatalogFuture<'_, Vec<String>>;

    /// One repository's records (or one collection's of it) in uri order, those after `after`
    /// (a uri), at most `limit`, handed to `writer` one at a time as they are read; none while
    /// its account is inactive (the explorer's author pages). `total` is how many were
    /// written and `more` whether more follow. Returns what the writer wrote.
    fn write_repository_records(
        &self,
        slice: crate::RepositorySlice,
        after: Option<String>,
        limit: usize,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>>;

    /// What stands on `subject` (a DID or a record's at-uri): the takedowns held on it, the
    /// operator's first, and whether the operator keeps it shown whatever labelers say.
    fn takedown(&self, subject: String) -> CatalogFuture<'_, Standing>;

    /// A page of the records whose words match the search, best match first (ties newest
    /// first), handed to `writer` with their labels; none of an account out of sight or taken
    /// down. `total` counts matches up to one past [`crate::SEARCH_COUNT_LIMIT`] (past it, a
    /// lower bound). A search that would run past its deadline fails.
    fn search(
        &self,
        request: SearchRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>>;

    /// The labels in force on any of `subjects` (DIDs and at-uris), `!takedown` aside, in
    /// (subject, labeler, value) order, at most `limit`.
    fn labels(&self, subjects: Vec<String>, limit: usize) -> CatalogFuture<'_, Vec<LabelView>>;

    /// The catalog's activity by minute from `since` on (at most a day and an hour back):
    /// changes streamed, and where each source stood.
    fn activity(&self, since: UnixMillis) -> CatalogFuture<'_, crate::Activity>;

    /// The indexer's last heartbeat.
    fn indexer_heartbeat(&self) -> CatalogFuture<'_, Option<UnixMillis>>;

    /// The change stream's changes numbered above `seq`, in order, at most `limit`.
    fn changes_after(&self, seq: i64, limit: usize) -> CatalogFuture<'_, Vec<RecordChange>>;

    /// The oldest change the stream keeps and the newest.
    fn change_bounds(&self) -> CatalogFuture<'_, StreamBounds>;

    /// Bumped after every commit for what it touched (by this process's writer, or read
    /// from the replication log); answers may be cached against it.
    fn clock(&self) -> &ChangeClock;
}

/// Writing the catalog: batches of changes with the cursor that covers them, account statuses
/// and bulk loads. Only a process holding the writer lock writes ([`CatalogError::NotWriter`]
/// otherwise).
pub trait CatalogWrite: Send + Sync {
    /// Applies a batch of changes in one transaction, with the cursor that covers them.
    /// An event older than the stored revision of its uri is counted stale and ignored.
    fn apply(
        &self,
        changes: Vec<Change>,
        cursor: Option<CursorPosition>,
    ) -> CatalogFuture<'_, ApplyReport> {
        self.apply_synced(changes, cursor, SyncWrites::default())
    }

    /// [`CatalogWrite::apply`], with what the batch says of the repositories'
    /// synchronisation (heads reached, repositories owed a whole read) in the same
    /// transaction as its cursor.
    fn apply_synced(
        &self,
        changes: Vec<Change>,
        cursor: Option<CursorPosition>,
        sync: SyncWrites,
    ) -> CatalogFuture<'_, ApplyReport>;

    /// Queued repositories due by `now`, soonest first, at most `limit`.
    fn resync_due(&self, now: UnixMillis, limit: usize) -> CatalogFuture<'_, Vec<ResyncEntry>>;

    /// The resynchronisation queue at a glance.
    fn resync_summary(&self) -> CatalogFuture<'_, ResyncSummary>;

    /// Stored heads of followed repositories, at most `limit`.
    fn repository_heads(&self, limit: usize) -> CatalogFuture<'_, Vec<RepositoryHead>>;

    /// Where a source stood after the last batch stored with its cursor: where it resumes.
    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>>;

    /// Makes a repository's records those of a verified copy of the whole repository at
    /// revision `rev`: `records` (one change per record) and `applied_before` (the uris of
    /// its records already applied, in earlier batches). In one transaction, each live record
    /// of the repository among neither is deleted at `rev`, then `records` are applied under
    /// the rules of `apply`; `sync` is written in the same transaction.
    fn replace_repository(
        &self,
        did: Did,
        rev: Tid,
        records: Vec<Change>,
        applied_before: Vec<AtUri>,
        sync: SyncWrites,
    ) -> CatalogFuture<'_, ApplyReport>;

    /// Records an account's status change, hiding, restoring or removing its records.
    /// Whether the account was hidden (inactive) before.
    fn set_account(&self, did: Did, status: AccountStatus) -> CatalogFuture<'_, bool>;

    /// Takes `subject` down: an account's records, present and future, or one record's, leave
    /// every answer, count and the change stream until [`CatalogWrite::lift_takedown`]; a
    /// takedown applied again keeps its subject down with the new reference. Whether it was
    /// taken down before.
    fn take_down(&self, subject: Subject, reference: Option<String>) -> CatalogFuture<'_, bool>;

    /// Lifts a takedown: what it hid is filed again, unless out of sight for another reason
    /// (an inactive account). Whether it was taken down.
    fn lift_takedown(&self, subject: Subject) -> CatalogFuture<'_, bool>;

    /// Stores one labeler's labels with its cursor (source `labeler:<did>`), in order: a
    /// label older than the one stored for its subject and value is stale; `!takedown` in
    /// force takes its subject down (as [`CatalogWrite::take_down`], on the labeler's behalf),
    /// and its negation or expiry lifts that.
    fn apply_labels(&self, batch: LabelBatch) -> CatalogFuture<'_, LabelReport>;

    /// Removes labels whose expiry is at or before `now`, lifting expired takedowns; how
    /// many (at most a sweep's worth: call again while it returns more than none).
    fn expire_labels(&self, now: UnixMillis) -> CatalogFuture<'_, usize>;

    /// Forgets every labeler but those in `keep`: its takedowns lifted, its labels and its
    /// cursor removed, so that what it said stops applying and, followed again, it is read
    /// from its first label. The labelers forgotten.
    fn forget_labelers(&self, keep: Vec<svc_syntax::Did>) -> CatalogFuture<'_, Vec<String>>;

    /// Starts a bulk load if the catalog is empty (`false` otherwise, and nothing changes).
    /// Until [`CatalogWrite::finish_bulk`], `apply` stages changes: they are not visible, and
    /// their reports are empty.
    fn begin_bulk(&self) -> CatalogFuture<'_, bool>;

    /// Merges everything staged since [`CatalogWrite::begin_bulk`] in one transaction, with
    /// the cursor, under the same rules as `apply`; the report covers all staged changes.
    fn finish_bulk(&self, cursor: Option<CursorPosition>) -> CatalogFuture<'_, ApplyReport>;
}

/// The process's role: whether it holds the writer lock, the heartbeat it keeps as the writer,
/// and how closely it follows the replication log otherwise.
pub trait CatalogRole: Send + Sync {
    /// Resolves once this process is the catalog's writer: at once for an indexer that got
    /// the writer lock, on takeover for one standing by, never for a query replica.
    fn writer_started(&self) -> CatalogFuture<'_, ()>;

    /// Whether this process writes the catalog now.
    fn is_writer(&self) -> bool;

    /// Stores the indexer's heartbeat (the catalog is current as of now) and trims the
    /// replication log.
    /// `keep_changes`: how long the change stream keeps a change, for clients resuming.
    fn heartbeat(&self, keep_changes: std::time::Duration) -> CatalogFuture<'_, ()>;

    /// For a process following the replication log: how long after the writer logged the last
    /// entry this process applied it to its change clock.
    fn change_log_delay(&self) -> Option<std::time::Duration>;
}

/// An opened catalog, all three parts: what a process opens and hands out, each user taking
/// only the part it needs.
pub trait Catalog: CatalogRead + CatalogWrite + CatalogRole {}

impl<T: CatalogRead + CatalogWrite + CatalogRole> Catalog for T {}

/// What a process does with a catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Writes it: takes the writer lock, or stands by until it is free.
    Indexer,
    /// Only reads it, following the replication log.
    Reader,
}
