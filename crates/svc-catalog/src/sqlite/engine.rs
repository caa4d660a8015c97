//! The SQLite engine's write side: the storage primitives the catalog's rules call, on the
//! one write connection. Index entries point at record rowids, so a read joins on integers.

use super::record_row::row_values;
use crate::activity::{self, ActivityWrite};
use crate::engine::{
    Engine, Filed, LabelKey, Plan, RecordWrite, StagedVersion, Stored, StoredKeys, Takedowns,
    repository_range,
};
use crate::keys_column::QueryIds;
use crate::replication_log::{KEEP_AT_MOST, KEEP_FOR_MS, LogEntry, LogRow, sql};
use crate::resync::{self, RepositoryHead, ResyncEntry, ResyncSummary, SyncWrites};
use crate::runtime::now_ms;
use crate::stream::{self, STREAM_KEEP_AT_MOST, StreamEntry, StreamRow};
use crate::{CatalogError, CatalogResult, Change};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use svc_spec::QueryId;
use svc_spec::search::SearchText;
use svc_syntax::Nsid;
use svc_syntax::UnixMillis;

pub(crate) struct SqliteEngine {
    pub(super) conn: Connection,
    pub(super) ids: QueryIds,
    /// The open lock file, while this process is the catalog's writer.
    pub(super) writer_lock: Option<std::fs::File>,
    /// The longer words a bulk load under way has filed, listed when it ends.
    pub(super) bulk_words: std::collections::BTreeSet<String>,
}

const UPSERT: &str = "INSERT INTO records (uri, collection, author, rev, cid, record, keys, indexed_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (uri) DO UPDATE SET \
     collection = excluded.collection, author = excluded.author, rev = excluded.rev, cid = excluded.cid, \
     record = excluded.record, keys = excluded.keys, indexed_at = excluded.indexed_at RETURNING rowid";

impl SqliteEngine {
    /// Writes the plan's record rows; returns the rowid of each uri written.
    fn write_records<'p>(&self, plan: &'p Plan<'_>) -> CatalogResult<HashMap<&'p str, i64>> {
        let now = now_ms();
        let mut rowids = HashMap::with_capacity(plan.records.len());
        for write in &plan.records {
            let (uri, rowid) = match write {
                RecordWrite::Row(row) => {
                    let rowid = self
                        .conn
                        .prepare_cached(UPSERT)?
                        .query_row(row_values(row, &self.ids, now), |r| r.get(0))?;
                    self.write_search(row, rowid)?;
                    (row.uri, rowid)
                }
                RecordWrite::Keys { uri, keys } => {
                    let rowid = self
                        .conn
                        .prepare_cached(
                            "UPDATE records SET keys = ?2 WHERE uri = ?1 RETURNING rowid",
                        )?
                        .query_row(params![uri, self.ids.encode(keys)], |r| r.get(0))?;
                    (uri.as_str(), rowid)
                }
            };
            rowids.insert(uri, rowid);
        }
        Ok(rowids)
    }

    fn write_index(&self, plan: &Plan<'_>, rowids: &HashMap<&str, i64>) -> CatalogResult<()> {
        let mut delete = self
            .conn
            .prepare_cached("DELETE FROM query_keys WHERE qid = ?1 AND key = ?2 AND uri = ?3")?;
        let mut insert = self.conn.prepare_cached(
            "INSERT OR IGNORE INTO query_keys (qid, key, uri, rid) VALUES (?1, ?2, ?3, ?4)",
        )?;
        let mut rowid_of = self
            .conn
            .prepare_cached("SELECT rowid FROM records WHERE uri = ?1")?;
        for ((query, key, uri), file) in &plan.index {
            let qid = self.ids.qid(query)?;
            if *file {
                let rowid = match rowids.get(uri.as_str()) {
                    Some(rowid) => *rowid,
                    None => rowid_of.query_row([uri], |r| r.get::<_, i64>(0))?,
                };
                insert.execute(params![qid, key, uri, rowid])?;
            } else {
                delete.execute(params![qid, key, uri])?;
            }
        }
        Ok(())
    }

