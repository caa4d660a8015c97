//! Bulk-load primitives: staged records go in through `COPY` with the uri index, the id's hash
//! index and the index entries' primary key dropped; records get their ids here, so that their
//! index entries can point at them. The entries wait in memory, compactly, until the load
//! settles: then the uri index is built on a connection of its own (or, when a uri was staged
//! twice, in the settling transaction after its versions are settled) while the settling
//! transaction writes the entries in their primary key's order (so that the key is built from
//! sorted input, and the counts are summed on the way) and builds the key. The id's hash index
//! is built after the load, in the background (`id_index.rs`): pages are answered without it,
//! only more slowly.

use super::binary_rows::{BinaryRows, COPY_PIECE, MAX_FIELD};
use super::link::Link;
use super::staging::Staging;
use crate::engine::{RecordRow, StagedVersion};
use crate::runtime::now_ms;
use crate::{CatalogError, CatalogResult, Change};
use bytes::Bytes;
use futures_util::SinkExt;
use std::collections::BTreeMap;
use std::pin::Pin;
use tokio_postgres::Client;

/// Unique violation.
const UNIQUE_VIOLATION: &str = "23505";

pub(super) async fn begin(link: &mut Link) -> CatalogResult<()> {
    link.staging = Staging::default();
    link.uri_index = None;
    link.batch(
        "BEGIN;
         TRUNCATE query_keys, query_counts, kind_counts;
         DROP INDEX records_uri;
         DROP INDEX IF EXISTS records_id_hash;
         ALTER TABLE query_keys DROP CONSTRAINT query_keys_pkey;
         COMMIT;",
    )
    .await
}

pub(super) async fn stage(link: &mut Link, changes: &[&Change]) -> CatalogResult<()> {
    let now = now_ms();
    let first = link.staging.arriving()?.uris.len();
    // A crash during a bulk load empties the catalog at the next start anyway, so a staged
    // batch need not wait for the disk.
    link.batch("BEGIN; SET LOCAL synchronous_commit = off")
        .await?;
    let copied = async {
        let mut sink = CopySink::open(link, COPY_RECORDS).await?;
        let staging = link.staging.arriving()?;
        for change in changes {
            let row = RecordRow::of(change);
            if row.record.is_some_and(|record| record.len() > MAX_FIELD) {
                return Err(CatalogError::Refused {
                    reason: crate::Refusal::Limit,
                    message: format!("{} is larger than PostgreSQL stores in a field", row.uri),
                });
            }
            let position = staging.uris.len();
            let id = position as i64 + 1;
            let record = u32::try_from(position)
                .map_err(|_| CatalogError::Storage("too many records for one bulk load".into()))?;
            for (query, key) in row.keys {
                let qid = link.ids.qid(query)?;
                staging.stage_entry(qid, key, record);
            }
            staging.uris.push(row.uri.into());
            let out = &mut sink.rows;
            out.row(7);
            out.bigint(id);
            for text in [row.uri, row.collection, row.rev] {
                out.text(Some(text));
            }
            out.text(row.cid);
            out.text(row.record);
            out.bigint(now);
            sink.send_if_full().await?;
        }
        sink.finish().await?;
        stage_words(link, changes, first).await
    };
    match copied.await {
        Ok(()) => link.batch("COMMIT").await,
        Err(error) => {
            let _ = link.batch("ROLLBACK").await;
            if let Ok(staging) = link.staging.arriving() {
                staging.forget_from(first);
            }
            Err(error)
        }
    }
}

/// Stages the words of the records just staged (ids from `first` + 1), filed in the search
/// index when the load settles.
async fn stage_words(link: &Link, changes: &[&Change], first: usize) -> CatalogResult<()> {
    let mut sink = CopySink::open(link, COPY_WORDS).await?;
    for (at, change) in changes.iter().enumerate() {
        let row = RecordRow::of(change);
        let (Some(_), Some(words)) = (row.record, row.search) else {
            continue;
        };
        let out = &mut sink.rows;
        out.row(4);
        out.bigint((first + at) as i64 + 1);
        out.text(Some(row.collection));
        out.text(Some(&words.name));
        out.text(Some(&words.text));
        sink.send_if_full().await?;
    }
    sink.finish().await
}

const COPY_WORDS: &str = "COPY search_staging (rid, kind, name, text) FROM STDIN (FORMAT binary)";

