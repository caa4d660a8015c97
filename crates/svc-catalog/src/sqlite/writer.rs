//! The single writer: owns the only write connection, applies batches in one transaction each
//! (several queued batches share one commit), keeps index keys and counts in step with the
//! records, and stores the source cursor in the same transaction. A bulk load into an empty
//! catalog stages changes and merges them in key order instead (see `bulk`).

use super::Shared;
use super::keys_column;
use crate::spec::QuerySet;
use crate::{
    AccountStatus, ApplyReport, CatalogError, CatalogResult, Change, CursorPosition, IndexKeys,
};
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, mpsc};
use tokio::sync::oneshot;

pub(crate) enum WriteJob {
    Apply {
        changes: Vec<Change>,
        cursor: Option<CursorPosition>,
        reply: oneshot::Sender<CatalogResult<ApplyReport>>,
    },
    BeginBulk {
        reply: oneshot::Sender<CatalogResult<bool>>,
    },
    FinishBulk {
        cursor: Option<CursorPosition>,
        reply: oneshot::Sender<CatalogResult<ApplyReport>>,
    },
    Account {
        did: String,
        status: AccountStatus,
        reply: oneshot::Sender<CatalogResult<()>>,
    },
}

/// An apply job waiting in a group commit.
type QueuedApply = (
    Vec<Change>,
    Option<CursorPosition>,
    oneshot::Sender<CatalogResult<ApplyReport>>,
);

/// Queued batches merged into one commit, at most this many changes.
const GROUP_COMMIT_CHANGES: usize = 100_000;

pub(crate) struct Writer {
    conn: Connection,
    shared: Arc<Shared>,
    /// Position in the query set of each stored qid.
    positions: HashMap<i64, usize>,
    /// What a bulk load has staged, when one is under way.
    bulk: Option<Box<bulk::BulkLoad>>,
    /// Accounts whose records are out of the index.
    inactive: HashSet<String>,
}

