//! Whether the catalog has caught up (CONTRACT "Caught up"): open, imports and backfill done,
//! the live source (when there is one) current, and writes to the catalog succeeding. When it
//! has not, why not, for `/readyz`.

use crate::firehose::LiveStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The last failure to write to the catalog, until a write succeeds again. Shared by every
/// source, which waits and retries meanwhile (a full disk is survived, not fatal).
#[derive(Debug, Default)]
pub struct WriteHealth {
    failure: Mutex<Option<String>>,
    failing: AtomicBool,
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
}

#[derive(Debug)]
pub struct Readiness {
    imports_done: AtomicBool,
    backfill_done: AtomicBool,
    live: Option<(Arc<LiveStatus>, Duration)>,
    writes: Arc<WriteHealth>,
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

    /// Why the catalog is not caught up, or `None` when it is.
    pub fn not_ready_because(&self) -> Option<String> {
        if let Some(failure) = self.writes.failure() {
            return Some(format!("catalog writes are failing, retrying: {failure}"));
        }
        if !self.imports_done.load(Ordering::Acquire) {
            return Some("importing".into());
        }
        if !self.backfill_done.load(Ordering::Acquire) {
            return Some("backfilling".into());
        }
        match &self.live {
            Some((status, lag)) if !status.caught_up(*lag) => Some(status.lagging_because()),
            _ => None,
        }
    }
}