/// Files the staged words of the records that settled (a superseded version's row is gone),
/// the index built once after them rather than kept up row by row.
const FILE_STAGED_WORDS: &str = "DROP INDEX search_words; \
     INSERT INTO search (rid, kind, words) SELECT s.rid, s.kind, \
       setweight(to_tsvector('simple', s.name), 'A') || setweight(to_tsvector('simple', s.text), 'D') \
     FROM search_staging s JOIN records r ON r.id = s.rid; \
     TRUNCATE search_staging; \
     CREATE INDEX search_words ON search USING GIN (words)";

/// The keys stay NULL: the rules take them from the record when they need them (the record
/// changes, its account is hidden or restored, a query is rebuilt).
const COPY_RECORDS: &str = "COPY records (id, uri, collection, rev, cid, record, indexed_at) \
     FROM STDIN (FORMAT binary)";
/// Frozen as written (the table was emptied in the same transaction): the primary key's build
/// and readers then find every row visible without setting hint bits (rewriting each page), and
/// the pages are marked all-visible, which an index-only skip for an offset needs.
const COPY_ENTRIES: &str = "COPY query_keys (kid, uri, rid) FROM STDIN (FORMAT binary, FREEZE)";
/// The index entries' primary key, as the schema's latest migration defines it, rebuilt after a
/// bulk load drops it.
const ADD_ENTRIES_KEY: &str = "ALTER TABLE query_keys ADD PRIMARY KEY (kid, uri) INCLUDE (rid)";
/// The bulk load's index builds sort in one backend with `$1` KiB (for the transaction when
/// `$2`, else for the session): a sort that does not fit writes every row to a file once more,
/// and a parallel build's workers each spill a share and merge it back, slower than one sort
/// (the entries come presorted; the uri index's build runs beside the entries' sort and COPY,
/// which the settling waits on). The database's own setting stands where it is larger.
const SORT_IN_MEMORY: &str = "SELECT set_config('maintenance_work_mem', \
     greatest((pg_size_bytes(current_setting('maintenance_work_mem')) / 1024)::bigint, $1::bigint)::text || 'kB', $2), \
     set_config('max_parallel_maintenance_workers', '0', $2)";
const COPY_COUNTS: &str = "COPY query_counts (kid, qid, key, n) FROM STDIN (FORMAT binary)";

/// A `COPY ... FROM STDIN (FORMAT binary)` under way, sent a piece at a time.
struct CopySink {
    sink: Pin<Box<tokio_postgres::CopyInSink<Bytes>>>,
    rows: BinaryRows,
}

impl CopySink {
    async fn open(link: &Link, statement: &str) -> CatalogResult<CopySink> {
        let sink = link
            .client
            .copy_in(statement)
            .await
            .map_err(super::storage)?;
        Ok(CopySink {
            sink: Box::pin(sink),
            rows: BinaryRows::new(),
        })
    }

    async fn send_if_full(&mut self) -> CatalogResult<()> {
        if self.rows.bytes.len() < COPY_PIECE {
            return Ok(());
        }
        let piece = self.rows.take();
        self.sink.send(piece).await.map_err(super::storage)
    }

    async fn finish(mut self) -> CatalogResult<()> {
        // The trailer: a row of -1 fields.
        self.rows.row(-1);
        let piece = self.rows.take();
        self.sink.send(piece).await.map_err(super::storage)?;
        self.sink.as_mut().finish().await.map_err(super::storage)?;
        Ok(())
    }
}

/// The planner's statistics for the records are gathered right after: they still describe an
/// empty table.
const BUILD_URI_INDEX: &str = "CREATE UNIQUE INDEX records_uri ON records (uri); ANALYZE records";

