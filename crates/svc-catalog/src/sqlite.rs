//! The embedded backend: one SQLite file in WAL mode, one writer thread that owns the only
//! write connection, and reader threads, each with a read-only connection of its own.

/// The labels in force on a record `r` (a row of `records`) or its author, as a JSON array
/// of `{src, val, cts}`, `!takedown` aside; NULL while the catalog holds no label: every
/// statement that returns records to a page writes them the same way.
macro_rules! labels_json {
    () => {
        "CASE WHEN EXISTS (SELECT 1 FROM labels) THEN ( \
           SELECT json_group_array(json_object('src', l.src, 'val', l.val, 'cts', l.cts)) \
           FROM labels l WHERE l.subject IN (r.uri, r.author) AND l.neg = 0 \
           AND l.val <> '!takedown') END"
    };
}

mod bulk;
mod checkpoint;
mod engine;
mod labels;
mod migrations;
mod page_statement;
mod reader;
mod record_row;
mod search;
mod search_rows;

use crate::engine::EngineReads;
use crate::engine_catalog::EngineCatalog;
use crate::keys_column::QueryIds;
use crate::replication_log::{LogRow, LogSource};
use crate::stream::{StreamBounds, StreamRow};
use crate::{
    CatalogError, CatalogFuture, CatalogResult, CursorPosition, Item, KindCounts, Page,
    PageRequest, PageWriter,
};
use crate::{LabelView, Standing};
use engine::SqliteEngine;
pub use reader::ReaderPool;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use svc_spec::{IndexSet, QueryId};
use svc_syntax::{AtUri, UnixMillis};

impl From<rusqlite::Error> for CatalogError {
    fn from(error: rusqlite::Error) -> Self {
        use crate::Refusal;
        use rusqlite::ErrorCode::{ConstraintViolation, TooBig, TypeMismatch};
        // The value, not the store: a constraint, a string or blob over SQLite's length
        // limit, a value of the wrong type.
        let reason = match error.sqlite_error_code() {
            Some(ConstraintViolation) => Refusal::Constraint,
            Some(TooBig) => Refusal::Limit,
            Some(TypeMismatch) => Refusal::Value,
            _ => return CatalogError::Storage(error.to_string()),
        };
        CatalogError::Refused {
            reason,
            message: error.to_string(),
        }
    }
}

/// The catalog on one SQLite file.
pub type SqliteCatalog = EngineCatalog<ReaderPool>;

/// Page cache of the write connection (negative: KiB).
const WRITER_CACHE_KIB: i64 = -32_000;

/// Checkpoint every 16,384 pages of WAL (128 MiB with 8 KiB pages) instead of SQLite's 1,000:
/// hot pages (counts, recent keys) are copied back once per checkpoint, so fewer checkpoints
/// mean far fewer writes on ingest.
const WAL_AUTOCHECKPOINT_PAGES: i64 = 16_384;

pub(crate) fn configure(conn: &Connection) -> rusqlite::Result<()> {
    every_connection(conn)?;
    // Records average over half a KiB: 8 KiB pages pack them with less waste at page ends.
    // Takes effect on new files only.
    conn.pragma_update(None, "page_size", 8192)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // NORMAL in WAL mode: a power cut may lose the last commits, never corrupts; the cursor
    // is committed with the records, so a restart replays exactly what was lost.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
    writer_settings(conn)
}

/// Settings of the writer's and the readers' connections alike.
fn every_connection(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    // A prepared statement keeps the plan it was prepared with. Without this SQLite prepares
    // a statement again whenever a new value is bound to a parameter its plan looked at (a
    // page's `LIMIT ?`): a tenth of the instructions of an uncached page went to that.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

/// The write connection's settings that a bulk load changes for its duration; it puts them
/// back with this.
pub(crate) fn writer_settings(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)?;
    conn.pragma_update(None, "threads", 0)?;
    Ok(())
}

impl EngineCatalog<ReaderPool> {
    /// Opens (or creates) the catalog file, runs pending migrations, and rebuilds the index
    /// keys of any query whose definition is new or changed since the last start.
    pub fn open(path: &Path, queries: IndexSet, readers: usize) -> CatalogResult<SqliteCatalog> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| CatalogError::Storage(format!("{}: {e}", parent.display())))?;
        }
        let mut conn = Connection::open(path)?;
        configure(&conn)?;
        let found: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if found > migrations::LATEST {
            return Err(CatalogError::Storage(format!(
                "{} has schema version {found}, newer than this build's {}",
                path.display(),
                migrations::LATEST
            )));
        }
        migrations::run(&mut conn)?;
        let ids = load_query_ids(&conn)?;
        let readers = ReaderPool::open(path, readers.max(1))?;
        let engine = SqliteEngine {
            conn,
            ids,
            writer_lock: None,
            bulk_words: Default::default(),
        };
        let catalog = EngineCatalog::start(engine, &queries, readers, SqliteLog::shared(path))?;
        checkpoint::spawn(path.to_path_buf(), checkpoint::After::Start);
        Ok(catalog)
    }

    /// Opens a catalog file an indexer (another process) writes, for reads only.
    pub fn open_reader(path: &Path, readers: usize) -> CatalogResult<SqliteCatalog> {
        if !path.exists() {
            return Err(CatalogError::Storage(format!(
                "{}: no catalog there (a query replica reads the file an indexer writes)",
                path.display()
            )));
        }
        let conn = open_reader(path)?;
        let found: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if found != migrations::LATEST {
            return Err(CatalogError::Storage(format!(
                "{} has schema version {found}, this build reads {} (start its indexer first)",
                path.display(),
                migrations::LATEST
            )));
        }
        let ids = load_query_ids(&conn)?;
        let readers = ReaderPool::open(path, readers.max(1))?;
        EngineCatalog::reader(ids, readers, SqliteLog::shared(path))
    }
}

