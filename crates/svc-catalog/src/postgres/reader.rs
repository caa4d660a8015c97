//! Read paths: a list is one statement, an index range scan of one (query, key) prefix in
//! uri order, its records fetched by id, beside the count lookup, so total and items come from
//! one snapshot.

use super::reads::{Reads, connection};
use super::storage;
use crate::stream::{self, StreamBounds, StreamRow};
use crate::{
    CatalogResult, CursorPosition, Item, ItemRef, KindCounts, Page, PageRequest, PageWriter,
};
use crate::{Standing, Takedown};
use futures_util::TryStreamExt;
use std::error::Error;
use svc_syntax::{UnixMicros, UnixMillis};
use tokio_postgres::types::{FromSql, ToSql, Type};

/// A page: the count, looked up once (a step of its own, where the planner would otherwise copy
/// it into every reference), and the records whose ids `$ids` selects, each fetched through the
/// id's hash index (a bucket page, where the primary key's B-tree is descended three levels at
/// a million records). The ids go through an array so that the planner, knowing nothing of how
/// often they repeat, does not put a cache (`Memoize`) in front of the fetch: they never repeat,
/// and copying every row into it cost a fifth of the statement. The records come back in no
/// particular order; [`read_page`] puts them in uri order.
macro_rules! page_of_ids {
    ($ids:literal) => {
        concat!(
            "WITH c AS MATERIALIZED ( \
               SELECT coalesce(q.n, 0) AS n, q.kid FROM (SELECT) AS one \
               LEFT JOIN query_counts q ON q.qid = $1 AND q.key = $2) \
             SELECT c.n, r.uri, r.rev, r.record, r.labels FROM c LEFT JOIN LATERAL ( \
               SELECT r.uri, r.rev, r.record, ",
            labels_json!(),
            " AS labels FROM unnest(ARRAY(",
            $ids,
            ")) AS page(rid) JOIN records r ON r.id = page.rid) AS r ON true"
        )
    };
}

/// The rows an offset skips are stepped over in the index alone (an index-only scan: the uri
/// and the record's id are in it). A page past the middle of its key is counted back from the
/// end (the second branch; the planner runs only the branch whose condition holds), so that no
/// offset skips more than half the key's rows.
const PAGE_BY_OFFSET: &str = page_of_ids!(
    "(SELECT k.rid FROM query_keys k WHERE k.kid = c.kid AND $4 <= c.n - $4 \
      ORDER BY k.uri LIMIT $3 OFFSET $4) \
     UNION ALL \
     (SELECT k.rid FROM query_keys k WHERE k.kid = c.kid AND $4 > c.n - $4 \
      ORDER BY k.uri DESC LIMIT greatest(least($3, c.n - $4), 0) OFFSET greatest(c.n - $4 - $3, 0))"
);

/// Beyond any catalog's size, and far enough below `i64::MAX` that the arithmetic on it in
/// [`PAGE_BY_OFFSET`] cannot overflow.
const DEEPEST_OFFSET: i64 = 1 << 60;

const PAGE_AFTER: &str = page_of_ids!(
    "SELECT k.rid FROM query_keys k WHERE k.kid = c.kid AND k.uri > $5 \
     ORDER BY k.uri LIMIT $3 OFFSET $4"
);

/// A text column's bytes as the database sent them, without a second UTF-8 check: the uri and
/// revision are checked once on their way into an answer ([`ItemRef::from_stored`]), and the
/// record is the JSON text the indexer validated before storing it, passed on as SQLite's
/// reader passes it.
struct RawText<'a>(&'a [u8]);

impl<'a> FromSql<'a> for RawText<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        Ok(RawText(raw))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TEXT
    }
}

pub(super) async fn list(
    pool: &Reads,
    qid: i64,
    key: &str,
    page: &PageRequest,
) -> CatalogResult<Page> {
    let mut items = Vec::with_capacity(page.limit.min(1000) as usize);
    let (total, more) = read_page(pool, qid, key, page, &mut |item| {
        items.push(Item::try_from(item))
    })
    .await?;
    let items = items.into_iter().collect::<CatalogResult<_>>()?;
    Ok(Page { items, total, more })
}

pub(super) async fn write_list(
    pool: &Reads,
    qid: i64,
    key: &str,
    page: &PageRequest,
    mut writer: Box<dyn PageWriter>,
) -> CatalogResult<Vec<u8>> {
    let (total, more) = read_page(pool, qid, key, page, &mut |item| writer.item(item)).await?;
    Ok(writer.finish(total, more))
}

