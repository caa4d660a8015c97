//! Query registration at start: each query's keys follow the definition they were built from
//! (its fingerprint). A query that is new or whose definition changed gets its keys rebuilt
//! from the stored records; the keys of a query no longer specified are dropped.

use crate::CatalogResult;
use crate::engine::{Engine, Plan, RecordWrite};
use crate::replication_log::LogEntry;
use crate::rules::Filing;
use crate::stream::StreamEntry;
use svc_spec::{Index, IndexKeys};

/// Records read and refiled per step of a rebuild.
const REBUILD_CHUNK: usize = 10_000;

/// Whether anything changed: then the replication log got entry `log_seq`, which tells other
/// processes to re-read the queries' numbers and drop their cached answers.
pub(super) fn register(
    engine: &mut dyn Engine,
    filing: &Filing,
    log_seq: i64,
) -> CatalogResult<bool> {
    let queries = &filing.queries;
    let stored = engine.queries()?;
    engine.begin()?;
    let outcome = (|| {
        let mut changed = false;
        for (id, _) in &stored {
            if queries.get(id).is_none() {
                engine.drop_query(id)?;
                changed = true;
            }
        }
        let started = std::time::Instant::now();
        let mut filed = 0;
        for query in queries.all() {
            let fingerprint = query.fingerprint();
            let current = stored
                .iter()
                .any(|(id, known)| id == query.id() && *known == fingerprint);
            if !current {
                let one = std::time::Instant::now();
                engine.define_query(query.id(), &fingerprint)?;
                rebuild(engine, query, filing)?;
                tracing::debug!(
                    query = %query.id(),
                    "filed the stored records under a new or changed query in {:.1}s",
                    one.elapsed().as_secs_f64()
                );
                filed += 1;
            }
        }
        if filed > 0 {
            // One line at start, however many queries are new (a new catalog: all of them);
            // each is named at debug.
            tracing::info!(
                "filed the stored records under {filed} new or changed queries in {:.1}s",
                started.elapsed().as_secs_f64()
            );
            changed = true;
        }
        if changed {
            engine.log(log_seq, &LogEntry::everything())?;
            // Readers of the change stream hold answers by the old definitions.
            let last_change = engine.last_streamed()?;
            if last_change > 0 {
                engine.stream(last_change + 1, &[StreamEntry::gap()])?;
            }
        }
        engine.commit()?;
        Ok(changed)
    })();
    if outcome.is_err() {
        engine.rollback();
    }
    outcome
}

/// Files every stored record of the query's kind under the query's keys, in chunks of uris.
/// An inactive account's records get their keys stored but stay out of the index.
fn rebuild(engine: &mut dyn Engine, query: &Index, filing: &Filing) -> CatalogResult<()> {
    let mut after = String::new();
    loop {
        let rows = engine.records_of_kind(query.kind(), &after, REBUILD_CHUNK)?;
        let Some(last) = rows.last().map(|(filed, _)| filed.uri.clone()) else {
            return Ok(());
        };
        let mut plan = Plan::default();
        for (filed, text) in rows {
            let keys: Vec<String> = svc_spec::Json::parse(&text)
                .map(|record| query.index_keys(&svc_spec::RecordView::new(&filed.uri, &record)))
                .unwrap_or_default();
            let mut all = filing.keys_of(&filed.uri, &filed.collection, filed.keys);
            all.retain(|(id, _)| id != query.id());
            let mine: IndexKeys = keys.into_iter().map(|k| (query.id().clone(), k)).collect();
            if !filing.hides(&filed.uri) {
                plan.refile(&filed.uri, &IndexKeys::new(), &mine);
            }
            all.extend(mine);
            plan.records.push(RecordWrite::Keys {
                uri: filed.uri,
                keys: all,
            });
        }
        engine.write(&plan)?;
        after = last;
    }
}
