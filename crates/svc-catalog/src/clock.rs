//! Change clocks that let readers cache answers safely: every committed change bumps the slot
//! of each (query, key) it touched, and the kinds clock when per-kind counts moved. A cached
//! answer is valid while its slot still shows the version read before the answer was built.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use svc_spec::QueryId;

const SLOTS: usize = 1 << 16;

#[derive(Debug)]
pub struct ChangeClock {
    slots: Box<[AtomicU64]>,
    kinds: AtomicU64,
    /// Moves with every commit that wrote a record or changed what is out of sight: what
    /// search answers are cached against.
    search: AtomicU64,
    /// Moves with every touch: whether anything at all changed.
    ticks: AtomicU64,
}

impl Default for ChangeClock {
    fn default() -> Self {
        ChangeClock {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            kinds: AtomicU64::new(0),
            search: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
        }
    }
}

/// The key of each query's own slot, which moves with any of its keys: no stored key holds a
/// NUL (such a key is stored as its digest).
const ANY_KEY: &str = "\0";

fn slot(query: &QueryId, key: &str) -> usize {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    query.hash(&mut hasher);
    key.hash(&mut hasher);
    hasher.finish() as usize % SLOTS
}

impl ChangeClock {
    /// The version of one (query, key); read it before reading the catalog.
    pub fn key_version(&self, query: &QueryId, key: &str) -> u64 {
        self.slots[slot(query, key)].load(Ordering::Acquire)
    }

    /// The version of a whole query: it moves with any of its keys (and, as slots are
    /// shared, sometimes with others).
    pub fn query_version(&self, query: &QueryId) -> u64 {
        self.key_version(query, ANY_KEY)
    }

    pub fn search_version(&self) -> u64 {
        self.search.load(Ordering::Acquire)
    }

    pub fn touch_search(&self) {
        self.search.fetch_add(1, Ordering::AcqRel);
        self.ticks.fetch_add(1, Ordering::AcqRel);
    }

    pub fn kinds_version(&self) -> u64 {
        self.kinds.load(Ordering::Acquire)
    }

    /// Moves whenever anything is touched.
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Acquire)
    }

    /// Call after the change is committed: each key's slot moves, and each query's own
    /// slot once.
    pub fn touch_keys(&self, keys: &svc_spec::IndexKeys) {
        let mut last: Option<&QueryId> = None;
        for (query, key) in keys {
            self.slots[slot(query, key)].fetch_add(1, Ordering::AcqRel);
            // In (query, key) order: a query's keys come together.
            if last != Some(query) {
                self.slots[slot(query, ANY_KEY)].fetch_add(1, Ordering::AcqRel);
                last = Some(query);
            }
        }
        if !keys.is_empty() {
            self.ticks.fetch_add(1, Ordering::AcqRel);
        }
    }

    pub fn touch_kinds(&self) {
        self.kinds.fetch_add(1, Ordering::AcqRel);
        self.ticks.fetch_add(1, Ordering::AcqRel);
    }

    /// Invalidates everything (a change whose keys are not known).
    pub fn touch_all(&self) {
        for s in self.slots.iter() {
            s.fetch_add(1, Ordering::AcqRel);
        }
        self.touch_search();
        self.touch_kinds();
    }
}