/// Reads one page, handing its items to `emit` in uri order, each borrowed from its row;
/// returns `total` and whether more items follow.
async fn read_page(
    pool: &Reads,
    qid: i64,
    key: &str,
    page: &PageRequest,
    emit: &mut (dyn FnMut(ItemRef<'_>) + Send),
) -> CatalogResult<(u64, bool)> {
    let client = connection(pool).await?;
    let fetch = i64::from(page.limit) + 1;
    let rows = match &page.after {
        Some(after) => {
            let statement = client.prepare_cached(PAGE_AFTER).await.map_err(storage)?;
            client
                .query(&statement, &[&qid, &key, &fetch, &0i64, after])
                .await
        }
        None => {
            let offset = page.offset.min(DEEPEST_OFFSET as u64) as i64;
            let statement = client
                .prepare_cached(PAGE_BY_OFFSET)
                .await
                .map_err(storage)?;
            client
                .query(&statement, &[&qid, &key, &fetch, &offset])
                .await
        }
    }
    .map_err(storage)?;
    let total = rows.first().map(|r| r.get::<_, i64>(0)).unwrap_or(0).max(0) as u64;
    // The count comes with every row, and alone (a null item) when the page is empty.
    let mut found = Vec::with_capacity(rows.len());
    for row in &rows {
        let Some(RawText(uri)) = row.try_get::<_, Option<RawText>>(1).map_err(storage)? else {
            continue;
        };
        let RawText(rev) = row.try_get(2).map_err(storage)?;
        let record = row.try_get::<_, Option<RawText>>(3).map_err(storage)?;
        let labels = row.try_get::<_, Option<RawText>>(4).map_err(storage)?;
        found.push(ItemRef {
            uri,
            rev,
            record_json: record.map_or(&b""[..], |text| text.0),
            labels: labels.map_or(&b""[..], |text| text.0),
        });
    }
    found.sort_unstable_by(|a, b| a.uri.cmp(b.uri));
    let mut items = found.into_iter();
    for item in items.by_ref().take(page.limit as usize) {
        emit(item);
    }
    Ok((total, items.next().is_some()))
}

pub(super) async fn count_keys(pool: &Reads, qid: i64, keys: &[String]) -> CatalogResult<Vec<u64>> {
    let client = connection(pool).await?;
    let statement = client
        .prepare_cached("SELECT key, n FROM query_counts WHERE qid = $1 AND key = ANY($2)")
        .await
        .map_err(storage)?;
    let rows = client
        .query(&statement, &[&qid, &keys])
        .await
        .map_err(storage)?;
    let found: std::collections::HashMap<String, i64> =
        rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    Ok(keys
        .iter()
        .map(|k| found.get(k).copied().unwrap_or(0).max(0) as u64)
        .collect())
}

/// Each prefix's keys, each read as one range of the counts' primary key (see
/// [`svc_spec::prefix_end`]), all in one statement: a map asks for hundreds.
pub(super) async fn keys_under(
    pool: &Reads,
    qid: i64,
    prefixes: &[String],
    limit: usize,
) -> CatalogResult<Vec<crate::KeyCounts>> {
    let client = connection(pool).await?;
    let statement = client
        .prepare_cached(
            "SELECT p.i, c.key, c.n \
             FROM unnest($2::TEXT[], $3::TEXT[]) WITH ORDINALITY AS p (start, stop, i) \
             CROSS JOIN LATERAL (SELECT key, n FROM query_counts \
               WHERE qid = $1 AND key >= p.start AND key < p.stop ORDER BY key LIMIT $4) c \
             ORDER BY p.i, c.key",
        )
        .await
        .map_err(storage)?;
    let ends: Vec<String> = prefixes.iter().map(|p| svc_spec::prefix_end(p)).collect();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = client
        .query(&statement, &[&qid, &prefixes, &ends, &limit])
        .await
        .map_err(storage)?;
    let mut found: Vec<crate::KeyCounts> = vec![Vec::new(); prefixes.len()];
    for row in rows {
        let place = usize::try_from(row.get::<_, i64>(0) - 1).unwrap_or(usize::MAX);
        if let Some(keys) = found.get_mut(place) {
            keys.push((row.get(1), row.get::<_, i64>(2).max(0) as u64));
        }
    }
    Ok(found)
}

pub(super) async fn activity(pool: &Reads, since: i64) -> CatalogResult<crate::Activity> {
    use crate::activity::sql;
    let client = connection(pool).await?;
    let changes = client
        .query(sql::CHANGES_SINCE, &[&since])
        .await
        .map_err(storage)?;
    let sources = client
        .query(sql::SOURCES_SINCE, &[&since])
        .await
        .map_err(storage)?;
    Ok(crate::Activity::of_rows(
        changes.iter().map(|r| (r.get(0), r.get(1))).collect(),
        sources
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect(),
    ))
}

pub(super) async fn kind_counts(pool: &Reads) -> CatalogResult<KindCounts> {
    let client = connection(pool).await?;
    let rows = client
        .query("SELECT collection, n FROM kind_counts", &[])
        .await
        .map_err(storage)?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1).max(0) as u64))
        .collect())
}

