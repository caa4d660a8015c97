//! The single writer: a thread that owns the engine's write side, applies batches in one
//! transaction each (several queued batches share one commit), and bumps the change clock
//! only after a commit.

mod accounts;
mod bulk_load;
mod jobs;
mod labels;
#[cfg(test)]
pub(crate) use labels::{LABELS_PER_LABELER, NEGATION_KEPT_MS, VALUES_PER_SUBJECT};
mod queries;
mod search;
mod sync_reads;
mod takedowns;
mod transactions;

use crate::engine::{Engine, Plan, TakedownState};
use crate::keys_column::QueryIds;
use crate::rules::{Filing, Queued, plan_group};
use crate::{
    AccountStatus, ApplyReport, CatalogError, CatalogResult, Change, ChangeClock, CursorPosition,
    LabelBatch, LabelReport, Refusal, Subject, SyncWrites,
};
use bulk_load::BulkLoad;
use jobs::WriteJob;
pub(crate) use jobs::WriterHandle;
use std::collections::HashSet;
use std::sync::{Arc, mpsc};
use svc_spec::IndexSet;
use svc_syntax::{AtUri, Did, Nsid, Tid, UnixMillis};
use tokio::sync::oneshot;
use transactions::Transactions;

/// An apply job waiting in a group commit.
type QueuedApply = (
    Vec<Change>,
    (Option<CursorPosition>, SyncWrites),
    oneshot::Sender<CatalogResult<ApplyReport>>,
);

/// A write of some of a group's changes, reporting what each batch did.
type Write<'a, E> = fn(&mut Writer<E>, &[Queued<'a>], &mut [ApplyReport]) -> CatalogResult<()>;

/// Queued batches merged into one commit, at most this many changes.
const GROUP_COMMIT_CHANGES: usize = 100_000;

/// What moves with a commit's changes: the sources' cursors and what the batches say of the
/// repositories' synchronisation.
#[derive(Default)]
struct Marks<'a> {
    cursors: Vec<&'a CursorPosition>,
    sync: Vec<&'a SyncWrites>,
}

struct Writer<E: Engine> {
    tx: Transactions<E>,
    /// What a bulk load has staged, when one is under way.
    bulk: Option<BulkLoad>,
    label_allowances: labels::LabelAllowances,
}

/// Readies the catalog behind an engine (an interrupted bulk load undone, query keys rebuilt
/// where the specification changed) and starts its writer thread.
pub(crate) fn spawn_writer<E: Engine>(
    mut engine: E,
    queries: &IndexSet,
    clock: Arc<ChangeClock>,
) -> CatalogResult<(WriterHandle, QueryIds)> {
    if engine.recover_bulk()? {
        tracing::warn!("an interrupted bulk load was rolled back; the catalog is empty");
    }
    let filing = Filing {
        inactive: engine.inactive_accounts()?,
        taken_down: engine.takedowns()?,
        queries: queries.clone(),
    };
    let mut next_seq = engine.last_logged()? + 1;
    if queries::register(&mut engine, &filing, next_seq)? {
        next_seq += 1;
    }
    let ids = engine.query_ids();
    let next_change = engine.last_streamed()? + 1;
    let mut writer = Writer {
        tx: Transactions {
            engine,
            clock,
            filing,
            next_seq,
            next_change,
        },
        bulk: None,
        label_allowances: Default::default(),
    };
    search::ensure_current(&mut writer.tx)?;
    let (sender, receiver) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("catalog-writer".into())
        .spawn(move || writer.run(receiver))
        .map_err(|e| CatalogError::Storage(e.to_string()))?;
    let handle = WriterHandle::new(sender, thread);
    Ok((handle, ids))
}

/// Fails every batch queued behind one that failed: a later batch must not commit a cursor
/// past changes that never landed. Whoever sent them learns of the failure and resends from
/// the stored cursor. Returns the first job that is not a batch, to run next.
fn fail_queued_applies(jobs: &mpsc::Receiver<WriteJob>) -> Option<WriteJob> {
    while let Ok(job) = jobs.try_recv() {
        match job {
            WriteJob::Apply { reply, .. } => {
                let _ = reply.send(Err(CatalogError::Storage(
                    "not written: a batch queued before it failed".into(),
                )));
            }
            other => return Some(other),
        }
    }
    None
}

