//! Bulk-load primitives: staged records and their index entries (in `staged_keys`, out of
//! sight) go in through `COPY`, with the uri index and the index entries' primary key dropped; records get their ids here, so that
//! their entries can point at them before the load settles. At the end one transaction builds
//! the uri index (settling uris staged twice), the entries' primary key (one sort each) and the
//! counts.

use super::engine::Link;
use crate::rules::{RecordRow, StagedVersion, now_ms};
use crate::{CatalogError, CatalogResult, Change};
use std::collections::BTreeMap;
use std::pin::pin;

/// Unique violation.
const UNIQUE_VIOLATION: &str = "23505";

pub(super) async fn begin(link: &mut Link) -> CatalogResult<()> {
    link.staged = 0;
    link.batch(
        "BEGIN;
         TRUNCATE query_keys, query_counts, kind_counts, staged_keys;
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
    let now = now_ms().to_string();
    let (mut records, mut entries) = (String::new(), String::new());
    let mut next = link.staged;
    for change in changes {
        next += 1;
        let id = next.to_string();
        let row = RecordRow::of(change);
        for (query, key) in row.keys {
            let qid = link.ids.qid(query)?.to_string();
            copy_row(
                &mut entries,
                [Some(qid.as_str()), Some(key), Some(row.uri), Some(&id)],
            );
        }
        let keys = link.ids.encode(row.keys);
        copy_row(
            &mut records,
            [
                Some(id.as_str()),
                Some(row.uri),
                Some(row.collection),
                Some(row.author),
                Some(row.rev),
                row.cid,
                row.record,
                Some(keys.as_str()),
                Some(now.as_str()),
            ],
        );
    }
    // A crash during a bulk load empties the catalog at the next start anyway, so a staged
    // batch need not wait for the disk.
    link.batch("BEGIN; SET LOCAL synchronous_commit = off")
        .await?;
    let copied = async {
        copy_in(link, COPY_RECORDS, records).await?;
        copy_in(link, COPY_ENTRIES, entries).await
    };
    match copied.await {
        Ok(()) => {
            link.batch("COMMIT").await?;
            link.staged = next;
            Ok(())
        }
        Err(error) => {
            let _ = link.batch("ROLLBACK").await;
            Err(error)
        }
    }
}

const COPY_RECORDS: &str =
    "COPY records (id, uri, collection, author, rev, cid, record, keys, indexed_at) FROM STDIN";
const COPY_ENTRIES: &str = "COPY staged_keys (qid, key, uri, rid) FROM STDIN";

/// One row in COPY's text format.
fn copy_row<const N: usize>(out: &mut String, values: [Option<&str>; N]) {
    for (index, value) in values.into_iter().enumerate() {
        if index > 0 {
            out.push('\t');
        }
        copy_text(out, value);
    }
    out.push('\n');
}

async fn copy_in(link: &mut Link, statement: &str, text: String) -> CatalogResult<()> {
    use futures_util::SinkExt;
    if text.is_empty() {
        return Ok(());
    }
    let sink = link
        .client
        .copy_in(statement)
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
    // The index builds of the settling transaction sort in memory rather than in files.
    link.batch("SET LOCAL maintenance_work_mem = '512MB'; SAVEPOINT unique_uris")
        .await?;
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
        "SELECT setval('records_id_seq', (SELECT coalesce(max(id), 0) + 1 FROM records), false);
         INSERT INTO query_keys SELECT * FROM staged_keys;
         TRUNCATE staged_keys;
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
        // The planner's statistics still describe the empty tables. Vacuuming the index
        // entries marks their pages all-visible, so that skipping rows for an offset reads the
        // index alone rather than each skipped row's heap tuple; VACUUM runs outside any
        // transaction, hence a statement of its own.
        link.batch("VACUUM (ANALYZE) query_keys").await?;
        link.batch("ANALYZE records, query_counts").await?;
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
         TRUNCATE records, query_keys, query_counts, kind_counts, staged_keys;
         CREATE UNIQUE INDEX records_uri ON records (uri);
         ALTER TABLE query_keys ADD PRIMARY KEY (qid, key, uri);
         COMMIT;",
    )
    .await?;
    Ok(true)
}
