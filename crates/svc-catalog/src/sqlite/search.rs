//! Search in SQLite: an FTS5 table (`search`, contentless, rowid = the record's rowid) of each
//! live record's folded words in two columns, its name and its text, and its kind in a third;
//! written with the record, its words longer than the prefix indexes reach listed in
//! `search_words`. A search counts the matches, at most one past the count limit, from the
//! index alone; up to [`SEARCH_RANKED_AT_MOST`] of them, those whose name holds every term come
//! first, else newest first; only then are the page's records read.

use super::engine::SqliteEngine;
use super::reader::{Reader, item_ref};
use super::search_rows::{PREFIX_INDEXED_CHARS, insert_listed, kind_word};
use crate::engine::RecordRow;
use crate::{
    CatalogError, CatalogResult, PageWriter, SEARCH_COUNT_LIMIT, SEARCH_RANKED_AT_MOST,
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
            insert_listed(&self.conn, rowid, text, row.collection)?;
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
            "INSERT INTO search (search) VALUES ('delete-all'); DELETE FROM search_words; \
             DELETE FROM search_state;",
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
                insert_listed(&self.conn, rowid, text, &collection)?;
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

/// Starts of a word past the prefix indexes searched as the words they begin, at most; past
/// it, FTS5 merges the lists of the words itself.
const START_WORDS_AT_MOST: usize = 32;

/// A query in FTS5's syntax, two ways: every match, and the matches whose name holds every
/// term (the better ones).
#[derive(Debug, PartialEq)]
struct Matching {
    all: String,
    named: String,
}

/// How a start of a word is searched: from a prefix index, as the words it begins, or (none
/// begins with it) not at all.
enum Start {
    Prefix,
    Words(Vec<String>),
    Unknown,
}

/// The query's terms in FTS5's syntax, each word quoted (folded words hold letters and digits
/// only, so nothing of FTS5's own syntax can come through): a phrase as one quoted string, a
/// start of a word as the words it begins or followed by `*`; `None` when a start begins no
/// word, so that nothing matches.
fn fts5_terms(conn: &Connection, query: &SearchQuery) -> CatalogResult<Option<String>> {
    let mut terms = Vec::with_capacity(query.terms.len());
    for term in &query.terms {
        terms.push(match term {
            Term::Word(word) => format!("\"{word}\""),
            Term::Phrase(words) => format!("\"{}\"", words.join(" ")),
            Term::Prefix(start) => match start_of(conn, start)? {
                Start::Prefix => format!("\"{start}\"*"),
                Start::Words(words) => {
                    let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
                    format!("({})", quoted.join(" OR "))
                }
                Start::Unknown => return Ok(None),
            },
        });
    }
    Ok(Some(terms.join(" AND ")))
}

/// How `start` is searched: a start the prefix indexes cover, or a list of the index's words
/// beginning with it when they are few.
fn start_of(conn: &Connection, start: &str) -> CatalogResult<Start> {
    if start.chars().nth(PREFIX_INDEXED_CHARS).is_none() {
        return Ok(Start::Prefix);
    }
    // Above every word beginning with `start` (UTF-8 orders by code point).
    let past = format!("{start}\u{10FFFF}");
    let mut statement = conn.prepare_cached(
        "SELECT word FROM search_words WHERE word >= ?1 AND word < ?2 ORDER BY word LIMIT ?3",
    )?;
    let words = statement
        .query_map(params![start, past, START_WORDS_AT_MOST as i64 + 1], |r| {
            r.get::<_, String>(0)
        })?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(match words.len() {
        0 => Start::Unknown,
        n if n > START_WORDS_AT_MOST => Start::Prefix,
        _ => Start::Words(words),
    })
}

impl Matching {
    /// The query's two readings, with the kind when asked for; `None` when nothing can match.
    fn of(
        conn: &Connection,
        query: &SearchQuery,
        kind: Option<&str>,
    ) -> CatalogResult<Option<Matching>> {
        let Some(terms) = fts5_terms(conn, query)? else {
            return Ok(None);
        };
        let of_kind = kind.map_or(String::new(), |kind| {
            format!(" AND kind : \"{}\"", kind_word(kind))
        });
        let (all, named) = (
            format!("{{name text}} : ({terms})"),
            format!("{{name}} : ({terms})"),
        );
        Ok(Some(Matching {
            all: format!("{all}{of_kind}"),
            named: format!("{named}{of_kind}"),
        }))
    }
}

/// The condition that leaves out the matches of an account out of sight or taken down, or
/// taken down, when any record is (`hidden`).
fn visible(hidden: bool) -> &'static str {
    match hidden {
        true => {
            " AND NOT EXISTS (SELECT 1 FROM records h WHERE h.rowid = search.rowid \
             AND (EXISTS (SELECT 1 FROM inactive_accounts WHERE did = h.author) \
             OR EXISTS (SELECT 1 FROM takedowns WHERE subject IN (h.uri, h.author))))"
        }
        false => "",
    }
}

