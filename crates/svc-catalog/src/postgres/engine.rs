//! The PostgreSQL engine's write side: the storage primitives the catalog's rules call, on one
//! connection driven by a runtime of the writer's thread (a plan's own statements are
//! `plan_writes.rs`).

use super::link::{Link, connect};
use super::storage;
use crate::activity::ActivityWrite;
use crate::engine::{
    Engine, Filed, LabelKey, Plan, StagedVersion, Stored, StoredKeys, Takedowns, repository_range,
};
use crate::keys_column::QueryIds;
use crate::replication_log::{KEEP_AT_MOST, KEEP_FOR_MS, LogEntry, LogRow, sql};
use crate::resync::{RepositoryHead, ResyncEntry, ResyncSummary};
use crate::stream::{self, STREAM_KEEP_AT_MOST, StreamEntry, StreamRow};
use crate::{CatalogError, CatalogResult, Change};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use svc_spec::QueryId;
use svc_spec::search::SearchText;
use svc_syntax::Nsid;
use svc_syntax::UnixMillis;
use tokio_postgres::{Client, Config};
use tokio_postgres_rustls::MakeRustlsConnect;

pub(crate) struct PostgresEngine {
    runtime: tokio::runtime::Runtime,
    config: Config,
    tls: MakeRustlsConnect,
    pub(super) link: Link,
    /// Between `begin` and `commit` or `rollback`: a lost connection is then an error, never
    /// replaced, or the rest of the transaction would run outside it.
    in_transaction: bool,
    writer_lock: WriterLock,
}

/// Whether this engine holds the catalog's writer lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriterLock {
    NotTaken,
    Held,
    /// It was held on a connection that was lost: nothing is written until it is held again
    /// (another indexer may have taken over meanwhile).
    Lost,
}

impl PostgresEngine {
    pub fn connect(config: Config, tls: MakeRustlsConnect) -> CatalogResult<PostgresEngine> {
        let runtime = crate::runtime::thread_runtime()?;
        let mut client = runtime.block_on(connect(&config, &tls))?;
        runtime.block_on(super::migrations::migrate(&mut client))?;
        let ids = runtime.block_on(load_ids(&client))?;
        Ok(PostgresEngine {
            runtime,
            config,
            tls,
            link: Link {
                client,
                statements: HashMap::new(),
                ids,
                staging: Default::default(),
                uri_index: None,
                notify_on_commit: false,
            },
            in_transaction: false,
            writer_lock: WriterLock::NotTaken,
        })
    }

    fn reconnect_if_lost(&mut self) -> CatalogResult<()> {
        if !self.link.client.is_closed() {
            return Ok(());
        }
        let client = self.runtime.block_on(connect(&self.config, &self.tls))?;
        tracing::info!("catalog database connection restored");
        self.link.client = client;
        self.link.statements.clear();
        if self.writer_lock == WriterLock::Held {
            self.writer_lock = WriterLock::Lost;
        }
        Ok(())
    }

    /// After a lost connection, the writer lock is taken again before anything is written.
    fn retake_lost_lock(&mut self) -> CatalogResult<()> {
        if self.writer_lock != WriterLock::Lost {
            return Ok(());
        }
        let PostgresEngine { runtime, link, .. } = self;
        if runtime.block_on(link.try_writer_lock())? {
            tracing::info!("catalog writer lock taken again");
            self.writer_lock = WriterLock::Held;
            Ok(())
        } else {
            Err(CatalogError::Unavailable(
                "another indexer holds the catalog's writer lock".into(),
            ))
        }
    }

    /// Runs one step of work on the connection, on the writer's runtime; outside a
    /// transaction, on a fresh connection if the last one was lost (the database restarted).
    pub(super) fn run<T>(
        &mut self,
        work: impl AsyncFnOnce(&mut Link) -> CatalogResult<T>,
    ) -> CatalogResult<T> {
        if !self.in_transaction {
            self.reconnect_if_lost()?;
            self.retake_lost_lock()?;
        }
        let PostgresEngine { runtime, link, .. } = self;
        runtime.block_on(work(link))
    }
}

impl Drop for PostgresEngine {
    /// The writer lock is given back before the connection closes: the server releases a
    /// closed connection's locks only when its backend notices, so another process (or this
    /// one reopening the catalog) would otherwise find the lock still held and stand by.
    fn drop(&mut self) {
        if self.writer_lock == WriterLock::Held && !self.link.client.is_closed() {
            let PostgresEngine { runtime, link, .. } = self;
            let _ = runtime.block_on(link.release_writer_lock());
        }
    }
}

pub(super) async fn load_ids(client: &Client) -> CatalogResult<QueryIds> {
    let rows = client
        .query("SELECT qid, name FROM queries", &[])
        .await
        .map_err(storage)?;
    let mut ids = QueryIds::default();
    for row in rows {
        ids.insert(QueryId::new(row.get(1)), row.get(0));
    }
    Ok(ids)
}

