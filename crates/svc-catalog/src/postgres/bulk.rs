//! Bulk-load primitives: staged records go in through `COPY` with the uri index, the id's hash
//! index and the index entries' primary key dropped; records get their ids here, so that their
//! index entries can point at them. The entries wait in memory, compactly, until the load
//! settles: then the uri index is built on a connection of its own (or, when a uri was staged
//! twice, in the settling transaction after its versions are settled) while the settling
//! transaction writes the entries in their primary key's order (so that the key is built from
//! sorted input, and the counts are summed on the way) and builds the key. The id's hash index
//! is built after the load, in the background (`id_index.rs`): pages are answered without it,
//! only more slowly.

use super::engine::Link;
use crate::rules::{RecordRow, StagedVersion, now_ms};
use crate::{CatalogError, CatalogResult, Change};
use bytes::Bytes;
use futures_util::SinkExt;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, HashSet};
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

/// What a bulk load under way has staged: its index entries, unsorted while records arrive,
/// sorted once the load settles.
pub(super) enum Staging {
    Arriving(Entries),
    Sorted(KeyOrder),
}

impl Default for Staging {
    fn default() -> Staging {
        Staging::Arriving(Entries::default())
    }
}

impl Staging {
    fn arriving(&mut self) -> CatalogResult<&mut Entries> {
        match self {
            Staging::Arriving(entries) => Ok(entries),
            Staging::Sorted(_) => Err(CatalogError::Storage(
                "records staged after the bulk load began settling".into(),
            )),
        }
    }

    /// The sort memory the uri index needs, in KiB.
    fn uri_build_kib(&self) -> i64 {
        let uris = match self {
            Staging::Arriving(entries) => &entries.uris,
            Staging::Sorted(sorted) => &sorted.uris,
        };
        build_kib(uris.iter().map(|uri| uri.len()).sum(), uris.len())
    }

    pub(super) fn is_sorted(&self) -> bool {
        matches!(self, Staging::Sorted(_))
    }

    /// Forgets the entries of records that do not stand.
    pub(super) fn remove(&mut self, superseded: &[i64]) {
        let gone: HashSet<usize> = superseded
            .iter()
            .filter_map(|id| usize::try_from(id - 1).ok())
            .collect();
        let mut sorted = std::mem::take(self).sorted();
        let uri_by_rank = &sorted.uri_by_rank;
        sorted
            .order
            .retain(|entry| !gone.contains(&record_of(uri_by_rank, *entry)));
        *self = Staging::Sorted(sorted);
    }

    fn sorted(self) -> KeyOrder {
        match self {
            Staging::Arriving(entries) => entries.in_key_order(),
            Staging::Sorted(sorted) => sorted,
        }
    }
}

/// The staged records' uris (a record's id is its position plus one) and their index
/// entries, each a numbered (query, key) pair and a record position.
#[derive(Default)]
pub(super) struct Entries {
    uris: Vec<Box<str>>,
    keys: Vec<(i64, Box<str>)>,
    key_numbers: FxHashMap<i64, FxHashMap<Box<str>, u32>>,
    /// (key number, record position), in staging order.
    entries: Vec<(u32, u32)>,
}

impl Entries {
    fn stage_entry(&mut self, qid: i64, key: &str, record: u32) {
        let numbers = self.key_numbers.entry(qid).or_default();
        let number = match numbers.get(key) {
            Some(number) => *number,
            None => {
                let number = self.keys.len() as u32;
                self.keys.push((qid, key.into()));
                numbers.insert(key.into(), number);
                number
            }
        };
        self.entries.push((number, record));
    }

    /// Forgets the records from `position` on (and their entries): their batch was not staged.
    fn forget_from(&mut self, position: usize) {
        self.uris.truncate(position);
        let kept = self
            .entries
            .partition_point(|(_, record)| (*record as usize) < position);
        self.entries.truncate(kept);
    }

    /// The entries in primary-key order: by query id, key, then uri, byte-wise.
    fn in_key_order(self) -> KeyOrder {
        /// Each item's rank, from the items in rank order.
        fn ranks_of(by_rank: &[u32]) -> Vec<u32> {
            let mut rank = vec![0; by_rank.len()];
            for (r, item) in by_rank.iter().enumerate() {
                rank[*item as usize] = r as u32;
            }
            rank
        }
        let mut key_by_rank: Vec<u32> = (0..self.keys.len() as u32).collect();
        key_by_rank.sort_unstable_by_key(|key| &self.keys[*key as usize]);
        let key_rank = ranks_of(&key_by_rank);
        let uri_by_rank = uris_in_order(&self.uris);
        let uri_rank = ranks_of(&uri_by_rank);
        let mut order: Vec<u64> = self
            .entries
            .iter()
            .map(|(key, record)| {
                (u64::from(key_rank[*key as usize]) << 32) | u64::from(uri_rank[*record as usize])
            })
            .collect();
        order.sort_unstable();
        let uris_unique = uri_by_rank
            .windows(2)
            .all(|pair| self.uris[pair[0] as usize] != self.uris[pair[1] as usize]);
        KeyOrder {
            keys: self.keys,
            uris: self.uris,
            key_by_rank,
            uri_by_rank,
            order,
            uris_unique,
        }
    }
}