/// The first line of a store's message, at most 300 bytes: one log line per refusal, never the
/// refused row itself (PostgreSQL's detail lines quote it whole).
fn headline(message: &str) -> &str {
    let line = message.lines().next().unwrap_or_default();
    let mut end = line.len().min(300);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// Takes queued batches behind the first, up to the group size; returns the job that ended
/// the group, if it was not a batch.
fn gather(
    first: QueuedApply,
    jobs: &mpsc::Receiver<WriteJob>,
) -> (Vec<QueuedApply>, Option<WriteJob>) {
    let mut size = first.0.len();
    let mut group = vec![first];
    while size < GROUP_COMMIT_CHANGES {
        match jobs.try_recv() {
            Ok(WriteJob::Apply {
                changes,
                cursor,
                sync,
                reply,
            }) => {
                size += changes.len();
                group.push((changes, (cursor, sync), reply));
            }
            Ok(other) => return (group, Some(other)),
            Err(_) => break,
        }
    }
    (group, None)
}

impl<E: Engine> Writer<E> {
    fn run(mut self, jobs: mpsc::Receiver<WriteJob>) {
        let mut held: Option<WriteJob> = None;
        while let Some(job) = held.take().or_else(|| jobs.recv().ok()) {
            held = self.take(job, &jobs);
        }
    }

    /// Does one job (an apply with those queued behind it); the job it read past, if any.
    fn take(&mut self, job: WriteJob, jobs: &mpsc::Receiver<WriteJob>) -> Option<WriteJob> {
        match job {
            WriteJob::Apply {
                changes,
                cursor,
                sync,
                reply,
            } => return self.apply_queued((changes, (cursor, sync), reply), jobs),
            WriteJob::Replace {
                did,
                rev,
                records,
                applied_before,
                sync,
                reply,
            } => {
                let copy = (records, applied_before.as_slice());
                let _ = reply.send(self.replace_repository(&did, &rev, copy, &sync));
            }
            WriteJob::SyncRead { read } => read(&mut self.tx.engine),
            WriteJob::Account { did, status, reply } => {
                let _ = reply.send(self.account(&did, &status));
            }
            WriteJob::Takedown {
                subject,
                state,
                reply,
            } => {
                let _ = reply.send(self.takedown(&subject, state));
            }
            WriteJob::Labels { batch, reply } => {
                let _ = reply.send(self.labels(&batch));
            }
            WriteJob::ExpireLabels { now, reply } => {
                let _ = reply.send(self.expire_labels(now));
            }
            WriteJob::ForgetLabelers { keep, reply } => {
                let _ = reply.send(self.forget_labelers(&keep));
            }
            WriteJob::Heartbeat {
                keep_changes,
                reply,
            } => {
                let _ = reply.send(self.heartbeat(keep_changes));
            }
            WriteJob::BeginBulk { reply } => {
                let _ = reply.send(self.begin_bulk());
            }
            WriteJob::FinishBulk { cursor, reply } => {
                let _ = reply.send(self.finish_bulk(cursor));
            }
        }
        None
    }

    /// Applies `first` with the applies queued behind it, as one group; the job read past.
    fn apply_queued(
        &mut self,
        first: QueuedApply,
        jobs: &mpsc::Receiver<WriteJob>,
    ) -> Option<WriteJob> {
        let (group, next) = gather(first, jobs);
        if !self.apply_group(group) && next.is_none() {
            return fail_queued_applies(jobs);
        }
        next
    }

    /// The indexer's heartbeat, with the change stream trimmed to what is kept.
    fn heartbeat(&mut self, keep_changes: std::time::Duration) -> CatalogResult<()> {
        self.tx.run(|engine, _| {
            engine.heartbeat(UnixMillis::now(), keep_changes)?;
            Ok((Plan::default(), ()))
        })
    }

    /// Whether the group committed.
    fn apply_group(&mut self, group: Vec<QueuedApply>) -> bool {
        let changes: Vec<Queued<'_>> = group
            .iter()
            .enumerate()
            .flat_map(|(batch, (changes, _, _))| changes.iter().map(move |c| (batch, c)))
            .collect();
        let marks = Marks {
            cursors: group
                .iter()
                .filter_map(|(_, (cursor, _), _)| cursor.as_ref())
                .collect(),
            sync: group
                .iter()
                .map(|(_, (_, sync), _)| sync)
                .filter(|sync| !sync.is_empty())
                .collect(),
        };
        let mut reports = vec![ApplyReport::default(); group.len()];
        let outcome = if self.bulk.is_some() {
            self.attempt(&changes, &mut reports, |writer, part, _| writer.stage(part))
                .and_then(|()| self.commit_sync_beside_bulk(&marks.sync))
        } else {
            // The group and its cursors in one commit, unless the store refuses something.
            match self.commit(&changes, &marks, &mut reports) {
                Err(CatalogError::Refused { reason, message }) => self
                    .isolate(
                        &changes,
                        &mut reports,
                        (reason, message),
                        |writer, part, r| writer.commit(part, &Marks::default(), r),
                    )
                    .and_then(|()| self.commit_cursors(&marks, &mut reports)),
                outcome => outcome,
            }
        };
        drop(changes);
        match outcome {
            Ok(()) => {
                for ((_, _, reply), report) in group.into_iter().zip(reports) {
                    let _ = reply.send(Ok(report));
                }
                true
            }
            Err(error) => {
                for (_, _, reply) in group {
                    let _ = reply.send(Err(error.clone()));
                }
                false
            }
        }
    }

    /// Carries out `write` on the changes, isolating what the store refuses.
    fn attempt<'a>(
        &mut self,
        changes: &[Queued<'a>],
        reports: &mut [ApplyReport],
        write: Write<'a, E>,
    ) -> CatalogResult<()> {
        if changes.is_empty() {
            return Ok(());
        }
        match write(self, changes, reports) {
            Err(CatalogError::Refused { reason, message }) => {
                self.isolate(changes, reports, (reason, message), write)
            }
            outcome => outcome,
        }
    }

    /// The store refused `changes` as a whole: writes halves of them in arrival order (which
    /// leaves what one write would), down to each change it refuses, which is skipped, counted
    /// and logged, so that one bad change never holds back the good ones queued with it. Any
    /// other failure ends it.
    fn isolate<'a>(
        &mut self,
        changes: &[Queued<'a>],
        reports: &mut [ApplyReport],
        (reason, message): (Refusal, String),
        write: Write<'a, E>,
    ) -> CatalogResult<()> {
        if let [(batch, change)] = changes {
            reports[*batch].refused[reason as usize] += 1;
            tracing::warn!(
                reason = reason.label(),
                "the catalog refused a change, which is skipped: {}: {}",
                change.uri(),
                headline(&message)
            );
            return Ok(());
        }
        let (first, second) = changes.split_at(changes.len() / 2);
        self.attempt(first, reports, write)?;
        self.attempt(second, reports, write)
    }

    /// A cursor the store refuses is left where it was: the source resumes from an earlier
    /// one, and its events replay harmlessly.
    fn commit_cursors(
        &mut self,
        marks: &Marks<'_>,
        reports: &mut [ApplyReport],
    ) -> CatalogResult<()> {
        match self.commit(&[], marks, reports) {
            Err(CatalogError::Refused { reason, message }) => {
                tracing::warn!(
                    reason = reason.label(),
                    "the catalog refused a source's cursor, which is not stored: {}",
                    headline(&message)
                );
                Ok(())
            }
            outcome => outcome,
        }
    }

    /// During a bulk load the staged changes are out of sight and the cursor waits for the
    /// load to settle; the queue does not wait (a repository owed a read stays owed whatever
    /// becomes of the load), but heads do, since a load that does not settle empties the
    /// catalog and a head must never be ahead of it.
    fn commit_sync_beside_bulk(&mut self, sync: &[&SyncWrites]) -> CatalogResult<()> {
        let kept: Vec<SyncWrites> = sync.iter().map(|sync| sync.without_heads()).collect();
        let marks = Marks {
            cursors: Vec::new(),
            sync: kept.iter().filter(|sync| !sync.is_empty()).collect(),
        };
        if marks.sync.is_empty() {
            return Ok(());
        }
        self.commit(&[], &marks, &mut [])
    }

    /// Commits changes, cursors and what they say of the repositories' synchronisation in
    /// one transaction; what each batch did is added to its report once committed.
    fn commit(
        &mut self,
        changes: &[Queued<'_>],
        marks: &Marks<'_>,
        reports: &mut [ApplyReport],
    ) -> CatalogResult<()> {
        let batches = reports.len();
        let done = self.tx.run(|engine, filing| {
            let (mut plan, done) = plan_group(engine, filing, changes, batches)?;
            plan.cursors.extend_from_slice(&marks.cursors);
            plan.sync.extend_from_slice(&marks.sync);
            engine.write(&plan)?;
            Ok((plan, done))
        })?;
        for (report, done) in reports.iter_mut().zip(&done) {
            report.add(done);
        }
        Ok(())
    }

    /// An account's change; one the store refuses is skipped and logged. Whether the
    /// account was hidden before.
    fn account(&mut self, did: &Did, status: &AccountStatus) -> CatalogResult<bool> {
        match self.set_account(did, status) {
            Err(CatalogError::Refused { reason, message }) => {
                tracing::warn!(
                    reason = reason.label(),
                    "the catalog refused the change of account {did}, which is skipped: {}",
                    headline(&message)
                );
                Ok(false)
            }
            outcome => outcome,
        }
    }

    fn takedown(&mut self, subject: &Subject, state: TakedownState) -> CatalogResult<bool> {
        if self.bulk.is_some() {
            return Err(CatalogError::Storage(
                "a takedown cannot join a bulk load".into(),
            ));
        }
        let words = takedowns::operator_word(&self.tx.filing.taken_down, subject, state);
        takedowns::set_takedown(&mut self.tx, subject, &words)
    }

    fn labels(&mut self, batch: &LabelBatch) -> CatalogResult<LabelReport> {
        self.refuse_in_bulk("labels")?;
        labels::apply_labels(&mut self.tx, &mut self.label_allowances, batch)
    }

    fn expire_labels(&mut self, now: UnixMillis) -> CatalogResult<usize> {
        self.refuse_in_bulk("expired labels")?;
        let swept = labels::expire_labels(&mut self.tx, now)?;
        if swept > 0 {
            // What the sweep removed is given back: each labeler's count is read again.
            self.label_allowances = Default::default();
        }
        Ok(swept)
    }

    fn forget_labelers(&mut self, keep: &[svc_syntax::Did]) -> CatalogResult<Vec<String>> {
        self.refuse_in_bulk("forgetting labelers")?;
        let gone = labels::forget_labelers(&mut self.tx, keep)?;
        gone.iter()
            .for_each(|src| self.label_allowances.forget(src));
        Ok(gone)
    }

    /// Refuses what cannot join a bulk load, which files nothing until it settles.
    fn refuse_in_bulk(&self, what: &str) -> CatalogResult<()> {
        match self.bulk {
            Some(_) => Err(CatalogError::Storage(format!(
                "{what} wait for the bulk load under way"
            ))),
            None => Ok(()),
        }
    }

    fn set_account(&mut self, did: &Did, status: &AccountStatus) -> CatalogResult<bool> {
        if self.bulk.is_some() {
            return Err(CatalogError::Storage(
                "an account change cannot join a bulk load".into(),
            ));
        }
        accounts::set_account(&mut self.tx, did, status)
    }

    /// The repository's live records neither among `records` nor `applied_before` (the
    /// copy's records applied in earlier batches) are deleted at `rev`, in the same commit as
    /// `records`.
    fn replace_repository(
        &mut self,
        did: &Did,
        rev: &Tid,
        (mut records, applied_before): (Vec<Change>, &[AtUri]),
        sync: &SyncWrites,
    ) -> CatalogResult<ApplyReport> {
        if self.bulk.is_some() {
            return Err(CatalogError::Storage(
                "a repository cannot be replaced during a bulk load".into(),
            ));
        }
        let live = self
            .tx
            .run(|engine, _| Ok((Plan::default(), engine.repository(did.as_str())?)))?;
        let kept: HashSet<&str> = records
            .iter()
            .map(Change::uri)
            .chain(applied_before.iter().map(AtUri::as_str))
            .collect();
        let gone: Vec<Change> = live
            .into_iter()
            .filter(|filed| !kept.contains(filed.uri.as_str()))
            .filter_map(|filed| {
                Some(Change::Delete {
                    uri: AtUri::new(&filed.uri).ok()?,
                    collection: Nsid::new(&filed.collection).ok()?,
                    rev: rev.clone(),
                })
            })
            .collect();
        records.extend(gone);
        let queued: Vec<Queued<'_>> = records.iter().map(|change| (0, change)).collect();
        let mut reports = [ApplyReport::default()];
        let marks = Marks {
            cursors: Vec::new(),
            sync: vec![sync],
        };
        // One commit, unless the store refuses a record: then the others still go in, and
        // the repository leaves the queue after them.
        match self.commit(&queued, &marks, &mut reports) {
            Err(CatalogError::Refused { reason, message }) => {
                self.isolate(
                    &queued,
                    &mut reports,
                    (reason, message),
                    |writer, part, r| writer.commit(part, &Marks::default(), r),
                )?;
                self.commit(&[], &marks, &mut reports)?;
            }
            outcome => outcome?,
        }
        let [report] = reports;
        Ok(report)
    }

    fn begin_bulk(&mut self) -> CatalogResult<bool> {
        if self.bulk.is_none() {
            self.bulk = BulkLoad::begin(&mut self.tx)?;
        }
        Ok(self.bulk.is_some())
    }

    fn stage(&mut self, changes: &[Queued<'_>]) -> CatalogResult<()> {
        let Some(load) = self.bulk.as_mut() else {
            return Err(CatalogError::Storage("no bulk load under way".into()));
        };
        load.stage(&mut self.tx.engine, changes)
    }

    /// Settles the bulk load under way, if any; every answer may have changed.
    fn finish_bulk(&mut self, cursor: Option<CursorPosition>) -> CatalogResult<ApplyReport> {
        let outcome = match self.bulk.take() {
            Some(load) => load.finish(&mut self.tx, cursor),
            None => Ok(ApplyReport::default()),
        };
        if outcome.is_ok() {
            self.tx.clock.touch_all();
        }
        outcome
    }
}
