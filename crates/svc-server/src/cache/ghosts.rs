//! The ghosts of S3-FIFO: fingerprints of keys recently evicted from the small queue, so that
//! an answer asked for again goes straight to the main queue. A table of fixed size: a ghost
//! costs 8 bytes whatever its key.

use super::CacheKey;
use super::budget::ALLOCATION_SLACK;
use std::hash::{BuildHasher, RandomState};

/// Fingerprints of evicted keys, one a slot, the slot chosen by the fingerprint's low bits (a
/// newer ghost takes the place of one that shares its slot). Each slot holds the
/// fingerprint's high bits and the ghost's sequence number; a ghost is remembered while fewer
/// than `window` ghosts are newer. A fingerprint that matches by chance, one in 2^40, only
/// sends an answer to the main queue.
#[derive(Default)]
pub(super) struct Ghosts {
    slots: Vec<u64>,
    /// The next ghost's sequence number.
    next: u64,
    hasher: RandomState,
}

const GHOST_SEQUENCE_BITS: u32 = 24;
const GHOST_SEQUENCE: u64 = (1 << GHOST_SEQUENCE_BITS) - 1;

impl Ghosts {
    pub fn fingerprint(&self, key: &CacheKey) -> u64 {
        self.hasher.hash_one(key)
    }

    fn slot(&self, fingerprint: u64) -> Option<usize> {
        match self.slots.len() {
            0 => None,
            n => Some(fingerprint as usize & (n - 1)),
        }
    }

    /// Remembers a key, in `slots` slots (allocated now if they are not yet).
    pub fn remember(&mut self, fingerprint: u64, slots: usize) {
        if self.slots.is_empty() && slots > 0 {
            self.slots = vec![0; slots];
        }
        let Some(slot) = self.slot(fingerprint) else {
            return;
        };
        self.slots[slot] = (fingerprint & !GHOST_SEQUENCE) | (self.next & GHOST_SEQUENCE);
        self.next += 1;
    }

    /// Whether the key is remembered among the `window` newest ghosts; it is forgotten now.
    pub fn take(&mut self, fingerprint: u64, window: usize) -> bool {
        let Some(slot) = self.slot(fingerprint) else {
            return false;
        };
        let held = self.slots[slot];
        let age = self.next.wrapping_sub(held) & GHOST_SEQUENCE;
        let found = held != 0
            && held & !GHOST_SEQUENCE == fingerprint & !GHOST_SEQUENCE
            && age < (window as u64).min(GHOST_SEQUENCE);
        if found {
            self.slots[slot] = 0;
        }
        found
    }

    /// Slots allocated.
    #[cfg(test)]
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    pub fn bytes(&self) -> usize {
        match self.slots.capacity() {
            0 => 0,
            n => n * size_of::<u64>() + ALLOCATION_SLACK,
        }
    }
}