/// The positions of `uris` in byte-wise order of their uris.
///
/// Comparing the uris themselves in a sort reads two strings from the heap at each step, and
/// an author's uris share their first fifty bytes or so; instead the positions are sorted by
/// the 8 bytes that follow the prefix every uri shares, held beside them, and each run of
/// positions whose 8 bytes are equal by the 8 bytes after those, and so on.
fn uris_in_order(uris: &[Box<str>]) -> Vec<u32> {
    let mut order: Vec<(u64, u32)> = (0..uris.len() as u32).map(|at| (0, at)).collect();
    sort_from(&mut order, uris, common_prefix(uris));
    order.into_iter().map(|(_, position)| position).collect()
}

/// Sorts `run`, positions of uris that share their first `start` bytes, by the rest.
fn sort_from(run: &mut [(u64, u32)], uris: &[Box<str>], start: usize) {
    let rest = |position: u32| {
        uris[position as usize]
            .as_bytes()
            .get(start..)
            .unwrap_or_default()
    };
    for entry in run.iter_mut() {
        entry.0 = first_eight_bytes(rest(entry.1));
    }
    run.sort_unstable();
    for ties in run.chunk_by_mut(|a, b| a.0 == b.0) {
        if ties.len() < 2 {
            continue;
        }
        // Where a uri ends within the 8 bytes, the zeros after its end could equal NUL bytes
        // of another: those ties are put in order by their bytes.
        if ties.iter().any(|entry| rest(entry.1).len() <= 8) {
            ties.sort_unstable_by(|a, b| rest(a.1).cmp(rest(b.1)));
        } else {
            sort_from(ties, uris, start + 8);
        }
    }
}

/// How many leading bytes all of `items` share.
fn common_prefix(items: &[Box<str>]) -> usize {
    let Some(first) = items.first() else {
        return 0;
    };
    let first = first.as_bytes();
    items.iter().fold(first.len(), |shared, item| {
        let item = item.as_bytes();
        (0..shared.min(item.len()))
            .position(|at| item[at] != first[at])
            .unwrap_or(shared.min(item.len()))
    })
}

/// The first 8 bytes of `text` as a big-endian number (zeros past its end), so that numbers
/// order as the bytes do, ties aside.
fn first_eight_bytes(text: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let length = text.len().min(8);
    bytes[..length].copy_from_slice(&text[..length]);
    u64::from_be_bytes(bytes)
}

/// Staged entries sorted for writing.
pub(super) struct KeyOrder {
    keys: Vec<(i64, Box<str>)>,
    uris: Vec<Box<str>>,
    key_by_rank: Vec<u32>,
    uri_by_rank: Vec<u32>,
    /// Each entry's key rank (high half) and uri rank (low half), ascending.
    order: Vec<u64>,
    /// No uri was staged twice.
    uris_unique: bool,
}

/// The record position of a sorted entry: its uri rank (the low half) read back.
fn record_of(uri_by_rank: &[u32], entry: u64) -> usize {
    uri_by_rank[(entry & u64::from(u32::MAX)) as usize] as usize
}

impl KeyOrder {
    fn key(&self, entry: u64) -> &(i64, Box<str>) {
        &self.keys[self.key_by_rank[(entry >> 32) as usize] as usize]
    }

    /// The sort memory the entries' primary key needs, in KiB: an index tuple holds the
    /// key's number and the uri.
    fn key_build_kib(&self) -> i64 {
        let text: usize = self
            .order
            .iter()
            .map(|entry| self.uris[record_of(&self.uri_by_rank, *entry)].len())
            .sum();
        build_kib(text, self.order.len())
    }

    /// The number an entry's (query, key) is stored under: its key's rank, counted from 1, so
    /// that the entries' order by (number, uri) is their order by (query, key, uri).
    fn key_number(entry: u64) -> i64 {
        (entry >> 32) as i64 + 1
    }

    /// The largest key number the load stored (0 when none).
    pub(super) fn last_key_number(&self) -> i64 {
        self.order
            .last()
            .map_or(0, |entry| Self::key_number(*entry))
    }

    /// The entry at `at` as a row of `query_keys`.
    fn write_entry(&self, at: usize, out: &mut BinaryRows) {
        let entry = self.order[at];
        let record = record_of(&self.uri_by_rank, entry);
        out.row(3);
        out.bigint(Self::key_number(entry));
        out.text(Some(&self.uris[record]));
        out.bigint(record as i64 + 1);
    }