/// The matches of `?1`, oldest first, up to `?2`; those out of sight left out when `hidden`.
fn matches_sql(hidden: bool) -> String {
    let visible = visible(hidden);
    format!("SELECT rowid FROM search WHERE search MATCH ?1{visible} LIMIT ?2")
}

/// A page (`?2` after `?3`) of the matches of `?1`, newest first (the index's own order, read
/// backwards a page at a time); those out of sight left out when `hidden`.
fn newest_sql(hidden: bool) -> String {
    let visible = visible(hidden);
    format!(
        "SELECT rowid FROM search WHERE search MATCH ?1{visible} \
         ORDER BY rowid DESC LIMIT ?2 OFFSET ?3"
    )
}

/// A record found, with its labels.
const RECORD: &str = concat!(
    "SELECT r.uri, r.rev, r.record, ",
    labels_json!(),
    " FROM records r WHERE r.rowid = ?1 AND r.record IS NOT NULL"
);

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
    let Some(matching) = Matching::of(conn, &request.query, request.kind.as_deref())? else {
        return Ok((0, 0));
    };
    let hidden: bool = conn
        .prepare_cached(crate::engine::ANY_HIDDEN)?
        .query_row([], |r| r.get(0))?;
    let counted = (SEARCH_COUNT_LIMIT + 1) as i64;
    let found = rowids(conn, &matches_sql(hidden), params![matching.all, counted])?;
    let total = found.len() as u64;
    let (offset, limit) = (request.offset as usize, request.limit as usize);
    let page: Vec<i64> = if total == 0 {
        Vec::new()
    } else if total <= SEARCH_RANKED_AT_MOST {
        let named = rowids(conn, &matches_sql(false), params![matching.named, counted])?;
        named_first(found, &named, offset, limit)
    } else if total <= SEARCH_COUNT_LIMIT {
        found
            .iter()
            .rev()
            .skip(offset)
            .take(limit)
            .copied()
            .collect()
    } else {
        let window = params![matching.all, limit as i64, offset as i64];
        rowids(conn, &newest_sql(hidden), window)?
    };
    let mut record = conn.prepare_cached(RECORD)?;
    let mut written = 0;
    for rowid in page {
        let mut rows = record.query([rowid])?;
        if let Some(row) = rows.next()? {
            writer.item(item_ref(row)?);
            written += 1;
        }
    }
    Ok((total, written))
}

/// The rowids `sql` answers.
fn rowids(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> CatalogResult<Vec<i64>> {
    let mut statement = conn.prepare_cached(sql)?;
    let found = statement.query_map(params, |r| r.get::<_, i64>(0))?;
    Ok(found.collect::<rusqlite::Result<Vec<i64>>>()?)
}

/// A page of `found` (oldest first): those in `named` (oldest first) first, newest first within.
fn named_first(found: Vec<i64>, named: &[i64], offset: usize, limit: usize) -> Vec<i64> {
    let (mut first, mut then): (Vec<i64>, Vec<i64>) = found
        .into_iter()
        .partition(|rowid| named.binary_search(rowid).is_ok());
    first.reverse();
    then.reverse();
    first
        .into_iter()
        .chain(then)
        .skip(offset)
        .take(limit)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_first_then_the_newest() {
        let found = vec![1, 2, 3, 4, 5, 6];
        assert_eq!(
            named_first(found.clone(), &[2, 5], 0, 10),
            [5, 2, 6, 4, 3, 1]
        );
        assert_eq!(named_first(found.clone(), &[2, 5], 1, 3), [2, 6, 4]);
        assert_eq!(named_first(found, &[], 4, 10), [2, 1]);
    }

    #[test]
    fn a_query_becomes_quoted_fts5_terms_read_two_ways() {
        let conn = Connection::open_in_memory().expect("a database");
        conn.execute_batch(
            "CREATE TABLE search_words (word TEXT PRIMARY KEY) WITHOUT ROWID; \
             INSERT INTO search_words VALUES ('geojson'), ('geojsonld'), ('geojsom');",
        )
        .expect("the word list");
        let matching = |q: &str| {
            let query = SearchQuery::parse(q).expect("a query");
            Matching::of(&conn, &query, Some("dev.svc.vocab")).expect("a reading")
        };
        let terms = "\"lens\" AND \"dublin core\" AND \"geo\"*";
        let kind = " AND kind : \"devsvcvocab\"";
        assert_eq!(
            matching("lens \"Dublin Core\" geo"),
            Some(Matching {
                all: format!("{{name text}} : ({terms}){kind}"),
                named: format!("{{name}} : ({terms}){kind}"),
            })
        );
        let start = matching("geojs").expect("words begin with it").all;
        assert!(
            start.starts_with("{name text} : ((\"geojsom\" OR \"geojson\" OR \"geojsonld\"))"),
            "a longer start is the words it begins: {start}"
        );
        assert_eq!(matching("lens geojsx"), None, "a start no word begins");
    }
}