/// The replication log as a follower reads it: a connection of its own, polled, opened when a
/// follower first reads (an indexer that writes from the start never does).
struct SqliteLog {
    path: std::path::PathBuf,
    conn: std::sync::Mutex<Option<Connection>>,
}

impl SqliteLog {
    fn shared(path: &Path) -> std::sync::Arc<dyn LogSource> {
        std::sync::Arc::new(SqliteLog {
            path: path.to_path_buf(),
            conn: std::sync::Mutex::new(None),
        })
    }

    fn with<T>(&self, work: impl FnOnce(&Connection) -> CatalogResult<T>) -> CatalogResult<T> {
        let mut conn = self.conn.lock().map_err(|_| CatalogError::Closed)?;
        if conn.is_none() {
            *conn = Some(open_reader(&self.path)?);
        }
        conn.as_ref().map_or(Err(CatalogError::Closed), work)
    }
}

// The follower runs on a thread of its own: these short reads block it, and nothing else.
impl LogSource for SqliteLog {
    fn entries_after(&self, seq: i64, limit: usize) -> CatalogFuture<'_, Vec<LogRow>> {
        let rows = self.with(|conn| reader::log_after(conn, seq, limit));
        Box::pin(async move { rows })
    }

    fn last_entry(&self) -> CatalogFuture<'_, i64> {
        let last = self.with(reader::last_logged);
        Box::pin(async move { last })
    }

    fn query_ids(&self) -> CatalogFuture<'_, QueryIds> {
        let ids = self.with(load_query_ids);
        Box::pin(async move { ids })
    }

    fn changed(&self, poll: std::time::Duration) -> CatalogFuture<'_, ()> {
        Box::pin(async move {
            tokio::time::sleep(poll).await;
            Ok(())
        })
    }
}

fn load_query_ids(conn: &Connection) -> CatalogResult<QueryIds> {
    let mut stmt = conn.prepare("SELECT qid, name FROM queries")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
    let mut ids = QueryIds::default();
    for row in rows {
        let (qid, name) = row?;
        ids.insert(QueryId::new(&name), qid);
    }
    Ok(ids)
}

/// Opens a read-only connection (readers never write).
pub(crate) fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    every_connection(&conn)?;
    conn.pragma_update(None, "query_only", true)?;
    conn.pragma_update(None, "cache_size", -16_000)?;
    Ok(conn)
}