    /// The count of the key whose entries start at `at`, as a row of `query_counts`; where its
    /// entries end.
    fn write_count(&self, at: usize, out: &mut BinaryRows) -> usize {
        let rank = self.order[at] >> 32;
        let end = at + self.order[at..].partition_point(|entry| entry >> 32 == rank);
        let (qid, key) = self.key(self.order[at]);
        out.row(4);
        out.bigint(Self::key_number(self.order[at]));
        out.bigint(*qid);
        out.text(Some(key));
        out.bigint((end - at) as i64);
        end
    }
}

/// COPY data is sent in pieces of about this size, so that the database reads one while the
/// next is written.
const COPY_PIECE: usize = 1 << 20;

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
        sink.finish().await
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
/// The most sort memory an index build asks for: a larger load spills part of its sort to
/// files rather than risk the database server's memory.
const MAX_BUILD_KIB: i64 = 2 << 20;

/// The memory, in KiB, PostgreSQL's sort needs to build an index of `tuples` rows holding `text`
/// bytes of text: each tuple's header, fixed columns and the sort's bookkeeping take about 96
/// bytes beside its text (measured on PostgreSQL 15); an eighth to spare.
fn build_kib(text: usize, tuples: usize) -> i64 {
    let bytes = text.saturating_add(tuples.saturating_mul(96)) / 8 * 9;
    i64::try_from(bytes >> 10)
        .unwrap_or(i64::MAX)
        .min(MAX_BUILD_KIB)
}
const COPY_COUNTS: &str = "COPY query_counts (kid, qid, key, n) FROM STDIN (FORMAT binary)";

/// The longest value PostgreSQL stores in a field.
const MAX_FIELD: usize = (1 << 30) - 1;

/// Rows in COPY's binary format: nothing to escape, numbers as they are.
pub(super) struct BinaryRows {
    bytes: Vec<u8>,
}

impl BinaryRows {
    fn new() -> BinaryRows {
        let mut bytes = Vec::with_capacity(COPY_PIECE + COPY_PIECE / 4);
        // The signature, no flags, no header extension.
        bytes.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
        bytes.extend_from_slice(&[0; 8]);
        BinaryRows { bytes }
    }

    fn row(&mut self, fields: i16) {
        self.bytes.extend_from_slice(&fields.to_be_bytes());
    }

    fn bigint(&mut self, value: i64) {
        self.bytes.extend_from_slice(&8i32.to_be_bytes());
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    /// A text value; `None` is NULL. Callers keep to `MAX_FIELD` bytes.
    fn text(&mut self, value: Option<&str>) {
        match value {
            Some(text) => {
                let length = text.len().min(MAX_FIELD) as i32;
                self.bytes.extend_from_slice(&length.to_be_bytes());
                self.bytes.extend_from_slice(text.as_bytes());
            }
            None => self.bytes.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }

    fn take(&mut self) -> Bytes {
        let full = std::mem::replace(
            &mut self.bytes,
            Vec::with_capacity(COPY_PIECE + COPY_PIECE / 4),
        );
        Bytes::from(full)
    }
}

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

/// The uri index being built on a connection of its own.
pub(super) type UriIndexBuild = tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>;

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
         TRUNCATE records, query_keys, query_counts, kind_counts;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn byte_wise(uris: &[Box<str>]) -> Vec<&str> {
        let mut sorted: Vec<&str> = uris.iter().map(|uri| &**uri).collect();
        sorted.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        sorted
    }

    fn ordered(uris: &[Box<str>]) -> Vec<&str> {
        uris_in_order(uris)
            .iter()
            .map(|position| &*uris[*position as usize])
            .collect()
    }

    #[test]
    fn uris_sharing_everything_but_their_ends_come_in_byte_order() {
        let uris: Vec<Box<str>> = [
            "at://did:plc:b/x/2",
            "at://did:plc:a/x/10",
            "at://did:plc:a/x/1",
            "at://did:plc:a/x/1\0",
            "at://did:plc:a/x/",
            "at://did:plc:a/x/1",
            "at://did:plc:aé/x/1",
        ]
        .into_iter()
        .map(Box::from)
        .collect();
        assert_eq!(ordered(&uris), byte_wise(&uris));
        assert!(ordered(&[]).is_empty());
    }

    proptest! {
        #[test]
        fn uris_come_in_byte_order(
            uris in prop::collection::vec("at://did:plc:[ab]{0,3}[/\u{0}-\u{7f}é]{0,12}", 0..60)
        ) {
            let uris: Vec<Box<str>> = uris.into_iter().map(Box::from).collect();
            prop_assert_eq!(ordered(&uris), byte_wise(&uris));
        }

        #[test]
        fn uris_sharing_long_stretches_come_in_byte_order(
            uris in prop::collection::vec("at://did:plc:[ab]{0,2}(/dev.svc.[ab]{0,2}){0,4}[/\u{0}ab]{0,10}", 0..60)
        ) {
            let uris: Vec<Box<str>> = uris.into_iter().map(Box::from).collect();
            prop_assert_eq!(ordered(&uris), byte_wise(&uris));
        }
    }
}
