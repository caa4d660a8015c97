//! Bulk loads into an empty catalog. Random index keys make every commit of the normal path
//! rewrite most index pages, so a large import is staged instead: changes are appended to a
//! temporary table (sequential writes, no index), then merged into the catalog in one
//! transaction, each table filled in its own key order so every B-tree is built by appending.
//!
//! The merge keeps the semantics of `apply`: changes of one uri are applied in arrival order,
//! and a change older than the stored revision is stale.

use super::{Writer, author_of, keys_column, now_ms, store_cursor};
use crate::{ApplyReport, CatalogResult, Change, CursorPosition};
use rusqlite::params;

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
        if !empty {
            return Ok(false);
        }
        // The staging table can be large: keep it in a temporary file, not in memory.
        self.conn.pragma_update(None, "temp_store", "FILE")?;
        self.conn.execute_batch(
            "DROP TABLE IF EXISTS temp.staged;
             CREATE TEMP TABLE staged (
                 seq INTEGER PRIMARY KEY,
                 uri TEXT NOT NULL,
                 collection TEXT NOT NULL,
                 author TEXT NOT NULL,
                 rev TEXT NOT NULL,
                 cid TEXT,
                 record TEXT,
                 keys TEXT NOT NULL
             );",
        )?;
        self.bulk = Some(0);
        Ok(true)
    }

    /// Appends changes to the staging table; nothing is visible until the bulk load finishes.
    pub(super) fn stage(
        &mut self,
        jobs: &[(&[Change], Option<&CursorPosition>)],
    ) -> CatalogResult<Vec<ApplyReport>> {
        let tx = self.conn.transaction()?;
        let mut staged = 0u64;
        {
            let mut insert = tx.prepare_cached(
                "INSERT INTO temp.staged (uri, collection, author, rev, cid, record, keys) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for (changes, _) in jobs {
                for change in *changes {
                    match change {
                        Change::Upsert(u) => insert.execute(params![
                            u.uri,
                            u.collection,
                            u.author,
                            u.rev,
                            u.cid,
                            u.record_json,
                            keys_column::encode(&self.shared.qids, &u.keys)
                        ])?,
                        Change::Delete {
                            uri,
                            collection,
                            rev,
                        } => insert.execute(params![
                            uri,
                            collection,
                            author_of(uri),
                            rev,
                            None::<String>,
                            None::<String>,
                            "[]"
                        ])?,
                    };
                    staged += 1;
                }
            }
        }
        tx.commit()?;
        if let Some(total) = self.bulk.as_mut() {
            *total += staged;
        }
        // Staged changes are reported by `finish_bulk`, once they are merged.
        Ok(jobs.iter().map(|_| ApplyReport::default()).collect())
    }

    /// Merges the staged changes into the catalog in one transaction, with the final cursor.
    pub(super) fn finish_bulk(
        &mut self,
        cursor: Option<CursorPosition>,
    ) -> CatalogResult<ApplyReport> {
        let Some(staged) = self.bulk.take() else {
            return Ok(ApplyReport::default());
        };
        let outcome = self.merge(staged, cursor.as_ref());
        let cleanup = self
            .conn
            .execute_batch("DROP TABLE IF EXISTS temp.staged")
            .and_then(|_| self.conn.pragma_update(None, "temp_store", "MEMORY"));
        let report = outcome?;
        cleanup?;
        Ok(report)
    }

    fn merge(
        &mut self,
        staged: u64,
        cursor: Option<&CursorPosition>,
    ) -> CatalogResult<ApplyReport> {
        let tx = self.conn.transaction()?;
        // In (uri, arrival) order, each change meets the version left by the one before it.
        let applied = tx.execute(
            "INSERT INTO records (uri, collection, author, rev, cid, record, keys, indexed_at)
             SELECT uri, collection, author, rev, cid, record, keys, ?1 FROM temp.staged WHERE true ORDER BY uri, seq
             ON CONFLICT (uri) DO UPDATE SET collection = excluded.collection, author = excluded.author,
                 rev = excluded.rev, cid = excluded.cid, record = excluded.record, keys = excluded.keys,
                 indexed_at = excluded.indexed_at
             WHERE excluded.rev >= records.rev",
            [now_ms()],
        )? as u64;
        tx.execute(
            "INSERT INTO query_keys (qid, key, uri)
             SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), r.uri
             FROM records r, json_each(r.keys) j WHERE r.record IS NOT NULL ORDER BY 1, 2, 3",
            [],
        )?;
        tx.execute("INSERT INTO query_counts (qid, key, n) SELECT qid, key, count(*) FROM query_keys GROUP BY qid, key", [])?;
        tx.execute(
            "INSERT INTO kind_counts (collection, n) SELECT collection, count(*) FROM records WHERE record IS NOT NULL GROUP BY collection",
            [],
        )?;
        if let Some(cursor) = cursor {
            store_cursor(&tx, cursor)?;
        }
        tx.commit()?;
        Ok(ApplyReport {
            applied,
            stale: staged - applied.min(staged),
        })
    }
}
