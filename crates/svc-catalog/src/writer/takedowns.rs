//! The operator's takedowns: an account's records, or one record, leave every answer, count
//! and the change stream, and stay stored; new revisions and new records of what is taken
//! down are stored out of sight too (the rules' `Filing::hides`). Lifting the takedown files
//! them again, unless the account is out of sight for another reason.

use super::accounts::file_repository;
use super::transactions::Transactions;
use crate::engine::{Engine, Plan, Stored, TakedownState, TakedownWrite};
use crate::rules::Filing;
use crate::stream::StreamEntry;
use crate::{CatalogResult, Subject, TakedownSource};
use svc_spec::IndexKeys;

/// Applies or lifts `source`'s takedown of `subject`; whether it was down before (by anyone).
pub(super) fn set_takedown<E: Engine>(
    tx: &mut Transactions<E>,
    subject: &Subject,
    source: &TakedownSource,
    state: TakedownState,
) -> CatalogResult<bool> {
    let key = subject.as_str();
    let applied = matches!(state, TakedownState::Applied { .. });
    let was = tx.filing.taken_down.contains(key);
    let now = tx
        .filing
        .taken_down
        .down_after(key, source.as_str(), applied);
    tx.run(|engine, filing| {
        let mut plan = Plan::default();
        if was != now {
            match subject {
                Subject::Account(did) if !filing.inactive.contains(did.as_str()) => {
                    file_repository(engine, filing, did.as_str(), !now, &mut plan)?;
                }
                Subject::Account(_) => {}
                Subject::Record(uri) => file_record(engine, filing, uri.as_str(), !now, &mut plan)?,
            }
        }
        plan.takedown = Some(TakedownWrite {
            subject: key.to_string(),
            source: source.as_str().to_string(),
            state,
        });
        engine.write(&plan)?;
        Ok((plan, ()))
    })?;
    tx.filing.taken_down.set(key, source.as_str(), applied);
    Ok(was)
}

/// Files the live record at `uri` under its keys (`file = true`) or takes it out of the
/// index (`false`), with the counts, unless its account is out of sight.
fn file_record(
    engine: &mut dyn Engine,
    filing: &Filing,
    uri: &str,
    file: bool,
    plan: &mut Plan<'_>,
) -> CatalogResult<()> {
    if filing.hides_account(crate::engine::did_of(uri)) {
        return Ok(());
    }
    let Some(Stored {
        collection, keys, ..
    }) = engine
        .stored(&[uri])?
        .remove(uri)
        .filter(|stored| stored.live)
    else {
        return Ok(());
    };
    let keys = filing.keys_of(uri, &collection, keys);
    let empty = IndexKeys::new();
    let (before, after) = match file {
        true => (empty, keys),
        false => (keys, empty),
    };
    plan.refile(uri, &before, &after);
    plan.count_kind(&collection, if file { 1 } else { -1 });
    plan.stream.push(StreamEntry {
        uri: uri.to_string(),
        was_live: !file,
        is_live: file,
        before,
        after,
    });
    Ok(())
}
