//! The replication log (table `change_log`): every commit of the writer appends, in its own
//! transaction, what it changed (the (query, key) pairs whose answers moved, whether the
//! per-kind counts moved, the uris written), numbered without gaps by the writer. Every
//! process that does not write follows it and bumps its own change clock, so that an answer
//! cache stays exact in every process. Subscribers read the change stream (`stream.rs`), not
//! this log.

use crate::keys_column::QueryIds;
use crate::{CatalogResult, ChangeClock};
use std::borrow::Cow;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use svc_spec::IndexKeys;
use svc_syntax::UnixMillis;

/// Entries kept at least this long, so that a follower that was briefly away catches up
/// entry by entry instead of dropping its whole cache.
pub(crate) const KEEP_FOR_MS: i64 = 10 * 60 * 1000;
/// At most this many entries are kept (older ones are trimmed even if young).
pub(crate) const KEEP_AT_MOST: i64 = 200_000;

/// No keys: what a tombstone is filed under, and what a log entry of everything names.
pub(crate) static NO_KEYS: IndexKeys = IndexKeys::new();

/// What one commit changed, borrowed from the commit's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry<'a> {
    pub keys: &'a IndexKeys,
    /// The uris written; a removed repository as its `at://<did>` prefix.
    pub uris: Vec<Cow<'a, str>>,
    /// The per-kind counts moved.
    pub kinds: bool,
    /// Anything may have changed (a bulk load settled, queries were rebuilt): followers drop
    /// their whole cache and re-read the queries' numbers.
    pub everything: bool,
}

/// Whether what a search finds, or the labels it shows, may have changed with an entry: one
/// that moved index entries, or names uris (records written, repositories removed, subjects
/// taken down, lifted, labelled, accounts whose standing changed). The writer and every
/// follower ask this of each entry.
fn changes_search(moved_keys: bool, names_uris: bool) -> bool {
    moved_keys || names_uris
}

impl LogEntry<'_> {
    pub fn changes_search(&self) -> bool {
        changes_search(!self.keys.is_empty(), !self.uris.is_empty())
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.uris.is_empty() && !self.kinds && !self.everything
    }

    pub fn everything() -> LogEntry<'static> {
        LogEntry {
            keys: &NO_KEYS,
            uris: Vec::new(),
            kinds: false,
            everything: true,
        }
    }
}

/// A log entry as storage keeps it: keys by the engine's query numbers, as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRow {
    pub seq: i64,
    pub at_ms: i64,
    /// `[[qid, key], ...]`, as the records' keys column.
    pub keys: String,
    /// `["at://...", ...]`.
    pub uris: String,
    pub kinds: bool,
    pub everything: bool,
}

impl LogRow {
    pub fn of(seq: i64, at: UnixMillis, entry: &LogEntry<'_>, ids: &QueryIds) -> LogRow {
        LogRow {
            seq,
            at_ms: at.0,
            keys: ids.encode(entry.keys),
            uris: serde_json::to_string(&entry.uris).unwrap_or_else(|_| "[]".into()),
            kinds: entry.kinds,
            everything: entry.everything,
        }
    }
}

/// The replication log's statements, the same in both engines' dialects (SQLite reads `$1` as its
/// first parameter, as PostgreSQL does).
pub(crate) mod sql {
    pub const APPEND: &str = "INSERT INTO change_log (seq, at_ms, keys, uris, kinds, everything) \
         VALUES ($1, $2, $3, $4, $5, $6)";
    pub const LAST: &str = "SELECT coalesce(max(seq), 0) FROM change_log";
    pub const AFTER: &str = "SELECT seq, at_ms, keys, uris, kinds, everything FROM change_log \
         WHERE seq > $1 ORDER BY seq LIMIT $2";
    /// Keeps the last entry (it numbers the next), and the others while they are young and few.
    pub const TRIM: &str = "DELETE FROM change_log WHERE seq < (SELECT max(seq) FROM change_log) \
         AND (at_ms < $1 OR seq <= (SELECT max(seq) FROM change_log) - $2)";
    pub const BEAT: &str = "INSERT INTO indexer_state (id, heartbeat_ms) VALUES (1, $1) \
         ON CONFLICT (id) DO UPDATE SET heartbeat_ms = excluded.heartbeat_ms";
    pub const HEARTBEAT: &str = "SELECT heartbeat_ms FROM indexer_state WHERE id = 1";
}

