//! Read paths: every list is a range scan of one (query, key) prefix of `query_keys` in uri
//! order, joined to `records` by rowid; totals come from `query_counts`, never from counting.

use super::page_statement::{PageStatement, Parameter, Rows};
use crate::replication_log::{self, LogRow};
use crate::stream::{self, StreamBounds, StreamRow};
use crate::{
    CatalogError, CatalogResult, CursorPosition, Item, ItemRef, KindCounts, Page, PageRequest,
    PageWriter,
};
use crate::{Standing, Takedown};
use rusqlite::{Connection, OptionalExtension, params};
use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use svc_syntax::{UnixMicros, UnixMillis};
use tokio::sync::oneshot;

/// The read side of an SQLite catalog: a fixed set of reader threads, each with its own
/// read-only connection, taking jobs from one queue. Threads of their own rather than tokio's
/// blocking pool: under a query mix the pool grew to 21 threads for 4 connections, each keeping
/// allocator pages of the answers it had built (RSS 200-213 MB against 124-142 MB now, and the
/// mix 20-60% slower).
pub struct ReaderPool {
    jobs: crossbeam_channel::Sender<Queued>,
}

type Job = Box<dyn FnOnce(&mut Reader) + Send>;

/// A job and the flag that says its request is gone.
type Queued = (Job, Arc<AtomicBool>);

/// A reader thread's connection, with the page statements it has prepared. Declared before the
/// connection, they are dropped first: a connection closes only once its statements are
/// finalized.
pub(crate) struct Reader {
    statements: PageStatements,
    conn: Connection,
    /// Set when the request the running job answers is gone.
    abandoned: Arc<AtomicBool>,
}

/// The statements of a page, each prepared on its first use.
#[derive(Default)]
struct PageStatements {
    begin: Option<PageStatement>,
    commit: Option<PageStatement>,
    count: Option<PageStatement>,
    page_from: Option<PageStatement>,
    page_after: Option<PageStatement>,
}

/// The statement held in `slot`, prepared on first use.
fn prepared<'s>(
    slot: &'s mut Option<PageStatement>,
    conn: &Connection,
    sql: &str,
) -> CatalogResult<&'s mut PageStatement> {
    let statement = match slot.take() {
        Some(statement) => statement,
        None => PageStatement::prepare(conn, sql)?,
    };
    Ok(slot.insert(statement))
}

impl Reader {
    /// The thread's connection.
    pub(crate) fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Stops the running job's statements when its request is gone or, when given, at
    /// `deadline` (an interrupted statement fails with "interrupted").
    pub(crate) fn stop_at(&mut self, deadline: Option<Instant>) -> CatalogResult<()> {
        let abandoned = self.abandoned.clone();
        let stop = move || {
            abandoned.load(Ordering::Relaxed) || deadline.is_some_and(|at| Instant::now() > at)
        };
        Ok(self
            .conn
            .progress_handler(STEPS_BETWEEN_CHECKS, Some(stop))?)
    }

    fn run(&mut self, job: Job, abandoned: Arc<AtomicBool>) {
        self.abandoned = abandoned;
        if let Err(error) = self.stop_at(None) {
            tracing::warn!("a read runs without its stop check: {error}");
        }
        job(self);
    }
}

/// SQLite virtual machine steps between two looks at whether a statement should stop: about
/// a millisecond of work, so a read whose client left ends within that.
const STEPS_BETWEEN_CHECKS: std::ffi::c_int = 10_000;