/// Builds the unique uri index; `false` (and nothing changed) when a uri is there twice.
///
/// With `builder` (a connection of its own, given the first time), the index is built there while the
/// entries are sorted here, and then while they are written: the build commits on its own, and
/// a load that fails after it is still found interrupted at the next start (the entries'
/// primary key is missing), so nothing depends on it being inside the settling transaction.
/// The sort says whether a uri came twice; then the build fails, and the caller settles the
/// versions and asks again.
pub(super) async fn make_unique(link: &mut Link, builder: Option<Client>) -> CatalogResult<bool> {
    let sort_kib = link.staging.uri_build_kib();
    if let Some(builder) = builder {
        let building = tokio::spawn(async move {
            builder
                .execute(SORT_IN_MEMORY, &[&sort_kib, &false])
                .await?;
            builder.batch_execute(BUILD_URI_INDEX).await
        });
        let staging = std::mem::take(&mut link.staging);
        let sorted = tokio::task::spawn_blocking(move || staging.sorted())
            .await
            .map_err(|e| {
                CatalogError::Storage(format!("sorting the staged entries failed: {e}"))
            })?;
        let unique = sorted.uris_unique;
        link.staging = Staging::Sorted(sorted);
        if unique {
            link.uri_index = Some(building);
            return Ok(true);
        }
        return match building.await {
            Ok(Ok(())) => Err(CatalogError::Storage(
                "the uri index was built over a uri staged twice".into(),
            )),
            _ => Ok(false),
        };
    }
    link.execute(SORT_IN_MEMORY, &[&sort_kib, &true]).await?;
    link.batch("SAVEPOINT unique_uris").await?;
    match link.client.batch_execute(BUILD_URI_INDEX).await {
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

/// Waits for the uri index built on a connection of its own, if one is being built.
async fn uri_index_built(link: &mut Link) -> CatalogResult<()> {
    let Some(building) = link.uri_index.take() else {
        return Ok(());
    };
    building
        .await
        .map_err(|e| CatalogError::Storage(format!("building the uri index failed: {e}")))?
        .map_err(super::storage)
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
         TRUNCATE query_keys",
    )
    .await?;
    let sorted = std::mem::take(&mut link.staging).sorted();
    let mut at = 0;
    copy_in(link, COPY_ENTRIES, |out| {
        let more = at < sorted.order.len();
        if more {
            sorted.write_entry(at, out);
            at += 1;
        }
        more
    })
    .await?;
    link.execute(SORT_IN_MEMORY, &[&sorted.key_build_kib(), &true])
        .await?;
    link.batch(ADD_ENTRIES_KEY).await?;
    let mut at = 0;
    copy_in(link, COPY_COUNTS, |out| {
        let more = at < sorted.order.len();
        if more {
            at = sorted.write_count(at, out);
        }
        more
    })
    .await?;
    link.execute(
        "SELECT setval('query_counts_kid_seq', $1::bigint + 1, false)",
        &[&sorted.last_key_number()],
    )
    .await?;
    uri_index_built(link).await?;
    link.batch(FILE_STAGED_WORDS).await?;
    let (collections, counts): (Vec<&str>, Vec<i64>) =
        kinds.iter().map(|(k, n)| (k.as_str(), *n)).unzip();
    link.execute(
        "INSERT INTO kind_counts (collection, n) SELECT * FROM unnest($1::text[], $2::bigint[])",
        &[&collections, &counts],
    )
    .await?;
    Ok(())
}

/// Rows written one at a time by `write_row` (which says whether it wrote one), sent a piece
/// at a time.
async fn copy_in(
    link: &Link,
    statement: &str,
    mut write_row: impl FnMut(&mut BinaryRows) -> bool,
) -> CatalogResult<()> {
    let mut sink = CopySink::open(link, statement).await?;
    while write_row(&mut sink.rows) {
        sink.send_if_full().await?;
    }
    sink.finish().await
}

pub(super) async fn end(link: &mut Link, settled: bool) -> CatalogResult<()> {
    if settled {
        // The planner's statistics still describe the empty tables (the records' were
        // gathered with their index). Vacuuming the index entries marks any page not yet
        // all-visible (they were written frozen), so that skipping rows for an offset reads the
        // index alone; VACUUM runs outside any transaction, hence a statement of its own.
        link.batch("VACUUM (ANALYZE) query_keys").await?;
        link.batch("ANALYZE query_counts").await?;
    }
    Ok(())
}

/// Empties a catalog whose bulk load did not settle (it was empty when the load began).
pub(super) async fn recover_interrupted(link: &mut Link) -> CatalogResult<bool> {
    let rows = link
        .query(
            "SELECT to_regclass('records_uri') IS NULL OR to_regclass('query_keys_pkey') IS NULL",
            &[],
        )
        .await?;
    let interrupted = rows
        .first()
        .map(|r| r.get::<_, bool>(0))
        .ok_or_else(|| CatalogError::Storage("no answer".into()))?;
    if !interrupted {
        return Ok(false);
    }
    link.batch(&format!(
        "BEGIN;
         TRUNCATE records, query_keys, query_counts, kind_counts, search, search_staging;
         DROP INDEX IF EXISTS records_uri;
         DROP INDEX IF EXISTS records_id_hash;
         CREATE UNIQUE INDEX records_uri ON records (uri);
         CREATE INDEX records_id_hash ON records USING hash (id);
         ALTER TABLE query_keys DROP CONSTRAINT IF EXISTS query_keys_pkey;
         {ADD_ENTRIES_KEY};
         COMMIT;"
    ))
    .await?;
    Ok(true)
}
