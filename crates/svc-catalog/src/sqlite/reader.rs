//! Read paths: every list is a range scan of one (query, key) prefix of `query_keys` in uri
//! order, joined to `records` by rowid; totals come from `query_counts`, never from counting.

use crate::changelog::LogRow;
use crate::{CatalogError, CatalogResult, CursorPosition, Item, KindCounts, Page, PageRequest};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// The read side of an SQLite catalog: a pool of read-only connections used from blocking
/// threads.
pub struct ReaderPool {
    connections: Arc<Mutex<Vec<Connection>>>,
    permits: Arc<Semaphore>,
    path: std::path::PathBuf,
}

impl ReaderPool {
    pub(crate) fn open(path: &Path, size: usize) -> CatalogResult<ReaderPool> {
        let mut connections = Vec::with_capacity(size);
        for _ in 0..size {
            connections.push(super::open_reader(path)?);
        }
        Ok(ReaderPool {
            connections: Arc::new(Mutex::new(connections)),
            permits: Arc::new(Semaphore::new(size)),
            path: path.to_path_buf(),
        })
    }

    /// Runs `work` on a pooled connection on a blocking thread.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> CatalogResult<T> + Send + 'static,
    ) -> CatalogResult<T> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| CatalogError::Closed)?;
        let pool = Arc::clone(&self.connections);
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let taken = pool.lock().map_err(|_| CatalogError::Closed)?.pop();
            // A connection lost to a panicking reader is replaced.
            let conn = match taken {
                Some(conn) => conn,
                None => super::open_reader(&path)?,
            };
            let outcome = work(&conn);
            if let Ok(mut connections) = pool.lock() {
                connections.push(conn);
            }
            outcome
        })
        .await
        .map_err(|e| CatalogError::Storage(format!("reader task failed: {e}")))?
    }
}

// The rows an offset skips are stepped over in the index alone: joined to records, each would
// cost a lookup of a record nobody reads.
const PAGE_FROM_START: &str = "SELECT p.uri, r.author, r.rev, r.record FROM \
     (SELECT uri, rid FROM query_keys WHERE qid = ?1 AND key = ?2 ORDER BY uri LIMIT ?3 OFFSET ?4) p \
     JOIN records r ON r.rowid = p.rid ORDER BY p.uri";
const PAGE_FROM_END: &str = "SELECT p.uri, r.author, r.rev, r.record FROM \
     (SELECT uri, rid FROM query_keys WHERE qid = ?1 AND key = ?2 ORDER BY uri DESC LIMIT ?3 OFFSET ?4) p \
     JOIN records r ON r.rowid = p.rid ORDER BY p.uri DESC";

/// Which index rows a page at an offset reads: a page past the middle of its key is counted
/// back from the end, so that no offset skips more than half the key's rows.
#[derive(Debug, PartialEq, Eq)]
struct OffsetSpan {
    from_end: bool,
    /// Rows skipped in the scan's direction.
    skip: i64,
    /// Rows read after them.
    take: i64,
}

impl OffsetSpan {
    /// `fetch` rows from `offset` of a key holding `total`; `None` past the end.
    fn of(offset: u64, fetch: u64, total: u64) -> Option<OffsetSpan> {
        let rest = total.checked_sub(offset).filter(|&rest| rest > 0)?;
        let take = fetch.min(rest);
        let (from_end, skip) = if offset > rest {
            (true, rest - take)
        } else {
            (false, offset)
        };
        Some(OffsetSpan {
            from_end,
            skip: i64::try_from(skip).ok()?,
            take: i64::try_from(take).ok()?,
        })
    }
}

/// An item from a row of `uri, author, rev, record`.
fn item(row: &rusqlite::Row<'_>) -> rusqlite::Result<Item> {
    Ok(Item {
        uri: row.get(0)?,
        author: row.get(1)?,
        rev: row.get(2)?,
        record_json: row.get(3)?,
    })
}

