//! What a storage engine offers the rules: the primitives of one transaction on the writer's
//! thread ([`Engine`]), the reads of its read side ([`EngineReads`]), and the rows and plans
//! that pass between them. An engine stores and reads; it decides nothing.

use crate::keys_column::QueryIds;
use crate::replication_log::{LogEntry, NO_KEYS};
use crate::resync::{RepositoryHead, ResyncEntry, ResyncSummary, SyncWrites};
use crate::stream::{StreamBounds, StreamEntry, StreamRow};
use crate::{
    CatalogFuture, CatalogResult, Change, CursorPosition, Item, KindCounts, Page, PageRequest,
    PageWriter,
};
use crate::{LabelView, Standing};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use svc_spec::search::SearchText;
use svc_spec::{IndexKeys, QueryId};
use svc_syntax::UnixMillis;
use svc_syntax::{AtUri, Nsid};

/// What an engine holds for a uri: a record version or a tombstone.
#[derive(Debug, Clone)]
pub struct Stored {
    pub rev: String,
    pub collection: String,
    /// A record, not a tombstone.
    pub live: bool,
    /// The version's CID, when its source gave one.
    pub cid: Option<String>,
    /// The keys the version was filed under (or would be, for a hidden account's record).
    pub keys: StoredKeys,
}

/// A live record as filed: what account changes move in and out of the index.
#[derive(Debug, Clone)]
pub struct Filed {
    pub uri: String,
    pub collection: String,
    pub keys: StoredKeys,
}

/// The keys a stored version is filed under, as an engine read them.
#[derive(Debug, Clone)]
pub enum StoredKeys {
    /// Stored beside the record when it was written.
    Filed(IndexKeys),
    /// Not stored (a bulk load leaves them out: they would be a fifth of every row it
    /// writes): the record's text, from which the queries give them again. They are the keys
    /// it was filed under, since the definitions in force are those it was filed by: a query
    /// whose definition changed was rebuilt at start, before any write.
    InRecord(String),
}

/// A `records` row as both engines store it: a record version, or a tombstone (no cid, no
/// record, no keys; the revision stays, so an older event cannot bring the record back).
#[derive(Debug, Clone, Copy)]
pub struct RecordRow<'a> {
    pub uri: &'a str,
    pub collection: &'a str,
    /// The repository DID: the at-uri's authority.
    pub author: &'a str,
    pub rev: &'a str,
    pub cid: Option<&'a str>,
    pub record: Option<&'a str>,
    pub keys: &'a IndexKeys,
    /// The live record's searchable words.
    pub search: Option<&'a SearchText>,
    /// Whether the uri held a live record before (whose words the search index holds).
    pub replaces: bool,
}

impl<'a> RecordRow<'a> {
    /// The row a change leaves.
    pub fn of(change: &'a Change) -> RecordRow<'a> {
        match change {
            Change::Upsert(u) => RecordRow {
                uri: &u.uri,
                collection: &u.collection,
                author: &u.author,
                rev: &u.rev,
                cid: u.cid.as_deref(),
                record: Some(&u.record_json),
                keys: &u.keys,
                search: u.search.as_ref(),
                replaces: false,
            },
            Change::Delete {
                uri,
                collection,
                rev,
            } => RecordRow {
                uri,
                collection,
                author: did_of(uri),
                rev,
                cid: None,
                record: None,
                keys: &NO_KEYS,
                search: None,
                replaces: false,
            },
        }
    }

    pub fn live(&self) -> bool {
        self.record.is_some()
    }
}

/// One row a plan writes.
#[derive(Debug)]
pub enum RecordWrite<'a> {
    /// The row replaces whatever the uri held.
    Row(RecordRow<'a>),
    /// Only the keys a stored record is filed under change (a query rebuilt).
    Keys { uri: String, keys: IndexKeys },
}

/// What becomes of a takedown: applied, with the reference the operator gave, or lifted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakedownState {
    Applied { reference: Option<String> },
    Lifted,
}

/// A takedown as stored: by whom (`operator`, or a labeler's DID) and of what.
#[derive(Debug)]
pub struct TakedownWrite {
    pub subject: String,
    pub source: String,
    pub state: TakedownState,
}