/// Marks a read abandoned when its request's future is dropped before the answer (the client
/// left, or the request's time ran out).
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl ReaderPool {
    pub(crate) fn open(path: &Path, size: usize) -> CatalogResult<ReaderPool> {
        let (jobs, queue) = crossbeam_channel::unbounded::<Queued>();
        for n in 0..size {
            let conn = super::open_reader(path)?;
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("catalog-reader-{n}"))
                .spawn(move || {
                    yield_to_writer_and_requests();
                    let mut reader = Reader {
                        statements: PageStatements::default(),
                        conn,
                        abandoned: Arc::default(),
                    };
                    // Ends when the pool is dropped (the queue's sender with it).
                    for (job, abandoned) in queue {
                        // A panicking job fails its own request only (its answer channel is
                        // dropped unanswered); the thread and its connection go on.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            reader.run(job, abandoned)
                        }));
                    }
                })
                .map_err(|e| CatalogError::Storage(format!("starting a reader thread: {e}")))?;
        }
        Ok(ReaderPool { jobs })
    }

    /// Runs `work` on the next free reader thread's connection.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> CatalogResult<T> + Send + 'static,
    ) -> CatalogResult<T> {
        self.run_reader(move |reader| work(&reader.conn)).await
    }

    /// Runs `work` on the next free reader thread.
    pub(crate) async fn run_reader<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Reader) -> CatalogResult<T> + Send + 'static,
    ) -> CatalogResult<T> {
        let (answer, answered) = oneshot::channel();
        let abandoned = AbandonOnDrop(Arc::default());
        let job: Job = Box::new(move |reader| {
            // The request is gone (timed out, its client left): its read would only delay the
            // others.
            if !answer.is_closed() {
                let _ = answer.send(work(reader));
            }
        });
        let queued = (job, abandoned.0.clone());
        self.jobs.send(queued).map_err(|_| CatalogError::Closed)?;
        let answer = answered
            .await
            .map_err(|_| CatalogError::Storage("a reader failed while answering".into()));
        // Marked once answered too: the job is over, and its flag goes with it.
        drop(abandoned);
        answer?
    }
}

/// How much lower than the rest of the process readers run: when the CPU is saturated, reads
/// are the load that can wait. The writer keeps the catalog fresh for everyone, and the
/// runtime's threads answer health checks and cached answers; an idle machine sees no
/// difference.
const READER_NICENESS: i32 = 10;

/// The time slice readers ask of the scheduler, in nanoseconds (Linux 6.12 and later; earlier
/// kernels ignore it). A short slice gives a reader that wakes an early deadline, so an
/// uncached answer waits less for its turn on a saturated CPU, while the share of the CPU
/// readers get stays what their niceness gives them. 100 us is the shortest Linux accepts.
const READER_SLICE_NS: u64 = 200_000;

fn yield_to_writer_and_requests() {
    // Linux gives each thread its own niceness (elsewhere this call would lower the process).
    #[cfg(target_os = "linux")]
    if !set_niceness_and_slice() {
        // SAFETY: setpriority takes plain integers; 0 names the calling thread on Linux.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, 0, READER_NICENESS);
        }
    }
}

/// `struct sched_attr` as `sched_setattr(2)` reads it (its first version, 48 bytes).
#[cfg(target_os = "linux")]
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Sets the calling thread's niceness and time slice in one call; `false` when it is refused
/// (a kernel older than 3.14, or a sandbox's system-call filter), and the thread keeps its
/// default slice.
#[cfg(target_os = "linux")]
fn set_niceness_and_slice() -> bool {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice: READER_NICENESS,
        priority: 0,
        runtime: READER_SLICE_NS,
        deadline: 0,
        period: 0,
    };
    // SAFETY: the kernel reads `size` bytes of `attr`, which lives through the call; 0 names
    // the calling thread.
    let outcome =
        unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    outcome == 0
}

// A page is one keyset scan of the index joined to its records, in index order: SQLite needs
// no temporary sort, and no record is read that the page does not return. An offset first finds
// the uri it starts at in the index alone. No LIMIT: the reader stops stepping one row past the
// page and resets the statement, which spares SQLite a counter per row.
macro_rules! page_by_uri {
    ($comparison:literal) => {
        concat!(
            "SELECT k.uri, r.rev, r.record, ",
            // Labels are looked up only while the catalog holds any: SQLite runs the
            // uncorrelated EXISTS once per statement, the lookup (two index probes) per row.
            labels_json!(),
            " FROM query_keys k ",
            "JOIN records r ON r.rowid = k.rid WHERE k.qid = ?1 AND k.key = ?2 AND k.uri ",
            $comparison,
            " ?3 ORDER BY k.uri"
        )
    };
}
/// From a page's first uri (an offset's).
const PAGE_FROM: &str = page_by_uri!(">=");
/// After the last uri of the page before (a cursor's).
const PAGE_AFTER: &str = page_by_uri!(">");
const NTH_URI: &str =
    "SELECT uri FROM query_keys WHERE qid = ?1 AND key = ?2 ORDER BY uri LIMIT 1 OFFSET ?3";
const NTH_URI_FROM_END: &str =
    "SELECT uri FROM query_keys WHERE qid = ?1 AND key = ?2 ORDER BY uri DESC LIMIT 1 OFFSET ?3";

