//! Whether the catalog has caught up: open, imports and backfill done,
//! the live source (when there is one) current, and writes to the catalog succeeding. When it
//! has not, why not, for `/readyz`.

use crate::firehose::LiveStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The last failure to write to the catalog, until a write succeeds again. Shared by every
/// source, which waits and retries meanwhile (a full disk is survived, not fatal). It also
/// carries the backfill's skipped repositories: this is what every source and readiness
/// already share, through the [`Ingestor`](crate::Ingestor).
#[derive(Debug, Default)]
pub struct WriteHealth {
    failure: Mutex<Option<String>>,
    failing: AtomicBool,
    backfill_skips: BackfillSkips,
}

/// Repositories the backfill could not read and skipped: how many, and the first few by name.
/// `/readyz` names them while the backfill runs; the backfill's last log line names them too.
/// Once it ends the catalog is ready: a peer that failed will not be asked again, and
/// the live stream brings those repositories' new records as for any other.
#[derive(Debug, Default)]
pub struct BackfillSkips {
    skipped: Mutex<(u64, Vec<String>)>,
}

impl BackfillSkips {
    /// How many skipped repositories are named; the rest are counted.
    const NAMED: usize = 5;

    pub fn clear(&self) {
        if let Ok(mut skipped) = self.skipped.lock() {
            *skipped = (0, Vec::new());
        }
    }

    pub fn skipped(&self, did: &str) {
        if let Ok(mut skipped) = self.skipped.lock() {
            skipped.0 += 1;
            if skipped.1.len() < Self::NAMED {
                skipped.1.push(did.to_string());
            }
        }
    }

    /// `3 repositories skipped: did:plc:a, did:plc:b, did:plc:c`, or `None` when none was.
    pub fn describe(&self) -> Option<String> {
        let skipped = self.skipped.lock().ok()?;
        let (count, named) = &*skipped;
        if *count == 0 {
            return None;
        }
        let more = if *count > named.len() as u64 {
            ", …"
        } else {
            ""
        };
        let noun = if *count == 1 {
            "repository"
        } else {
            "repositories"
        };
        Some(format!(
            "{count} {noun} skipped: {}{more}",
            named.join(", ")
        ))
    }
}

impl WriteHealth {
    pub fn failed(&self, reason: String) {
        if let Ok(mut failure) = self.failure.lock() {
            *failure = Some(reason);
        }
        self.failing.store(true, Ordering::Release);
    }

    pub fn succeeded(&self) {
        // The common case costs one atomic load.
        if self.failing.swap(false, Ordering::AcqRel)
            && let Ok(mut failure) = self.failure.lock()
        {
            *failure = None;
        }
    }

    pub fn failure(&self) -> Option<String> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        self.failure.lock().ok().and_then(|f| f.clone())
    }

    pub fn backfill_skips(&self) -> &BackfillSkips {
        &self.backfill_skips
    }
}

#[derive(Debug)]
pub struct Readiness {
    imports_done: AtomicBool,
    backfill_done: AtomicBool,
    live: Option<(Arc<LiveStatus>, Duration)>,
    writes: Arc<WriteHealth>,
    /// The repositories owed a whole read, when something reads them.
    resync: Option<Arc<crate::ResyncProgress>>,
}

impl Readiness {
    /// `live`: the live source's status and the lag it may have; `backfill`: whether a
    /// backfill must finish first.
    pub fn new(
        live: Option<(Arc<LiveStatus>, Duration)>,
        backfill: bool,
        writes: Arc<WriteHealth>,
    ) -> Readiness {
        Readiness {
            imports_done: AtomicBool::new(false),
            backfill_done: AtomicBool::new(!backfill),
            live,
            writes,
            resync: None,
        }
    }

    /// Notes what the resynchronisation queue waits for.
    pub fn with_resync(self, progress: Arc<crate::ResyncProgress>) -> Readiness {
        Readiness {
            resync: Some(progress),
            ..self
        }
    }

    pub fn imports_finished(&self) {
        self.imports_done.store(true, Ordering::Release);
    }

    pub fn backfill_finished(&self) {
        self.backfill_done.store(true, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.not_ready_because().is_none()
    }

    /// What `/readyz` says beside readiness: that the live source is not verified, and how
    /// many repositories wait to be read whole, since when and why.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .live
            .as_ref()
            .map(|(status, _)| status.notes())
            .unwrap_or_default();
        notes.extend(self.resync.iter().flat_map(|progress| progress.notes()));
        notes
    }

    /// Why the catalog is not caught up, or `None` when it is.
    pub fn not_ready_because(&self) -> Option<String> {
        if let Some(failure) = self.writes.failure() {
            return Some(format!("catalog writes are failing, retrying: {failure}"));
        }
        if !self.imports_done.load(Ordering::Acquire) {
            return Some("importing".into());
        }
        if !self.backfill_done.load(Ordering::Acquire) {
            return Some(match self.writes.backfill_skips().describe() {
                Some(skipped) => format!("backfilling ({skipped})"),
                None => "backfilling".into(),
            });
        }
        match &self.live {
            Some((status, lag)) if !status.caught_up(*lag) => Some(status.lagging_because()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_repositories_are_named_while_the_backfill_runs_and_never_hold_readiness() {
        let writes = Arc::new(WriteHealth::default());
        let readiness = Readiness::new(None, true, Arc::clone(&writes));
        readiness.imports_finished();
        assert_eq!(
            readiness.not_ready_because().as_deref(),
            Some("backfilling")
        );
        writes.backfill_skips().skipped("did:plc:a");
        assert_eq!(
            readiness.not_ready_because().as_deref(),
            Some("backfilling (1 repository skipped: did:plc:a)")
        );
        for n in 0..6 {
            writes.backfill_skips().skipped(&format!("did:plc:n{n}"));
        }
        assert_eq!(
            readiness.not_ready_because().as_deref(),
            Some(
                "backfilling (7 repositories skipped: did:plc:a, did:plc:n0, did:plc:n1, \
                 did:plc:n2, did:plc:n3, …)"
            )
        );
        readiness.backfill_finished();
        assert!(readiness.is_ready());
    }
}
