//! Query registration at start: each query's keys follow the definition they were built from
//! (its fingerprint). A query that is new or whose definition changed gets its keys rebuilt
//! from the stored records; the keys of a query no longer specified are dropped.

use crate::CatalogResult;
use crate::engine::{Engine, Plan, RecordWrite};
use crate::replication_log::LogEntry;
use crate::rules::Filing;
use crate::stream::StreamEntry;
use std::collections::BTreeMap;
use svc_spec::{Index, IndexKeys, QueryId};

/// Records read and refiled per step of a rebuild.
const REBUILD_CHUNK: usize = 10_000;

/// Whether anything changed: then the replication log got entry `log_seq`, which tells other
/// processes to re-read the queries' numbers and drop their cached answers.
pub(super) fn register(
    engine: &mut dyn Engine,
    filing: &Filing,
    log_seq: i64,
) -> CatalogResult<bool> {
    let stored = engine.queries()?;
    engine.begin()?;
    let outcome = (|| {
        let dropped = drop_unspecified(engine, filing, &stored)?;
        let filed = file_new_and_changed(engine, filing, &stored)?;
        let changed = dropped || filed;
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

/// Drops the keys of the stored queries the specification no longer has; whether any.
fn drop_unspecified(
    engine: &mut dyn Engine,
    filing: &Filing,
    stored: &[(QueryId, String)],
) -> CatalogResult<bool> {
    let mut dropped = false;
    for (id, _) in stored {
        if filing.queries.get(id).is_none() {
            engine.drop_query(id)?;
            dropped = true;
        }
    }
    Ok(dropped)
}

/// Defines each query that is new or whose definition changed, and files the stored records
/// under it, the queries of one kind together (one read of that kind's records); whether any.
fn file_new_and_changed(
    engine: &mut dyn Engine,
    filing: &Filing,
    stored: &[(QueryId, String)],
) -> CatalogResult<bool> {
    let started = std::time::Instant::now();
    let mut by_kind: BTreeMap<&str, Vec<&Index>> = BTreeMap::new();
    for query in filing.queries.all() {
        let fingerprint = query.fingerprint();
        let current = stored
            .iter()
            .any(|(id, known)| id == query.id() && *known == fingerprint);
        if !current {
            engine.define_query(query.id(), &fingerprint)?;
            by_kind
                .entry(query.kind().as_str())
                .or_default()
                .push(query);
        }
    }
    for group in by_kind.values() {
        let one = std::time::Instant::now();
        rebuild(engine, group, filing)?;
        tracing::debug!(
            kind = %group[0].kind(),
            queries = group.len(),
            "filed the stored records under new or changed queries in {:.1}s",
            one.elapsed().as_secs_f64()
        );
    }
    let filed: usize = by_kind.values().map(Vec::len).sum();
    if filed > 0 {
        // One line at start, however many queries are new (a new catalog: all of them);
        // each kind is named at debug.
        tracing::info!(
            "filed the stored records under {filed} new or changed queries in {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(filed > 0)
}

/// Files every stored record of the queries' kind (one kind for all of them) under their
/// keys, in chunks of uris. An inactive account's records get their keys stored but stay out
/// of the index.
fn rebuild(engine: &mut dyn Engine, queries: &[&Index], filing: &Filing) -> CatalogResult<()> {
    let Some(kind) = queries.first().map(|query| query.kind()) else {
        return Ok(());
    };
    let mut after = String::new();
    loop {
        let rows = engine.records_of_kind(kind, &after, REBUILD_CHUNK)?;
        let Some(last) = rows.last().map(|(filed, _)| filed.uri.clone()) else {
            return Ok(());
        };
        let mut plan = Plan::default();
        for (filed, text) in rows {
            let mine = keys_under(queries, &filed.uri, &text);
            let mut all = filing.keys_of(&filed.uri, &filed.collection, filed.keys);
            all.retain(|(id, _)| !queries.iter().any(|query| query.id() == id));
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

/// The keys a stored record's text is filed under by `queries`; none when it does not parse.
fn keys_under(queries: &[&Index], uri: &str, text: &str) -> IndexKeys {
    let Ok(record) = svc_spec::Json::parse(text) else {
        return IndexKeys::new();
    };
    let view = svc_spec::RecordView::new(uri, &record);
    queries
        .iter()
        .flat_map(|query| {
            let id = query.id();
            query
                .index_keys(&view)
                .into_iter()
                .map(|key| (id.clone(), key))
        })
        .collect()
}