pub(super) async fn cursor(pool: &Reads, source: &str) -> CatalogResult<Option<CursorPosition>> {
    let client = connection(pool).await?;
    let row = client
        .query_opt(
            "SELECT endpoint, cursor, event_time_us FROM cursors WHERE source = $1",
            &[&source],
        )
        .await
        .map_err(storage)?;
    Ok(row.map(|r| CursorPosition {
        source: source.to_string(),
        endpoint: r.get(0),
        cursor: r.get(1),
        event_time: r.get::<_, Option<i64>>(2).map(UnixMicros),
    }))
}

pub(super) async fn cursors(pool: &Reads) -> CatalogResult<Vec<CursorPosition>> {
    let client = connection(pool).await?;
    let rows = client
        .query(crate::engine::CURSORS, &[])
        .await
        .map_err(storage)?;
    Ok(rows
        .iter()
        .map(|r| CursorPosition {
            source: r.get(0),
            endpoint: r.get(1),
            cursor: r.get(2),
            event_time: r.get::<_, Option<i64>>(3).map(UnixMicros),
        })
        .collect())
}

/// The record stored at the uri `$1`, unless its account (the uri's authority) is inactive or
/// it or its account is taken down.
const RECORD_AT: &str = "SELECT uri, rev, record FROM records \
     WHERE uri = $1 AND record IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM inactive_accounts WHERE did = split_part(records.uri, '/', 3)) \
     AND NOT EXISTS (SELECT 1 FROM takedowns \
       WHERE subject IN (records.uri, split_part(records.uri, '/', 3)))";
/// [`RECORD_AT`] for every uri of the array `$1`.
const RECORDS_AT: &str = "SELECT uri, rev, record FROM records \
     WHERE uri = ANY($1) AND record IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM inactive_accounts WHERE did = split_part(records.uri, '/', 3)) \
     AND NOT EXISTS (SELECT 1 FROM takedowns \
       WHERE subject IN (records.uri, split_part(records.uri, '/', 3)))";

/// A row of (uri, rev, record) as an item.
fn item_of(r: &tokio_postgres::Row) -> CatalogResult<Item> {
    let (uri, rev, record): (&str, &str, &str) = (r.get(0), r.get(1), r.get(2));
    Item::try_from(ItemRef {
        uri: uri.as_bytes(),
        rev: rev.as_bytes(),
        record_json: record.as_bytes(),
        labels: &[],
    })
}

pub(super) async fn get(pool: &Reads, uri: &str) -> CatalogResult<Option<Item>> {
    let client = connection(pool).await?;
    let row = client
        .query_opt(RECORD_AT, &[&uri])
        .await
        .map_err(storage)?;
    row.as_ref().map(item_of).transpose()
}

pub(super) async fn get_many(pool: &Reads, uris: &[String]) -> CatalogResult<Vec<Option<Item>>> {
    let client = connection(pool).await?;
    let rows = client.query(RECORDS_AT, &[&uris]).await.map_err(storage)?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for r in &rows {
        let item = item_of(r)?;
        found.insert(item.uri.clone(), item);
    }
    Ok(uris.iter().map(|uri| found.get(uri).cloned()).collect())
}

/// Which uris of the array `$1` name a record [`RECORD_AT`] reads; the records, stored
/// apart when large, are not read.
const HELD_AT: &str = "SELECT uri FROM records \
     WHERE uri = ANY($1) AND record IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM inactive_accounts WHERE did = split_part(records.uri, '/', 3)) \
     AND NOT EXISTS (SELECT 1 FROM takedowns \
       WHERE subject IN (records.uri, split_part(records.uri, '/', 3)))";

