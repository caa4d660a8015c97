//! Bulk-load primitives: staged rows go in through `COPY` with the uri index and the index
//! keys' primary key dropped; at the end one transaction builds the uri index, the index keys
//! from the rows' keys columns, their primary key (one sort), and the counts.

use super::engine::Link;
use crate::rules::{StagedVersion, did_of};
use crate::{CatalogError, CatalogResult, Change};
use std::collections::BTreeMap;
use std::pin::pin;

/// Unique violation.
const UNIQUE_VIOLATION: &str = "23505";

pub(super) async fn begin(link: &mut Link) -> CatalogResult<()> {
    link.batch(
        "BEGIN;
         TRUNCATE query_keys, query_counts, kind_counts;
         DROP INDEX records_uri;
         ALTER TABLE query_keys DROP CONSTRAINT query_keys_pkey;
         COMMIT;",
    )
    .await
}

/// A value in COPY's text format: backslash escapes for the characters it gives meaning to.
fn copy_text(out: &mut String, value: Option<&str>) {
    let Some(value) = value else {
        out.push_str("\\N");
        return;
    };
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
}

pub(super) async fn stage(link: &mut Link, changes: &[&Change]) -> CatalogResult<()> {
    use futures_util::SinkExt;
    let now = svc_syntax::now_unix_micros() / 1000;
    let now = now.to_string();
    let mut text = String::new();
    for change in changes {
        let (uri, collection, author, rev, cid, record, keys) = match change {
            Change::Upsert(u) => (
                u.uri.as_str(),
                u.collection.as_str(),
                u.author.as_str(),
                u.rev.as_str(),
                u.cid.as_deref(),
                Some(u.record_json.as_str()),
                link.ids.encode(&u.keys),
            ),
            Change::Delete {
                uri,
                collection,
                rev,
            } => (
                uri.as_str(),
                collection.as_str(),
                did_of(uri),
                rev.as_str(),
                None,
                None,
                "[]".to_string(),
            ),
        };
        for (index, value) in [
            Some(uri),
            Some(collection),
            Some(author),
            Some(rev),
            cid,
            record,
            Some(keys.as_str()),
            Some(now.as_str()),
        ]
        .into_iter()
        .enumerate()
        {
            if index > 0 {
                text.push('\t');
            }
            copy_text(&mut text, value);
        }
        text.push('\n');
    }
    let sink = link
        .client
        .copy_in(
            "COPY records (uri, collection, author, rev, cid, record, keys, indexed_at) FROM STDIN",
        )
        .await
        .map_err(super::storage)?;
    let mut sink = pin!(sink);
    sink.send(bytes::Bytes::from(text))
        .await
        .map_err(super::storage)?;
    sink.as_mut().finish().await.map_err(super::storage)?;
    Ok(())
}

/// Builds the unique uri index; `false` (and nothing changed) when a uri is there twice.
pub(super) async fn make_unique(link: &mut Link) -> CatalogResult<bool> {
    link.batch("SAVEPOINT unique_uris").await?;
    match link
        .client
        .batch_execute("CREATE UNIQUE INDEX records_uri ON records (uri)")
        .await
    {
        Ok(()) => {
            link.batch("RELEASE unique_uris").await?;
            Ok(true)
        }
        Err(error) if error.code().is_some_and(|c| c.code() == UNIQUE_VIOLATION) => {
            link.batch("ROLLBACK TO unique_uris; RELEASE unique_uris")
                .await?;
            Ok(false)
        }
        Err(error) => Err(super::storage(error)),
    }
}

pub(super) async fn versions(link: &mut Link) -> CatalogResult<Vec<StagedVersion>> {
    let rows = link
        .query(
            "SELECT id, uri, rev, collection, record IS NOT NULL FROM records ORDER BY uri, id",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| StagedVersion {
            row: r.get(0),
            uri: r.get(1),
            rev: r.get(2),
            collection: r.get(3),
            live: r.get(4),
        })
        .collect())
}

pub(super) async fn index(link: &mut Link, kinds: &BTreeMap<String, i64>) -> CatalogResult<()> {
    link.batch(
        "INSERT INTO query_keys (qid, key, uri, rid)
           SELECT (e ->> 0)::bigint, e ->> 1, r.uri, r.id
           FROM records r, jsonb_array_elements(r.keys::jsonb) AS e;
         ALTER TABLE query_keys ADD PRIMARY KEY (qid, key, uri);
         INSERT INTO query_counts (qid, key, n) SELECT qid, key, count(*) FROM query_keys GROUP BY qid, key;",
    )
    .await?;
    let (collections, counts): (Vec<&str>, Vec<i64>) =
        kinds.iter().map(|(k, n)| (k.as_str(), *n)).unzip();
    link.execute(
        "INSERT INTO kind_counts (collection, n) SELECT * FROM unnest($1::text[], $2::bigint[])",
        &[&collections, &counts],
    )
    .await?;
    Ok(())
}

pub(super) async fn end(link: &mut Link, settled: bool) -> CatalogResult<()> {
    if settled {
        // The planner's statistics still describe the empty tables.
        link.batch("ANALYZE records, query_keys, query_counts")
            .await?;
    }
    Ok(())
}

/// Empties a catalog whose bulk load did not settle (it was empty when the load began).
pub(super) async fn recover_interrupted(link: &mut Link) -> CatalogResult<bool> {
    let rows = link
        .query("SELECT to_regclass('records_uri') IS NULL", &[])
        .await?;
    let interrupted = rows
        .first()
        .map(|r| r.get::<_, bool>(0))
        .ok_or_else(|| CatalogError::Storage("no answer".into()))?;
    if !interrupted {
        return Ok(false);
    }
    link.batch(
        "BEGIN;
         TRUNCATE records, query_keys, query_counts, kind_counts;
         CREATE UNIQUE INDEX records_uri ON records (uri);
         ALTER TABLE query_keys ADD PRIMARY KEY (qid, key, uri);
         COMMIT;",
    )
    .await?;
    Ok(true)
}
