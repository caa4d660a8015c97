//! Whether the catalog has caught up (CONTRACT "Caught up"): open, imports and backfill done,
//! and the live source (when there is one) current.

use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug)]
pub struct Readiness {
    imports_done: AtomicBool,
    has_live_source: bool,
    live_caught_up: AtomicBool,
}

impl Readiness {
    pub fn new(has_live_source: bool) -> Readiness {
        Readiness {
            imports_done: AtomicBool::new(false),
            has_live_source,
            live_caught_up: AtomicBool::new(false),
        }
    }

    pub fn imports_finished(&self) {
        self.imports_done.store(true, Ordering::Release);
    }

    pub fn set_live_caught_up(&self, caught_up: bool) {
        self.live_caught_up.store(caught_up, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.imports_done.load(Ordering::Acquire)
            && (!self.has_live_source || self.live_caught_up.load(Ordering::Acquire))
    }
}