    fn write_counts(&self, plan: &Plan<'_>) -> CatalogResult<()> {
        let mut add = self.conn.prepare_cached(
            "INSERT INTO query_counts (qid, key, n) VALUES (?1, ?2, ?3) ON CONFLICT (qid, key) DO UPDATE SET n = n + excluded.n",
        )?;
        let mut prune = self
            .conn
            .prepare_cached("DELETE FROM query_counts WHERE qid = ?1 AND key = ?2 AND n <= 0")?;
        for ((query, key), delta) in plan.query_counts.iter().filter(|(_, d)| **d != 0) {
            let qid = self.ids.qid(query)?;
            add.execute(params![qid, key, delta])?;
            if *delta < 0 {
                prune.execute(params![qid, key])?;
            }
        }
        let mut add_kind = self.conn.prepare_cached(
            "INSERT INTO kind_counts (collection, n) VALUES (?1, ?2) ON CONFLICT (collection) DO UPDATE SET n = n + excluded.n",
        )?;
        let mut prune_kind = self
            .conn
            .prepare_cached("DELETE FROM kind_counts WHERE collection = ?1 AND n <= 0")?;
        for (collection, delta) in plan.kind_counts.iter().filter(|(_, d)| **d != 0) {
            add_kind.execute(params![collection, delta])?;
            if *delta < 0 {
                prune_kind.execute([collection])?;
            }
        }
        Ok(())
    }

    fn write_sync(&self, sync: &SyncWrites) -> CatalogResult<()> {
        for head in &sync.heads {
            self.conn
                .prepare_cached(resync::sql::HEAD)?
                .execute(params![head.did.as_str(), head.rev.as_str(), head.data])?;
        }
        let now = now_ms();
        for request in &sync.queued {
            self.conn
                .prepare_cached(resync::sql::QUEUE)?
                .execute(params![request.did.as_str(), request.reason, now])?;
        }
        for retry in &sync.retried {
            self.conn
                .prepare_cached(resync::sql::RETRY)?
                .execute(params![retry.due.0, retry.error, retry.did.as_str()])?;
        }
        for postponed in &sync.postponed {
            self.conn
                .prepare_cached(resync::sql::POSTPONE)?
                .execute(params![postponed.due.0, postponed.did.as_str()])?;
        }
        for did in &sync.done {
            self.conn
                .prepare_cached(resync::sql::DONE)?
                .execute([did.as_str()])?;
        }
        for did in &sync.forgotten {
            self.conn
                .prepare_cached(resync::sql::FORGET)?
                .execute([did.as_str()])?;
        }
        if let Some(at) = sync.hurry {
            self.conn
                .prepare_cached(resync::sql::HURRY)?
                .execute(params![at.0, resync::HURRIED_AT_MOST])?;
        }
        Ok(())
    }

    fn write_status(&self, plan: &Plan<'_>) -> CatalogResult<()> {
        for source in &plan.forget_cursors {
            self.conn
                .prepare_cached(crate::engine::label_sql::FORGET_CURSOR)?
                .execute([source])?;
        }
        for cursor in &plan.cursors {
            self.conn.prepare_cached(
                "INSERT OR REPLACE INTO cursors (source, endpoint, cursor, event_time_us, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![cursor.source, cursor.endpoint, cursor.cursor, cursor.event_time.map(|time| time.0), now_ms()])?;
        }
        for sync in &plan.sync {
            self.write_sync(sync)?;
        }
        if let Some(account) = &plan.account {
            match &account.inactive {
                Some(status) => self.conn.execute(
                    "INSERT OR REPLACE INTO inactive_accounts (did, status, updated_at) VALUES (?1, ?2, ?3)",
                    params![account.did, status, now_ms()],
                )?,
                None => self
                    .conn
                    .execute("DELETE FROM inactive_accounts WHERE did = ?1", [&account.did])?,
            };
        }
        for takedown in &plan.takedowns {
            self.write_takedown(takedown)?;
        }
        self.write_labels(&plan.labels)?;
        Ok(())
    }
}

impl Engine for SqliteEngine {
    fn begin(&mut self) -> CatalogResult<()> {
        // Immediate: take the write lock now, so a checkpoint holding it makes this wait
        // (busy timeout) instead of failing later on a stale snapshot.
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        Ok(())
    }

    fn commit(&mut self) -> CatalogResult<()> {
        self.conn.execute_batch("COMMIT")?;
        Ok(())
    }

    fn rollback(&mut self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }

