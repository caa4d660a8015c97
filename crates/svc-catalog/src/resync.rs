//! What the catalog keeps of each followed repository's synchronisation, so that nothing a
//! passing fault held back is forgotten by a restart: the resynchronisation queue (the
//! repositories owed a whole, verified read, with their retry schedule) and each followed
//! repository's head (the revision and tree root its chain of commits reached). Both are
//! written in the transaction of the batch whose cursor moves past the event that changed
//! them, so a crash at any moment leaves them where the cursor is.

use svc_syntax::{Did, Tid, UnixMillis};

/// A repository to read whole, and why (a short label: `chain`, `key`, `backfill`...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResyncRequest {
    pub did: Did,
    pub reason: String,
}

/// The revision and tree root (a CID's bytes) a repository's verified chain reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryHead {
    pub did: Did,
    pub rev: Tid,
    pub data: Vec<u8>,
}

/// A read that failed for a reason a retry could undo: the repository waits until `due`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResyncRetry {
    pub did: Did,
    pub due: UnixMillis,
    /// The failure, in words, for an operator.
    pub error: String,
}

/// A repository whose read waits for a turn, not for a peer to recover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResyncPostponed {
    pub did: Did,
    pub due: UnixMillis,
}

/// A repository in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResyncEntry {
    pub did: Did,
    pub reason: String,
    /// When it was queued.
    pub since: UnixMillis,
    /// Reads tried and failed.
    pub attempts: u32,
    pub due: UnixMillis,
    pub last_error: Option<String>,
}

/// Failed reads after which an entry no longer counts as fresh (about 15 s of retries).
pub const FRESH_ATTEMPTS: u32 = 4;

/// The queue at a glance, for readiness and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResyncSummary {
    pub waiting: u64,
    /// Tried fewer than [`FRESH_ATTEMPTS`] times: still in their first seconds of reads.
    pub fresh: u64,
    /// The entry queued longest ago.
    pub oldest: Option<ResyncEntry>,
}

/// What one batch changes of the repositories' synchronisation, written in its transaction,
/// in this order: heads, queued, retried, postponed, done, forgotten.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncWrites {
    /// Heads stored, each unless the stored one is newer.
    pub heads: Vec<RepositoryHead>,
    /// Queued, each unless it waits already (its schedule stays).
    pub queued: Vec<ResyncRequest>,
    pub retried: Vec<ResyncRetry>,
    /// Due later without a failure counted (its host was busy with other reads).
    pub postponed: Vec<ResyncPostponed>,
    /// Read whole: out of the queue.
    pub done: Vec<Did>,
    /// Heads forgotten: the chain begins again at the repository's next commit.
    pub forgotten: Vec<Did>,
    /// A peer that was failing answers again: the entries waiting longest after failures (at
    /// most [`HURRIED_AT_MOST`]) are due at this time instead of at their later one.
    pub hurry: Option<UnixMillis>,
}

/// Entries one hurry moves up at most, so that it costs the writer a bounded update whatever
/// the queue's size.
pub const HURRIED_AT_MOST: i64 = 1000;

impl SyncWrites {
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
            && self.queued.is_empty()
            && self.retried.is_empty()
            && self.postponed.is_empty()
            && self.done.is_empty()
            && self.forgotten.is_empty()
            && self.hurry.is_none()
    }

    /// Only what does not depend on records being visible (during a bulk load the heads wait:
    /// a load that does not settle empties the catalog, and a head must never be ahead of it).
    pub(crate) fn without_heads(&self) -> SyncWrites {
        SyncWrites {
            heads: Vec::new(),
            forgotten: Vec::new(),
            ..self.clone()
        }
    }
}

/// The statements, the same in both engines' dialects (SQLite reads `$1` as its first
/// parameter, as PostgreSQL does).
pub(crate) mod sql {
    pub const HEAD: &str = "INSERT INTO repository_heads (did, rev, data) VALUES ($1, $2, $3) \
         ON CONFLICT (did) DO UPDATE SET rev = excluded.rev, data = excluded.data \
         WHERE excluded.rev > repository_heads.rev";
    pub const QUEUE: &str = "INSERT INTO resync_queue \
         (did, reason, since_ms, attempts, due_ms, last_error) VALUES ($1, $2, $3, 0, $3, NULL) \
         ON CONFLICT (did) DO NOTHING";
    /// Parameters in the order they appear: SQLite numbers `$N` by first appearance.
    pub const RETRY: &str = "UPDATE resync_queue SET attempts = attempts + 1, due_ms = $1, last_error = $2 \
         WHERE did = $3";
    pub const POSTPONE: &str = "UPDATE resync_queue SET due_ms = $1 WHERE did = $2";
    pub const DONE: &str = "DELETE FROM resync_queue WHERE did = $1";
    pub const FORGET: &str = "DELETE FROM repository_heads WHERE did = $1";
    /// The soonest `$2` entries waiting after failures are due at `$1`.
    pub const HURRY: &str = "UPDATE resync_queue SET due_ms = $1 WHERE did IN \
         (SELECT did FROM resync_queue WHERE due_ms > $1 AND attempts > 0 \
          ORDER BY due_ms LIMIT $2)";
    pub const DUE: &str = "SELECT did, reason, since_ms, attempts, due_ms, last_error \
         FROM resync_queue WHERE due_ms <= $1 ORDER BY due_ms, did LIMIT $2";
    pub const COUNTS: &str = "SELECT count(*), \
         coalesce(sum(CASE WHEN attempts < 4 THEN 1 ELSE 0 END), 0) FROM resync_queue";
    pub const OLDEST: &str = "SELECT did, reason, since_ms, attempts, due_ms, last_error \
         FROM resync_queue ORDER BY since_ms, did LIMIT 1";
    pub const HEADS: &str = "SELECT did, rev, data FROM repository_heads LIMIT $1";
}

/// A queue row as both engines read it, checked: a row that is not (written by hand) is
/// skipped rather than trusted.
pub(crate) fn entry(
    did: String,
    reason: String,
    since_ms: i64,
    attempts: i64,
    due_ms: i64,
    last_error: Option<String>,
) -> Option<ResyncEntry> {
    Some(ResyncEntry {
        did: Did::new(did).ok()?,
        reason,
        since: UnixMillis(since_ms),
        attempts: u32::try_from(attempts.max(0)).unwrap_or(u32::MAX),
        due: UnixMillis(due_ms),
        last_error,
    })
}

/// A head row as both engines read it, checked likewise.
pub(crate) fn head(did: String, rev: String, data: Vec<u8>) -> Option<RepositoryHead> {
    Some(RepositoryHead {
        did: Did::new(did).ok()?,
        rev: Tid::new(rev).ok()?,
        data,
    })
}
