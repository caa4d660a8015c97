//! The single writer: owns the only write connection, applies batches in one transaction each
//! (several queued batches share one commit), keeps index keys and counts in step with the
//! records, and stores the source cursor in the same transaction.

use super::Shared;
use crate::spec::QuerySet;
use crate::{ApplyReport, CatalogError, CatalogResult, Change, CursorPosition, IndexKeys};
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, mpsc};
use tokio::sync::oneshot;

pub(crate) struct WriteJob {
    pub changes: Vec<Change>,
    pub cursor: Option<CursorPosition>,
    pub reply: oneshot::Sender<CatalogResult<ApplyReport>>,
}

/// Queued batches merged into one commit, at most this many changes.
const GROUP_COMMIT_CHANGES: usize = 48_000;

pub(crate) struct Writer {
    conn: Connection,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Pending {
    query_counts: HashMap<(usize, String), i64>,
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
    let stale: Vec<i64> = {
        let mut stmt = tx.prepare("SELECT qid, name FROM queries")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
        let mut stale = Vec::new();
        for row in rows {
            let (qid, name) = row?;
            if queries.position(&name).is_none() {
                stale.push(qid);
            }
        }
        stale
    };
    for qid in stale {
        tx.execute("DELETE FROM query_keys WHERE qid = ?1", [qid])?;
        tx.execute("DELETE FROM query_counts WHERE qid = ?1", [qid])?;
        tx.execute("DELETE FROM queries WHERE qid = ?1", [qid])?;
    }
    for position in rebuild {
        let query = &queries.all()[position];
        let qid = qids[position];
        let mut counts: HashMap<String, i64> = HashMap::new();
        {
            let mut scan = tx.prepare("SELECT rowid, uri, record FROM records WHERE collection = ?1 AND record IS NOT NULL")?;
            let mut insert = tx.prepare(
                "INSERT OR IGNORE INTO query_keys (qid, key, uri, rid) VALUES (?1, ?2, ?3, ?4)",
            )?;
            let mut rows = scan.query([query.kind()])?;
            while let Some(row) = rows.next()? {
                let rid: i64 = row.get(0)?;
                let uri: String = row.get(1)?;
                let text: String = row.get(2)?;
                let Ok(record) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                for key in query.index_keys(&record) {
                    insert.execute(params![qid, key, uri, rid])?;
                    *counts.entry(key).or_default() += 1;
                }
            }
        }
        let mut insert =
            tx.prepare("INSERT INTO query_counts (qid, key, n) VALUES (?1, ?2, ?3)")?;
        for (key, n) in counts {
            insert.execute(params![qid, key, n])?;
        }
    }
    tx.commit()?;
    Ok(qids)
}

impl Writer {
    pub fn new(conn: Connection, shared: Arc<Shared>) -> Writer {
        Writer { conn, shared }
    }