/// Every subject taken down, with who took it down (`operator`, labelers' DIDs), and the
/// subjects the operator keeps shown whatever labelers say (`operator-shows`): a subject is
/// down while anyone holds it down, unless the operator keeps it shown.
#[derive(Debug, Default, Clone)]
pub struct Takedowns(HashMap<String, BTreeSet<String>>);

impl Takedowns {
    /// Whether `subject` is out of sight.
    pub fn hides(&self, subject: &str) -> bool {
        self.0.get(subject).is_some_and(hidden_by)
    }

    /// Whether some labeler holds `subject` down (whatever the operator says).
    pub fn held_by_a_labeler(&self, subject: &str) -> bool {
        self.0
            .get(subject)
            .is_some_and(|sources| sources.iter().any(|source| is_labeler(source)))
    }

    /// Whether `source` holds `subject` down (or, for the operator's keeping it shown, says so).
    pub fn held_by(&self, subject: &str, source: &str) -> bool {
        self.0
            .get(subject)
            .is_some_and(|sources| sources.contains(source))
    }

    /// The subjects `source` holds down.
    pub fn held_by_source(&self, source: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(_, sources)| sources.contains(source))
            .map(|(subject, _)| subject.clone())
            .collect()
    }

    /// Whether nothing is down, or kept shown, at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Records `source`'s takedown of `subject` as applied or lifted.
    pub fn set(&mut self, subject: &str, source: &str, applied: bool) {
        if applied {
            let sources = self.0.entry(subject.to_string()).or_default();
            sources.insert(source.to_string());
        } else if let Some(sources) = self.0.get_mut(subject) {
            sources.remove(source);
            if sources.is_empty() {
                self.0.remove(subject);
            }
        }
    }

    /// Whether `subject` would be down once each `(source, applied)` word is taken.
    pub fn hides_after(&self, subject: &str, words: &[(&str, bool)]) -> bool {
        let mut sources = self.0.get(subject).cloned().unwrap_or_default();
        for (source, applied) in words {
            match applied {
                true => sources.insert(source.to_string()),
                false => sources.remove(*source),
            };
        }
        hidden_by(&sources)
    }
}

/// Whether these sources hide their subject: someone holds it down and the operator does not
/// keep it shown.
fn hidden_by(sources: &BTreeSet<String>) -> bool {
    let shown = crate::TakedownSource::OperatorKeepsShown.as_str();
    !sources.contains(shown) && sources.iter().any(|source| source != shown)
}

/// Whether a stored source is a labeler's (a DID), not one of the operator's words.
fn is_labeler(source: &str) -> bool {
    source.starts_with("did:")
}

impl FromIterator<(String, String)> for Takedowns {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(rows: I) -> Takedowns {
        let mut takedowns = Takedowns::default();
        for (subject, source) in rows {
            takedowns.set(&subject, &source, true);
        }
        takedowns
    }
}

/// Which label a row holds: one value one labeler states of one subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LabelKey {
    pub subject: String,
    pub src: String,
    pub val: String,
}

/// A label row: the labeler's latest statement of its value (a negation kept, so that an
/// older statement arriving late cannot undo it).
#[derive(Debug, Clone)]
pub struct LabelRow {
    pub key: LabelKey,
    pub neg: bool,
    /// The creation time as fixed-width UTC text, which sorts as the times do.
    pub cts: String,
    pub exp_ms: Option<i64>,
}

/// A change of the labels table.
#[derive(Debug, Clone)]
pub enum LabelWrite {
    Put(LabelRow),
    /// An expired label, gone.
    Remove(LabelKey),
}

/// An account's status as stored: `Some(status)` inactive, `None` active again.
#[derive(Debug)]
pub struct AccountWrite {
    pub did: String,
    pub inactive: Option<String>,
}