pub(crate) fn list(
    conn: &Connection,
    qid: i64,
    key: &str,
    page: &PageRequest,
) -> CatalogResult<Page> {
    // `total` and the items come from one snapshot, so a commit in between cannot split them.
    let _snapshot = Snapshot::begin(conn)?;
    let total = count(conn, qid, key)?;
    let fetch = i64::from(page.limit) + 1;
    let mut items = Vec::with_capacity(page.limit.min(1000) as usize);
    let mut push = |row: &rusqlite::Row<'_>| -> rusqlite::Result<()> {
        items.push(item(row)?);
        Ok(())
    };
    match &page.after {
        Some(after) => {
            let mut stmt = conn.prepare_cached(
                "SELECT k.uri, r.author, r.rev, r.record FROM query_keys k JOIN records r ON r.rowid = k.rid \
                 WHERE k.qid = ?1 AND k.key = ?2 AND k.uri > ?3 ORDER BY k.uri LIMIT ?4",
            )?;
            let mut rows = stmt.query(params![qid, key, after, fetch])?;
            while let Some(row) = rows.next()? {
                push(row)?;
            }
        }
        None => {
            if let Some(span) = OffsetSpan::of(page.offset, fetch as u64, total) {
                let mut stmt = conn.prepare_cached(if span.from_end {
                    PAGE_FROM_END
                } else {
                    PAGE_FROM_START
                })?;
                let mut rows = stmt.query(params![qid, key, span.take, span.skip])?;
                while let Some(row) = rows.next()? {
                    push(row)?;
                }
                if span.from_end {
                    items.reverse();
                }
            }
        }
    }
    let more = items.len() > page.limit as usize;
    items.truncate(page.limit as usize);
    Ok(Page { items, total, more })
}

/// A read transaction from prepared statements (a transaction begun by text would be parsed
/// again for every page), ended when dropped.
struct Snapshot<'c>(&'c Connection);

impl<'c> Snapshot<'c> {
    fn begin(conn: &'c Connection) -> rusqlite::Result<Snapshot<'c>> {
        conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(Snapshot(conn))
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        // A read transaction has nothing to keep; ending it cannot lose anything.
        if let Ok(mut end) = self.0.prepare_cached("COMMIT") {
            let _ = end.execute([]);
        }
    }
}

/// Records filed under one key of one query.
fn count(conn: &Connection, qid: i64, key: &str) -> CatalogResult<u64> {
    let n: Option<i64> = conn
        .prepare_cached("SELECT n FROM query_counts WHERE qid = ?1 AND key = ?2")?
        .query_row(params![qid, key], |r| r.get(0))
        .optional()?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

pub(crate) fn count_keys(conn: &Connection, qid: i64, keys: &[String]) -> CatalogResult<Vec<u64>> {
    keys.iter().map(|key| count(conn, qid, key)).collect()
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
                event_time_us: r.get(2)?,
            })
        })
        .optional()?)
}

pub(crate) fn get(conn: &Connection, uri: &str) -> CatalogResult<Option<Item>> {
    Ok(conn
        .prepare_cached(
            "SELECT uri, author, rev, record FROM records WHERE uri = ?1 AND record IS NOT NULL",
        )?
        .query_row([uri], item)
        .optional()?)
}

pub(crate) fn indexer_heartbeat(conn: &Connection) -> CatalogResult<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT heartbeat_ms FROM indexer_state WHERE id = 1")?
        .query_row([], |r| r.get(0))
        .optional()?)
}

pub(crate) fn log_after(conn: &Connection, seq: i64, limit: usize) -> CatalogResult<Vec<LogRow>> {
    let mut statement = conn.prepare_cached(
        "SELECT seq, at_ms, keys, uris, kinds, everything FROM change_log \
         WHERE seq > ?1 ORDER BY seq LIMIT ?2",
    )?;
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
    Ok(
        conn.query_row("SELECT coalesce(max(seq), 0) FROM change_log", [], |r| {
            r.get(0)
        })?,
    )
}

#[cfg(test)]
mod tests {
    use super::OffsetSpan;

    #[test]
    fn offsets_past_the_middle_count_back_from_the_end() {
        let span = |offset, fetch, total| OffsetSpan::of(offset, fetch, total);
        let forward = |skip, take| {
            Some(OffsetSpan {
                from_end: false,
                skip,
                take,
            })
        };
        let backward = |skip, take| {
            Some(OffsetSpan {
                from_end: true,
                skip,
                take,
            })
        };
        assert_eq!(span(0, 11, 100), forward(0, 11));
        assert_eq!(span(50, 11, 100), forward(50, 11));
        assert_eq!(span(51, 11, 100), backward(38, 11));
        assert_eq!(span(95, 11, 100), backward(0, 5));
        assert_eq!(span(99, 11, 100), backward(0, 1));
        assert_eq!(span(100, 11, 100), None);
        assert_eq!(span(u64::MAX, 11, 100), None);
        assert_eq!(span(0, 11, 0), None);
        assert_eq!(span(3, 11, 5), backward(0, 2));
    }
}