    pub fn run(mut self, jobs: mpsc::Receiver<WriteJob>) {
        while let Ok(first) = jobs.recv() {
            let mut group = vec![first];
            let mut size = group[0].changes.len();
            while size < GROUP_COMMIT_CHANGES {
                match jobs.try_recv() {
                    Ok(job) => {
                        size += job.changes.len();
                        group.push(job);
                    }
                    Err(_) => break,
                }
            }
            match self.commit_group(&group) {
                Ok((reports, pending)) => {
                    self.publish(&pending);
                    for (job, report) in group.into_iter().zip(reports) {
                        let _ = job.reply.send(Ok(report));
                    }
                }
                Err(error) => {
                    for job in group {
                        let _ = job
                            .reply
                            .send(Err(CatalogError::Storage(error.to_string())));
                    }
                }
            }
        }
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

    fn commit_group(&mut self, group: &[WriteJob]) -> CatalogResult<(Vec<ApplyReport>, Pending)> {
        let tx = self.conn.transaction()?;
        let mut pending = Pending::default();
        let mut reports = Vec::with_capacity(group.len());
        for job in group {
            let mut report = ApplyReport::default();
            for change in &job.changes {
                if apply_change(&tx, &self.shared, change, &mut pending)? {
                    report.applied += 1;
                } else {
                    report.stale += 1;
                }
            }
            if let Some(cursor) = &job.cursor {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO cursors (source, endpoint, cursor, event_time_us, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![cursor.source, cursor.endpoint, cursor.cursor, cursor.event_time_us, now_ms()])?;
            }
            reports.push(report);
        }
        flush_counts(&tx, &self.shared, &pending)?;
        tx.commit()?;
        Ok((reports, pending))
    }
}

struct Existing {
    rowid: i64,
    rev: String,
    collection: String,
    record: Option<String>,
}

/// Applies one change; `false` when it was older than the stored revision.
fn apply_change(
    tx: &Transaction<'_>,
    shared: &Shared,
    change: &Change,
    pending: &mut Pending,
) -> CatalogResult<bool> {
    let uri = change.uri();
    let now = now_ms();
    // A uri never seen before costs one insert, without a lookup first.
    if let Change::Upsert(u) = change {
        let inserted = tx
            .prepare_cached(
                "INSERT INTO records (uri, collection, author, rev, cid, record, indexed_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (uri) DO NOTHING",
            )?
            .execute(params![
                u.uri,
                u.collection,
                u.author,
                u.rev,
                u.cid,
                u.record_json,
                now
            ])?;
        if inserted == 1 {
            let rowid = tx.last_insert_rowid();
            *pending.kind_counts.entry(u.collection.clone()).or_default() += 1;
            update_keys(tx, shared, uri, rowid, &IndexKeys::new(), &u.keys, pending)?;
            return Ok(true);
        }
    }
    let existing: Option<Existing> = tx
        .prepare_cached("SELECT rowid, rev, collection, record FROM records WHERE uri = ?1")?
        .query_row([uri], |r| {
            Ok(Existing {
                rowid: r.get(0)?,
                rev: r.get(1)?,
                collection: r.get(2)?,
                record: r.get(3)?,
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
    let old_keys = match &existing {
        Some(Existing {
            record: Some(text),
            collection,
            ..
        }) => match serde_json::from_str::<Value>(text) {
            Ok(record) => shared.queries.index_keys(collection, &record),
            Err(_) => IndexKeys::new(),
        },
        _ => IndexKeys::new(),
    };
    if let Some(Existing {
        record: Some(_),
        collection,
        ..
    }) = &existing
    {
        *pending.kind_counts.entry(collection.clone()).or_default() -= 1;
    }
    let empty = IndexKeys::new();
    let (rowid, new_keys) = match change {
        Change::Upsert(u) => {
            let rowid = match &existing {
                Some(e) => {
                    tx.prepare_cached(
                        "UPDATE records SET collection = ?2, author = ?3, rev = ?4, cid = ?5, record = ?6, indexed_at = ?7 WHERE rowid = ?1",
                    )?
                    .execute(params![e.rowid, u.collection, u.author, u.rev, u.cid, u.record_json, now])?;
                    e.rowid
                }
                None => {
                    tx.prepare_cached(
                        "INSERT INTO records (uri, collection, author, rev, cid, record, indexed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )?
                    .execute(params![u.uri, u.collection, u.author, u.rev, u.cid, u.record_json, now])?;
                    tx.last_insert_rowid()
                }
            };
            *pending.kind_counts.entry(u.collection.clone()).or_default() += 1;
            (rowid, &u.keys)
        }
        Change::Delete {
            uri,
            collection,
            rev,
        } => {
            // The tombstone keeps the revision, so an older create cannot resurrect the record.
            let rowid = match &existing {
                Some(e) => {
                    tx.prepare_cached("UPDATE records SET rev = ?2, cid = NULL, record = NULL, indexed_at = ?3 WHERE rowid = ?1")?
                        .execute(params![e.rowid, rev, now])?;
                    e.rowid
                }
                None => {
                    let author = svc_syntax::check_at_uri(uri)
                        .map(|u| u.authority.to_string())
                        .unwrap_or_default();
                    tx.prepare_cached(
                        "INSERT INTO records (uri, collection, author, rev, cid, record, indexed_at) VALUES (?1, ?2, ?3, ?4, NULL, NULL, ?5)",
                    )?
                    .execute(params![uri, collection, author, rev, now])?;
                    tx.last_insert_rowid()
                }
            };
            (rowid, &empty)
        }
    };
    update_keys(tx, shared, uri, rowid, &old_keys, new_keys, pending)?;
    Ok(true)
}

/// Moves a record's index entries and counts from its old keys to its new ones.
fn update_keys(
    tx: &Transaction<'_>,
    shared: &Shared,
    uri: &str,
    rowid: i64,
    old_keys: &IndexKeys,
    new_keys: &IndexKeys,
    pending: &mut Pending,
) -> CatalogResult<()> {
    let mut delete_key =
        tx.prepare_cached("DELETE FROM query_keys WHERE qid = ?1 AND key = ?2 AND uri = ?3")?;
    for (position, key) in old_keys.difference(new_keys) {
        delete_key.execute(params![shared.qids[*position], key, uri])?;
        *pending
            .query_counts
            .entry((*position, key.clone()))
            .or_default() -= 1;
    }
    let mut insert_key = tx.prepare_cached(
        "INSERT OR REPLACE INTO query_keys (qid, key, uri, rid) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (position, key) in new_keys.difference(old_keys) {
        insert_key.execute(params![shared.qids[*position], key, uri, rowid])?;
        *pending
            .query_counts
            .entry((*position, key.clone()))
            .or_default() += 1;
    }
    pending.touched.extend(old_keys.iter().cloned());
    pending.touched.extend(new_keys.iter().cloned());
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
    for (collection, delta) in &pending.kind_counts {
        if *delta != 0 {
            add_kind.execute(params![collection, delta])?;
        }
    }
    Ok(())
}
