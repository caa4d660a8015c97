//! A verified copy of a whole repository made the catalog's records of it, a batch at a time:
//! each batch's records are turned into changes only when its turn comes, so a large
//! repository never has all its records in memory at once, and the batches are spaced so
//! that the change stream's subscribers keep up with what a copy changes. The last batch
//! replaces the repository: what the catalog holds of it beyond the copy is deleted then.
//! Between batches a reader can see part of the copy applied; each record is at the copy's
//! revision or newer throughout.

use crate::event::CommitEvent;
use crate::ingest::{Ingestor, Prepared};
use crate::repository_verify::VerifiedRepository;
use std::time::Duration;
use svc_catalog::{ApplyReport, CatalogError, CatalogWrite, Change, SyncWrites};

/// A copy's records applied per second at most, past its first batch.
const RECORDS_PER_SECOND: f64 = 20_000.0;

/// What applying a copy did.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    pub report: ApplyReport,
    /// Records of the catalog's collections the copy holds.
    pub records: u64,
    /// Of them, those that are not valid records of their kind.
    pub invalid: u64,
}

/// Makes the catalog's records of `repository` those it proves; `sync` is written with the
/// last batch.
pub(crate) async fn apply_whole(
    catalog: &dyn CatalogWrite,
    ingestor: &Ingestor,
    repository: &VerifiedRepository,
    sync: SyncWrites,
) -> Result<Applied, CatalogError> {
    let mut batches = repository.batches().peekable();
    let mut applied_before = Vec::new();
    let mut applied = Applied::default();
    loop {
        let batch = batches.next().unwrap_or_default();
        let size = batch.len();
        let changes = prepare(ingestor, batch, &mut applied);
        if batches.peek().is_none() {
            let report = catalog
                .replace_repository(
                    repository.did.clone(),
                    repository.rev.clone(),
                    changes,
                    applied_before,
                    sync,
                )
                .await?;
            applied.report.add(&report);
            return Ok(applied);
        }
        applied_before.extend(changes.iter().filter_map(|change| match change {
            Change::Upsert(upsert) => Some(upsert.uri.clone()),
            Change::Delete { .. } => None,
        }));
        let report = catalog.apply(changes, None).await?;
        applied.report.add(&report);
        tokio::time::sleep(Duration::from_secs_f64(size as f64 / RECORDS_PER_SECOND)).await;
    }
}

fn prepare(ingestor: &Ingestor, batch: Vec<CommitEvent>, applied: &mut Applied) -> Vec<Change> {
    applied.records += batch.len() as u64;
    let mut changes = Vec::with_capacity(batch.len());
    for record in batch {
        match ingestor.prepare(record) {
            Prepared::Change(change) => changes.push(change),
            Prepared::Invalid => applied.invalid += 1,
            Prepared::Ignored => {}
        }
    }
    changes
}