/// How the uri at an offset is found: a position past the middle of its key is counted back
/// from the end, so that no offset steps over more than half the key's index rows.
#[derive(Debug, PartialEq, Eq)]
struct OffsetSeek {
    from_end: bool,
    /// Index rows stepped over in the scan's direction.
    skip: i64,
}

impl OffsetSeek {
    /// The seek to `offset` in a key holding `total`; `None` at or past the end.
    fn of(offset: u64, total: u64) -> Option<OffsetSeek> {
        let rest = total.checked_sub(offset).filter(|&rest| rest > 0)?;
        let (from_end, skip) = if offset >= rest {
            (true, rest - 1)
        } else {
            (false, offset)
        };
        Some(OffsetSeek {
            from_end,
            skip: i64::try_from(skip).ok()?,
        })
    }
}

/// An item from the current row of a page statement (`uri, rev, record, labels`), borrowed
/// from it.
fn page_item<'r>(rows: &'r Rows<'_>) -> ItemRef<'r> {
    ItemRef {
        uri: rows.text(0),
        rev: rows.text(1),
        record_json: rows.text(2),
        labels: rows.text(3),
    }
}

/// An item from a row of `uri, rev, record`, borrowed from the row.
/// A row of uri, rev and record, and its labels when the statement reads them (a fourth
/// column, null while none apply), as an item.
pub(super) fn item_ref<'r>(row: &'r rusqlite::Row<'_>) -> CatalogResult<ItemRef<'r>> {
    let bytes = |i: usize| -> CatalogResult<&'r [u8]> {
        row.get_ref(i)?
            .as_bytes()
            .map_err(|e| CatalogError::Storage(format!("a stored item's column {i}: {e}")))
    };
    let labels = match row.as_ref().column_count() > 3 {
        true => (row.get_ref(3)?.as_bytes_or_null())
            .map_err(|e| CatalogError::Storage(format!("a stored item's labels: {e}")))?
            .unwrap_or_default(),
        false => &[],
    };
    Ok(ItemRef {
        uri: bytes(0)?,
        rev: bytes(1)?,
        record_json: bytes(2)?,
        labels,
    })
}

pub(crate) fn list(
    reader: &mut Reader,
    qid: i64,
    key: &str,
    page: &PageRequest,
) -> CatalogResult<Page> {
    let mut items = Vec::with_capacity(page.limit.min(1000) as usize);
    let (total, more) = read_page(reader, qid, key, page, &mut |item| {
        items.push(Item::try_from(item))
    })?;
    let items = items.into_iter().collect::<CatalogResult<_>>()?;
    Ok(Page { items, total, more })
}

pub(crate) fn write_list(
    reader: &mut Reader,
    qid: i64,
    key: &str,
    page: &PageRequest,
    mut writer: Box<dyn PageWriter>,
) -> CatalogResult<Vec<u8>> {
    let (total, more) = read_page(reader, qid, key, page, &mut |item| writer.item(item))?;
    Ok(writer.finish(total, more))
}

