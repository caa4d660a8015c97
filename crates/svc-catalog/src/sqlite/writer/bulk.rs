//! Bulk loads into an empty catalog. Random index keys make every commit of the normal path
//! rewrite most index pages, so a large import goes another way: records are appended in
//! arrival order with the uri index dropped (sequential writes only) and no checkpoints (the
//! WAL only grows), then one transaction builds the uri index, settles each uri's final
//! version if a uri came more than once, builds the query keys from the rows' keys columns
//! in key order (B-trees built by appending), and fills the counts. A checkpoint follows, off
//! the writer's thread (`checkpoint`).
//!
//! The outcome equals that of `apply`: changes of one uri take effect in arrival order, and a
//! change older than the stored revision is stale. If a bulk load is interrupted, the
//! catalog (empty before it began) is emptied again at the next start.

use super::accounts::did_of;
use super::{Writer, now_ms, store_cursor};
use crate::{ApplyReport, CatalogResult, Change, CursorPosition};
use rusqlite::{Connection, ErrorCode, params};
use std::collections::HashMap;

/// What a bulk load under way has committed so far.
#[derive(Default)]
pub(super) struct BulkLoad {
    staged: u64,
    /// Upserts per collection: the kind counts if no uri came twice.
    kinds: HashMap<String, i64>,
}

impl BulkLoad {
    fn count(&mut self, changes: &[Change]) {
        for change in changes {
            self.staged += 1;
            if let Change::Upsert(u) = change {
                match self.kinds.get_mut(&u.collection) {
                    Some(n) => *n += 1,
                    None => {
                        self.kinds.insert(u.collection.clone(), 1);
                    }
                }
            }
        }
    }
}

/// Whether the uri index exists; it is missing only while a bulk load is under way.
fn uri_index_exists(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'records_uri')",
        [],
        |r| r.get(0),
    )
}

/// Empties a catalog whose bulk load did not finish (it was empty when the load began).
pub(crate) fn recover_interrupted(conn: &Connection) -> CatalogResult<bool> {
    if uri_index_exists(conn)? {
        return Ok(false);
    }
    conn.execute_batch(
        "BEGIN IMMEDIATE;
         DELETE FROM records; DELETE FROM query_keys; DELETE FROM query_counts; DELETE FROM kind_counts;
         CREATE UNIQUE INDEX records_uri ON records (uri);
         COMMIT;",
    )?;
    Ok(true)
}

impl Writer {
    /// Enters bulk mode if the catalog holds nothing at all (not even tombstones).
    pub(super) fn begin_bulk(&mut self) -> CatalogResult<bool> {
        if self.bulk.is_some() {
            return Ok(true);
        }
        let empty: bool =
            self.conn
                .query_row("SELECT NOT EXISTS (SELECT 1 FROM records)", [], |r| {
                    r.get(0)
                })?;
        // With inactive accounts on record, records must be filed one by one (hidden or
        // not); the bulk path files everything.
        if !empty || !self.inactive.is_empty() {
            return Ok(false);
        }
        self.conn.execute_batch(
            "DELETE FROM query_keys; DELETE FROM query_counts; DELETE FROM kind_counts;
             DROP INDEX records_uri;",
        )?;
        // Sorts of a large load spill to a temporary file rather than to memory.
        self.conn.pragma_update(None, "temp_store", "FILE")?;
        // No checkpoints while loading: each would copy the new pages into the database file
        // and wait for the disk twice. The WAL only grows (a power cut keeps a valid prefix
        // of it); a checkpoint moves it into the database once the load has settled.
        self.conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        self.bulk = Some(Box::default());
        Ok(true)
    }

    /// Appends changes as rows; nothing is visible in any answer until the load finishes.
    pub(super) fn stage(
        &mut self,
        jobs: &[(&[Change], Option<&CursorPosition>)],
    ) -> CatalogResult<Vec<ApplyReport>> {
        if self.bulk.is_none() {
            return Err(crate::CatalogError::Storage(
                "no bulk load under way".into(),
            ));
        }
        let tx = self.conn.transaction()?;
        let now = now_ms();
        {
            let mut insert = tx.prepare_cached(
                "INSERT INTO records (uri, collection, author, rev, cid, record, keys, indexed_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            for (changes, _) in jobs {
                for change in *changes {
                    match change {
                        Change::Upsert(u) => insert.execute(rusqlite::params_from_iter(
                            super::upsert_params(u, &self.shared.qids, now),
                        ))?,
                        Change::Delete {
                            uri,
                            collection,
                            rev,
                        } => insert.execute(params![
                            uri,
                            collection,
                            did_of(uri),
                            rev,
                            None::<String>,
                            None::<String>,
                            "[]",
                            now
                        ])?,
                    };
                }
            }
        }
        tx.commit()?;
        // Counted once committed: a failed transaction stages nothing.
        if let Some(load) = self.bulk.as_mut() {
            for (changes, _) in jobs {
                load.count(changes);
            }
        }
        // Staged changes are reported by `finish_bulk`, once they are settled.
        Ok(jobs.iter().map(|_| ApplyReport::default()).collect())
    }

