//! Labels from the labelers svc follows. Each (subject, labeler, value) keeps the labeler's
//! latest statement; a statement older than the stored one is stale. `!takedown` holds its
//! subject down as the operator's takedown does, with the labeler as its source; any other
//! value is shown with the records it applies to, so the answers holding them are touched.
//! Expired labels are removed by a sweep, which lifts an expired `!takedown`.

use super::takedowns::set_takedown;
use super::transactions::Transactions;
use crate::engine::{Engine, LabelKey, LabelRow, LabelWrite, Plan, Stored, TakedownState};
use crate::rules::Filing;
use crate::{CatalogResult, LabelBatch, LabelReport, Subject, TAKEDOWN_LABEL, TakedownSource};
use std::collections::{BTreeSet, HashMap};
use svc_syntax::{Did, UnixMillis};

/// Label rows one labeler may store on subjects the catalog does not hold; past it such
/// labels are refused and counted (labels on held records and accounts are always kept).
/// The catalog's own tests reach it with a handful.
pub(crate) const LABELS_PER_LABELER: u64 = if cfg!(test) { 8 } else { 1_000_000 };

/// Expired labels removed in one sweep step.
const EXPIRED_PER_SWEEP: usize = 1_000;

/// Values one labeler may state of one subject, held or not; past it, refused and counted.
pub(crate) const VALUES_PER_SUBJECT: u64 = if cfg!(test) { 4 } else { 64 };

/// How long a negation's row is kept to order what follows, then swept.
pub(crate) const NEGATION_KEPT_MS: i64 = 24 * 3_600 * 1_000;

/// How many label rows each labeler has stored, read from storage once per labeler.
#[derive(Default)]
pub(super) struct LabelAllowances(HashMap<String, u64>);

impl LabelAllowances {
    fn count<E: Engine>(&mut self, engine: &mut E, src: &str) -> CatalogResult<&mut u64> {
        if !self.0.contains_key(src) {
            let stored = engine.label_count(src)?;
            self.0.insert(src.to_string(), stored);
        }
        Ok(self.0.entry(src.to_string()).or_default())
    }

    /// Forgets a labeler's count (after a failed write, or its labels removed: read it again).
    pub(super) fn forget(&mut self, src: &str) {
        self.0.remove(src);
    }
}

/// Stores a batch of one labeler's labels with its cursor.
pub(super) fn apply_labels<E: Engine>(
    tx: &mut Transactions<E>,
    allowances: &mut LabelAllowances,
    batch: &LabelBatch,
) -> CatalogResult<LabelReport> {
    let outcome = store_labels(tx, allowances, batch);
    if outcome.is_err() {
        allowances.forget(batch.labeler.as_str());
    }
    outcome
}

/// What a batch gathers before it is written.
#[derive(Default)]
struct Gathered {
    report: LabelReport,
    /// What this batch wrote already, which storage does not show until it commits.
    written: HashMap<LabelKey, String>,
    /// The new rows this batch adds on each subject, beside those stored.
    added_on: HashMap<String, u64>,
    rows: Vec<LabelWrite>,
    /// Each subject's `!takedown` as the batch leaves it: a storm of toggles costs one change.
    takedowns: Vec<(Subject, TakedownState)>,
}

fn store_labels<E: Engine>(
    tx: &mut Transactions<E>,
    allowances: &mut LabelAllowances,
    batch: &LabelBatch,
) -> CatalogResult<LabelReport> {
    let now = UnixMillis::now();
    let mut gathered = Gathered::default();
    for label in &batch.labels {
        gather(tx, allowances, &batch.labeler, label, now, &mut gathered)?;
    }
    let source = TakedownSource::Labeler(batch.labeler.clone());
    for (subject, state) in std::mem::take(&mut gathered.takedowns) {
        let applied = matches!(state, TakedownState::Applied { .. });
        if tx
            .filing
            .taken_down
            .held_by(subject.as_str(), source.as_str())
            != applied
        {
            set_takedown(tx, &subject, &[(source.clone(), state)])?;
        }
    }
    let rows = std::mem::take(&mut gathered.rows);
    tx.run(|engine, filing| {
        let mut plan = Plan::default();
        touch_labelled(engine, filing, &rows, &mut plan)?;
        plan.labels = rows;
        plan.cursors = vec![&batch.cursor];
        engine.write(&plan)?;
        Ok((plan, ()))
    })?;
    Ok(gathered.report)
}