/// Reads one page, handing its items to `emit` in uri order, each borrowed from its row;
/// returns `total` and whether more items follow.
fn read_page(
    reader: &mut Reader,
    qid: i64,
    key: &str,
    page: &PageRequest,
    emit: &mut dyn FnMut(ItemRef<'_>),
) -> CatalogResult<(u64, bool)> {
    let Reader {
        statements, conn, ..
    } = reader;
    let PageStatements {
        begin,
        commit,
        count,
        page_from,
        page_after,
    } = statements;
    // `total` and the items come from one snapshot, so a commit in between cannot split them.
    let _snapshot = Snapshot::begin(conn, begin, commit)?;
    let total = page_total(prepared(count, conn, COUNT)?, qid, key)?;
    let limit = page.limit as usize;
    let (slot, sql, from) = match &page.after {
        Some(after) => (page_after, PAGE_AFTER, Cow::Borrowed(after.as_str())),
        None => match start_uri(conn, qid, key, page.offset, total)? {
            Some(start) => (page_from, PAGE_FROM, Cow::Owned(start)),
            None => return Ok((total, false)),
        },
    };
    let rows = prepared(slot, conn, sql)?.run(&[
        Parameter::Integer(qid),
        Parameter::Text(key),
        Parameter::Text(&from),
    ])?;
    let more = forward(rows, limit, emit)?;
    Ok((total, more))
}

/// The uri at `offset` in a key holding `total` (the empty string, below every uri, at 0);
/// `None` past the end.
fn start_uri(
    conn: &Connection,
    qid: i64,
    key: &str,
    offset: u64,
    total: u64,
) -> CatalogResult<Option<String>> {
    let Some(seek) = OffsetSeek::of(offset, total) else {
        return Ok(None);
    };
    if seek.skip == 0 && !seek.from_end {
        return Ok(Some(String::new()));
    }
    let sql = if seek.from_end {
        NTH_URI_FROM_END
    } else {
        NTH_URI
    };
    Ok(conn
        .prepare_cached(sql)?
        .query_row(params![qid, key, seek.skip], |r| r.get(0))
        .optional()?)
}

/// Hands the first `limit` rows to `emit`; whether a row follows them.
fn forward(
    mut rows: Rows<'_>,
    limit: usize,
    emit: &mut dyn FnMut(ItemRef<'_>),
) -> CatalogResult<bool> {
    for _ in 0..limit {
        if !rows.step()? {
            return Ok(false);
        }
        emit(page_item(&rows));
    }
    rows.step()
}

/// A read transaction, ended when dropped.
struct Snapshot<'s> {
    commit: &'s mut PageStatement,
}

impl<'s> Snapshot<'s> {
    fn begin(
        conn: &Connection,
        begin: &mut Option<PageStatement>,
        commit: &'s mut Option<PageStatement>,
    ) -> CatalogResult<Snapshot<'s>> {
        // Prepared before the transaction begins, so that failing to prepare it cannot leave
        // one open.
        let commit = prepared(commit, conn, "COMMIT")?;
        prepared(begin, conn, "BEGIN")?.run(&[])?.step()?;
        Ok(Snapshot { commit })
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        // A read transaction has nothing to keep; ending it cannot lose anything.
        if let Ok(mut end) = self.commit.run(&[]) {
            let _ = end.step();
        }
    }
}

const COUNT: &str = "SELECT n FROM query_counts WHERE qid = ?1 AND key = ?2";

/// Records filed under one key of one query, by the reader's own [`COUNT`] statement.
fn page_total(count: &mut PageStatement, qid: i64, key: &str) -> CatalogResult<u64> {
    let mut rows = count.run(&[Parameter::Integer(qid), Parameter::Text(key)])?;
    Ok(if rows.step()? {
        stored_count(rows.integer(0))
    } else {
        0
    })
}

/// Records filed under one key of one query.
fn count(conn: &Connection, qid: i64, key: &str) -> CatalogResult<u64> {
    let n: Option<i64> = conn
        .prepare_cached(COUNT)?
        .query_row(params![qid, key], |r| r.get(0))
        .optional()?;
    Ok(stored_count(n.unwrap_or(0)))
}

/// A stored count as a total (never negative).
fn stored_count(n: i64) -> u64 {
    n.max(0) as u64
}

pub(crate) fn count_keys(conn: &Connection, qid: i64, keys: &[String]) -> CatalogResult<Vec<u64>> {
    keys.iter().map(|key| count(conn, qid, key)).collect()
}