/// How often a follower reads the log when nothing woke it.
pub(crate) const POLL: Duration = Duration::from_millis(50);
/// Entries read per step.
const READ_AT_MOST: usize = 1000;

/// What a follower reads from storage.
pub trait LogSource: Send + Sync + 'static {
    /// Entries numbered above `seq`, in order, at most `limit`.
    fn entries_after(&self, seq: i64, limit: usize) -> crate::CatalogFuture<'_, Vec<LogRow>>;
    /// The highest number in the log (0 when empty).
    fn last_entry(&self) -> crate::CatalogFuture<'_, i64>;
    /// The queries' numbers as storage has them now.
    fn query_ids(&self) -> crate::CatalogFuture<'_, QueryIds>;
    /// Resolves when an entry may have been appended, or after `poll` at the latest.
    fn changed(&self, poll: Duration) -> crate::CatalogFuture<'_, ()>;
}

/// A process's follower of the log.
pub(crate) struct Follower {
    /// The last entry applied to the clock; `None` until the log's end has been read.
    last: Option<i64>,
    qids: Arc<RwLock<QueryIds>>,
    clock: Arc<ChangeClock>,
    /// Milliseconds from the writer logging the last entry applied to this follower applying
    /// it (-1 before the first).
    delay_ms: Arc<AtomicI64>,
}

impl Follower {
    /// A follower that starts at the log's end: the process's cache starts empty, so nothing
    /// before it matters.
    pub fn new(
        qids: Arc<RwLock<QueryIds>>,
        clock: Arc<ChangeClock>,
        delay_ms: Arc<AtomicI64>,
    ) -> Follower {
        Follower {
            last: None,
            qids,
            clock,
            delay_ms,
        }
    }

    /// A follower that has applied the log up to `last`.
    #[cfg(test)]
    pub fn at(last: i64, qids: Arc<RwLock<QueryIds>>, clock: Arc<ChangeClock>) -> Follower {
        Follower {
            last: Some(last),
            qids,
            clock,
            delay_ms: Arc::new(AtomicI64::new(-1)),
        }
    }

    /// Applies what the log holds beyond `last`; a gap (entries trimmed before this follower
    /// read them) drops everything. Returns how many entries it applied.
    pub(crate) async fn step(&mut self, source: &dyn LogSource) -> CatalogResult<usize> {
        let Some(mut last) = self.last else {
            self.last = Some(source.last_entry().await?);
            // Whatever changed while the end was being found.
            self.clock.touch_all();
            return Ok(0);
        };
        let rows = source.entries_after(last, READ_AT_MOST).await?;
        for row in &rows {
            if row.seq != last + 1 || row.everything {
                if row.everything {
                    let ids = source.query_ids().await?;
                    *self.qids.write().unwrap_or_else(|p| p.into_inner()) = ids;
                }
                self.clock.touch_all();
            } else {
                self.touch(row);
            }
            last = row.seq;
            self.last = Some(last);
            let delay = crate::runtime::now_ms() - row.at_ms;
            self.delay_ms.store(delay.max(0), Ordering::Relaxed);
        }
        Ok(rows.len())
    }

    fn touch(&self, row: &LogRow) {
        let keys = self
            .qids
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .decode(&row.keys);
        self.clock.touch_keys(&keys);
        if row.kinds {
            self.clock.touch_kinds();
        }
        if changes_search(!keys.is_empty(), row.uris != "[]") {
            self.clock.touch_search();
        }
    }

    /// Follows the log until `stop` says so, waiting out storage failures.
    pub async fn run(
        mut self,
        source: Arc<dyn LogSource>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut failing = false;
        while !*stop.borrow() {
            match self.step(source.as_ref()).await {
                Ok(applied) => {
                    failing = false;
                    if applied == READ_AT_MOST {
                        continue;
                    }
                }
                Err(error) => {
                    if !failing {
                        tracing::warn!("reading the replication log: {error}");
                    }
                    failing = true;
                }
            }
            tokio::select! {
                _ = source.changed(POLL) => {}
                _ = stop.changed() => {}
            }
        }
    }
}
