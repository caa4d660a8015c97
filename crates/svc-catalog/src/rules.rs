//! The catalog's rules, written once above the storage engines: an event older than the
//! stored revision is stale; a delete leaves a tombstone that keeps its revision; an inactive
//! account's records stay stored but leave answers and counts until it is active again, as do
//! an account's or a record's the operator took down, until the takedown is lifted; a
//! deleted account's records go; a query whose definition changed gets its keys rebuilt.
//!
//! The rules turn a batch into a [`Plan`] of storage writes (record rows, index entries,
//! count deltas, cursors) that an [`Engine`] carries out inside one transaction.

use crate::engine::{Engine, Plan, RecordRow, RecordWrite, Stored, StoredKeys, Takedowns, did_of};
use crate::stream::StreamEntry;
use crate::{ApplyReport, CatalogResult, Change};
use std::collections::HashSet;
use svc_spec::{IndexKeys, IndexSet};

/// What the rules consult beside the engine to file a record.
pub(crate) struct Filing {
    /// Accounts whose records are out of the index.
    pub inactive: HashSet<String>,
    /// What the operator took down: accounts' DIDs and records' uris.
    pub taken_down: Takedowns,
    /// The queries records are filed by.
    pub queries: IndexSet,
}

impl Filing {
    /// Whether the account of `did` is out of sight: inactive, or taken down.
    pub(crate) fn hides_account(&self, did: &str) -> bool {
        self.inactive.contains(did) || self.taken_down.hides(did)
    }

    /// Whether the record at `uri` is stored out of the index and the counts: its account is
    /// out of sight, or the record was taken down.
    pub(crate) fn hides(&self, uri: &str) -> bool {
        self.hides_account(did_of(uri)) || self.taken_down.hides(uri)
    }

    /// The keys a stored record is filed under, taken from its text where they were not
    /// stored (on the writer's thread: a row loaded in bulk costs a parse when it changes).
    pub(crate) fn keys_of(&self, uri: &str, collection: &str, keys: StoredKeys) -> IndexKeys {
        match keys {
            StoredKeys::Filed(keys) => keys,
            StoredKeys::InRecord(text) => match svc_spec::Json::parse(&text) {
                Ok(record) => self.queries.index_keys(collection, uri, &record),
                // Stored text was valid JSON when written: only a damaged row gets here, and
                // its entries are left as they are rather than the write refused.
                Err(error) => {
                    tracing::warn!(%uri, "stored record is not JSON ({error}); its keys read as none");
                    IndexKeys::new()
                }
            },
        }
    }
}

/// One change of a group, with the number of the batch it came in.
pub(crate) type Queued<'a> = (usize, &'a Change);

/// Plans changes of a group of `batches` batches: each uri's changes in arrival order against
/// what it holds, the stale ones counted and dropped, one row write per uri for the last that
/// applied. What each batch did is reported by its number.
pub(crate) fn plan_group<'a>(
    engine: &mut dyn Engine,
    filing: &Filing,
    changes: &[Queued<'a>],
    batches: usize,
) -> CatalogResult<(Plan<'a>, Vec<ApplyReport>)> {
    let mut reports = vec![ApplyReport::default(); batches];
    // In uri order (a stable sort keeps each uri's changes in arrival order), so the engine
    // walks its uri index once; the outcome does not depend on the order across uris.
    let mut order = changes.to_vec();
    order.sort_by(|a, b| a.1.uri().cmp(b.1.uri()));
    let mut uris: Vec<&str> = order.iter().map(|(_, c)| c.uri()).collect();
    uris.dedup();
    let mut stored = engine.stored(&uris)?;
    let mut plan = Plan::default();
    let mut at = 0;
    while at < order.len() {
        let uri = order[at].1.uri();
        let end = at
            + order[at..]
                .iter()
                .take_while(|(_, c)| c.uri() == uri)
                .count();
        let before = stored.remove(uri);
        let mut last: Option<&'a Change> = None;
        let mut rev: Option<&str> = before.as_ref().map(|s| s.rev.as_str());
        for (batch, change) in &order[at..end] {
            let change_rev = match change {
                Change::Upsert(u) => u.rev.as_str(),
                Change::Delete { rev, .. } => rev.as_str(),
            };
            if rev.is_some_and(|standing| standing > change_rev) {
                reports[*batch].stale += 1;
            } else {
                reports[*batch].applied += 1;
                rev = Some(change_rev);
                last = Some(change);
            }
        }
        if let Some(change) = last {
            plan_change(&mut plan, filing, before, change);
        }
        at = end;
    }
    Ok((plan, reports))
}

/// One uri's row write, index entries and counts, from what it held to its last change.
fn plan_change<'a>(
    plan: &mut Plan<'a>,
    filing: &Filing,
    before: Option<Stored>,
    change: &'a Change,
) {
    let mut row = RecordRow::of(change);
    row.replaces = before.as_ref().is_some_and(|b| b.live);
    plan.records.push(RecordWrite::Row(row));
    // An inactive or taken-down account's records, and a taken-down record, are stored but
    // stay out of the index and the counts.
    if filing.hides(row.uri) {
        return;
    }
    if let Some(before) = before.as_ref().filter(|b| b.live) {
        plan.count_kind(&before.collection, -1);
    }
    if row.live() {
        plan.count_kind(row.collection, 1);
    }
    let was_live = before.as_ref().is_some_and(|b| b.live);
    // The same revision, or the same content (a copy read whole states every record again
    // at its own revision), is the same version.
    let same_version = before
        .as_ref()
        .is_some_and(|b| b.rev == row.rev || (row.cid.is_some() && b.cid.as_deref() == row.cid));
    let old = before.map_or_else(IndexKeys::new, |b| {
        filing.keys_of(row.uri, &b.collection, b.keys)
    });
    plan.refile(row.uri, &old, row.keys);
    let entry = StreamEntry {
        uri: row.uri.to_string(),
        was_live,
        is_live: row.live(),
        before: old,
        after: row.keys.clone(),
    };
    // The same version applied again (a source replaying after a restart, a repository read
    // whole) changes nothing anyone could see.
    let replayed = same_version && was_live == entry.is_live && entry.before == entry.after;
    if entry.visible() && !replayed {
        plan.stream.push(entry);
    }
}