/// Takes one label into the batch: stale, refused for want of room, or a row to write.
fn gather<E: Engine>(
    tx: &mut Transactions<E>,
    allowances: &mut LabelAllowances,
    labeler: &Did,
    label: &crate::Label,
    now: UnixMillis,
    gathered: &mut Gathered,
) -> CatalogResult<()> {
    let key = LabelKey {
        subject: label.subject.as_str().to_string(),
        src: labeler.as_str().to_string(),
        val: label.val.clone(),
    };
    let cts = svc_syntax::format_unix_micros(label.cts.0);
    let standing = match gathered.written.get(&key) {
        Some(cts) => Some(cts.clone()),
        None => tx.engine.stored_label(&key)?.map(|(_, cts)| cts),
    };
    if standing
        .as_deref()
        .is_some_and(|standing| standing > cts.as_str())
    {
        gathered.report.stale += 1;
        return Ok(());
    }
    if standing.is_none() && !room_for(tx, allowances, &key, gathered)? {
        gathered.report.over_allowance += 1;
        return Ok(());
    }
    // A label already expired holds as its negation: nothing older may restate it.
    let neg = label.neg || label.exp.is_some_and(|exp| exp <= now);
    if label.val == TAKEDOWN_LABEL {
        let state = match !neg {
            true => TakedownState::Applied {
                reference: Some(format!("{TAKEDOWN_LABEL} of {cts}")),
            },
            false => TakedownState::Lifted,
        };
        let takedowns = &mut gathered.takedowns;
        match takedowns
            .iter_mut()
            .find(|(held, _)| *held == label.subject)
        {
            Some((_, last)) => *last = state,
            None => takedowns.push((label.subject.clone(), state)),
        }
    }
    gathered.written.insert(key.clone(), cts.clone());
    gathered.rows.push(LabelWrite::Put(LabelRow {
        key,
        neg,
        cts,
        exp_ms: row_expiry(label.exp, neg, now),
    }));
    gathered.report.applied += 1;
    Ok(())
}

/// Whether a new row fits: at most [`VALUES_PER_SUBJECT`] of one labeler's values on any
/// subject, and its allowance on subjects the catalog does not hold.
fn room_for<E: Engine>(
    tx: &mut Transactions<E>,
    allowances: &mut LabelAllowances,
    key: &LabelKey,
    gathered: &mut Gathered,
) -> CatalogResult<bool> {
    let added = gathered.added_on.get(&key.subject).copied().unwrap_or(0);
    if tx.engine.label_values(&key.subject, &key.src)? + added >= VALUES_PER_SUBJECT {
        return Ok(false);
    }
    let count = allowances.count(&mut tx.engine, &key.src)?;
    if *count >= LABELS_PER_LABELER && !tx.engine.holds(&key.subject)? {
        return Ok(false);
    }
    *count += 1;
    *gathered.added_on.entry(key.subject.clone()).or_default() += 1;
    Ok(true)
}

/// When a row is swept: its label's expiry; a negation, kept only so that an older statement
/// arriving late cannot restate what it took back, after [`NEGATION_KEPT_MS`] at most, so
/// that its storage and its share of the labeler's allowance are given back.
fn row_expiry(stated: Option<UnixMillis>, neg: bool, now: UnixMillis) -> Option<i64> {
    let stated = stated.map(|exp| exp.0);
    match neg {
        true => Some(stated.map_or(now.0 + NEGATION_KEPT_MS, |exp| {
            exp.min(now.0 + NEGATION_KEPT_MS)
        })),
        false => stated,
    }
}

/// Removes the labels expired by `now` (at most a sweep's worth); how many.
pub(super) fn expire_labels<E: Engine>(
    tx: &mut Transactions<E>,
    now: UnixMillis,
) -> CatalogResult<usize> {
    let expired = tx.engine.expired_labels(now, EXPIRED_PER_SWEEP)?;
    if expired.is_empty() {
        return Ok(0);
    }
    for key in expired.iter().filter(|key| key.val == TAKEDOWN_LABEL) {
        let subject = Subject::parse(&key.subject);
        if let (Some(subject), Ok(labeler)) = (subject, Did::new(key.src.as_str())) {
            let source = TakedownSource::Labeler(labeler);
            set_takedown(tx, &subject, &[(source, TakedownState::Lifted)])?;
        }
    }
    let count = expired.len();
    remove_labels(tx, expired)?;
    Ok(count)
}

