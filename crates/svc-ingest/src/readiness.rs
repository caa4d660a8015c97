//! Whether the catalog has caught up (CONTRACT "Caught up"): open, imports and backfill done,
//! and the live source (when there is one) current.

use crate::firehose::LiveStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Debug)]
pub struct Readiness {
    imports_done: AtomicBool,
    backfill_done: AtomicBool,
    live: Option<(Arc<LiveStatus>, Duration)>,
}

impl Readiness {
    /// `live`: the live source's status and the lag it may have; `backfill`: whether a
    /// backfill must finish first.
    pub fn new(live: Option<(Arc<LiveStatus>, Duration)>, backfill: bool) -> Readiness {
        Readiness {
            imports_done: AtomicBool::new(false),
            backfill_done: AtomicBool::new(!backfill),
            live,
        }
    }

    pub fn imports_finished(&self) {
        self.imports_done.store(true, Ordering::Release);
    }

    pub fn backfill_finished(&self) {
        self.backfill_done.store(true, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.imports_done.load(Ordering::Acquire)
            && self.backfill_done.load(Ordering::Acquire)
            && self
                .live
                .as_ref()
                .is_none_or(|(status, lag)| status.caught_up(*lag))
    }
}
