//! The search index built whole, at start, when the catalog's index was built under another
//! definition (a kind's fields, or the folding, changed; or the catalog predates search); when
//! the definition only adds kinds, only their records are filed.
//! Every live record of each searched kind is read in pages and its words filed, a
//! transaction a page; the definition is stored last, with an entry of the replication log
//! that tells other processes to read their searches again, so an interrupted build is done
//! again at the next start.

use super::transactions::Transactions;
use crate::CatalogResult;
use crate::engine::Engine;
use crate::replication_log::LogEntry;
use svc_syntax::Nsid;

/// Records read and filed in one transaction.
const PAGE: usize = 2_000;

/// Builds the index again unless it was built under this definition; when the definition
/// only adds kinds, files those kinds' records and keeps the rest.
pub(super) fn ensure_current<E: Engine>(tx: &mut Transactions<E>) -> CatalogResult<()> {
    let wanted = tx.filing.queries.search_fingerprint().to_string();
    let stored = tx.engine.search_fingerprint()?;
    if stored.as_deref() == Some(wanted.as_str()) {
        return Ok(());
    }
    match stored.and_then(|stored| svc_spec::search_kinds_added(&stored, &wanted)) {
        Some(added) => build(tx, &added, false),
        None => {
            let every: Vec<String> = tx
                .filing
                .queries
                .searched_kinds()
                .map(String::from)
                .collect();
            build(tx, &every, true)
        }
    }
}

/// Files the words of every live record of `kinds`, after emptying the index when `whole`.
fn build<E: Engine>(tx: &mut Transactions<E>, kinds: &[String], whole: bool) -> CatalogResult<()> {
    let started = std::time::Instant::now();
    let queries = tx.filing.queries.clone();
    if whole {
        in_transaction(&mut tx.engine, |engine| engine.clear_search())?;
    }
    let mut filed = 0;
    for kind in kinds {
        let Ok(collection) = Nsid::new(kind) else {
            continue;
        };
        let mut after = String::new();
        loop {
            let page = tx.engine.records_of_kind(&collection, &after, PAGE)?;
            let Some((last, _)) = page.last() else {
                break;
            };
            after = last.uri.clone();
            let entries: Vec<(String, svc_spec::search::SearchText)> = page
                .iter()
                .filter_map(|(filed, text)| {
                    let record = svc_spec::Json::parse(text).ok()?;
                    let words = queries.search_text(&filed.collection, &filed.uri, &record)?;
                    Some((filed.uri.clone(), words))
                })
                .collect();
            filed += entries.len();
            in_transaction(&mut tx.engine, |engine| engine.index_search(&entries))?;
        }
    }
    let fingerprint = queries.search_fingerprint().to_string();
    // Other processes on the catalog answered searches from the index as it was: the
    // replication log tells them to forget those answers, as it does after a bulk load.
    tx.engine.begin()?;
    let stored = tx
        .engine
        .set_search_fingerprint(&fingerprint)
        .and_then(|()| tx.log(&LogEntry::everything()))
        .and_then(|_| tx.engine.commit());
    if let Err(error) = stored {
        tx.engine.rollback();
        return Err(error);
    }
    tx.next_seq += 1;
    tx.clock.touch_search();
    if filed > 0 {
        tracing::info!(
            records = filed,
            seconds = started.elapsed().as_secs_f64(),
            "search index built"
        );
    }
    Ok(())
}

fn in_transaction<E: Engine>(
    engine: &mut E,
    work: impl FnOnce(&mut E) -> CatalogResult<()>,
) -> CatalogResult<()> {
    engine.begin()?;
    match work(engine).and_then(|()| engine.commit()) {
        Ok(()) => Ok(()),
        Err(error) => {
            engine.rollback();
            Err(error)
        }
    }
}