#[derive(Default)]
struct Pending {
    /// Index entries to write, by (query position, key, uri): `Some(rowid)` to file the record
    /// there, `None` to take it out. The last change of a group wins; they are written in key
    /// order, so a group walks each index once instead of jumping around it.
    key_writes: BTreeMap<(usize, String, String), Option<i64>>,
    query_counts: BTreeMap<(usize, String), i64>,
    kind_counts: HashMap<String, i64>,
    touched: IndexKeys,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Assigns each query its database id, and (re)builds the keys of queries that are new or
/// whose definition changed. Keys of queries no longer in the specification are dropped.
pub(crate) fn register_queries(
    conn: &mut Connection,
    queries: &QuerySet,
    inactive: &HashSet<String>,
) -> CatalogResult<Vec<i64>> {
    let tx = conn.transaction()?;
    let mut qids = Vec::with_capacity(queries.all().len());
    let mut rebuild = Vec::new();
    for (position, query) in queries.all().iter().enumerate() {
        let fingerprint = query.fingerprint();
        let stored: Option<(i64, String)> = tx
            .query_row(
                "SELECT qid, fingerprint FROM queries WHERE name = ?1",
                [query.name()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let qid = match stored {
            Some((qid, old)) if old == fingerprint => qid,
            Some((qid, _)) => {
                tx.execute("DELETE FROM query_keys WHERE qid = ?1", [qid])?;
                tx.execute("DELETE FROM query_counts WHERE qid = ?1", [qid])?;
                tx.execute(
                    "UPDATE queries SET fingerprint = ?2 WHERE qid = ?1",
                    params![qid, fingerprint],
                )?;
                rebuild.push(position);
                qid
            }
            None => {
                tx.execute(
                    "INSERT INTO queries (name, fingerprint) VALUES (?1, ?2)",
                    params![query.name(), fingerprint],
                )?;
                rebuild.push(position);
                tx.last_insert_rowid()
            }
        };
        qids.push(qid);
    }
    let dropped: Vec<i64> = {
        let mut stmt = tx.prepare("SELECT qid, name FROM queries")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
        let mut dropped = Vec::new();
        for row in rows {
            let (qid, name) = row?;
            if queries.position(&name).is_none() {
                dropped.push(qid);
            }
        }
        dropped
    };
    for qid in dropped {
        tx.execute("DELETE FROM query_keys WHERE qid = ?1", [qid])?;
        tx.execute("DELETE FROM query_counts WHERE qid = ?1", [qid])?;
        tx.execute("DELETE FROM queries WHERE qid = ?1", [qid])?;
    }
    for position in rebuild {
        rebuild_query(&tx, queries, position, qids[position], inactive)?;
    }
    tx.commit()?;
    Ok(qids)
}

/// Files every stored record of the query's kind under the query's keys, in chunks of uris.
fn rebuild_query(
    tx: &Transaction<'_>,
    queries: &QuerySet,
    position: usize,
    qid: i64,
    inactive: &HashSet<String>,
) -> CatalogResult<()> {
    let query = &queries.all()[position];
    let mut counts: HashMap<String, i64> = HashMap::new();
    let mut after = String::new();
    loop {
        let mut rows: Vec<(i64, String, Vec<String>, String)> = Vec::new();
        {
            let mut scan = tx.prepare_cached(
                "SELECT rowid, uri, record, keys FROM records WHERE uri > ?1 AND collection = ?2 AND record IS NOT NULL ORDER BY uri LIMIT 10000",
            )?;
            let mut found = scan.query(params![after, query.kind()])?;
            while let Some(row) = found.next()? {
                let rowid: i64 = row.get(0)?;
                let uri: String = row.get(1)?;
                let text: String = row.get(2)?;
                let keys = serde_json::from_str::<Value>(&text)
                    .map(|r| query.index_keys(&r))
                    .unwrap_or_default();
                rows.push((rowid, uri, keys, row.get(3)?));
            }
        }
        let Some(last) = rows.last().map(|r| r.1.clone()) else {
            break;
        };
        let mut insert = tx.prepare_cached(
            "INSERT OR IGNORE INTO query_keys (qid, key, uri, rid) VALUES (?1, ?2, ?3, ?4)",
        )?;
        let mut update = tx.prepare_cached("UPDATE records SET keys = ?2 WHERE rowid = ?1")?;
        for (rowid, uri, keys, column) in rows {
            // An inactive account's records keep their keys column but stay out of the index.
            let indexed: &[String] = if inactive.contains(accounts::did_of(&uri)) {
                &[]
            } else {
                &keys
            };
            for key in indexed {
                insert.execute(params![qid, key, uri, rowid])?;
                *counts.entry(key.clone()).or_default() += 1;
            }
            update.execute(params![
                rowid,
                keys_column::replace_query(&column, qid, &keys)
            ])?;
        }
        after = last;
    }
    let mut insert =
        tx.prepare_cached("INSERT INTO query_counts (qid, key, n) VALUES (?1, ?2, ?3)")?;
    for (key, n) in counts {
        insert.execute(params![qid, key, n])?;
    }
    Ok(())
}

/// Fails every batch queued behind one that failed: a later batch must not commit a cursor
/// past changes that never landed. Whoever sent them learns of the failure and resends from
/// the stored cursor. Returns the first job that is not a batch, to run next.
fn fail_queued_applies(jobs: &mpsc::Receiver<WriteJob>) -> Option<WriteJob> {
    while let Ok(job) = jobs.try_recv() {
        match job {
            WriteJob::Apply { reply, .. } => {
                let _ = reply.send(Err(CatalogError::Storage(
                    "not written: a batch queued before it failed".into(),
                )));
            }
            other => return Some(other),
        }
    }
    None
}

impl Writer {
    pub fn new(conn: Connection, shared: Arc<Shared>, inactive: HashSet<String>) -> Writer {
        let positions = shared
            .qids
            .iter()
            .enumerate()
            .map(|(p, q)| (*q, p))
            .collect();
        Writer {
            conn,
            shared,
            positions,
            bulk: None,
            inactive,
        }
    }

    pub fn run(mut self, jobs: mpsc::Receiver<WriteJob>) {
        let mut held: Option<WriteJob> = None;
        while let Some(job) = held.take().or_else(|| jobs.recv().ok()) {
            match job {
                WriteJob::Apply {
                    changes,
                    cursor,
                    reply,
                } => {
                    let mut group = vec![(changes, cursor, reply)];
                    let mut size = group[0].0.len();
                    while size < GROUP_COMMIT_CHANGES {
                        match jobs.try_recv() {
                            Ok(WriteJob::Apply {
                                changes,
                                cursor,
                                reply,
                            }) => {
                                size += changes.len();
                                group.push((changes, cursor, reply));
                            }
                            Ok(other) => {
                                held = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    if !self.apply_group(group) {
                        held = fail_queued_applies(&jobs);
                    }
                }
                WriteJob::Account { did, status, reply } => {
                    let _ = reply.send(self.set_account(&did, &status));
                }
                WriteJob::BeginBulk { reply } => {
                    let _ = reply.send(self.begin_bulk());
                }
                WriteJob::FinishBulk { cursor, reply } => {
                    let outcome = self.finish_bulk(cursor);
                    let settled = outcome.is_ok();
                    if settled {
                        self.shared.clock.touch_all();
                    }
                    let _ = reply.send(outcome);
                    if settled && let Some(path) = self.conn.path() {
                        super::checkpoint::spawn(path.into(), super::checkpoint::After::BulkLoad);
                    }
                }
            }
        }
    }

    /// Whether the group committed.
    fn apply_group(&mut self, group: Vec<QueuedApply>) -> bool {
        let jobs: Vec<(&[Change], Option<&CursorPosition>)> = group
            .iter()
            .map(|(changes, cursor, _)| (changes.as_slice(), cursor.as_ref()))
            .collect();
        let outcome = if self.bulk.is_some() {
            self.stage(&jobs)
        } else {
            self.commit_group(&jobs)
        };
        match outcome {
            Ok(reports) => {
                for ((_, _, reply), report) in group.into_iter().zip(reports) {
                    let _ = reply.send(Ok(report));
                }
                true
            }
            Err(error) => {
                for (_, _, reply) in group {
                    let _ = reply.send(Err(error.clone()));
                }
                false
            }
        }
    }

    fn commit_group(
        &mut self,
        jobs: &[(&[Change], Option<&CursorPosition>)],
    ) -> CatalogResult<Vec<ApplyReport>> {
        let tx = self.conn.transaction()?;
        let mut pending = Pending::default();
        let mut reports = vec![ApplyReport::default(); jobs.len()];
        // In uri order (a stable sort keeps each uri's changes in arrival order), so the group
        // walks the uri index once; the outcome does not depend on the order across uris.
        let mut order: Vec<(usize, &Change)> = jobs
            .iter()
            .enumerate()
            .flat_map(|(job, (changes, _))| changes.iter().map(move |change| (job, change)))
            .collect();
        order.sort_by(|a, b| a.1.uri().cmp(b.1.uri()));
        for (job, change) in order {
            if apply_change(
                &tx,
                &self.shared,
                &self.positions,
                &self.inactive,
                change,
                &mut pending,
            )? {
                reports[job].applied += 1;
            } else {
                reports[job].stale += 1;
            }
        }
        for (_, cursor) in jobs {
            if let Some(cursor) = cursor {
                store_cursor(&tx, cursor)?;
            }
        }
        write_keys(&tx, &self.shared, &mut pending)?;
        flush_counts(&tx, &self.shared, &pending)?;
        tx.commit()?;
        self.publish(&pending);
        Ok(reports)
    }

    /// Readers may cache against the clock: bump it only after the commit.
    fn publish(&self, pending: &Pending) {
        for (position, key) in &pending.touched {
            self.shared.clock.touch_key(*position, key);
        }
        if !pending.kind_counts.is_empty() {
            self.shared.clock.touch_kinds();
        }
    }
}

fn store_cursor(tx: &Transaction<'_>, cursor: &CursorPosition) -> CatalogResult<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO cursors (source, endpoint, cursor, event_time_us, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![cursor.source, cursor.endpoint, cursor.cursor, cursor.event_time_us, now_ms()])?;
    Ok(())
}

struct Existing {
    rowid: i64,
    rev: String,
    collection: String,
    live: bool,
    keys: String,
}

/// Applies one change; `false` when it was older than the stored revision.
fn apply_change(
    tx: &Transaction<'_>,
    shared: &Shared,
    positions: &HashMap<i64, usize>,
    inactive: &HashSet<String>,
    change: &Change,
    pending: &mut Pending,
) -> CatalogResult<bool> {
    let uri = change.uri();
    // An inactive account's records are stored but stay out of the index and the counts
    // until it is active again; a scratch `Pending` takes what they would have changed.
    let hide = inactive.contains(accounts::did_of(uri));
    let mut hidden = Pending::default();
    let pending = if hide { &mut hidden } else { pending };
    let now = now_ms();
    let empty = IndexKeys::new();
    // An upsert's row values (its keys column encoded) are made once for both statements.
    let mut values = None;
    // A uri never seen before costs one insert, without a lookup first.
    if let Change::Upsert(u) = change {
        let values = values.insert(upsert_params(u, &shared.qids, now));
        let inserted = tx
            .prepare_cached(
                "INSERT INTO records (uri, collection, author, rev, cid, record, keys, indexed_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (uri) DO NOTHING",
            )?
            .execute(rusqlite::params_from_iter(values.iter()))?;
        if inserted == 1 {
            *pending.kind_counts.entry(u.collection.clone()).or_default() += 1;
            let rowid = tx.last_insert_rowid();
            if !hide {
                update_keys(uri, rowid, &empty, &u.keys, pending);
            }
            return Ok(true);
        }
    }
    let existing: Option<Existing> = tx
        .prepare_cached(
            "SELECT rowid, rev, collection, record IS NOT NULL, keys FROM records WHERE uri = ?1",
        )?
        .query_row([uri], |r| {
            Ok(Existing {
                rowid: r.get(0)?,
                rev: r.get(1)?,
                collection: r.get(2)?,
                live: r.get(3)?,
                keys: r.get(4)?,
            })
        })
        .optional()?;
    let rev = match change {
        Change::Upsert(u) => &u.rev,
        Change::Delete { rev, .. } => rev,
    };
    if existing
        .as_ref()
        .is_some_and(|e| e.rev.as_str() > rev.as_str())
    {
        return Ok(false);
    }
    let old_keys = existing
        .as_ref()
        .map(|e| keys_column::decode(&e.keys, positions))
        .unwrap_or_default();
    if let Some(e) = existing.as_ref().filter(|e| e.live) {
        *pending.kind_counts.entry(e.collection.clone()).or_default() -= 1;
    }
    let new_keys = match change {
        Change::Upsert(u) => {
            let values = values.get_or_insert_with(|| upsert_params(u, &shared.qids, now));
            tx.prepare_cached(
                "INSERT INTO records (uri, collection, author, rev, cid, record, keys, indexed_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (uri) DO UPDATE SET \
                 collection = excluded.collection, author = excluded.author, rev = excluded.rev, cid = excluded.cid, \
                 record = excluded.record, keys = excluded.keys, indexed_at = excluded.indexed_at",
            )?
            .execute(rusqlite::params_from_iter(values.iter()))?;
            *pending.kind_counts.entry(u.collection.clone()).or_default() += 1;
            &u.keys
        }
        Change::Delete {
            uri,
            collection,
            rev,
        } => {
            // The tombstone keeps the revision, so an older create cannot resurrect the record.
            tx.prepare_cached(
                "INSERT INTO records (uri, collection, author, rev, cid, record, keys, indexed_at) \
                 VALUES (?1, ?2, ?3, ?4, NULL, NULL, '[]', ?5) ON CONFLICT (uri) DO UPDATE SET \
                 rev = excluded.rev, cid = NULL, record = NULL, keys = '[]', indexed_at = excluded.indexed_at",
            )?
            .execute(params![uri, collection, accounts::did_of(uri), rev, now])?;
            &empty
        }
    };
    // An update keeps its row; a tombstone for a uri never seen is a new row.
    let rowid = match &existing {
        Some(e) => e.rowid,
        None => tx.last_insert_rowid(),
    };
    if !hide {
        update_keys(uri, rowid, &old_keys, new_keys, pending);
    }
    Ok(true)
}

/// The eight values of a records row for an upsert, in column order
/// (uri, collection, author, rev, cid, record, keys, indexed_at).
pub(super) fn upsert_params<'a>(
    u: &'a crate::Upsert,
    qids: &[i64],
    now: i64,
) -> [Box<dyn rusqlite::ToSql + 'a>; 8] {
    [
        Box::new(&u.uri),
        Box::new(&u.collection),
        Box::new(&u.author),
        Box::new(&u.rev),
        Box::new(&u.cid),
        Box::new(&u.record_json),
        Box::new(keys_column::encode(qids, &u.keys)),
        Box::new(now),
    ]
}

/// Moves a record's index entries and counts from its old keys to its new ones.
fn update_keys(
    uri: &str,
    rowid: i64,
    old_keys: &IndexKeys,
    new_keys: &IndexKeys,
    pending: &mut Pending,
) {
    for (position, key) in old_keys.difference(new_keys) {
        pending
            .key_writes
            .insert((*position, key.clone(), uri.to_string()), None);
    }
    for (position, key) in new_keys.difference(old_keys) {
        pending
            .key_writes
            .insert((*position, key.clone(), uri.to_string()), Some(rowid));
    }
    pending.touched.extend(old_keys.iter().cloned());
    pending.touched.extend(new_keys.iter().cloned());
}

/// Writes the group's index entries in key order. Counts follow what the index actually
/// gained or lost, so they cannot drift.
fn write_keys(tx: &Transaction<'_>, shared: &Shared, pending: &mut Pending) -> CatalogResult<()> {
    let mut delete_key =
        tx.prepare_cached("DELETE FROM query_keys WHERE qid = ?1 AND key = ?2 AND uri = ?3")?;
    let mut insert_key = tx.prepare_cached(
        "INSERT OR IGNORE INTO query_keys (qid, key, uri, rid) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for ((position, key, uri), write) in std::mem::take(&mut pending.key_writes) {
        let qid = shared.qids[position];
        let delta = match write {
            Some(rowid) => {
                i64::try_from(insert_key.execute(params![qid, key, uri, rowid])?).unwrap_or(0)
            }
            None => -i64::try_from(delete_key.execute(params![qid, key, uri])?).unwrap_or(0),
        };
        if delta != 0 {
            *pending.query_counts.entry((position, key)).or_default() += delta;
        }
    }
    Ok(())
}

fn flush_counts(tx: &Transaction<'_>, shared: &Shared, pending: &Pending) -> CatalogResult<()> {
    let mut add = tx.prepare_cached(
        "INSERT INTO query_counts (qid, key, n) VALUES (?1, ?2, ?3) ON CONFLICT (qid, key) DO UPDATE SET n = n + excluded.n",
    )?;
    let mut prune =
        tx.prepare_cached("DELETE FROM query_counts WHERE qid = ?1 AND key = ?2 AND n <= 0")?;
    for ((position, key), delta) in &pending.query_counts {
        if *delta == 0 {
            continue;
        }
        let qid = shared.qids[*position];
        add.execute(params![qid, key, delta])?;
        if *delta < 0 {
            prune.execute(params![qid, key])?;
        }
    }
    let mut add_kind = tx.prepare_cached(
        "INSERT INTO kind_counts (collection, n) VALUES (?1, ?2) ON CONFLICT (collection) DO UPDATE SET n = n + excluded.n",
    )?;
    let mut prune_kind =
        tx.prepare_cached("DELETE FROM kind_counts WHERE collection = ?1 AND n <= 0")?;
    for (collection, delta) in &pending.kind_counts {
        if *delta != 0 {
            add_kind.execute(params![collection, delta])?;
        }
        if *delta < 0 {
            prune_kind.execute([collection])?;
        }
    }
    Ok(())
}

mod accounts;
mod bulk;
pub(crate) use bulk::recover_interrupted as recover_interrupted_bulk;

pub(crate) fn load_inactive(conn: &Connection) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare("SELECT did FROM inactive_accounts")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    rows.collect()
}
