//! Search in PostgreSQL: a table of each live record's folded words as a `tsvector` (its
//! name weighted A, its text D, the `simple` configuration: the words are folded already),
//! and its kind, with a GIN index. A search reads at most one past the count limit of the
//! matches the index finds, ranks them by `ts_rank`, ties newest first, and only then reads
//! the page's records.

use super::link::Link;
use super::reads::{Reads, connection};
use super::storage;
use crate::engine::{Plan, RecordWrite};
use crate::{
    CatalogError, CatalogResult, ItemRef, PageWriter, SEARCH_COUNT_LIMIT, SEARCH_RANKED_AT_MOST,
    SearchRequest,
};
use svc_spec::search::{SearchQuery, SearchText, Term};
use tokio_postgres::types::ToSql;

/// A record's words as the index holds them, from `$name` and `$text` (arrays, or values).
macro_rules! vector_of {
    ($name:literal, $text:literal) => {
        concat!(
            "setweight(to_tsvector('simple', ",
            $name,
            "), 'A') || setweight(to_tsvector('simple', ",
            $text,
            "), 'D')"
        )
    };
}

impl Link {
    /// Inside the open transaction, after the plan's record rows: the search index follows.
    pub(super) async fn write_search(&mut self, plan: &Plan<'_>) -> CatalogResult<()> {
        let (mut replaced, mut uris, mut names, mut texts) = (Vec::new(), vec![], vec![], vec![]);
        for write in &plan.records {
            let RecordWrite::Row(row) = write else {
                continue;
            };
            match (row.record, row.search) {
                (Some(_), Some(text)) => {
                    uris.push(row.uri);
                    names.push(text.name.as_str());
                    texts.push(text.text.as_str());
                }
                // Its words, if it had any, go; a version with words replaces them in place.
                _ if row.replaces => replaced.push(row.uri),
                _ => {}
            }
        }
        if !replaced.is_empty() {
            self.execute(
                "DELETE FROM search s USING records r WHERE r.uri = ANY($1) AND s.rid = r.id",
                &[&replaced],
            )
            .await?;
        }
        self.file_words(&uris, &names, &texts).await
    }

    async fn file_words(
        &mut self,
        uris: &[&str],
        names: &[&str],
        texts: &[&str],
    ) -> CatalogResult<()> {
        if uris.is_empty() {
            return Ok(());
        }
        self.execute(
            concat!(
                "INSERT INTO search (rid, kind, words) SELECT r.id, r.collection, ",
                vector_of!("u.name", "u.text"),
                " FROM unnest($1::text[], $2::text[], $3::text[]) AS u(uri, name, text) \
                 JOIN records r ON r.uri = u.uri AND r.record IS NOT NULL \
                 ON CONFLICT (rid) DO UPDATE SET kind = excluded.kind, words = excluded.words"
            ),
            &[&uris, &names, &texts],
        )
        .await?;
        Ok(())
    }

    /// Inside the open transaction, before the records in `from..to` are deleted.
    pub(super) async fn remove_search_range(&mut self, from: &str, to: &str) -> CatalogResult<()> {
        self.execute(
            "DELETE FROM search s USING records r \
             WHERE r.uri >= $1 AND r.uri < $2 AND s.rid = r.id",
            &[&from, &to],
        )
        .await?;
        Ok(())
    }

    pub(super) async fn read_search_fingerprint(&mut self) -> CatalogResult<Option<String>> {
        let rows = self
            .query("SELECT fingerprint FROM search_state", &[])
            .await?;
        Ok(rows.first().and_then(|row| row.get(0)))
    }

    pub(super) async fn empty_search(&mut self) -> CatalogResult<()> {
        self.batch("TRUNCATE search; DELETE FROM search_state")
            .await
    }

    pub(super) async fn index_words(
        &mut self,
        entries: &[(String, SearchText)],
    ) -> CatalogResult<()> {
        let uris: Vec<&str> = entries.iter().map(|(uri, _)| uri.as_str()).collect();
        let names: Vec<&str> = entries.iter().map(|(_, t)| t.name.as_str()).collect();
        let texts: Vec<&str> = entries.iter().map(|(_, t)| t.text.as_str()).collect();
        self.file_words(&uris, &names, &texts).await
    }

    pub(super) async fn store_search_fingerprint(
        &mut self,
        fingerprint: &str,
    ) -> CatalogResult<()> {
        self.execute("DELETE FROM search_state", &[]).await?;
        self.execute(
            "INSERT INTO search_state (fingerprint) VALUES ($1)",
            &[&fingerprint],
        )
        .await?;
        Ok(())
    }
}

/// The query as a `tsquery`: each word quoted (folded words hold letters and digits only),
/// a phrase's words joined by `<->`, a prefix marked `:*`, the terms joined by `&`; with a
/// `weight`, each word found only with it.
fn tsquery(query: &SearchQuery, weight: &str) -> String {
    let whole = match weight {
        "" => String::new(),
        weight => format!(":{weight}"),
    };
    let terms: Vec<String> = query
        .terms
        .iter()
        .map(|term| match term {
            Term::Word(word) => format!("'{word}'{whole}"),
            Term::Prefix(start) => format!("'{start}':*{weight}"),
            Term::Phrase(words) => {
                let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'{whole}")).collect();
                format!("({})", quoted.join(" <-> "))
            }
        })
        .collect();
    terms.join(" & ")
}

