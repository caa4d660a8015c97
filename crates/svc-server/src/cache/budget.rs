//! What the cache may hold, drawn from its capacity in bytes, and what each thing it holds is
//! charged: keys, entries and the hash tables around them.

use super::{Answer, CacheKey};

/// The longest key, in bytes of its text and its cursor's position, an answer is kept under.
/// Index keys are at most 512 bytes (longer ones are looked up by their digest) and a cursor
/// holds one record's uri, about a hundred bytes, so every real key fits, long DIDs and record
/// keys too. A longer one comes from an unusual or hostile request, which is answered without
/// being kept: a key then never costs the budget more than a small answer does, and a stream
/// of distinct long keys (cursors of any text) cannot fill the cache with keys.
pub(crate) const MAX_KEY_BYTES: usize = 1024;

/// What an allocator may add to an allocation: its header and the rounding to a size class.
pub(super) const ALLOCATION_SLACK: usize = 16;

/// What an entry holds beyond its key's text, its answer's bytes and its slot in the map: the
/// key's and the answer's shared allocations, and the header a body's bytes get when they are
/// first sent.
pub(super) const ENTRY_OVERHEAD: usize =
    (2 * size_of::<usize>() + size_of::<CacheKey>() + ALLOCATION_SLACK)
        + (2 * size_of::<usize>() + size_of::<Answer>() + ALLOCATION_SLACK)
        + (4 * size_of::<usize>() + ALLOCATION_SLACK);

/// The share of the budget ghosts may take.
pub(super) const GHOST_SHARE: usize = 32;

/// The share of the budget expanded forms may take.
pub(super) const EXPANDED_SHARE: usize = 32;

/// The cache's limits, all drawn from its capacity in bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    /// Everything held ([`Inner::held`]), at most.
    pub bytes: usize,
    /// The dearest entry kept: a sixteenth, so that a few huge answers cannot keep evicting
    /// everything else.
    pub largest_entry: usize,
    /// The small queue's share; beyond it, the small queue gives up entries first.
    pub small: usize,
    /// The expanded forms' share.
    pub expanded: usize,
    /// Slots for ghosts: the largest power of two whose fingerprints fit the ghosts' share.
    pub ghost_slots: usize,
}

impl Budget {
    pub fn new(bytes: usize) -> Budget {
        let fingerprints = bytes / GHOST_SHARE / size_of::<u64>();
        Budget {
            bytes,
            largest_entry: bytes / 16,
            small: bytes / 10,
            expanded: bytes / EXPANDED_SHARE,
            ghost_slots: match fingerprints {
                0 => 0,
                n => 1 << n.ilog2(),
            },
        }
    }
}

/// The bytes a hash table of std's kind takes, at most, having held `items` entries of `slot`
/// bytes: its slots are a power of two with a control byte each (and a group's width more),
/// and it doubles only when more than half of what it holds (7/8 of its slots) is live, so it
/// never has 32/7 slots or more for each entry it has held at once.
pub(super) fn table_bytes(items: usize, slot: usize) -> usize {
    if items == 0 {
        return 0;
    }
    let slots = 1usize << (items.saturating_mul(32) / 7).max(16).ilog2();
    slots.saturating_mul(slot + 1) + 16 + ALLOCATION_SLACK
}

/// The heap bytes of a key's own text, as allocated (the query's name is shared with the
/// specification).
pub(super) fn key_bytes(key: &CacheKey) -> usize {
    let text = |capacity: usize| match capacity {
        0 => 0,
        n => n + ALLOCATION_SLACK,
    };
    let after = key.page.as_ref().and_then(|page| page.after.as_ref());
    text(key.key.capacity()) + text(after.map_or(0, String::capacity))
}

/// The length a key is limited by ([`MAX_KEY_BYTES`]).
pub(super) fn key_len(key: &CacheKey) -> usize {
    let after = key.page.as_ref().and_then(|page| page.after.as_ref());
    key.key.len() + after.map_or(0, String::len)
}
