//! The embedded backend: one SQLite file in WAL mode, one writer thread that owns the only
//! write connection, and a pool of reader connections used from blocking threads.

mod checkpoint;
mod keys_column;
mod migrations;
mod reader;
mod writer;

use crate::spec::QuerySet;
use crate::{
    AccountStatus, ApplyReport, Catalog, CatalogError, CatalogFuture, CatalogResult, Change,
    ChangeClock, CursorPosition, Item, KindCounts, Page, PageRequest,
};
use reader::ReaderPool;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::sync::{Arc, mpsc};
use std::thread;
use tokio::sync::oneshot;
use writer::{WriteJob, Writer};

impl From<rusqlite::Error> for CatalogError {
    fn from(error: rusqlite::Error) -> Self {
        CatalogError::Storage(error.to_string())
    }
}

pub(crate) struct Shared {
    /// Database id (`queries.qid`) of each query, by position in the query set.
    pub qids: Vec<i64>,
    pub clock: ChangeClock,
}

pub struct SqliteCatalog {
    shared: Arc<Shared>,
    writer: mpsc::Sender<WriteJob>,
    readers: ReaderPool,
}

/// Page cache of the write connection (negative: KiB).
const WRITER_CACHE_KIB: i64 = -32_000;

/// Checkpoint every 16,384 pages of WAL (128 MiB with 8 KiB pages) instead of SQLite's 1,000:
/// hot pages (counts, recent keys) are copied back once per checkpoint, so fewer checkpoints
/// mean far fewer writes on ingest.
const WAL_AUTOCHECKPOINT_PAGES: i64 = 16_384;

pub(crate) fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
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

/// The write connection's settings that a bulk load changes for its duration; it puts them
/// back with this.
pub(crate) fn writer_settings(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)?;
    conn.pragma_update(None, "threads", 0)?;
    Ok(())
}

impl SqliteCatalog {
    /// Opens (or creates) the catalog file, runs pending migrations, and rebuilds the index
    /// keys of any query whose definition is new or changed since the last start.
    pub fn open(path: &Path, queries: QuerySet, readers: usize) -> CatalogResult<SqliteCatalog> {
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
        if writer::recover_interrupted_bulk(&conn)? {
            tracing::warn!(db = %path.display(), "an interrupted bulk load was rolled back; the catalog is empty");
        }
        let inactive = writer::load_inactive(&conn)?;
        let qids = writer::register_queries(&mut conn, &queries, &inactive)?;
        let shared = Arc::new(Shared {
            qids,
            clock: ChangeClock::default(),
        });
        // The writer's transactions take the write lock when they begin, so a checkpoint that
        // holds it back makes them wait (busy timeout) instead of failing on a stale snapshot.
        conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
        let (sender, receiver) = mpsc::channel();
        let writer = Writer::new(conn, Arc::clone(&shared), inactive);
        thread::Builder::new()
            .name("catalog-writer".into())
            .spawn(move || writer.run(receiver))
            .map_err(|e| CatalogError::Storage(e.to_string()))?;
        let readers = ReaderPool::open(path, readers.max(1))?;
        checkpoint::spawn(path.to_path_buf(), checkpoint::After::Start);
        Ok(SqliteCatalog {
            shared,
            writer: sender,
            readers,
        })
    }
}

/// Opens a read-only connection (readers never write).
pub(crate) fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    conn.pragma_update(None, "query_only", true)?;
    conn.pragma_update(None, "cache_size", -16_000)?;
    Ok(conn)
}

impl SqliteCatalog {
    /// Sends a job to the writer thread and waits for its reply.
    fn ask<T: Send + 'static>(
        &self,
        job: impl FnOnce(oneshot::Sender<CatalogResult<T>>) -> WriteJob,
    ) -> CatalogFuture<'_, T> {
        let (reply, answer) = oneshot::channel();
        let job = job(reply);
        Box::pin(async move {
            self.writer.send(job).map_err(|_| CatalogError::Closed)?;
            answer.await.map_err(|_| CatalogError::Closed)?
        })
    }
}

impl Catalog for SqliteCatalog {
    fn apply(
        &self,
        changes: Vec<Change>,
        cursor: Option<CursorPosition>,
    ) -> CatalogFuture<'_, ApplyReport> {
        self.ask(|reply| WriteJob::Apply {
            changes,
            cursor,
            reply,
        })
    }

    fn list(&self, query: usize, key: String, page: PageRequest) -> CatalogFuture<'_, Page> {
        Box::pin(async move {
            let qid = self.qid(query)?;
            self.readers
                .run(move |conn| reader::list(conn, qid, &key, &page))
                .await
        })
    }

    fn count_keys(&self, query: usize, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>> {
        Box::pin(async move {
            let qid = self.qid(query)?;
            self.readers
                .run(move |conn| reader::count_keys(conn, qid, &keys))
                .await
        })
    }

    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts> {
        Box::pin(async move { self.readers.run(reader::kind_counts).await })
    }

    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>> {
        Box::pin(async move {
            self.readers
                .run(move |conn| reader::cursor(conn, &source))
                .await
        })
    }

    fn get(&self, uri: String) -> CatalogFuture<'_, Option<Item>> {
        Box::pin(async move { self.readers.run(move |conn| reader::get(conn, &uri)).await })
    }

    fn set_account(&self, did: String, status: AccountStatus) -> CatalogFuture<'_, ()> {
        self.ask(|reply| WriteJob::Account { did, status, reply })
    }

    fn begin_bulk(&self) -> CatalogFuture<'_, bool> {
        self.ask(|reply| WriteJob::BeginBulk { reply })
    }

    fn finish_bulk(&self, cursor: Option<CursorPosition>) -> CatalogFuture<'_, ApplyReport> {
        self.ask(|reply| WriteJob::FinishBulk { cursor, reply })
    }

    fn clock(&self) -> &ChangeClock {
        &self.shared.clock
    }
}

impl SqliteCatalog {
    fn qid(&self, query: usize) -> CatalogResult<i64> {
        self.shared
            .qids
            .get(query)
            .copied()
            .ok_or_else(|| CatalogError::UnknownQuery(query.to_string()))
    }
}