pub(super) async fn write_records(
    pool: &Reads,
    uris: &[String],
    mut writer: Box<dyn PageWriter>,
) -> CatalogResult<Vec<u8>> {
    let client = connection(pool).await?;
    let mut found = 0;
    let mut emit = |item: ItemRef<'_>| {
        writer.item(item);
        found += 1;
        true
    };
    each_item(&client, RECORDS_AT, &[&uris], &mut emit).await?;
    Ok(writer.finish(found, false))
}

pub(super) async fn held(pool: &Reads, uris: &[String]) -> CatalogResult<Vec<String>> {
    let client = connection(pool).await?;
    let rows = client.query(HELD_AT, &[&uris]).await.map_err(storage)?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

pub(super) async fn write_repository_records(
    pool: &Reads,
    slice: &crate::RepositorySlice,
    after: Option<&str>,
    limit: usize,
    mut writer: Box<dyn PageWriter>,
) -> CatalogResult<Vec<u8>> {
    let (from, to) = slice.range(after);
    let client = connection(pool).await?;
    let fetch = limit.saturating_add(1) as i64;
    let mut written = 0;
    let mut emit = |item: ItemRef<'_>| {
        if written == limit {
            return false;
        }
        writer.item(item);
        written += 1;
        true
    };
    let more = !each_item(
        &client,
        crate::engine::REPOSITORY_RECORDS,
        &[&from, &to, &slice.did, &fetch],
        &mut emit,
    )
    .await?;
    Ok(writer.finish(written as u64, more))
}

/// Hands each (uri, rev, record) row of `sql` to `emit` as it arrives, holding one row at a
/// time, until `emit` says to stop; returns whether every row was handed over.
async fn each_item(
    client: &deadpool_postgres::Object,
    sql: &str,
    parameters: &[&(dyn ToSql + Sync)],
    emit: &mut (dyn FnMut(ItemRef<'_>) -> bool + Send),
) -> CatalogResult<bool> {
    let rows = client
        .query_raw(sql, parameters.iter().copied())
        .await
        .map_err(storage)?;
    let mut rows = std::pin::pin!(rows);
    while let Some(row) = rows.try_next().await.map_err(storage)? {
        let (RawText(uri), RawText(rev), RawText(record_json)) = (
            row.try_get(0).map_err(storage)?,
            row.try_get(1).map_err(storage)?,
            row.try_get(2).map_err(storage)?,
        );
        if !emit(ItemRef {
            uri,
            rev,
            record_json,
            labels: &[],
        }) {
            return Ok(false);
        }
    }
    Ok(true)
}

pub(super) async fn takedown(pool: &Reads, subject: &str) -> CatalogResult<Standing> {
    let client = connection(pool).await?;
    let rows = client
        .query(crate::engine::TAKEDOWN_OF, &[&subject])
        .await
        .map_err(storage)?;
    Ok(Standing::of_rows(rows.iter().map(|r| Takedown {
        reference: r.get(0),
        applied_at: UnixMillis(r.get(1)),
        source: r.get(2),
    })))
}

pub(super) async fn changes_after(
    pool: &Reads,
    seq: i64,
    limit: usize,
) -> CatalogResult<Vec<StreamRow>> {
    let client = connection(pool).await?;
    let rows = client
        .query(stream::sql::AFTER, &[&seq, &(limit as i64)])
        .await
        .map_err(storage)?;
    Ok(rows
        .iter()
        .map(|r| StreamRow {
            seq: r.get(0),
            at_ms: r.get(1),
            uri: r.get(2),
            was_live: r.get(3),
            is_live: r.get(4),
            before: r.get(5),
            after: r.get(6),
        })
        .collect())
}

pub(super) async fn change_bounds(pool: &Reads) -> CatalogResult<StreamBounds> {
    let client = connection(pool).await?;
    let row = client
        .query_one(stream::sql::BOUNDS, &[])
        .await
        .map_err(storage)?;
    Ok(StreamBounds {
        oldest: row.get(0),
        newest: row.get(1),
    })
}

pub(super) async fn indexer_heartbeat(pool: &Reads) -> CatalogResult<Option<UnixMillis>> {
    let client = connection(pool).await?;
    let row = client
        .query_opt(crate::replication_log::sql::HEARTBEAT, &[])
        .await
        .map_err(storage)?;
    Ok(row.map(|r| UnixMillis(r.get(0))))
}