/// The storage writes of one commit, in the order an engine carries them out: records, then
/// the repository removal, index entries (after records, so new rows exist to point at),
/// counts, cursors and the account status.
#[derive(Debug, Default)]
pub struct Plan<'a> {
    /// At most one per uri, in uri order.
    pub records: Vec<RecordWrite<'a>>,
    /// Every record of this repository DID is removed, tombstones included.
    pub remove_repository: Option<String>,
    /// Index entries by (query, key, uri): `true` files the record there, `false` takes it
    /// out. In key order, so an engine walks each index once.
    pub index: BTreeMap<(QueryId, String, String), bool>,
    /// Record count deltas per (query, key); a count that reaches zero is removed.
    pub query_counts: BTreeMap<(QueryId, String), i64>,
    /// Record count deltas per collection.
    pub kind_counts: BTreeMap<String, i64>,
    pub cursors: Vec<&'a CursorPosition>,
    /// Sources whose cursors are forgotten (a labeler no longer followed).
    pub forget_cursors: Vec<String>,
    /// The repositories' synchronisation, moved with the cursors.
    pub sync: Vec<&'a SyncWrites>,
    pub account: Option<AccountWrite>,
    pub takedowns: Vec<TakedownWrite>,
    pub labels: Vec<LabelWrite>,
    /// Held records (a uri) and accounts (a DID) whose labels changed: every answer showing
    /// them changes, a search's included, whether or not they are filed under keys.
    pub relabelled: Vec<String>,
    /// The (query, key) pairs whose answers change (a record's text may change under keys
    /// that stay), for the change clock once committed.
    pub touched: IndexKeys,
    /// The records' visible changes, in the order they are planned, for the change stream.
    pub stream: Vec<StreamEntry>,
}

impl Plan<'_> {
    /// What the replication log says of this plan once committed.
    pub fn log_entry(&self) -> LogEntry<'_> {
        let written = self.records.iter().map(|write| match write {
            RecordWrite::Row(row) => Cow::Borrowed(row.uri),
            RecordWrite::Keys { uri, .. } => Cow::Borrowed(uri.as_str()),
        });
        // What moved out of sight or back, or shows other labels: a repository removed, a
        // subject taken down or lifted or an account's standing changed when records moved
        // with it, a subject labelled.
        let moved = !self.stream.is_empty();
        let standing = (self.takedowns.iter().map(|write| &write.subject))
            .chain(self.account.iter().map(|write| &write.did))
            .filter(|_| moved);
        let named = (self.remove_repository.iter())
            .chain(standing)
            .chain(self.relabelled.iter())
            .map(|subject| match subject.starts_with("at://") {
                true => Cow::Borrowed(subject.as_str()),
                false => Cow::Owned(format!("at://{subject}")),
            });
        LogEntry {
            keys: &self.touched,
            uris: written.chain(named).collect(),
            kinds: self.kind_counts.values().any(|delta| *delta != 0),
            everything: false,
        }
    }

    /// Moves a record's index entries and counts from its old keys to its new ones.
    pub(crate) fn refile(&mut self, uri: &str, old: &IndexKeys, new: &IndexKeys) {
        self.touched.extend(old.iter().cloned());
        self.touched.extend(new.iter().cloned());
        for (query, key) in old.difference(new) {
            self.index
                .insert((query.clone(), key.clone(), uri.to_string()), false);
            *self
                .query_counts
                .entry((query.clone(), key.clone()))
                .or_default() -= 1;
        }
        for (query, key) in new.difference(old) {
            self.index
                .insert((query.clone(), key.clone(), uri.to_string()), true);
            *self
                .query_counts
                .entry((query.clone(), key.clone()))
                .or_default() += 1;
        }
    }

    pub(crate) fn count_kind(&mut self, collection: &str, delta: i64) {
        *self.kind_counts.entry(collection.to_string()).or_default() += delta;
    }
}

