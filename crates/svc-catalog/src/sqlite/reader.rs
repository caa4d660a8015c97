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
    let snapshot = conn.unchecked_transaction()?;
    let conn: &Connection = &snapshot;
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
            let offset = i64::try_from(page.offset).unwrap_or(i64::MAX);
            if page.offset < total {
                // The rows an offset skips are stepped over in the index alone: joined to
                // records, each would cost a lookup of a record nobody reads.
                let mut stmt = conn.prepare_cached(
                    "SELECT p.uri, r.author, r.rev, r.record FROM \
                     (SELECT uri, rid FROM query_keys WHERE qid = ?1 AND key = ?2 ORDER BY uri LIMIT ?3 OFFSET ?4) p \
                     JOIN records r ON r.rowid = p.rid ORDER BY p.uri",
                )?;
                let mut rows = stmt.query(params![qid, key, fetch, offset])?;
                while let Some(row) = rows.next()? {
                    push(row)?;
                }
            }
        }
    }
    let more = items.len() > page.limit as usize;
    items.truncate(page.limit as usize);
    Ok(Page { items, total, more })
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