    fn stored(&mut self, uris: &[&str]) -> CatalogResult<HashMap<String, Stored>> {
        let mut found = HashMap::new();
        let mut lookup = self.conn.prepare_cached(
            "SELECT rev, collection, record IS NOT NULL, keys, cid FROM records WHERE uri = ?1",
        )?;
        for uri in uris {
            let row = lookup
                .query_row([uri], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, Option<String>>(4)?,
                    ))
                })
                .optional()?;
            if let Some((rev, collection, live, keys, cid)) = row {
                let keys = StoredKeys::Filed(self.ids.decode(&keys));
                found.insert(
                    uri.to_string(),
                    Stored {
                        rev,
                        collection,
                        live,
                        cid,
                        keys,
                    },
                );
            }
        }
        Ok(found)
    }

    fn write(&mut self, plan: &Plan<'_>) -> CatalogResult<()> {
        let rowids = self.write_records(plan)?;
        if let Some(did) = &plan.remove_repository {
            let (from, to) = repository_range(did);
            self.remove_search_range(&from, &to)?;
            self.conn.execute(
                "DELETE FROM records WHERE uri >= ?1 AND uri < ?2",
                params![from, to],
            )?;
        }
        self.write_index(plan, &rowids)?;
        self.write_counts(plan)?;
        self.write_status(plan)
    }

    fn repository(&mut self, did: &str) -> CatalogResult<Vec<Filed>> {
        let (from, to) = repository_range(did);
        let mut scan = self.conn.prepare_cached(
            "SELECT uri, collection, keys FROM records WHERE uri >= ?1 AND uri < ?2 AND record IS NOT NULL",
        )?;
        let rows = scan.query_map(params![from, to], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut filed = Vec::new();
        for row in rows {
            let (uri, collection, keys) = row?;
            filed.push(Filed {
                uri,
                collection,
                keys: StoredKeys::Filed(self.ids.decode(&keys)),
            });
        }
        Ok(filed)
    }

    fn records_of_kind(
        &mut self,
        collection: &Nsid,
        after: &str,
        limit: usize,
    ) -> CatalogResult<Vec<(Filed, String)>> {
        let mut scan = self.conn.prepare_cached(
            "SELECT uri, keys, record FROM records WHERE uri > ?1 AND collection = ?2 AND record IS NOT NULL ORDER BY uri LIMIT ?3",
        )?;
        let rows = scan.query_map(params![after, collection.as_str(), limit as i64], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut found = Vec::new();
        for row in rows {
            let (uri, keys, text) = row?;
            let keys = StoredKeys::Filed(self.ids.decode(&keys));
            found.push((
                Filed {
                    uri,
                    collection: collection.to_string(),
                    keys,
                },
                text,
            ));
        }
        Ok(found)
    }

    fn queries(&mut self) -> CatalogResult<Vec<(QueryId, String)>> {
        let mut stmt = self.conn.prepare("SELECT name, fingerprint FROM queries")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut known = Vec::new();
        for row in rows {
            let (name, fingerprint) = row?;
            known.push((QueryId::new(&name), fingerprint));
        }
        Ok(known)
    }

    fn define_query(&mut self, query: &QueryId, fingerprint: &str) -> CatalogResult<()> {
        self.drop_query(query)?;
        // A fresh id, never used before: keys columns still naming the old one read as none.
        let qid: i64 = self.conn.query_row(
            "SELECT max(coalesce((SELECT max(qid) FROM queries), 0), coalesce((SELECT max(qid) FROM retired_queries), 0)) + 1",
            [],
            |r| r.get(0),
        )?;
        self.conn.execute(
            "INSERT INTO queries (qid, name, fingerprint) VALUES (?1, ?2, ?3)",
            params![qid, query.as_str(), fingerprint],
        )?;
        self.ids.insert(query.clone(), qid);
        Ok(())
    }

    fn drop_query(&mut self, query: &QueryId) -> CatalogResult<()> {
        let qid: Option<i64> = self
            .conn
            .query_row(
                "SELECT qid FROM queries WHERE name = ?1",
                [query.as_str()],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(qid) = qid {
            self.conn
                .execute("DELETE FROM query_keys WHERE qid = ?1", [qid])?;
            self.conn
                .execute("DELETE FROM query_counts WHERE qid = ?1", [qid])?;
            self.conn
                .execute("DELETE FROM queries WHERE qid = ?1", [qid])?;
            self.conn.execute(
                "INSERT OR IGNORE INTO retired_queries (qid) VALUES (?1)",
                [qid],
            )?;
        }
        self.ids.remove(query);
        Ok(())
    }

    fn query_ids(&self) -> QueryIds {
        self.ids.clone()
    }

    fn inactive_accounts(&mut self) -> CatalogResult<HashSet<String>> {
        let mut stmt = self.conn.prepare("SELECT did FROM inactive_accounts")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn takedowns(&mut self) -> CatalogResult<Takedowns> {
        self.read_takedowns()
    }

    fn stored_label(&mut self, key: &LabelKey) -> CatalogResult<Option<(bool, String)>> {
        self.read_stored_label(key)
    }

    fn label_values(&mut self, subject: &str, src: &str) -> CatalogResult<u64> {
        let count: i64 = self
            .conn
            .prepare_cached(crate::engine::label_sql::VALUES_ON)?
            .query_row([subject, src], |r| r.get(0))?;
        Ok(count.max(0) as u64)
    }

    fn label_count(&mut self, src: &str) -> CatalogResult<u64> {
        self.read_label_count(src)
    }

    fn expired_labels(&mut self, now: UnixMillis, limit: usize) -> CatalogResult<Vec<LabelKey>> {
        self.read_expired_labels(now, limit)
    }

    fn labelers_on_record(&mut self) -> CatalogResult<Vec<String>> {
        self.read_labelers()
    }

    fn labels_of(&mut self, src: &str, limit: usize) -> CatalogResult<Vec<LabelKey>> {
        self.read_labels_of(src, limit)
    }

    fn holds(&mut self, subject: &str) -> CatalogResult<bool> {
        self.read_holds(subject)
    }

    fn search_fingerprint(&mut self) -> CatalogResult<Option<String>> {
        self.read_search_fingerprint()
    }

    fn clear_search(&mut self) -> CatalogResult<()> {
        self.empty_search()
    }

    fn index_search(&mut self, entries: &[(String, SearchText)]) -> CatalogResult<()> {
        self.file_search(entries)
    }

    fn set_search_fingerprint(&mut self, fingerprint: &str) -> CatalogResult<()> {
        self.store_search_fingerprint(fingerprint)
    }

    fn resync_due(&mut self, now: UnixMillis, limit: usize) -> CatalogResult<Vec<ResyncEntry>> {
        let mut statement = self.conn.prepare_cached(resync::sql::DUE)?;
        let rows = statement.query_map(params![now.0, limit as i64], queue_row)?;
        Ok(rows
            .collect::<rusqlite::Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect())
    }

    fn resync_summary(&mut self) -> CatalogResult<ResyncSummary> {
        let (waiting, fresh): (i64, i64) = self
            .conn
            .query_row(resync::sql::COUNTS, [], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let oldest = self
            .conn
            .query_row(resync::sql::OLDEST, [], queue_row)
            .optional()?
            .flatten();
        Ok(ResyncSummary {
            waiting: waiting.max(0) as u64,
            fresh: fresh.max(0) as u64,
            oldest,
        })
    }

    fn repository_heads(&mut self, limit: usize) -> CatalogResult<Vec<RepositoryHead>> {
        let mut statement = self.conn.prepare_cached(resync::sql::HEADS)?;
        let rows = statement.query_map([limit as i64], |r| {
            Ok(resync::head(r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
        Ok(rows
            .collect::<rusqlite::Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect())
    }

    fn is_empty(&mut self) -> CatalogResult<bool> {
        Ok(self
            .conn
            .query_row("SELECT NOT EXISTS (SELECT 1 FROM records)", [], |r| {
                r.get(0)
            })?)
    }

    fn begin_bulk(&mut self) -> CatalogResult<()> {
        super::bulk::begin(&self.conn)
    }

    fn stage(&mut self, changes: &[&Change]) -> CatalogResult<()> {
        super::bulk::stage(&mut self.conn, &self.ids, changes, &mut self.bulk_words)
    }

    fn staged_unique(&mut self) -> CatalogResult<bool> {
        super::bulk::make_unique(&self.conn)
    }

    fn staged_versions(&mut self) -> CatalogResult<Vec<StagedVersion>> {
        super::bulk::versions(&self.conn)
    }

    fn remove_staged(&mut self, superseded: &[i64]) -> CatalogResult<()> {
        let mut delete = self.conn.prepare("DELETE FROM records WHERE rowid = ?1")?;
        let mut unsearch = self.conn.prepare("DELETE FROM search WHERE rowid = ?1")?;
        for rowid in superseded {
            unsearch.execute([rowid])?;
            delete.execute([rowid])?;
        }
        Ok(())
    }

    fn index_staged(&mut self, kinds: &BTreeMap<String, i64>) -> CatalogResult<()> {
        super::bulk::list_words(&self.conn, &mut self.bulk_words)?;
        super::bulk::index(&self.conn, kinds)
    }

    fn end_bulk(&mut self, settled: bool) -> CatalogResult<()> {
        self.bulk_words.clear();
        super::writer_settings(&self.conn)?;
        self.conn.execute_batch("PRAGMA shrink_memory")?;
        if settled && let Some(path) = self.conn.path() {
            super::checkpoint::spawn(path.into(), super::checkpoint::After::BulkLoad);
        }
        Ok(())
    }

    fn recover_bulk(&mut self) -> CatalogResult<bool> {
        super::bulk::recover_interrupted(&self.conn)
    }

    fn try_lock_writer(&mut self) -> CatalogResult<bool> {
        if self.writer_lock.is_some() {
            return Ok(true);
        }
        let Some(path) = self.conn.path().filter(|p| !p.is_empty()) else {
            return Ok(true);
        };
        let lock_path = format!("{path}.writer-lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| CatalogError::Storage(format!("{lock_path}: {e}")))?;
        match file.try_lock() {
            Ok(()) => {
                self.writer_lock = Some(file);
                Ok(true)
            }
            Err(std::fs::TryLockError::WouldBlock) => Ok(false),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(CatalogError::Storage(format!("{lock_path}: {e}")))
            }
        }
    }

    fn log(&mut self, seq: i64, entry: &LogEntry<'_>) -> CatalogResult<()> {
        let row = LogRow::of(seq, UnixMillis::now(), entry, &self.ids);
        self.conn.prepare_cached(sql::APPEND)?.execute(params![
            row.seq,
            row.at_ms,
            row.keys,
            row.uris,
            row.kinds,
            row.everything
        ])?;
        Ok(())
    }

    fn last_logged(&mut self) -> CatalogResult<i64> {
        Ok(self.conn.query_row(sql::LAST, [], |r| r.get(0))?)
    }

    fn stream(&mut self, first: i64, entries: &[StreamEntry]) -> CatalogResult<()> {
        let now = UnixMillis::now();
        let mut append = self.conn.prepare_cached(stream::sql::APPEND)?;
        for (seq, entry) in (first..).zip(entries) {
            let row = StreamRow::of(seq, now, entry, &self.ids);
            append.execute(params![
                row.seq,
                row.at_ms,
                row.uri,
                row.was_live,
                row.is_live,
                row.before,
                row.after
            ])?;
        }
        Ok(())
    }

    fn record_activity(&mut self, write: &ActivityWrite<'_>) -> CatalogResult<()> {
        if write.changes > 0 {
            self.conn
                .prepare_cached(activity::sql::ADD_CHANGES)?
                .execute(params![write.minute, write.changes])?;
        }
        let mut moved = self.conn.prepare_cached(activity::sql::MOVE_SOURCE)?;
        for (source, event) in &write.sources {
            moved.execute(params![source, write.minute, event])?;
        }
        Ok(())
    }

    fn last_streamed(&mut self) -> CatalogResult<i64> {
        Ok(self.conn.query_row(stream::sql::BOUNDS, [], |r| r.get(1))?)
    }

    fn heartbeat(&mut self, now: UnixMillis, keep_changes: Duration) -> CatalogResult<()> {
        let now_ms = now.0;
        let changes_from = now_ms.saturating_sub(keep_changes.as_millis() as i64);
        self.conn.execute(sql::BEAT, [now_ms])?;
        self.conn
            .execute(sql::TRIM, params![now_ms - KEEP_FOR_MS, KEEP_AT_MOST])?;
        self.conn.execute(
            stream::sql::TRIM,
            params![changes_from, STREAM_KEEP_AT_MOST],
        )?;
        let minutes_from = activity::kept_from(now);
        self.conn
            .execute(activity::sql::TRIM_CHANGES, [minutes_from])?;
        self.conn
            .execute(activity::sql::TRIM_SOURCES, [minutes_from])?;
        Ok(())
    }
}

/// A queue row, or `None` when it does not hold a queue entry.
fn queue_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<ResyncEntry>> {
    Ok(resync::entry(
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
}
