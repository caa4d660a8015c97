//! Account status: an inactive account's records stay stored, with their keys, but leave the
//! index and the counts; reactivation files them again (unless the operator took the account
//! down); deletion removes them.

use super::transactions::Transactions;
use crate::engine::{AccountWrite, Engine, Plan};
use crate::rules::Filing;
use crate::stream::StreamEntry;
use crate::{AccountStatus, CatalogResult};
use svc_spec::IndexKeys;
use svc_syntax::Did;

/// Stores an account's new status, filing its records again or taking them out as it changes;
/// whether it was hidden before.
pub(super) fn set_account<E: Engine>(
    tx: &mut Transactions<E>,
    did: &Did,
    status: &AccountStatus,
) -> CatalogResult<bool> {
    let was_inactive = tx.filing.inactive.contains(did.as_str());
    let now_inactive = !matches!(status, AccountStatus::Active);
    // A takedown keeps the account out of sight whatever its host says.
    let taken_down = tx.filing.taken_down.hides(did.as_str());
    tx.run(|engine, filing| {
        let mut plan = Plan::default();
        if was_inactive != now_inactive && !taken_down {
            file_repository(engine, filing, did.as_str(), !now_inactive, &mut plan)?;
        }
        plan.account = Some(AccountWrite {
            did: did.to_string(),
            inactive: match status {
                AccountStatus::Active => None,
                AccountStatus::Inactive(reason) => Some(reason.clone()),
                // The account stays on record as deleted: a late event for it (a backfill
                // page read before the deletion) is stored out of sight, not served.
                AccountStatus::Deleted => Some("deleted".to_string()),
            },
        });
        if *status == AccountStatus::Deleted {
            plan.remove_repository = Some(did.to_string());
        }
        engine.write(&plan)?;
        Ok((plan, ()))
    })?;
    if now_inactive {
        tx.filing.inactive.insert(did.to_string());
    } else {
        tx.filing.inactive.remove(did.as_str());
    }
    Ok(was_inactive)
}

/// Files every live record of a repository under its keys (`file = true`) or takes them all
/// out of the index (`false`), with the counts; a record taken down on its own stays out.
pub(super) fn file_repository(
    engine: &mut dyn Engine,
    filing: &Filing,
    did: &str,
    file: bool,
    plan: &mut Plan<'_>,
) -> CatalogResult<()> {
    let empty = IndexKeys::new();
    for record in engine.repository(did)? {
        if filing.taken_down.hides(&record.uri) {
            continue;
        }
        let keys = filing.keys_of(&record.uri, &record.collection, record.keys);
        let (before, after) = match file {
            true => (empty.clone(), keys),
            false => (keys, empty.clone()),
        };
        plan.refile(&record.uri, &before, &after);
        plan.count_kind(&record.collection, if file { 1 } else { -1 });
        plan.stream.push(StreamEntry {
            uri: record.uri,
            was_live: !file,
            is_live: file,
            before,
            after,
        });
    }
    Ok(())
}