impl Engine for PostgresEngine {
    fn begin(&mut self) -> CatalogResult<()> {
        self.run(async |link| link.batch("BEGIN").await)?;
        self.in_transaction = true;
        Ok(())
    }

    fn commit(&mut self) -> CatalogResult<()> {
        // With a change-log entry, the notification goes in the same round trip: delivered
        // at commit, it wakes the followers listening.
        let committed = self.run(
            async |link| match std::mem::take(&mut link.notify_on_commit) {
                true => link.batch("NOTIFY svc_changes; COMMIT").await,
                false => link.batch("COMMIT").await,
            },
        );
        self.in_transaction = false;
        committed
    }

    fn rollback(&mut self) {
        self.link.notify_on_commit = false;
        if !self.link.client.is_closed() {
            let _ = self.run(async |link| link.batch("ROLLBACK").await);
        }
        self.in_transaction = false;
    }

    fn stored(&mut self, uris: &[&str]) -> CatalogResult<HashMap<String, Stored>> {
        self.run(async |link| {
            let rows = link
                .query(
                    "SELECT uri, rev, collection, record IS NOT NULL, keys, \
                       CASE WHEN keys IS NULL THEN record END, cid FROM records WHERE uri = ANY($1)",
                    &[&uris],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| {
                    let stored = Stored {
                        rev: r.get(1),
                        collection: r.get(2),
                        live: r.get(3),
                        cid: r.get(6),
                        keys: stored_keys(&link.ids, r.get(4), r.get(5)),
                    };
                    (r.get(0), stored)
                })
                .collect())
        })
    }

    fn write(&mut self, plan: &Plan<'_>) -> CatalogResult<()> {
        self.run(async |link| link.write(plan).await)
    }

    fn repository(&mut self, did: &str) -> CatalogResult<Vec<Filed>> {
        let (from, to) = repository_range(did);
        self.run(async |link| {
            let rows = link
                .query(
                    "SELECT uri, collection, keys, CASE WHEN keys IS NULL THEN record END FROM records \
                     WHERE uri >= $1 AND uri < $2 AND record IS NOT NULL",
                    &[&from, &to],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| Filed {
                    uri: r.get(0),
                    collection: r.get(1),
                    keys: stored_keys(&link.ids, r.get(2), r.get(3)),
                })
                .collect())
        })
    }

    fn records_of_kind(
        &mut self,
        collection: &Nsid,
        after: &str,
        limit: usize,
    ) -> CatalogResult<Vec<(Filed, String)>> {
        let limit = limit as i64;
        self.run(async |link| {
            let rows = link
                .query(
                    "SELECT uri, keys, record FROM records WHERE uri > $1 AND collection = $2 AND record IS NOT NULL \
                     ORDER BY uri LIMIT $3",
                    &[&after, &collection.as_str(), &limit],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| {
                    let text: String = r.get(2);
                    let filed = Filed {
                        uri: r.get(0),
                        collection: collection.to_string(),
                        keys: stored_keys(&link.ids, r.get(1), Some(&text)),
                    };
                    (filed, text)
                })
                .collect())
        })
    }

    fn queries(&mut self) -> CatalogResult<Vec<(QueryId, String)>> {
        self.run(async |link| {
            let rows = link
                .query("SELECT name, fingerprint FROM queries", &[])
                .await?;
            Ok(rows
                .iter()
                .map(|r| (QueryId::new(r.get(0)), r.get(1)))
                .collect())
        })
    }

    fn define_query(&mut self, query: &QueryId, fingerprint: &str) -> CatalogResult<()> {
        self.drop_query(query)?;
        let qid = self.run(async |link| {
            let rows = link
                .query(
                    "INSERT INTO queries (name, fingerprint) VALUES ($1, $2) RETURNING qid",
                    &[&query.as_str(), &fingerprint],
                )
                .await?;
            rows.first()
                .map(|r| r.get::<_, i64>(0))
                .ok_or_else(|| CatalogError::Storage("no query id returned".into()))
        })?;
        self.link.ids.insert(query.clone(), qid);
        Ok(())
    }

    fn drop_query(&mut self, query: &QueryId) -> CatalogResult<()> {
        self.run(async |link| {
            let rows = link
                .query(
                    "DELETE FROM queries WHERE name = $1 RETURNING qid",
                    &[&query.as_str()],
                )
                .await?;
            for row in rows {
                let qid: i64 = row.get(0);
                link.execute(
                    "DELETE FROM query_keys k USING query_counts c WHERE c.qid = $1 AND k.kid = c.kid",
                    &[&qid],
                )
                .await?;
                link.execute("DELETE FROM query_counts WHERE qid = $1", &[&qid])
                    .await?;
            }
            link.ids.remove(query);
            Ok(())
        })
    }

    fn query_ids(&self) -> QueryIds {
        self.link.ids.clone()
    }

    fn inactive_accounts(&mut self) -> CatalogResult<HashSet<String>> {
        self.run(async |link| {
            let rows = link.query("SELECT did FROM inactive_accounts", &[]).await?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    fn takedowns(&mut self) -> CatalogResult<Takedowns> {
        self.run(async |link| link.read_takedowns().await)
    }

    fn stored_label(&mut self, key: &LabelKey) -> CatalogResult<Option<(bool, String)>> {
        self.run(async |link| link.read_stored_label(key).await)
    }

    fn label_values(&mut self, subject: &str, src: &str) -> CatalogResult<u64> {
        self.run(async |link| link.read_label_values(subject, src).await)
    }

    fn label_count(&mut self, src: &str) -> CatalogResult<u64> {
        self.run(async |link| link.read_label_count(src).await)
    }

    fn expired_labels(&mut self, now: UnixMillis, limit: usize) -> CatalogResult<Vec<LabelKey>> {
        self.run(async |link| link.read_expired_labels(now, limit).await)
    }

    fn labelers_on_record(&mut self) -> CatalogResult<Vec<String>> {
        self.run(async |link| link.read_labelers().await)
    }

    fn labels_of(&mut self, src: &str, limit: usize) -> CatalogResult<Vec<LabelKey>> {
        self.run(async |link| link.read_labels_of(src, limit).await)
    }

    fn holds(&mut self, subject: &str) -> CatalogResult<bool> {
        self.run(async |link| link.read_holds(subject).await)
    }

    fn search_fingerprint(&mut self) -> CatalogResult<Option<String>> {
        self.run(async |link| link.read_search_fingerprint().await)
    }

    fn clear_search(&mut self) -> CatalogResult<()> {
        self.run(async |link| link.empty_search().await)
    }

    fn index_search(&mut self, entries: &[(String, SearchText)]) -> CatalogResult<()> {
        self.run(async |link| link.index_words(entries).await)
    }

    fn set_search_fingerprint(&mut self, fingerprint: &str) -> CatalogResult<()> {
        self.run(async |link| link.store_search_fingerprint(fingerprint).await)
    }

    fn resync_due(&mut self, now: UnixMillis, limit: usize) -> CatalogResult<Vec<ResyncEntry>> {
        self.run(async |link| link.resync_due(now, limit).await)
    }

    fn resync_summary(&mut self) -> CatalogResult<ResyncSummary> {
        self.run(async |link| link.resync_summary().await)
    }

    fn repository_heads(&mut self, limit: usize) -> CatalogResult<Vec<RepositoryHead>> {
        self.run(async |link| link.repository_heads(limit).await)
    }

    fn is_empty(&mut self) -> CatalogResult<bool> {
        self.run(async |link| {
            let rows = link
                .query("SELECT NOT EXISTS (SELECT 1 FROM records)", &[])
                .await?;
            Ok(rows.first().is_some_and(|r| r.get(0)))
        })
    }

    fn begin_bulk(&mut self) -> CatalogResult<()> {
        self.run(async |link| super::bulk::begin(link).await)
    }

    fn stage(&mut self, changes: &[&Change]) -> CatalogResult<()> {
        self.run(async |link| super::bulk::stage(link, changes).await)
    }

    fn staged_unique(&mut self) -> CatalogResult<bool> {
        // The first time only: asked again, the entries are sorted and the index is built in
        // the settling transaction.
        let builder = match self.link.staging.is_sorted() {
            false => Some(self.runtime.block_on(connect(&self.config, &self.tls))?),
            true => None,
        };
        self.run(async |link| super::bulk::make_unique(link, builder).await)
    }

    fn staged_versions(&mut self) -> CatalogResult<Vec<StagedVersion>> {
        self.run(async |link| super::bulk::versions(link).await)
    }

    fn remove_staged(&mut self, superseded: &[i64]) -> CatalogResult<()> {
        self.run(async |link| {
            link.execute("DELETE FROM records WHERE id = ANY($1)", &[&superseded])
                .await?;
            link.staging.remove(superseded);
            Ok(())
        })
    }

    fn index_staged(&mut self, kinds: &BTreeMap<String, i64>) -> CatalogResult<()> {
        self.run(async |link| super::bulk::index(link, kinds).await)
    }

    fn end_bulk(&mut self, settled: bool) -> CatalogResult<()> {
        let statistics = self.run(async |link| super::bulk::end(link, settled).await);
        if settled {
            // The settled records are committed whether or not their statistics could be
            // gathered: without the build now, pages would go without the index until the
            // writer's next start.
            super::id_index::spawn_build(self.config.clone(), self.tls.clone(), true);
        }
        statistics
    }

    fn recover_bulk(&mut self) -> CatalogResult<bool> {
        let emptied = self.run(async |link| super::bulk::recover_interrupted(link).await)?;
        let id_index = self.run(async |link| super::id_index::state(&link.client).await)?;
        if id_index != super::id_index::IdIndex::Valid
            && !self.run(async |link| super::id_index::make_if_empty(&link.client).await)?
        {
            super::id_index::spawn_build(self.config.clone(), self.tls.clone(), false);
        }
        Ok(emptied)
    }

    fn try_lock_writer(&mut self) -> CatalogResult<bool> {
        if self.writer_lock == WriterLock::Held {
            return Ok(true);
        }
        let held = self.run(async |link| link.try_writer_lock().await)?;
        if held {
            self.writer_lock = WriterLock::Held;
        }
        Ok(held)
    }

    fn log(&mut self, seq: i64, entry: &LogEntry<'_>) -> CatalogResult<()> {
        self.run(async |link| {
            let row = LogRow::of(seq, UnixMillis::now(), entry, &link.ids);
            link.execute(
                sql::APPEND,
                &[
                    &row.seq,
                    &row.at_ms,
                    &row.keys,
                    &row.uris,
                    &row.kinds,
                    &row.everything,
                ],
            )
            .await?;
            link.notify_on_commit = true;
            Ok(())
        })
    }

    fn last_logged(&mut self) -> CatalogResult<i64> {
        self.run(async |link| {
            let rows = link.query(sql::LAST, &[]).await?;
            Ok(rows.first().map(|r| r.get(0)).unwrap_or(0))
        })
    }

    fn stream(&mut self, first: i64, entries: &[StreamEntry]) -> CatalogResult<()> {
        let now = UnixMillis::now();
        self.run(async |link| {
            let rows: Vec<StreamRow> = (first..)
                .zip(entries)
                .map(|(seq, entry)| StreamRow::of(seq, now, entry, &link.ids))
                .collect();
            let column = |f: fn(&StreamRow) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
            let flag = |f: fn(&StreamRow) -> bool| rows.iter().map(f).collect::<Vec<bool>>();
            let text = |f: fn(&StreamRow) -> &str| rows.iter().map(f).collect::<Vec<&str>>();
            // One statement for the whole batch: a round trip per change would cost more
            // than the changes.
            link.execute(
                APPEND_STREAM,
                &[
                    &column(|r| r.seq),
                    &column(|r| r.at_ms),
                    &text(|r| &r.uri),
                    &flag(|r| r.was_live),
                    &flag(|r| r.is_live),
                    &text(|r| &r.before),
                    &text(|r| &r.after),
                ],
            )
            .await?;
            link.notify_on_commit = true;
            Ok(())
        })
    }

    fn record_activity(&mut self, write: &ActivityWrite<'_>) -> CatalogResult<()> {
        self.run(async |link| link.write_activity(write).await)
    }

    fn last_streamed(&mut self) -> CatalogResult<i64> {
        self.run(async |link| {
            let rows = link.query(stream::sql::BOUNDS, &[]).await?;
            Ok(rows.first().map(|r| r.get(1)).unwrap_or(0))
        })
    }

    fn heartbeat(&mut self, now: UnixMillis, keep_changes: Duration) -> CatalogResult<()> {
        let now_ms = now.0;
        let changes_from = now_ms.saturating_sub(keep_changes.as_millis() as i64);
        self.run(async |link| {
            link.execute(sql::BEAT, &[&now_ms]).await?;
            link.execute(sql::TRIM, &[&(now_ms - KEEP_FOR_MS), &KEEP_AT_MOST])
                .await?;
            link.execute(stream::sql::TRIM, &[&(changes_from), &STREAM_KEEP_AT_MOST])
                .await?;
            link.trim_activity(now).await
        })
    }
}

/// A batch of the change stream's rows, as arrays.
const APPEND_STREAM: &str = "INSERT INTO record_changes \
     (seq, at_ms, uri, was_live, is_live, before_keys, after_keys) \
     SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::BOOLEAN[], \
     $5::BOOLEAN[], $6::TEXT[], $7::TEXT[])";

/// A row's keys column as read, beside its record: NULL (a bulk load left the keys out) means
/// they are to be taken from the record (copied only then); a tombstone has none.
fn stored_keys(ids: &QueryIds, column: Option<&str>, record: Option<&str>) -> StoredKeys {
    match (column, record) {
        (Some(text), _) => StoredKeys::Filed(ids.decode(text)),
        (None, Some(record)) => StoredKeys::InRecord(record.to_string()),
        (None, None) => StoredKeys::Filed(svc_spec::IndexKeys::new()),
    }
}
