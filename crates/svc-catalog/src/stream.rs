//! The catalog's change stream: one row per visible change of a record, numbered without gaps
//! by the writer in commit order, naming the record and the (query, key) pairs it matched
//! before and after. From that, each subscriber learns whether the record entered its answer,
//! changed in it or left it; the record itself is read when the message is sent. Kept for a
//! while (as long as the indexer is told, and at most `STREAM_KEEP_AT_MOST` changes), so a
//! client can resume from the last number it holds.

use crate::keys_column::QueryIds;
use svc_spec::IndexKeys;
use svc_syntax::UnixMillis;

/// At most this many changes are kept (older ones are trimmed even if young).
pub const STREAM_KEEP_AT_MOST: i64 = 10_000_000;

/// One change of a record as the writer plans it, before it is numbered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamEntry {
    pub uri: String,
    /// Whether the record was answered by the catalog before (live, its account active).
    pub was_live: bool,
    pub is_live: bool,
    pub before: IndexKeys,
    pub after: IndexKeys,
}

impl StreamEntry {
    /// A gap: anything may have changed (a bulk load settled, queries were rebuilt), so a
    /// reader holding an answer from before must read it again. It names no record.
    pub fn gap() -> StreamEntry {
        StreamEntry {
            uri: String::new(),
            was_live: false,
            is_live: false,
            before: IndexKeys::new(),
            after: IndexKeys::new(),
        }
    }

    /// Whether anyone could see it: a change between two states that are both out of sight
    /// (a tombstone rewritten, a record of a hidden account) is not one.
    pub fn visible(&self) -> bool {
        self.was_live || self.is_live
    }
}

/// A change as storage keeps it: keys by the engine's query numbers, as the records' keys
/// column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRow {
    pub seq: i64,
    pub at_ms: i64,
    pub uri: String,
    pub was_live: bool,
    pub is_live: bool,
    pub before: String,
    pub after: String,
}

impl StreamRow {
    pub(crate) fn of(seq: i64, at: UnixMillis, entry: &StreamEntry, ids: &QueryIds) -> StreamRow {
        StreamRow {
            seq,
            at_ms: at.0,
            uri: entry.uri.clone(),
            was_live: entry.was_live,
            is_live: entry.is_live,
            before: ids.encode(&entry.before),
            after: ids.encode(&entry.after),
        }
    }

    pub(crate) fn decode(self, ids: &QueryIds) -> RecordChange {
        RecordChange {
            seq: self.seq,
            at: UnixMillis(self.at_ms),
            uri: self.uri,
            was_live: self.was_live,
            is_live: self.is_live,
            before: ids.decode(&self.before),
            after: ids.decode(&self.after),
        }
    }
}

/// One numbered change of a record, as a reader of the stream sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordChange {
    pub seq: i64,
    pub at: UnixMillis,
    pub uri: String,
    pub was_live: bool,
    pub is_live: bool,
    pub before: IndexKeys,
    pub after: IndexKeys,
}

/// What a change did to one answer: the whole catalog (`None`) or one query's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamOp {
    /// The record is now in the answer.
    Enter,
    /// It stays in the answer, and changed.
    Update,
    /// It is no longer in the answer.
    Leave,
}

impl StreamOp {
    pub fn label(self) -> &'static str {
        match self {
            StreamOp::Enter => "enter",
            StreamOp::Update => "update",
            StreamOp::Leave => "leave",
        }
    }
}

impl RecordChange {
    /// Whether this is a gap (see [`StreamEntry::gap`]) rather than a record's change.
    pub fn is_gap(&self) -> bool {
        self.uri.is_empty()
    }

    /// What the change did to the answer of `query` under `key`, or to the whole catalog's
    /// records when `answer` is `None`; `None` when it did nothing to it.
    pub fn op(&self, answer: Option<(&svc_spec::QueryId, &str)>) -> Option<StreamOp> {
        let (before, after) = match answer {
            None => (self.was_live, self.is_live),
            Some((query, key)) => {
                let pair = (query.clone(), key.to_string());
                (self.before.contains(&pair), self.after.contains(&pair))
            }
        };
        match (before, after) {
            (false, true) => Some(StreamOp::Enter),
            (true, true) => Some(StreamOp::Update),
            (true, false) => Some(StreamOp::Leave),
            (false, false) => None,
        }
    }
}

/// Where the stream stands: the oldest change kept and the newest (0 and 0 when none was
/// ever made).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamBounds {
    pub oldest: i64,
    pub newest: i64,
}

/// The stream's statements, the same in both engines' dialects.
pub(crate) mod sql {
    /// One row (SQLite; PostgreSQL appends a batch as arrays).
    pub const APPEND: &str = "INSERT INTO record_changes \
         (seq, at_ms, uri, was_live, is_live, before_keys, after_keys) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)";
    pub const AFTER: &str = "SELECT seq, at_ms, uri, was_live, is_live, before_keys, after_keys \
         FROM record_changes WHERE seq > $1 ORDER BY seq LIMIT $2";
    pub const BOUNDS: &str =
        "SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM record_changes";
    /// Keeps the last change (it numbers the next), and the others while young and few.
    pub const TRIM: &str = "DELETE FROM record_changes \
         WHERE seq < (SELECT max(seq) FROM record_changes) \
         AND (at_ms < $1 OR seq <= (SELECT max(seq) FROM record_changes) - $2)";
}