/// Each prefix's keys, read as one range of the counts' primary key (see
/// [`svc_spec::prefix_end`]).
pub(crate) fn keys_under(
    conn: &Connection,
    qid: i64,
    prefixes: &[String],
    limit: usize,
) -> CatalogResult<Vec<crate::KeyCounts>> {
    let mut statement = conn.prepare_cached(
        "SELECT key, n FROM query_counts WHERE qid = ?1 AND key >= ?2 AND key < ?3 \
         ORDER BY key LIMIT ?4",
    )?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    prefixes
        .iter()
        .map(|prefix| {
            let end = svc_spec::prefix_end(prefix);
            let rows = statement.query_map(params![qid, prefix, end, limit], |r| {
                Ok((r.get::<_, String>(0)?, stored_count(r.get(1)?)))
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .collect()
}

pub(crate) fn activity(conn: &Connection, since: i64) -> CatalogResult<crate::Activity> {
    use crate::activity::sql;
    let changes = conn
        .prepare_cached(sql::CHANGES_SINCE)?
        .query_map([since], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    let sources = conn
        .prepare_cached(sql::SOURCES_SINCE)?
        .query_map([since], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(crate::Activity::of_rows(changes, sources))
}

pub(crate) fn kind_counts(conn: &Connection) -> CatalogResult<KindCounts> {
    let mut stmt = conn.prepare_cached("SELECT collection, n FROM kind_counts")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    let mut counts = KindCounts::new();
    for row in rows {
        let (collection, n) = row?;
        counts.insert(collection, n.max(0) as u64);
    }
    Ok(counts)
}

pub(crate) fn cursor(conn: &Connection, source: &str) -> CatalogResult<Option<CursorPosition>> {
    Ok(conn
        .prepare_cached("SELECT endpoint, cursor, event_time_us FROM cursors WHERE source = ?1")?
        .query_row([source], |r| {
            Ok(CursorPosition {
                source: source.to_string(),
                endpoint: r.get(0)?,
                cursor: r.get(1)?,
                event_time: r.get::<_, Option<i64>>(2)?.map(UnixMicros),
            })
        })
        .optional()?)
}

pub(crate) fn cursors(conn: &Connection) -> CatalogResult<Vec<CursorPosition>> {
    let mut statement = conn.prepare_cached(crate::engine::CURSORS)?;
    let rows = statement.query_map([], |r| {
        Ok(CursorPosition {
            source: r.get(0)?,
            endpoint: r.get(1)?,
            cursor: r.get(2)?,
            event_time: r.get::<_, Option<i64>>(3)?.map(UnixMicros),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The record stored at the uri `?1`, unless its account is inactive or it or its account is
/// taken down.
const RECORD_AT: &str = "SELECT uri, rev, record FROM records \
     WHERE uri = ?1 AND record IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM inactive_accounts WHERE did = records.author) \
     AND NOT EXISTS (SELECT 1 FROM takedowns WHERE subject IN (records.uri, records.author))";

pub(crate) fn get(conn: &Connection, uri: &str) -> CatalogResult<Option<Item>> {
    let mut statement = conn.prepare_cached(RECORD_AT)?;
    let mut rows = statement.query([uri])?;
    rows.next()?
        .map(|row| item_ref(row).and_then(Item::try_from))
        .transpose()
}

/// Whether the uri `?1` names a record [`RECORD_AT`] reads; `typeof` tells a null from a
/// record without reading the record's overflow pages.
const HELD_AT: &str = "SELECT 1 FROM records \
     WHERE uri = ?1 AND typeof(record) <> 'null' \
     AND NOT EXISTS (SELECT 1 FROM inactive_accounts WHERE did = records.author) \
     AND NOT EXISTS (SELECT 1 FROM takedowns WHERE subject IN (records.uri, records.author))";

pub(crate) fn write_records(
    conn: &Connection,
    uris: &[String],
    mut writer: Box<dyn PageWriter>,
) -> CatalogResult<Vec<u8>> {
    let mut statement = conn.prepare_cached(RECORD_AT)?;
    let mut found = 0;
    for uri in uris {
        let mut rows = statement.query([uri])?;
        if let Some(row) = rows.next()? {
            writer.item(item_ref(row)?);
            found += 1;
        }
    }
    Ok(writer.finish(found, false))
}

pub(crate) fn held(conn: &Connection, uris: &[String]) -> CatalogResult<Vec<String>> {
    let mut statement = conn.prepare_cached(HELD_AT)?;
    let mut held = Vec::new();
    for uri in uris {
        if statement.exists([uri])? {
            held.push(uri.clone());
        }
    }
    Ok(held)
}

pub(crate) fn write_repository_records(
    conn: &Connection,
    slice: &crate::RepositorySlice,
    after: Option<&str>,
    limit: usize,
    mut writer: Box<dyn PageWriter>,
) -> CatalogResult<Vec<u8>> {
    let (from, to) = slice.range(after);
    let mut statement = conn.prepare_cached(crate::engine::REPOSITORY_RECORDS)?;
    let fetch = limit.saturating_add(1) as i64;
    let mut rows = statement.query(params![from, to, slice.did, fetch])?;
    let mut written = 0;
    while let Some(row) = rows.next()? {
        if written == limit {
            return Ok(writer.finish(written as u64, true));
        }
        writer.item(item_ref(row)?);
        written += 1;
    }
    Ok(writer.finish(written as u64, false))
}

pub(crate) fn takedown(conn: &Connection, subject: &str) -> CatalogResult<Standing> {
    let mut statement = conn.prepare_cached(crate::engine::TAKEDOWN_OF)?;
    let rows = statement.query_map([subject], |r| {
        Ok(Takedown {
            reference: r.get(0)?,
            applied_at: UnixMillis(r.get(1)?),
            source: r.get(2)?,
        })
    })?;
    Ok(Standing::of_rows(
        rows.collect::<rusqlite::Result<Vec<_>>>()?,
    ))
}

pub(crate) fn indexer_heartbeat(conn: &Connection) -> CatalogResult<Option<UnixMillis>> {
    Ok(conn
        .prepare_cached(replication_log::sql::HEARTBEAT)?
        .query_row([], |r| r.get(0).map(UnixMillis))
        .optional()?)
}

pub(crate) fn changes_after(
    conn: &Connection,
    seq: i64,
    limit: usize,
) -> CatalogResult<Vec<StreamRow>> {
    let mut statement = conn.prepare_cached(stream::sql::AFTER)?;
    let rows = statement.query_map(params![seq, limit as i64], |r| {
        Ok(StreamRow {
            seq: r.get(0)?,
            at_ms: r.get(1)?,
            uri: r.get(2)?,
            was_live: r.get(3)?,
            is_live: r.get(4)?,
            before: r.get(5)?,
            after: r.get(6)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(crate) fn change_bounds(conn: &Connection) -> CatalogResult<StreamBounds> {
    Ok(conn
        .prepare_cached(stream::sql::BOUNDS)?
        .query_row([], |r| {
            Ok(StreamBounds {
                oldest: r.get(0)?,
                newest: r.get(1)?,
            })
        })?)
}

pub(crate) fn log_after(conn: &Connection, seq: i64, limit: usize) -> CatalogResult<Vec<LogRow>> {
    let mut statement = conn.prepare_cached(replication_log::sql::AFTER)?;
    let rows = statement.query_map(params![seq, limit as i64], |r| {
        Ok(LogRow {
            seq: r.get(0)?,
            at_ms: r.get(1)?,
            keys: r.get(2)?,
            uris: r.get(3)?,
            kinds: r.get(4)?,
            everything: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(crate) fn last_logged(conn: &Connection) -> CatalogResult<i64> {
    Ok(conn.query_row(replication_log::sql::LAST, [], |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use super::{OffsetSeek, ReaderPool};
    use std::time::Duration;

    /// A statement that never ends on its own: it counts without a bound.
    const ENDLESS: &str =
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n";

    #[tokio::test]
    async fn a_read_whose_caller_left_stops_and_frees_its_reader() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("catalog.db");
        rusqlite::Connection::open(&path).expect("a database file");
        let pool = ReaderPool::open(&path, 1).expect("one reader");
        let endless = pool.run(|conn| Ok(conn.query_row(ENDLESS, [], |r| r.get::<_, i64>(0))?));
        let left = tokio::time::timeout(Duration::from_millis(100), endless).await;
        assert!(left.is_err(), "the endless read answered: {left:?}");
        let next = pool.run(|conn| Ok(conn.query_row("SELECT 7", [], |r| r.get::<_, i64>(0))?));
        let answered = tokio::time::timeout(Duration::from_secs(1), next).await;
        assert_eq!(
            answered.ok().and_then(Result::ok),
            Some(7),
            "the only reader was still busy a second after its caller left"
        );
    }

    #[test]
    fn offsets_past_the_middle_count_back_from_the_end() {
        let seek = |from_end, skip| Some(OffsetSeek { from_end, skip });
        assert_eq!(OffsetSeek::of(0, 100), seek(false, 0));
        assert_eq!(OffsetSeek::of(49, 100), seek(false, 49));
        assert_eq!(OffsetSeek::of(50, 100), seek(true, 49));
        assert_eq!(OffsetSeek::of(95, 100), seek(true, 4));
        assert_eq!(OffsetSeek::of(99, 100), seek(true, 0));
        assert_eq!(OffsetSeek::of(100, 100), None);
        assert_eq!(OffsetSeek::of(u64::MAX, 100), None);
        assert_eq!(OffsetSeek::of(0, 0), None);
        assert_eq!(OffsetSeek::of(3, 5), seek(true, 1));
        assert_eq!(OffsetSeek::of(0, 1), seek(false, 0));
    }
}
