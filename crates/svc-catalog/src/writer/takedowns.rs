//! Takedowns, the operator's and labelers': an account's records, or one record, leave every
//! answer, count and the change stream, and stay stored; new revisions and new records of
//! what is taken down are stored out of sight too (the rules' `Filing::hides`). Lifting the
//! takedown files them again, unless the account is out of sight for another reason. The
//! operator's word is final: lifting a takedown that labelers hold keeps the subject shown
//! whatever they say, until the operator takes it down again.

use super::accounts::file_repository;
use super::transactions::Transactions;
use crate::engine::{Engine, Plan, Stored, TakedownState, TakedownWrite};
use crate::rules::Filing;
use crate::stream::StreamEntry;
use crate::{CatalogResult, Subject, TakedownSource};
use svc_spec::IndexKeys;

/// Takes each source's word on `subject` (a takedown applied or lifted, the operator's keeping
/// it shown); whether it was down before (by anyone).
pub(super) fn set_takedown<E: Engine>(
    tx: &mut Transactions<E>,
    subject: &Subject,
    words: &[(TakedownSource, TakedownState)],
) -> CatalogResult<bool> {
    let key = subject.as_str();
    let applied = |state: &TakedownState| matches!(state, TakedownState::Applied { .. });
    let changes: Vec<(&str, bool)> = words
        .iter()
        .map(|(source, state)| (source.as_str(), applied(state)))
        .collect();
    let was = tx.filing.taken_down.hides(key);
    let now = tx.filing.taken_down.hides_after(key, &changes);
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
        plan.takedowns = words
            .iter()
            .map(|(source, state)| TakedownWrite {
                subject: key.to_string(),
                source: source.as_str().to_string(),
                state: state.clone(),
            })
            .collect();
        engine.write(&plan)?;
        Ok((plan, ()))
    })?;
    for (source, applied) in changes {
        tx.filing.taken_down.set(key, source, applied);
    }
    Ok(was)
}

/// The operator's word on `subject` as the sources it sets: a takedown clears any keeping it
/// shown; a lift keeps it shown against the labelers that hold it down, if any do.
pub(super) fn operator_word(
    takedowns: &crate::engine::Takedowns,
    subject: &Subject,
    state: TakedownState,
) -> Vec<(TakedownSource, TakedownState)> {
    let shown = match &state {
        TakedownState::Lifted if takedowns.held_by_a_labeler(subject.as_str()) => {
            TakedownState::Applied { reference: None }
        }
        _ => TakedownState::Lifted,
    };
    vec![
        (TakedownSource::Operator, state),
        (TakedownSource::OperatorKeepsShown, shown),
    ]
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