/// The words of a name are weighted A.
const IN_THE_NAME: &str = "A";

macro_rules! visible {
    () => {
        "NOT EXISTS (SELECT 1 FROM records h WHERE h.id = s.rid AND ( \
           EXISTS (SELECT 1 FROM inactive_accounts WHERE did = split_part(h.uri, '/', 3)) \
           OR EXISTS (SELECT 1 FROM takedowns \
             WHERE subject IN (h.uri, split_part(h.uri, '/', 3)))))"
    };
}

/// The matches of `$1` (of the kind `$2`, when given), those out of sight left out when `$3`.
macro_rules! matches {
    () => {
        concat!(
            "FROM search s, to_tsquery('simple', $1) q WHERE s.words @@ q \
             AND ($2::text IS NULL OR s.kind = $2) AND (NOT $3 OR ",
            visible!(),
            ")"
        )
    };
}

/// A page (`$4` after `$5`) of the matches ranked by `$order`, then their records.
macro_rules! page {
    ($score:literal, $order:literal) => {
        concat!(
            "WITH ranked AS (SELECT s.rid, ",
            $score,
            " AS score ",
            matches!(),
            " ORDER BY ",
            $order,
            " LIMIT $4 OFFSET $5) \
             SELECT r.uri, r.rev, r.record, ",
            labels_json!(),
            " FROM ranked JOIN records r ON r.id = ranked.rid \
             ORDER BY ranked.score DESC, ranked.rid DESC"
        )
    };
}

/// The matches whose name holds every term (`$6`) first, newest first within: for a query
/// that matches at most [`SEARCH_RANKED_AT_MOST`] records.
const RANKED_PAGE: &str = page!(
    "(s.words @@ to_tsquery('simple', $6))::int",
    "score DESC, s.rid DESC"
);
/// Newest first: for a query that matches more.
const NEWEST_PAGE: &str = page!("0", "s.rid DESC");

/// The matches, counted up to `$4` without ranking them.
const COUNT: &str = concat!(
    "SELECT count(*) FROM (SELECT 1 ",
    matches!(),
    " LIMIT $4) AS found"
);

/// Reads one page of a search, stopped at its deadline (`statement_timeout`).
pub(super) async fn search(
    pool: &Reads,
    request: &SearchRequest,
    mut writer: Box<dyn PageWriter>,
) -> CatalogResult<Vec<u8>> {
    let mut client = connection(pool).await?;
    let transaction = client.transaction().await.map_err(storage)?;
    let timeout = format!(
        "SET LOCAL statement_timeout = {}",
        request.deadline.as_millis().max(1)
    );
    transaction.batch_execute(&timeout).await.map_err(storage)?;
    let matching = tsquery(&request.query, "");
    let named = tsquery(&request.query, IN_THE_NAME);
    let kind = request.kind.as_deref();
    let counted = (SEARCH_COUNT_LIMIT + 1) as i64;
    let deadline = |error: tokio_postgres::Error| match error.code() {
        Some(code) if *code == tokio_postgres::error::SqlState::QUERY_CANCELED => {
            CatalogError::Unavailable(format!("the search ran past its {:?}", request.deadline))
        }
        _ => storage(error),
    };
    let hidden: bool = transaction
        .query_one(crate::engine::ANY_HIDDEN, &[])
        .await
        .map_err(storage)?
        .get(0);
    let total: i64 = transaction
        .query_one(COUNT, &[&matching, &kind, &hidden, &counted])
        .await
        .map_err(deadline)?
        .get(0);
    let (limit, offset) = (i64::from(request.limit), request.offset as i64);
    let rows = match (total.max(0) as u64) <= SEARCH_RANKED_AT_MOST {
        true => {
            let params: [&(dyn ToSql + Sync); 6] =
                [&matching, &kind, &hidden, &limit, &offset, &named];
            transaction.query(RANKED_PAGE, &params).await
        }
        false => {
            let params: [&(dyn ToSql + Sync); 5] = [&matching, &kind, &hidden, &limit, &offset];
            transaction.query(NEWEST_PAGE, &params).await
        }
    }
    .map_err(deadline)?;
    for row in &rows {
        let text = |i: usize| row.get::<_, Option<&str>>(i).unwrap_or_default().as_bytes();
        writer.item(ItemRef {
            uri: text(0),
            rev: text(1),
            record_json: text(2),
            labels: text(3),
        });
    }
    transaction.commit().await.map_err(storage)?;
    let total = total.max(0) as u64;
    let more = request.offset + (rows.len() as u64) < total;
    Ok(writer.finish(total, more))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_becomes_a_tsquery_of_quoted_words() {
        let query = SearchQuery::parse("lens \"Dublin Core\" geoj").expect("a query");
        assert_eq!(
            tsquery(&query, ""),
            "'lens' & ('dublin' <-> 'core') & 'geoj':*"
        );
        assert_eq!(
            tsquery(&query, IN_THE_NAME),
            "'lens':A & ('dublin':A <-> 'core':A) & 'geoj':*A"
        );
    }
}