/// The storage primitives an engine offers the rules, all on the writer's thread. `begin` and
/// `commit` bracket one transaction; reads inside it see its own writes.
pub trait Engine: Send + 'static {
    fn begin(&mut self) -> CatalogResult<()>;
    fn commit(&mut self) -> CatalogResult<()>;
    /// Abandons the open transaction, if any.
    fn rollback(&mut self);

    /// What each of these uris holds, for those that hold anything.
    fn stored(&mut self, uris: &[&str]) -> CatalogResult<HashMap<String, Stored>>;
    fn write(&mut self, plan: &Plan<'_>) -> CatalogResult<()>;
    /// The live records of one repository.
    fn repository(&mut self, did: &str) -> CatalogResult<Vec<Filed>>;
    /// Live records of one collection whose uri sorts after `after`, in uri order, with their
    /// JSON text, at most `limit`.
    fn records_of_kind(
        &mut self,
        collection: &Nsid,
        after: &str,
        limit: usize,
    ) -> CatalogResult<Vec<(Filed, String)>>;

    /// The queries known to storage, with the fingerprint of the definition their keys follow.
    fn queries(&mut self) -> CatalogResult<Vec<(QueryId, String)>>;
    /// Records a query as new or redefined: none of its index entries or counts remain.
    fn define_query(&mut self, query: &QueryId, fingerprint: &str) -> CatalogResult<()>;
    /// Forgets a query that left the specification, with its entries and counts.
    fn drop_query(&mut self, query: &QueryId) -> CatalogResult<()>;
    /// The engine's number of each query it knows (after registration: every query).
    fn query_ids(&self) -> QueryIds;
    /// Accounts stored as inactive or deleted.
    fn inactive_accounts(&mut self) -> CatalogResult<HashSet<String>>;
    /// The subjects (DIDs and record uris) taken down, each with who took it down.
    fn takedowns(&mut self) -> CatalogResult<Takedowns>;
    /// The stored row of a label, if any: whether it is a negation, and its creation time.
    fn stored_label(&mut self, key: &LabelKey) -> CatalogResult<Option<(bool, String)>>;
    /// How many values one labeler has stored of one subject.
    fn label_values(&mut self, subject: &str, src: &str) -> CatalogResult<u64>;
    /// How many label rows one labeler has stored.
    fn label_count(&mut self, src: &str) -> CatalogResult<u64>;
    /// Every labeler the catalog holds anything of (labels, takedowns, a cursor).
    fn labelers_on_record(&mut self) -> CatalogResult<Vec<String>>;
    /// Up to `limit` of the labels one labeler stated.
    fn labels_of(&mut self, src: &str, limit: usize) -> CatalogResult<Vec<LabelKey>>;
    /// Labels whose expiry is at or before `now`, at most `limit`, soonest first.
    fn expired_labels(&mut self, now: UnixMillis, limit: usize) -> CatalogResult<Vec<LabelKey>>;
    /// Whether the catalog stores the record at `subject` (an at-uri) or any record of it
    /// (a DID), tombstones aside.
    fn holds(&mut self, subject: &str) -> CatalogResult<bool>;

    /// The definition the search index was built under (`None` before it was built).
    fn search_fingerprint(&mut self) -> CatalogResult<Option<String>>;
    /// Inside the open transaction: empties the search index and forgets its definition.
    fn clear_search(&mut self) -> CatalogResult<()>;
    /// Inside the open transaction: files the words of the live records at these uris.
    fn index_search(&mut self, entries: &[(String, SearchText)]) -> CatalogResult<()>;
    /// Inside the open transaction: records the definition the index is now built under.
    fn set_search_fingerprint(&mut self, fingerprint: &str) -> CatalogResult<()>;

    /// Queued repositories due by `now`, soonest first, at most `limit`.
    fn resync_due(&mut self, now: UnixMillis, limit: usize) -> CatalogResult<Vec<ResyncEntry>>;
    fn resync_summary(&mut self) -> CatalogResult<ResyncSummary>;
    /// Stored heads of followed repositories, at most `limit`.
    fn repository_heads(&mut self, limit: usize) -> CatalogResult<Vec<RepositoryHead>>;

    /// Whether no uri holds anything, not even a tombstone.
    fn is_empty(&mut self) -> CatalogResult<bool>;
    /// Gets ready to stage a bulk load into the empty catalog (outside any transaction).
    fn begin_bulk(&mut self) -> CatalogResult<()>;
    /// Stages changes of a bulk load in arrival order, in a transaction of its own.
    fn stage(&mut self, changes: &[&Change]) -> CatalogResult<()>;
    /// Inside the settling transaction: makes the staged uris unique; `false` when a uri was
    /// staged more than once (and nothing changed).
    fn staged_unique(&mut self) -> CatalogResult<bool>;
    /// Inside the settling transaction: every staged version in uri order, arrival order
    /// within a uri.
    fn staged_versions(&mut self) -> CatalogResult<Vec<StagedVersion>>;
    /// Inside the settling transaction: removes these staged versions; the rest are unique.
    fn remove_staged(&mut self, superseded: &[i64]) -> CatalogResult<()>;
    /// Inside the settling transaction: files every settled record under its keys and sets
    /// the counts (kind counts as given).
    fn index_staged(&mut self, kinds: &BTreeMap<String, i64>) -> CatalogResult<()>;
    /// After the bulk load, settled or abandoned (outside any transaction).
    fn end_bulk(&mut self, settled: bool) -> CatalogResult<()>;
    /// Empties the catalog of a bulk load that did not settle; `true` when there was one.
    fn recover_bulk(&mut self) -> CatalogResult<bool>;

    /// Takes the catalog's writer lock if it is free, and keeps it; `false` while another
    /// process holds it.
    fn try_lock_writer(&mut self) -> CatalogResult<bool>;
    /// Inside the open transaction: appends entry `seq` to the replication log.
    fn log(&mut self, seq: i64, entry: &LogEntry<'_>) -> CatalogResult<()>;
    /// The highest change-log number stored (0 when the log is empty).
    fn last_logged(&mut self) -> CatalogResult<i64>;
    /// Inside the open transaction: appends the records' changes to the change stream,
    /// numbered from `first`.
    fn stream(&mut self, first: i64, entries: &[StreamEntry]) -> CatalogResult<()>;
    /// Inside the open transaction: adds a commit's activity to its minute.
    fn record_activity(&mut self, write: &crate::activity::ActivityWrite<'_>) -> CatalogResult<()>;
    /// The highest number in the change stream (0 when none was ever made).
    fn last_streamed(&mut self) -> CatalogResult<i64>;
    /// Inside the open transaction: stores the indexer's heartbeat and trims the replication log
    /// (never its last entry, which numbers the next).
    /// Also trims the change stream of what is older than `keep_changes`.
    fn heartbeat(
        &mut self,
        now: UnixMillis,
        keep_changes: std::time::Duration,
    ) -> CatalogResult<()>;
}

/// A staged version of a bulk load.
#[derive(Debug, Clone)]
pub struct StagedVersion {
    /// The engine's handle of the staged row.
    pub row: i64,
    pub uri: String,
    pub rev: String,
    pub collection: String,
    pub live: bool,
}

/// The uri range of one repository: `at://<did>/` up to (not including) `at://<did>0`.
pub(crate) fn repository_range(did: &str) -> (String, String) {
    (format!("at://{did}/"), format!("at://{did}0"))
}

/// One repository's stored records in uri order above `$1` and below `$2` (a
/// [`RepositorySlice`](crate::RepositorySlice)'s range), none while the account `$3` is
/// inactive or taken down, nor any record taken down, at most `$4` (one more than a page, which says whether more follow).
pub(crate) const REPOSITORY_RECORDS: &str = "SELECT uri, rev, record FROM records \
     WHERE uri > $1 AND uri < $2 AND record IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM inactive_accounts WHERE did = $3) \
     AND NOT EXISTS (SELECT 1 FROM takedowns WHERE subject IN ($3, records.uri)) \
     ORDER BY uri LIMIT $4";

/// A takedown of the subject `$1`, the operator's first: its reference, when it was applied,
/// and by whom.
pub(crate) const TAKEDOWN_OF: &str = "SELECT reference, applied_at, source FROM takedowns \
     WHERE subject = $1 ORDER BY source <> 'operator', source";

/// Label statements, in both engines' SQL.
pub(crate) mod label_sql {
    pub const STORED: &str =
        "SELECT neg, cts FROM labels WHERE subject = $1 AND src = $2 AND val = $3";
    pub const COUNT: &str = "SELECT count(*) FROM labels WHERE src = $1";
    pub const VALUES_ON: &str = "SELECT count(*) FROM labels WHERE subject = $1 AND src = $2";
    pub const OF_SOURCE: &str = "SELECT subject, src, val FROM labels WHERE src = $1 LIMIT $2";
    /// Every labeler the catalog holds anything of: labels, takedowns, a cursor.
    pub const LABELERS: &str = "SELECT src FROM labels \
         UNION SELECT source FROM takedowns WHERE source LIKE 'did:%' \
         UNION SELECT substr(source, 9) FROM cursors WHERE source LIKE 'labeler:%'";
    pub const FORGET_CURSOR: &str = "DELETE FROM cursors WHERE source = $1";
    pub const EXPIRED: &str = "SELECT subject, src, val FROM labels \
         WHERE exp_ms IS NOT NULL AND exp_ms <= $1 ORDER BY exp_ms LIMIT $2";
    pub const REMOVE: &str = "DELETE FROM labels WHERE subject = $1 AND src = $2 AND val = $3";
    /// Whether `$1` (an at-uri) or a record of `$1` (a DID, `$2` and `$3` its uri range) is
    /// stored.
    pub const HOLDS: &str = "SELECT EXISTS (SELECT 1 FROM records WHERE uri = $1 AND record IS NOT NULL) \
         OR EXISTS (SELECT 1 FROM records WHERE uri > $2 AND uri < $3 AND record IS NOT NULL)";
    pub const TAKEDOWNS: &str = "SELECT subject, source FROM takedowns";
    pub const TAKE_DOWN: &str = "INSERT INTO takedowns (subject, source, reference, applied_at) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (subject, source) DO UPDATE SET \
         reference = excluded.reference, applied_at = excluded.applied_at";
    pub const LIFT: &str = "DELETE FROM takedowns WHERE subject = $1 AND source = $2";
    /// The labels in force on the subject `$1`, at most `$2`.
    pub const IN_FORCE: &str = "SELECT subject, src, val, cts FROM labels \
         WHERE subject = $1 AND neg = false AND val <> '!takedown' \
         ORDER BY src, val LIMIT $2";
    pub const PUT: &str = "INSERT INTO labels (subject, src, val, neg, cts, exp_ms) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (subject, src, val) DO UPDATE SET \
         neg = excluded.neg, cts = excluded.cts, exp_ms = excluded.exp_ms";
}

/// Whether any account is out of sight or anything taken down: a search leaves such records
/// out only while there are any.
pub(crate) const ANY_HIDDEN: &str =
    "SELECT EXISTS (SELECT 1 FROM inactive_accounts) OR EXISTS (SELECT 1 FROM takedowns)";

/// Every source's position, by source.
pub(crate) const CURSORS: &str =
    "SELECT source, endpoint, cursor, event_time_us FROM cursors ORDER BY source";

/// The DID of an at-uri (its authority); the catalog's uris are checked at-uris.
pub(crate) fn did_of(uri: &str) -> &str {
    svc_syntax::at_uri_authority(uri).unwrap_or(uri)
}

/// What an engine's read side answers; a query is the engine's number for it.
pub trait EngineReads: Send + Sync + 'static {
    fn list(&self, qid: i64, key: String, page: PageRequest) -> CatalogFuture<'_, Page>;
    fn write_list(
        &self,
        qid: i64,
        key: String,
        page: PageRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>>;
    fn count_keys(&self, qid: i64, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>>;
    fn keys_under(
        &self,
        qid: i64,
        prefixes: Vec<String>,
        limit: usize,
    ) -> CatalogFuture<'_, Vec<crate::KeyCounts>>;
    /// The activity of the minutes from `since` (unix minutes) on.
    fn activity(&self, since: i64) -> CatalogFuture<'_, crate::Activity>;
    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts>;
    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>>;
    /// Every source's stored position, by source.
    fn cursors(&self) -> CatalogFuture<'_, Vec<CursorPosition>>;
    fn get(&self, uri: AtUri) -> CatalogFuture<'_, Option<Item>>;
    /// The records stored at each uri, in order, in one read.
    fn get_many(&self, uris: Vec<String>) -> CatalogFuture<'_, Vec<Option<Item>>>;
    /// The records stored at each uri, handed to `writer` as they are read.
    fn write_records(
        &self,
        uris: Vec<String>,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>>;
    /// Those of `uris` that name a record `get` would read, the records left unread.
    fn held(&self, uris: Vec<String>) -> CatalogFuture<'_, Vec<String>>;
    /// A repository's records after `after` in uri order, at most `limit`, handed to `writer`
    /// as they are read; none while its account is inactive.
    fn write_repository_records(
        &self,
        slice: crate::RepositorySlice,
        after: Option<String>,
        limit: usize,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>>;
    fn takedown(&self, subject: String) -> CatalogFuture<'_, Standing>;
    /// A page of a search, handed to `writer`; its `total` at most one past
    /// [`crate::SEARCH_COUNT_LIMIT`].
    fn search(
        &self,
        request: crate::SearchRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>>;
    fn labels(&self, subjects: Vec<String>, limit: usize) -> CatalogFuture<'_, Vec<LabelView>>;
    fn indexer_heartbeat(&self) -> CatalogFuture<'_, Option<UnixMillis>>;
    /// Changes of the stream numbered above `seq`, in order, at most `limit`.
    fn changes_after(&self, seq: i64, limit: usize) -> CatalogFuture<'_, Vec<StreamRow>>;
    fn change_bounds(&self) -> CatalogFuture<'_, StreamBounds>;
}
