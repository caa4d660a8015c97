//! Search in SQLite: an FTS5 table (`search`, contentless, rowid = the record's rowid) of each
//! live record's folded words in two columns, its name and its text, and its kind in a third;
//! written with the record. A search reads the newest matches, at most one past the count
//! limit, from the index alone, ranks them by BM25 (the name weighted four times the text),
//! ties newest first, and only then reads the page's records.

use super::engine::SqliteEngine;
use super::reader::Reader;
use super::search_rows::{insert, kind_word};
use crate::engine::RecordRow;
use crate::{
    CatalogError, CatalogResult, ItemRef, PageWriter, SEARCH_COUNT_LIMIT, SEARCH_RANKED_AT_MOST,
    SearchRequest,
};
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
            insert(&self.conn, rowid, text, row.collection)?;
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
        let mut rowid_of = self.conn.prepare_cached(
            "SELECT rowid, collection FROM records WHERE uri = ?1 AND record IS NOT NULL",
        )?;
        for (uri, text) in entries {
            let found = rowid_of
                .query_row([uri], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
                .optional()?;
            if let Some((rowid, collection)) = found {
                insert(&self.conn, rowid, text, &collection)?;
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

/// The query in FTS5's syntax: each word quoted (folded words hold letters and digits only,
/// so nothing of FTS5's own syntax can come through), a phrase as one quoted string, a prefix
/// followed by `*`; terms side by side must all match, in the name or the text; and the kind,
/// when asked for, in the kind column.
fn fts5_match(query: &SearchQuery, kind: Option<&str>) -> String {
    let terms: Vec<String> = query
        .terms
        .iter()
        .map(|term| match term {
            Term::Word(word) => format!("\"{word}\""),
            Term::Prefix(start) => format!("\"{start}\"*"),
            Term::Phrase(words) => format!("\"{}\"", words.join(" ")),
        })
        .collect();
    let mut matching = format!("{{name text}} : ({})", terms.join(" "));
    if let Some(kind) = kind {
        matching.push_str(&format!(" AND kind : \"{}\"", kind_word(kind)));
    }
    matching
}

/// Leaves out the matches (`search.rowid`, or `m.rid`) of an account out of sight or taken
/// down, or taken down.
macro_rules! visible {
    ($rid:literal) => {
        concat!(
            "NOT EXISTS (SELECT 1 FROM records h WHERE h.rowid = ",
            $rid,
            " AND (EXISTS (SELECT 1 FROM inactive_accounts WHERE did = h.author) \
             OR EXISTS (SELECT 1 FROM takedowns WHERE subject IN (h.uri, h.author))))"
        )
    };
}

/// A page (`?2` after `?3`) of the matches of `?1`, then their records with their labels:
/// ranked by BM25 (ties newest first) when `ranked`, else newest first; those of accounts
/// out of sight or taken down left out when `hidden`.
fn page_sql(ranked: bool, hidden: bool) -> String {
    // Newest first is the index's own order, read backwards a page at a time; a constant
    // rank before it would have SQLite sort every match.
    let (score, order) = match ranked {
        true => ("bm25(search, 4.0, 1.0, 0.0)", "score, rowid DESC"),
        false => ("0", "rowid DESC"),
    };
    let visible = match hidden {
        true => concat!(" AND ", visible!("search.rowid")),
        false => "",
    };
    let labels = labels_json!();
    format!(
        "WITH ranked AS (SELECT rowid AS rid, {score} AS score FROM search \
           WHERE search MATCH ?1{visible} ORDER BY {order} LIMIT ?2 OFFSET ?3) \
         SELECT r.uri, r.rev, r.record, {labels} \
         FROM ranked JOIN records r ON r.rowid = ranked.rid ORDER BY ranked.score, ranked.rid DESC"
    )
}

/// The matches, counted up to `?2` without ranking them.
fn count_sql(hidden: bool) -> String {
    let matches = "SELECT rowid AS rid FROM search WHERE search MATCH ?1 LIMIT ?2";
    match hidden {
        true => format!(
            "SELECT count(*) FROM ({matches}) m WHERE {}",
            visible!("m.rid")
        ),
        false => format!("SELECT count(*) FROM ({matches})"),
    }
}

/// Reads one page of a search, stopped at its deadline.
pub(crate) fn search(
    reader: &mut Reader,
    request: &SearchRequest,
    mut writer: Box<dyn PageWriter>,
) -> CatalogResult<Vec<u8>> {
    reader.stop_at(Some(Instant::now() + request.deadline))?;
    let outcome = read(reader.connection(), request, writer.as_mut());
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
    let matching = fts5_match(&request.query, request.kind.as_deref());
    let counted = (SEARCH_COUNT_LIMIT + 1) as i64;
    let hidden: bool = conn
        .prepare_cached(crate::engine::ANY_HIDDEN)?
        .query_row([], |r| r.get(0))?;
    let total: i64 = conn
        .prepare_cached(&count_sql(hidden))?
        .query_row(params![matching, counted], |r| r.get(0))?;
    let ranked = (total.max(0) as u64) <= SEARCH_RANKED_AT_MOST;
    let mut statement = conn.prepare_cached(&page_sql(ranked, hidden))?;
    let offset = request.offset as i64;
    let mut rows = statement.query(params![matching, request.limit, offset])?;
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
        assert_eq!(
            fts5_match(&query, Some("dev.svc.vocab")),
            "{name text} : (\"lens\" \"dublin core\" \"geoj\"*) AND kind : \"devsvcvocab\""
        );
    }
}