/// Removes labels in one transaction, touching the answers that showed them.
fn remove_labels<E: Engine>(tx: &mut Transactions<E>, keys: Vec<LabelKey>) -> CatalogResult<()> {
    let removals: Vec<LabelWrite> = keys.into_iter().map(LabelWrite::Remove).collect();
    tx.run(|engine, filing| {
        let mut plan = Plan::default();
        touch_labelled(engine, filing, &removals, &mut plan)?;
        plan.labels = removals;
        engine.write(&plan)?;
        Ok((plan, ()))
    })
}

/// Forgets every labeler not in `keep`; the ones forgotten.
pub(super) fn forget_labelers<E: Engine>(
    tx: &mut Transactions<E>,
    keep: &[Did],
) -> CatalogResult<Vec<String>> {
    let kept: BTreeSet<&str> = keep.iter().map(Did::as_str).collect();
    let mut gone = tx.engine.labelers_on_record()?;
    gone.retain(|src| !kept.contains(src.as_str()));
    for src in &gone {
        forget_labeler(tx, src)?;
    }
    Ok(gone)
}

/// Lifts `src`'s takedowns, removes its labels, a sweep's worth a transaction, and its cursor.
fn forget_labeler<E: Engine>(tx: &mut Transactions<E>, src: &str) -> CatalogResult<()> {
    let Ok(labeler) = Did::new(src) else {
        return Err(crate::CatalogError::Storage(format!(
            "a stored labeler is not a DID: {src:?}"
        )));
    };
    let source = TakedownSource::Labeler(labeler.clone());
    for subject in tx.filing.taken_down.held_by_source(src) {
        if let Some(subject) = Subject::parse(&subject) {
            set_takedown(tx, &subject, &[(source.clone(), TakedownState::Lifted)])?;
        }
    }
    loop {
        let keys = tx.engine.labels_of(src, EXPIRED_PER_SWEEP)?;
        if keys.is_empty() {
            break;
        }
        remove_labels(tx, keys)?;
    }
    tx.run(|engine, _| {
        let plan = Plan {
            forget_cursors: vec![crate::labeler_cursor_source(&labeler)],
            ..Plan::default()
        };
        engine.write(&plan)?;
        Ok((plan, ()))
    })
}

/// Touches the answers holding the records the labels apply to (a record, or every record of
/// an account), so that no cached answer shows the labels they had; `!takedown` is left to
/// the takedown, which refiles what it hides.
fn touch_labelled(
    engine: &mut dyn Engine,
    filing: &Filing,
    writes: &[LabelWrite],
    plan: &mut Plan<'_>,
) -> CatalogResult<()> {
    let subjects: BTreeSet<&str> = writes
        .iter()
        .map(|write| match write {
            LabelWrite::Put(row) => &row.key,
            LabelWrite::Remove(key) => key,
        })
        .filter(|key| key.val != TAKEDOWN_LABEL)
        .map(|key| key.subject.as_str())
        .collect();
    for subject in subjects {
        if !subject.starts_with("at://") {
            if !filing.hides_account(subject) {
                let mut held = false;
                for filed in engine.repository(subject)? {
                    if !filing.hides(&filed.uri) {
                        let keys = filing.keys_of(&filed.uri, &filed.collection, filed.keys);
                        plan.touched.extend(keys);
                        held = true;
                    }
                }
                if held {
                    plan.relabelled.push(subject.to_string());
                }
            }
        } else if !filing.hides(subject) {
            let stored = engine.stored(&[subject])?.remove(subject);
            if let Some(Stored {
                collection,
                keys,
                live: true,
                ..
            }) = stored
            {
                plan.touched
                    .extend(filing.keys_of(subject, &collection, keys));
                plan.relabelled.push(subject.to_string());
            }
        }
    }
    Ok(())
}