impl EngineReads for ReaderPool {
    fn list(&self, qid: i64, key: String, page: PageRequest) -> CatalogFuture<'_, Page> {
        Box::pin(self.run_reader(move |reader| reader::list(reader, qid, &key, &page)))
    }

    fn write_list(
        &self,
        qid: i64,
        key: String,
        page: PageRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        Box::pin(
            self.run_reader(move |reader| reader::write_list(reader, qid, &key, &page, writer)),
        )
    }

    fn count_keys(&self, qid: i64, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>> {
        Box::pin(self.run(move |conn| reader::count_keys(conn, qid, &keys)))
    }

    fn keys_under(
        &self,
        qid: i64,
        prefixes: Vec<String>,
        limit: usize,
    ) -> CatalogFuture<'_, Vec<crate::KeyCounts>> {
        Box::pin(self.run(move |conn| reader::keys_under(conn, qid, &prefixes, limit)))
    }

    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts> {
        Box::pin(self.run(reader::kind_counts))
    }

    fn activity(&self, since: i64) -> CatalogFuture<'_, crate::Activity> {
        Box::pin(self.run(move |conn| reader::activity(conn, since)))
    }

    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>> {
        Box::pin(self.run(move |conn| reader::cursor(conn, &source)))
    }

    fn cursors(&self) -> CatalogFuture<'_, Vec<CursorPosition>> {
        Box::pin(self.run(reader::cursors))
    }

    fn get(&self, uri: AtUri) -> CatalogFuture<'_, Option<Item>> {
        Box::pin(self.run(move |conn| reader::get(conn, &uri)))
    }

    fn get_many(&self, uris: Vec<String>) -> CatalogFuture<'_, Vec<Option<Item>>> {
        Box::pin(self.run(move |conn| uris.iter().map(|uri| reader::get(conn, uri)).collect()))
    }

    fn write_records(
        &self,
        uris: Vec<String>,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        Box::pin(self.run(move |conn| reader::write_records(conn, &uris, writer)))
    }

    fn held(&self, uris: Vec<String>) -> CatalogFuture<'_, Vec<String>> {
        Box::pin(self.run(move |conn| reader::held(conn, &uris)))
    }

    fn write_repository_records(
        &self,
        slice: crate::RepositorySlice,
        after: Option<String>,
        limit: usize,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        Box::pin(self.run(move |conn| {
            reader::write_repository_records(conn, &slice, after.as_deref(), limit, writer)
        }))
    }

    fn takedown(&self, subject: String) -> CatalogFuture<'_, Standing> {
        Box::pin(self.run(move |conn| reader::takedown(conn, &subject)))
    }

    fn labels(&self, subjects: Vec<String>, limit: usize) -> CatalogFuture<'_, Vec<LabelView>> {
        Box::pin(self.run(move |conn| labels::labels(conn, &subjects, limit)))
    }

    fn search(
        &self,
        request: crate::SearchRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        Box::pin(self.run_reader(move |reader| search::search(reader, &request, writer)))
    }

    fn indexer_heartbeat(&self) -> CatalogFuture<'_, Option<UnixMillis>> {
        Box::pin(self.run(reader::indexer_heartbeat))
    }

    fn changes_after(&self, seq: i64, limit: usize) -> CatalogFuture<'_, Vec<StreamRow>> {
        Box::pin(self.run(move |conn| reader::changes_after(conn, seq, limit)))
    }

    fn change_bounds(&self) -> CatalogFuture<'_, StreamBounds> {
        Box::pin(self.run(reader::change_bounds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication_log::Follower;
    use crate::tests::upsert;
    use crate::{CatalogRead, CatalogRole, CatalogWrite, ChangeClock};
    use serde_json::json;
    use std::sync::{Arc, RwLock};

    fn last_seq(path: &Path) -> i64 {
        let conn = Connection::open(path).unwrap();
        reader::last_logged(&conn).unwrap()
    }

    /// A follower applies entries one by one while they follow on; when entries it had not
    /// read were trimmed, it drops everything. The heartbeat trims old entries, never the last.
    #[tokio::test]
    async fn followers_drop_everything_after_a_trimmed_gap_and_the_heartbeat_trims() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.db");
        let queries = svc_spec::QuerySet::embedded();
        let catalog = SqliteCatalog::open(&path, queries.indexes().clone(), 1).unwrap();
        let bounty = |n: u32, requester: &str| {
            upsert(
                &format!("at://did:plc:a/dev.svc.bounty/{n}"),
                "3a",
                json!({"requester": requester}),
            )
        };
        let query = QueryId::new("bountiesByRequester");
        let start = last_seq(&path);

        let clock = Arc::new(ChangeClock::default());
        let ids = Arc::new(RwLock::new(
            load_query_ids(&Connection::open(&path).unwrap()).unwrap(),
        ));
        let mut follower = Follower::at(start, Arc::clone(&ids), Arc::clone(&clock));
        let source = SqliteLog::shared(&path);
        let first = bounty(1, "did:plc:r");
        let crate::Change::Upsert(filed) = &first else {
            panic!("an upsert")
        };
        let (_, key) = filed
            .keys
            .iter()
            .find(|(q, _)| *q == query)
            .expect("filed under the query")
            .clone();
        catalog.apply(vec![first], None).await.unwrap();
        assert_eq!(follower.step(source.as_ref()).await.unwrap(), 1);
        assert_eq!(clock.key_version(&query, &key), 1);
        assert_eq!(clock.key_version(&query, "did:plc:other"), 0);

        // Two commits, the first trimmed before the follower reads it: a gap.
        catalog
            .apply(vec![bounty(2, "did:plc:s")], None)
            .await
            .unwrap();
        catalog
            .apply(vec![bounty(3, "did:plc:t")], None)
            .await
            .unwrap();
        let last = last_seq(&path);
        Connection::open(&path)
            .unwrap()
            .execute("DELETE FROM change_log WHERE seq < ?1", [last])
            .unwrap();
        assert_eq!(follower.step(source.as_ref()).await.unwrap(), 1);
        assert_eq!(
            clock.key_version(&query, "did:plc:other"),
            1,
            "everything dropped"
        );

        // Entries older than the log keeps are trimmed by the next heartbeat, the last kept.
        catalog
            .apply(vec![bounty(4, "did:plc:u")], None)
            .await
            .unwrap();
        let conn = Connection::open(&path).unwrap();
        conn.execute("UPDATE change_log SET at_ms = 0", []).unwrap();
        catalog
            .heartbeat(std::time::Duration::from_secs(600))
            .await
            .unwrap();
        let kept: Vec<i64> = conn
            .prepare("SELECT seq FROM change_log")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(kept, vec![last_seq(&path)]);
        assert_eq!(kept, vec![last + 1]);
        assert!(catalog.indexer_heartbeat().await.unwrap().is_some());
    }
}
