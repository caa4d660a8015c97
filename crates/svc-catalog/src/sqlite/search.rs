//! Search in SQLite: an FTS5 table (`search`, contentless, rowid = the record's rowid) of each
//! live record's folded words in two columns, its name and its text; written with the record,
//! read ranked by BM25 (the name weighted four times the text), ties newest first.

use super::engine::SqliteEngine;
use crate::engine::RecordRow;
use crate::{CatalogError, CatalogResult, ItemRef, PageWriter, SEARCH_COUNT_LIMIT, SearchRequest};
use rusqlite::{Connection, OptionalExtension, params};
use std::time::Instant;
use svc_spec::search::{SearchQuery, SearchText, Term};

impl SqliteEngine {
    /// Inside the open transaction: the search index follows a record row written at `rowid`.
    pub(super) fn write_search(&self, row: &RecordRow<'_>, rowid: i64) -> CatalogResult<()> {
        if row.replaces {
            self.conn
                .prepare_cached("DELETE FROM search WHERE rowid = ?1")?
                .execute([rowid])?;
        }
        if let (Some(_), Some(text)) = (row.record, row.search) {
            insert(&self.conn, rowid, text)?;
        }
        Ok(())
    }

    /// Inside the open transaction, before the records in `from..to` are deleted.
    pub(super) fn remove_search_range(&self, from: &str, to: &str) -> CatalogResult<()> {
        self.conn
            .prepare_cached(
                "DELETE FROM search WHERE rowid IN \
                 (SELECT rowid FROM records WHERE uri >= ?1 AND uri < ?2 AND record IS NOT NULL)",
            )?
            .execute(params![from, to])?;
        Ok(())
    }

    pub(super) fn read_search_fingerprint(&self) -> CatalogResult<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT fingerprint FROM search_state", [], |r| r.get(0))
            .optional()?
            .flatten())
    }

    pub(super) fn empty_search(&self) -> CatalogResult<()> {
        self.conn.execute_batch(
            "INSERT INTO search (search) VALUES ('delete-all'); DELETE FROM search_state;",
        )?;
        Ok(())
    }

    pub(super) fn file_search(&self, entries: &[(String, SearchText)]) -> CatalogResult<()> {
        let mut rowid_of = self
            .conn
            .prepare_cached("SELECT rowid FROM records WHERE uri = ?1 AND record IS NOT NULL")?;
        for (uri, text) in entries {
            if let Some(rowid) = rowid_of.query_row([uri], |r| r.get(0)).optional()? {
                insert(&self.conn, rowid, text)?;
            }
        }
        Ok(())
    }

    pub(super) fn store_search_fingerprint(&self, fingerprint: &str) -> CatalogResult<()> {
        self.conn.execute_batch("DELETE FROM search_state")?;
        self.conn.execute(
            "INSERT INTO search_state (fingerprint) VALUES (?1)",
            [fingerprint],
        )?;
        Ok(())
    }
}

/// Files one record's words under `rowid`.
pub(super) fn insert(conn: &Connection, rowid: i64, text: &SearchText) -> CatalogResult<()> {
    conn.prepare_cached("INSERT INTO search (rowid, name, text) VALUES (?1, ?2, ?3)")?
        .execute(params![rowid, text.name, text.text])?;
    Ok(())
}

/// The query in FTS5's syntax: each word quoted (folded words hold letters and digits only,
/// so nothing of FTS5's own syntax can come through), a phrase as one quoted string, a prefix
/// followed by `*`; terms side by side must all match.
fn fts5_match(query: &SearchQuery) -> String {
    let terms: Vec<String> = query
        .terms
        .iter()
        .map(|term| match term {
            Term::Word(word) => format!("\"{word}\""),
            Term::Prefix(start) => format!("\"{start}\"*"),
            Term::Phrase(words) => format!("\"{}\"", words.join(" ")),
        })
        .collect();
    terms.join(" ")
}

/// The matches a search may show: a live record of the kind asked for (`?2`, or any), its
/// account not out of sight, neither it nor its account taken down.
const MATCHES: &str = "FROM search JOIN records r ON r.rowid = search.rowid \
     WHERE search MATCH ?1 AND (?2 IS NULL OR r.collection = ?2) AND r.record IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM inactive_accounts WHERE did = r.author) \
     AND NOT EXISTS (SELECT 1 FROM takedowns WHERE subject IN (r.uri, r.author))";

fn page_sql() -> String {
    format!(
        "SELECT r.uri, r.rev, r.record, CASE WHEN EXISTS (SELECT 1 FROM labels) THEN ( \
           SELECT json_group_array(json_object('src', l.src, 'val', l.val, 'cts', l.cts)) \
           FROM labels l WHERE l.subject IN (r.uri, r.author) AND l.neg = 0 \
           AND l.val <> '!takedown') END \
         {MATCHES} ORDER BY bm25(search, 4.0, 1.0), r.rev DESC, r.uri LIMIT ?3 OFFSET ?4"
    )
}

fn count_sql() -> String {
    format!("SELECT count(*) FROM (SELECT 1 {MATCHES} LIMIT ?3)")
}

/// Reads one page of a search, stopped at its deadline (SQLite's progress handler).
pub(crate) fn search(
    conn: &mut Connection,
    request: &SearchRequest,
    mut writer: Box<dyn PageWriter>,
) -> CatalogResult<Vec<u8>> {
    let deadline = Instant::now() + request.deadline;
    conn.progress_handler(10_000, Some(move || Instant::now() > deadline))?;
    let outcome = read(conn, request, writer.as_mut());
    conn.progress_handler(0, None::<fn() -> bool>)?;
    let (total, written) = outcome.map_err(|error| match error {
        CatalogError::Storage(message) if message.contains("interrupted") => {
            CatalogError::Unavailable(format!("the search ran past its {:?}", request.deadline))
        }
        other => other,
    })?;
    let more = request.offset + written < total;
    Ok(writer.finish(total, more))
}

/// The page's items handed to `writer`; the matches counted (up to one past the limit) and
/// the items written.
fn read(
    conn: &Connection,
    request: &SearchRequest,
    writer: &mut dyn PageWriter,
) -> CatalogResult<(u64, u64)> {
    let matching = fts5_match(&request.query);
    let kind = request.kind.as_deref();
    let counted = (SEARCH_COUNT_LIMIT + 1) as i64;
    let total: i64 = conn
        .prepare_cached(&count_sql())?
        .query_row(params![matching, kind, counted], |r| r.get(0))?;
    let mut statement = conn.prepare_cached(&page_sql())?;
    let offset = request.offset as i64;
    let mut rows = statement.query(params![matching, kind, request.limit, offset])?;
    let mut written = 0;
    while let Some(row) = rows.next()? {
        let bytes = |i: usize| -> CatalogResult<&[u8]> {
            let value = row.get_ref(i)?;
            Ok(match value {
                rusqlite::types::ValueRef::Null => &[],
                other => other.as_bytes().map_err(|e| {
                    CatalogError::Storage(format!("a search row's column {i}: {e}"))
                })?,
            })
        };
        writer.item(ItemRef {
            uri: bytes(0)?,
            rev: bytes(1)?,
            record_json: bytes(2)?,
            labels: bytes(3)?,
        });
        written += 1;
    }
    Ok((total.max(0) as u64, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_becomes_quoted_fts5_terms() {
        let query = SearchQuery::parse("lens \"Dublin Core\" geoj").expect("a query");
        assert_eq!(fts5_match(&query), "\"lens\" \"dublin core\" \"geoj\"*");
    }
}
