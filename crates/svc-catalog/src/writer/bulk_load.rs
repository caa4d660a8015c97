//! Bulk loads into an empty catalog: changes are staged in arrival order, invisible, and
//! settled in one transaction at the end, where the engine builds its indexes in one pass.
//! The outcome equals that of applying them one by one: a uri's changes take effect in
//! arrival order, and a change older than the standing revision is stale. If a bulk load is
//! interrupted, the catalog (empty before it began) is emptied again at the next start.

use super::transactions::Transactions;
use crate::engine::{Engine, Plan, StagedVersion};
use crate::replication_log::LogEntry;
use crate::rules::Queued;
use crate::stream::StreamEntry;
use crate::{ApplyReport, CatalogError, CatalogResult, Change, CursorPosition};
use std::collections::BTreeMap;

/// What a bulk load under way has staged so far.
#[derive(Default)]
pub(super) struct BulkLoad {
    staged: u64,
    /// Upserts per collection: the kind counts if no uri came twice.
    kinds: BTreeMap<String, i64>,
}

impl BulkLoad {
    /// A bulk load, if the catalog holds nothing at all (not even tombstones), no account is
    /// inactive and nothing is taken down (their records must be filed one by one, hidden or
    /// not).
    pub fn begin<E: Engine>(tx: &mut Transactions<E>) -> CatalogResult<Option<BulkLoad>> {
        let hidden = !tx.filing.inactive.is_empty() || !tx.filing.taken_down.is_empty();
        if hidden || !tx.engine.is_empty()? {
            return Ok(None);
        }
        tx.engine.begin_bulk()?;
        Ok(Some(BulkLoad::default()))
    }

    /// Stages changes; nothing is visible in any answer until the load settles, and the
    /// reports stay empty until then.
    pub fn stage(&mut self, engine: &mut dyn Engine, changes: &[Queued<'_>]) -> CatalogResult<()> {
        let staging: Vec<&Change> = changes.iter().map(|(_, change)| *change).collect();
        engine.stage(&staging)?;
        // Counted once committed: a failed stage stages nothing. What was staged is reported
        // when the load settles.
        for change in staging {
            self.staged += 1;
            if let Change::Upsert(u) = change {
                *self.kinds.entry(u.collection.to_string()).or_default() += 1;
            }
        }
        Ok(())
    }

    /// Settles the staged changes in one transaction, with the final cursor.
    pub fn finish<E: Engine>(
        self,
        tx: &mut Transactions<E>,
        cursor: Option<CursorPosition>,
    ) -> CatalogResult<ApplyReport> {
        let started = std::time::Instant::now();
        let staged = self.staged;
        tx.engine.begin()?;
        let outcome = settle(&mut tx.engine, self, cursor.as_ref()).and_then(|report| {
            tx.log(&LogEntry::everything())?;
            // The loaded records are not streamed one by one: readers are told to read again.
            tx.engine.stream(tx.next_change, &[StreamEntry::gap()])?;
            tx.engine.commit()?;
            tx.next_seq += 1;
            tx.next_change += 1;
            Ok(report)
        });
        if outcome.is_err() {
            tx.engine.rollback();
        }
        let ended = tx.engine.end_bulk(outcome.is_ok());
        if outcome.is_err() {
            tx.engine.recover_bulk()?;
        }
        let report = outcome?;
        ended?;
        tracing::info!(
            staged,
            applied = report.applied,
            stale = report.stale,
            "bulk load settled in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        Ok(report)
    }
}

fn settle<E: Engine>(
    engine: &mut E,
    load: BulkLoad,
    cursor: Option<&CursorPosition>,
) -> CatalogResult<ApplyReport> {
    // Most loads hold each uri once: then every staged row stands, and the pass over each
    // uri's versions is skipped.
    let (report, kinds) = if engine.staged_unique()? {
        let report = ApplyReport {
            applied: load.staged,
            ..ApplyReport::default()
        };
        (report, load.kinds)
    } else {
        let settled = settle_versions(&engine.staged_versions()?);
        engine.remove_staged(&settled.superseded)?;
        if !engine.staged_unique()? {
            return Err(CatalogError::Storage(
                "a uri still has two versions after settling".into(),
            ));
        }
        (settled.report, settled.kinds)
    };
    engine.index_staged(&kinds)?;
    if let Some(cursor) = cursor {
        let plan = Plan {
            cursors: vec![cursor],
            ..Default::default()
        };
        engine.write(&plan)?;
    }
    Ok(report)
}

struct Settled {
    report: ApplyReport,
    /// Standing records per collection.
    kinds: BTreeMap<String, i64>,
    /// Staged rows that do not stand.
    superseded: Vec<i64>,
}

/// Settles each uri's versions in arrival order: a version applies when its rev is not older
/// than the one standing; the last applied one stays, the others go.
fn settle_versions(versions: &[StagedVersion]) -> Settled {
    let mut settled = Settled {
        report: ApplyReport::default(),
        kinds: BTreeMap::new(),
        superseded: Vec::new(),
    };
    let mut standing: Option<&StagedVersion> = None;
    let stand = |settled: &mut Settled, version: Option<&StagedVersion>| {
        if let Some(v) = version.filter(|v| v.live) {
            *settled.kinds.entry(v.collection.clone()).or_default() += 1;
        }
    };
    for version in versions {
        match standing {
            Some(current) if current.uri == version.uri => {
                if version.rev >= current.rev {
                    settled.superseded.push(current.row);
                    standing = Some(version);
                    settled.report.applied += 1;
                } else {
                    settled.superseded.push(version.row);
                    settled.report.stale += 1;
                }
            }
            _ => {
                stand(&mut settled, standing);
                standing = Some(version);
                settled.report.applied += 1;
            }
        }
    }
    stand(&mut settled, standing);
    settled
}