    /// Settles the staged changes in one transaction, with the final cursor.
    pub(super) fn finish_bulk(
        &mut self,
        cursor: Option<CursorPosition>,
    ) -> CatalogResult<ApplyReport> {
        let Some(load) = self.bulk.take() else {
            return Ok(ApplyReport::default());
        };
        let outcome = self.settle(*load, cursor.as_ref());
        let restored = super::super::writer_settings(&self.conn)
            .and_then(|_| self.conn.execute_batch("PRAGMA shrink_memory"));
        if outcome.is_err() {
            recover_interrupted(&self.conn)?;
        }
        let report = outcome?;
        restored?;
        Ok(report)
    }

    fn settle(
        &mut self,
        load: BulkLoad,
        cursor: Option<&CursorPosition>,
    ) -> CatalogResult<ApplyReport> {
        let started = std::time::Instant::now();
        let staged = load.staged;
        // The sorts below may use a second thread; memory they took goes back after
        // (`shrink_memory` in `finish_bulk`).
        self.conn.pragma_update(None, "threads", 2)?;
        let tx = self.conn.transaction()?;
        // Most loads hold each uri once: then the unique index builds, every row stands as
        // staged, and the pass over each uri's versions (a sort of the whole table) is skipped.
        tx.execute_batch("SAVEPOINT unique_uris")?;
        let (report, kinds) =
            match tx.execute_batch("CREATE UNIQUE INDEX records_uri ON records (uri)") {
                Ok(()) => {
                    tx.execute_batch("RELEASE unique_uris")?;
                    let report = ApplyReport {
                        applied: staged,
                        stale: 0,
                    };
                    (report, load.kinds)
                }
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == ErrorCode::ConstraintViolation =>
                {
                    tx.execute_batch("ROLLBACK TO unique_uris; RELEASE unique_uris")?;
                    let settled = settle_versions(&tx)?;
                    tx.execute_batch("CREATE UNIQUE INDEX records_uri ON records (uri)")?;
                    settled
                }
                Err(error) => return Err(error.into()),
            };
        let indexed = started.elapsed();
        // Built from the rows' keys columns: staging them as rows of their own costs more.
        tx.execute(
            "INSERT INTO query_keys (qid, key, uri, rid)
             SELECT k.value ->> 0, k.value ->> 1, r.uri, r.rowid FROM records r, json_each(r.keys) k
             ORDER BY 1, 2, 3",
            [],
        )?;
        let keyed = started.elapsed();
        tx.execute(
            "INSERT INTO query_counts (qid, key, n) SELECT qid, key, count(*) FROM query_keys GROUP BY qid, key",
            [],
        )?;
        {
            let mut insert =
                tx.prepare("INSERT OR REPLACE INTO kind_counts (collection, n) VALUES (?1, ?2)")?;
            for (collection, n) in &kinds {
                insert.execute(params![collection, n])?;
            }
        }
        if let Some(cursor) = cursor {
            store_cursor(&tx, cursor)?;
        }
        tx.commit()?;
        debug_assert_eq!(report.applied + report.stale, staged);
        tracing::info!(
            staged,
            applied = report.applied,
            stale = report.stale,
            "bulk load settled in {:.1}s (uri index and versions {:.1}s, query keys {:.1}s, counts and commit {:.1}s)",
            started.elapsed().as_secs_f64(),
            indexed.as_secs_f64(),
            (keyed - indexed).as_secs_f64(),
            (started.elapsed() - keyed).as_secs_f64(),
        );
        Ok(report)
    }
}

/// Settles each uri's versions in arrival order: a version applies when its rev is not older
/// than the one it would replace; the last applied one stays, the others are deleted.
/// Returns the outcome and the standing records per collection.
fn settle_versions(
    tx: &rusqlite::Transaction<'_>,
) -> CatalogResult<(ApplyReport, HashMap<String, i64>)> {
    let mut report = ApplyReport::default();
    let mut kinds: HashMap<String, i64> = HashMap::new();
    let mut superseded: Vec<i64> = Vec::new();
    {
        let mut versions = tx.prepare(
            "SELECT uri, rowid, rev, collection, record IS NOT NULL FROM records ORDER BY uri, rowid",
        )?;
        let mut rows = versions.query([])?;
        // The version standing so far for the current uri: (uri, rowid, rev, collection, live).
        let mut standing: Option<(String, i64, String, String, bool)> = None;
        while let Some(row) = rows.next()? {
            let (uri, rowid, rev): (String, i64, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
            match standing.as_mut() {
                Some(current) if current.0 == uri => {
                    if rev >= current.2 {
                        superseded.push(current.1);
                        *current = (uri, rowid, rev, row.get(3)?, row.get(4)?);
                        report.applied += 1;
                    } else {
                        superseded.push(rowid);
                        report.stale += 1;
                    }
                }
                _ => {
                    if let Some((_, _, _, collection, true)) = standing.take() {
                        *kinds.entry(collection).or_default() += 1;
                    }
                    standing = Some((uri, rowid, rev, row.get(3)?, row.get(4)?));
                    report.applied += 1;
                }
            }
        }
        if let Some((_, _, _, collection, true)) = standing {
            *kinds.entry(collection).or_default() += 1;
        }
    }
    let mut delete = tx.prepare("DELETE FROM records WHERE rowid = ?1")?;
    for rowid in &superseded {
        delete.execute([rowid])?;
    }
    Ok((report, kinds))
}
