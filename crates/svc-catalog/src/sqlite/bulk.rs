//! Bulk-load primitives. Random index keys make every commit of the normal path rewrite most
//! index pages, so a large import goes another way: records are appended in arrival order
//! with the uri index dropped (sequential writes only) and no checkpoints (the WAL only
//! grows); at the end one transaction builds the uri index, the query keys from the rows'
//! keys columns in key order (B-trees built by appending), and the counts. A checkpoint
//! follows, off the writer's thread (`checkpoint`).

use crate::engine::{RecordRow, StagedVersion};
use crate::keys_column::QueryIds;
use crate::runtime::now_ms;
use crate::{CatalogResult, Change};
use rusqlite::{Connection, ErrorCode, params};
use std::collections::{BTreeMap, BTreeSet};

/// Whether the uri index exists; it is missing only while a bulk load is under way.
fn uri_index_exists(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'records_uri')",
        [],
        |r| r.get(0),
    )
}

/// Empties a catalog whose bulk load did not finish (it was empty when the load began).
pub(super) fn recover_interrupted(conn: &Connection) -> CatalogResult<bool> {
    if uri_index_exists(conn)? {
        return Ok(false);
    }
    conn.execute_batch(
        "BEGIN IMMEDIATE;
         DELETE FROM records; DELETE FROM query_keys; DELETE FROM query_counts; DELETE FROM kind_counts;
         INSERT INTO search (search) VALUES ('delete-all'); DELETE FROM search_words;
         CREATE UNIQUE INDEX records_uri ON records (uri);
         COMMIT;",
    )?;
    Ok(true)
}

pub(super) fn begin(conn: &Connection) -> CatalogResult<()> {
    conn.execute_batch(
        "DELETE FROM query_keys; DELETE FROM query_counts; DELETE FROM kind_counts;
         DROP INDEX records_uri;",
    )?;
    // Sorts of a large load spill to a temporary file rather than to memory, and may use a
    // second thread; the writer's settings come back after (`writer_settings`).
    conn.pragma_update(None, "temp_store", "FILE")?;
    conn.pragma_update(None, "threads", 2)?;
    // No checkpoints while loading: each would copy the new pages into the database file
    // and wait for the disk twice. The WAL only grows (a power cut keeps a valid prefix of
    // it); a checkpoint moves it into the database once the load has settled.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    Ok(())
}

/// Distinct words a bulk load lists at most in memory; past it they are written out.
const WORDS_HELD: usize = 1_000_000;

pub(super) fn stage(
    conn: &mut Connection,
    ids: &QueryIds,
    changes: &[&Change],
    words: &mut BTreeSet<String>,
) -> CatalogResult<()> {
    let tx = conn.transaction()?;
    let now = now_ms();
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO records (uri, collection, author, rev, cid, record, keys, indexed_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for change in changes {
            let row = RecordRow::of(change);
            insert.execute(super::record_row::row_values(&row, ids, now))?;
            if let (Some(_), Some(text)) = (row.record, row.search) {
                super::search_rows::insert(&tx, tx.last_insert_rowid(), text, row.collection)?;
                for word in super::search_rows::listed_words(text) {
                    if !words.contains(word) {
                        words.insert(word.to_string());
                    }
                }
            }
        }
    }
    if words.len() > WORDS_HELD {
        list_words(&tx, words)?;
    }
    tx.commit()?;
    Ok(())
}

/// Lists the words a bulk load gathered, and forgets them.
pub(super) fn list_words(conn: &Connection, words: &mut BTreeSet<String>) -> CatalogResult<()> {
    super::search_rows::list_words(conn, words.iter().map(String::as_str))?;
    words.clear();
    Ok(())
}

/// Builds the unique uri index; `false` (and nothing changed) when a uri is there twice.
pub(super) fn make_unique(conn: &Connection) -> CatalogResult<bool> {
    conn.execute_batch("SAVEPOINT unique_uris")?;
    match conn.execute_batch("CREATE UNIQUE INDEX records_uri ON records (uri)") {
        Ok(()) => {
            conn.execute_batch("RELEASE unique_uris")?;
            Ok(true)
        }
        Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == ErrorCode::ConstraintViolation => {
            conn.execute_batch("ROLLBACK TO unique_uris; RELEASE unique_uris")?;
            Ok(false)
        }
        Err(error) => Err(error.into()),
    }
}

pub(super) fn versions(conn: &Connection) -> CatalogResult<Vec<StagedVersion>> {
    let mut stmt = conn.prepare(
        "SELECT rowid, uri, rev, collection, record IS NOT NULL FROM records ORDER BY uri, rowid",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(StagedVersion {
            row: r.get(0)?,
            uri: r.get(1)?,
            rev: r.get(2)?,
            collection: r.get(3)?,
            live: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Query keys from the rows' keys columns (staging them as rows of their own costs more),
/// then the counts.
pub(super) fn index(conn: &Connection, kinds: &BTreeMap<String, i64>) -> CatalogResult<()> {
    conn.execute(
        "INSERT INTO query_keys (qid, key, uri, rid)
         SELECT k.value ->> 0, k.value ->> 1, r.uri, r.rowid FROM records r, json_each(r.keys) k
         ORDER BY 1, 2, 3",
        [],
    )?;
    conn.execute(
        "INSERT INTO query_counts (qid, key, n) SELECT qid, key, count(*) FROM query_keys GROUP BY qid, key",
        [],
    )?;
    let mut insert =
        conn.prepare("INSERT OR REPLACE INTO kind_counts (collection, n) VALUES (?1, ?2)")?;
    for (collection, n) in kinds {
        insert.execute(params![collection, n])?;
    }
    Ok(())
}
