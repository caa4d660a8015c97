//! Encoded answers kept for reuse. An entry records the catalog's change-clock version read
//! before its answer was built, and serves only while that version is current, so a cached
//! answer is never older than the catalog. Bounded in bytes, it evicts as S3-FIFO does: a new
//! answer enters a small queue and leaves it soon unless asked for again, so the many answers
//! asked for once (deep pages, rare keys) cannot push out the ones asked for often; those move
//! to the main queue, where each hit buys an entry another pass.
//! Answers of 1 KiB or more are kept LZ4-compressed, so the budget holds three times as many;
//! the hottest also keep their expanded form (charged to the budget, at most a thirty-second of it),
//! so that the answers asked for most are not expanded on every request.
//! An entry also keeps its gzip form once a client that accepts gzip has asked for it, so
//! an answer is compressed once, not once per request. Concurrent misses on one key and
//! version share one build (`flights.rs`).
//!
//! The budget bounds everything the cache holds, not only answers. The bound, `Inner::held()
//! <= capacity` whenever the cache's lock is free, counts: for each entry its key's text, its
//! answer's bytes (as allocated: buffers are cut to their length before they are kept, and a
//! gzip form has room reserved before it exists) and a fixed amount for its allocations; the
//! map at the most its table can have grown to for the entries it has held since it was last
//! compacted, and the queues at their capacity; and the ghosts, 64-bit fingerprints in a table
//! of fixed size, a thirty-second of the budget at most. Room for a new entry is made before it
//! goes in, so the one moment beyond the bound is a table or queue growing inside an insert
//! (its old and new allocations both live while it is copied). A key longer than
//! `MAX_KEY_BYTES`, or an entry dearer than a sixteenth of the budget, is answered but never
//! kept (what each thing is charged: `budget.rs`; the ghosts: `ghosts.rs`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use svc_catalog::PageRequest;

mod budget;
mod flights;
mod forms;
mod ghosts;

pub(crate) use budget::MAX_KEY_BYTES;
use budget::{ALLOCATION_SLACK, Budget, ENTRY_OVERHEAD, key_bytes, key_len, table_bytes};
use flights::Flights;
pub(crate) use flights::Ticket;
pub(crate) use forms::{Answer, compress};
use ghosts::Ghosts;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    pub query: svc_spec::QueryId,
    pub key: String,
    /// The page, for list answers.
    pub page: Option<PageRequest>,
}

pub(crate) struct ResponseCache {
    budget: Budget,
    inner: Mutex<Inner>,
    flights: Flights,
}

/// Hits an entry can bank against eviction from the main queue.
const MOST_HITS: u8 = 3;

struct Entry {
    version: u64,
    answer: Arc<Answer>,
    /// What the entry is charged against the budget: its key's text, its answer and the
    /// allocations holding them.
    cost: usize,
    hits: u8,
    in_main: bool,
    /// Bytes of `cost` reserved for the answer's expanded form (0: none kept).
    expanded: usize,
}

/// Every entry has exactly one place in one queue: entries leave only when their place is
/// taken from the queue's front, and a newer answer for a kept key keeps the old one's place.
/// A key is allocated once and shared by the map and its queue.
#[derive(Default)]
struct Inner {
    entries: HashMap<Arc<CacheKey>, Entry>,
    small: VecDeque<Arc<CacheKey>>,
    main: VecDeque<Arc<CacheKey>>,
    small_bytes: usize,
    main_bytes: usize,
    /// The most entries the map has held since it was last compacted: its table is sized for
    /// them.
    peak_entries: usize,
    /// Keys recently evicted from the small queue, asked for again, go straight to main.
    /// They are remembered by fingerprint, so a ghost costs 8 bytes whatever its key, in a
    /// table of fixed size: `Budget::ghost_slots`, allocated at the first ghost.
    ghosts: Ghosts,
    /// Bytes reserved for expanded forms, across entries.
    expanded_bytes: usize,
}

impl Inner {
    /// What the entries are charged, without the structures that hold them.
    fn bytes(&self) -> usize {
        self.small_bytes + self.main_bytes
    }

    /// Everything the cache holds: its entries, the map at the most it can have grown to
    /// for the entries it has held, the queues at their capacity, and the ghosts' table.
    fn held(&self) -> usize {
        self.bytes()
            + table_bytes(self.peak_entries, size_of::<(Arc<CacheKey>, Entry)>())
            + (self.small.capacity() + self.main.capacity()) * size_of::<Arc<CacheKey>>()
            + self.ghosts.bytes()
    }

    /// Ghosts remembered: as many as entries kept, and a floor so that a cache of a few large
    /// answers still remembers a useful number.
    fn ghost_window(&self) -> usize {
        self.entries.len().max(1024)
    }

    /// The answer, and whether to keep its expanded form: an answer with the most hits an
    /// entry banks is worth keeping expanded while expanded forms fit their share, which is
    /// reserved here, before it is made.
    fn get(
        &mut self,
        key: &CacheKey,
        version: u64,
        budget: &Budget,
    ) -> Option<(Arc<Answer>, bool)> {
        let entry = self.entries.get_mut(key)?;
        if entry.version != version {
            return None;
        }
        entry.hits = (entry.hits + 1).min(MOST_HITS);
        let len = entry.answer.expanded_len();
        let cost = len + ALLOCATION_SLACK;
        let expand = entry.hits == MOST_HITS
            && entry.expanded == 0
            && len > 0
            && self.expanded_bytes + cost <= budget.expanded;
        let (answer, in_main) = (Arc::clone(&entry.answer), entry.in_main);
        if expand {
            entry.expanded = cost;
            entry.cost += cost;
            self.expanded_bytes += cost;
            *self.queue_bytes(in_main) += cost;
            self.evict_to(budget, 0);
        }
        Some((answer, expand))
    }

    /// The bytes charged to the main queue, or to the small one.
    fn queue_bytes(&mut self, in_main: bool) -> &mut usize {
        match in_main {
            true => &mut self.main_bytes,
            false => &mut self.small_bytes,
        }
    }

    /// Takes an entry out of the cache's accounts.
    fn remove(&mut self, key: &CacheKey) {
        if let Some(entry) = self.entries.remove(key) {
            self.expanded_bytes -= entry.expanded;
        }
    }

    fn put(&mut self, key: CacheKey, version: u64, answer: Arc<Answer>, budget: &Budget) {
        let kept = self
            .entries
            .get_key_value(&key)
            .map(|(kept, _)| key_bytes(kept));
        if let Some(entry) = self.entries.get_mut(&key) {
            // A newer answer for a key kept: it takes the old one's place and standing.
            let cost = ENTRY_OVERHEAD + kept.unwrap_or_default() + answer.charge();
            let (old, old_expanded, in_main) = (entry.cost, entry.expanded, entry.in_main);
            entry.version = version;
            entry.answer = answer;
            entry.cost = cost;
            entry.expanded = 0;
            let queue_bytes = self.queue_bytes(in_main);
            *queue_bytes = *queue_bytes - old + cost;
            self.expanded_bytes -= old_expanded;
        } else {
            let cost = ENTRY_OVERHEAD + key_bytes(&key) + answer.charge();
            let fingerprint = self.ghosts.fingerprint(&key);
            let in_main = self.ghosts.take(fingerprint, self.ghost_window());
            self.evict_to(budget, cost);
            let key = Arc::new(key);
            match in_main {
                true => self.main.push_back(Arc::clone(&key)),
                false => self.small.push_back(Arc::clone(&key)),
            }
            *self.queue_bytes(in_main) += cost;
            let entry = Entry {
                version,
                answer,
                cost,
                hits: 0,
                in_main,
                expanded: 0,
            };
            self.entries.insert(key, entry);
            self.peak_entries = self.peak_entries.max(self.entries.len());
        }
        self.evict_to(budget, 0);
    }

    /// Evicts until what is held, and `room` more, fits the budget.
    fn evict_to(&mut self, budget: &Budget, room: usize) {
        while self.held() + room > budget.bytes {
            // The map and queues keep the room of the most entries they held; when they are
            // mostly empty, giving that room back comes before evicting answers.
            if self.entries.len() < self.peak_entries / 4 {
                self.compact();
                continue;
            }
            let evicted = if self.small_bytes > budget.small || self.main.is_empty() {
                self.evict_small(budget)
            } else {
                self.evict_main()
            };
            if !evicted {
                self.compact();
                break;
            }
        }
    }

    /// Gives back the room of the map and the queues beyond what their entries take.
    fn compact(&mut self) {
        self.entries.shrink_to_fit();
        self.small.shrink_to_fit();
        self.main.shrink_to_fit();
        self.peak_entries = self.entries.len();
    }

    /// The small queue's oldest entry leaves: for the main queue if it was asked for again,
    /// otherwise out, remembered as a ghost. `false` when the queue is empty.
    fn evict_small(&mut self, budget: &Budget) -> bool {
        let Some(key) = self.small.pop_front() else {
            return false;
        };
        let Some(entry) = self.entries.get_mut(&key) else {
            return true;
        };
        let cost = entry.cost;
        self.small_bytes -= cost;
        if entry.hits > 0 {
            entry.hits = 0;
            entry.in_main = true;
            self.main_bytes += cost;
            self.main.push_back(key);
        } else {
            self.remove(&key);
            let fingerprint = self.ghosts.fingerprint(&key);
            self.ghosts.remember(fingerprint, budget.ghost_slots);
        }
        true
    }

    /// The main queue's oldest entry spends a hit for another pass, or leaves.
    fn evict_main(&mut self) -> bool {
        let Some(key) = self.main.pop_front() else {
            return false;
        };
        let Some(entry) = self.entries.get_mut(&key) else {
            return true;
        };
        if entry.hits > 0 {
            entry.hits -= 1;
            self.main.push_back(key);
        } else {
            self.main_bytes -= entry.cost;
            self.remove(&key);
        }
        true
    }
}

impl ResponseCache {
    pub fn new(capacity: usize) -> ResponseCache {
        ResponseCache {
            budget: Budget::new(capacity),
            inner: Mutex::new(Inner::default()),
            flights: Flights::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.budget.bytes > 0
    }

    /// Whether an answer under a key of `len` bytes ([`MAX_KEY_BYTES`]) may be kept: a caller
    /// whose key could be long asks before building it.
    pub fn keeps_key_of(&self, len: usize) -> bool {
        self.enabled() && len <= MAX_KEY_BYTES
    }

    /// Whether an answer under this key may be kept; the answer for a key that may not is
    /// built by its request alone, outside flights and the cache.
    pub fn keeps(&self, key: &CacheKey) -> bool {
        self.keeps_key_of(key_len(key))
    }

    /// A part in the flight building the answer for this key and version, joined or started.
    pub fn join(&self, key: &CacheKey, version: u64) -> Ticket<'_> {
        self.flights.join(key, version)
    }

    pub fn get(&self, key: &CacheKey, version: u64) -> Option<Arc<Answer>> {
        if !self.enabled() {
            return None;
        }
        let (answer, expand) = self.inner.lock().ok()?.get(key, version, &self.budget)?;
        if expand {
            // Reserved under the lock, made outside it.
            answer.keep_expanded();
        }
        Some(answer)
    }

    /// Keeps an answer, unless its key is too long to keep, or the entry would cost more than
    /// a sixteenth of the budget (so a few huge pages cannot keep evicting everything else).
    pub fn put(&self, key: CacheKey, version: u64, answer: Arc<Answer>) {
        let cost = ENTRY_OVERHEAD + key_bytes(&key) + answer.charge();
        if !self.keeps(&key) || cost > self.budget.largest_entry {
            return;
        }
        if let Ok(mut inner) = self.inner.lock() {
            inner.put(key, version, answer, &self.budget);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::forms::{Body, gzip_reserve};
    use super::*;
    use axum::body::Bytes;
    use budget::{EXPANDED_SHARE, GHOST_SHARE};

    fn key(n: u64) -> CacheKey {
        CacheKey {
            query: svc_spec::QueryId::new("q"),
            key: String::new(),
            page: Some(PageRequest {
                limit: 100,
                offset: n,
                after: None,
            }),
        }
    }

    fn answer(len: usize) -> Arc<Answer> {
        Arc::new(Answer::new(Bytes::from(vec![b'x'; len])))
    }

    fn kept(text: &str) -> Answer {
        Answer::from_compressed(Bytes::from(compress(text.as_bytes()))).unwrap()
    }

    #[test]
    fn gzip_form_inflates_to_the_answer_and_short_answers_stay_plain() {
        let text: String = (0..200).map(|n| format!("{{\"n\":{n}}},")).collect();
        let answer = kept(&text);
        let compressed = answer.gzip().expect("long enough").clone();
        assert!(compressed.len() < text.len() / 3);
        let mut inflated = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(&compressed[..]),
            &mut inflated,
        )
        .unwrap();
        assert_eq!(inflated, text);
        assert!(kept("{}").gzip().is_none());
        assert!(Answer::new(Bytes::from(text)).gzip().is_none());
    }

    fn page_text(items: u32) -> String {
        let items: Vec<String> = (0..items)
            .map(|n| {
                format!(
                    "{{\"uri\":\"at://did:plc:{n:024}/dev.svc.bounty/3l{n}\",\"rev\":\"3l{n}\"}}"
                )
            })
            .collect();
        format!("{{\"items\":[{}],\"total\":9}}", items.join(","))
    }

    #[test]
    fn a_kept_answer_is_stored_compressed_and_comes_back_whole() {
        let text = page_text(100);
        let compressed = kept(&text);
        assert!(matches!(compressed.body, Body::Lz4 { .. }));
        assert_eq!(compressed.identity().unwrap(), text.as_bytes());
        assert!(
            compressed.charge() < text.len() / 2,
            "charged {} for {} bytes",
            compressed.charge(),
            text.len()
        );
        // Not kept, or too short to gain: as it is, at its length.
        let passing = Answer::new(Bytes::from(text.clone()));
        assert!(matches!(passing.body, Body::Plain(_)));
        assert_eq!(passing.identity().unwrap(), text.as_bytes());
        assert_eq!(passing.charge(), text.len() + ALLOCATION_SLACK);
        let short = kept("{\"items\":[]}");
        assert!(matches!(short.body, Body::Plain(_)));
        assert_eq!(short.identity().unwrap(), "{\"items\":[]}".as_bytes());
        assert!(Answer::from_compressed(Bytes::from_static(b"{}")).is_err());
        // The same budget keeps more compressed answers than plain ones.
        let count_kept = |compressed: bool| {
            let cache = ResponseCache::new(200_000);
            for n in 0..100 {
                let answer = if compressed {
                    kept(&page_text(100))
                } else {
                    Answer::new(Bytes::from(page_text(100)))
                };
                cache.put(key(n), 1, Arc::new(answer));
            }
            cache.inner.lock().unwrap().entries.len()
        };
        assert!(count_kept(true) >= 2 * count_kept(false));
    }

    #[test]
    fn the_hottest_answers_are_kept_expanded_within_their_share_of_the_budget() {
        let text = page_text(100);
        let cache = ResponseCache::new(1 << 20);
        let answer = Arc::new(kept(&text));
        cache.put(key(1), 1, Arc::clone(&answer));
        let charged = |cache: &ResponseCache| cache.inner.lock().unwrap().bytes();
        let expanded_cost = text.len() + ALLOCATION_SLACK;
        let before = charged(&cache);
        // Asked for less than the most hits an entry banks: still only compressed.
        for _ in 1..MOST_HITS {
            assert_eq!(
                cache.get(&key(1), 1).unwrap().identity().unwrap(),
                text.as_bytes()
            );
        }
        assert!(answer.expanded.get().is_none());
        assert_eq!(charged(&cache), before);
        // Then expanded once, kept, and paid for.
        assert_eq!(
            cache.get(&key(1), 1).unwrap().identity().unwrap(),
            text.as_bytes()
        );
        assert_eq!(answer.expanded.get().unwrap(), text.as_bytes());
        assert_eq!(charged(&cache), before + expanded_cost);
        cache.get(&key(1), 1).unwrap();
        assert_eq!(charged(&cache), before + expanded_cost);
        // A newer answer for the key starts unexpanded, at its own charge.
        cache.put(key(1), 2, Arc::new(kept(&text)));
        assert_eq!(charged(&cache), before);
        // Expanded forms never take more than their share, and the budget holds.
        let budget = 1_600_000;
        let small = ResponseCache::new(budget);
        for n in 0..20 {
            small.put(key(n), 1, Arc::new(kept(&page_text(100))));
            for _ in 0..MOST_HITS {
                small.get(&key(n), 1);
            }
            let inner = small.inner.lock().unwrap();
            assert!(inner.held() <= budget);
            assert!(inner.expanded_bytes <= budget / EXPANDED_SHARE);
            let reserved: usize = inner.entries.values().map(|e| e.expanded).sum();
            assert_eq!(reserved, inner.expanded_bytes);
        }
        assert!(small.inner.lock().unwrap().expanded_bytes > 0);
    }

    #[test]
    fn serves_only_the_current_version_and_stays_within_budget() {
        let cache = ResponseCache::new(64_000);
        cache.put(key(1), 7, answer(1000));
        assert!(cache.get(&key(1), 7).is_some());
        assert!(cache.get(&key(1), 8).is_none());
        for n in 2..400 {
            cache.put(key(n), 7, answer(1000));
        }
        let inner = cache.inner.lock().unwrap();
        assert!(inner.held() <= 64_000);
        drop(inner);
        cache.put(
            key(999),
            7,
            answer(4000 - ENTRY_OVERHEAD - ALLOCATION_SLACK),
        );
        assert!(
            cache.get(&key(999), 7).is_some(),
            "a sixteenth of the budget"
        );
        cache.put(
            key(998),
            7,
            answer(4001 - ENTRY_OVERHEAD - ALLOCATION_SLACK),
        );
        assert!(
            cache.get(&key(998), 7).is_none(),
            "larger than a sixteenth of the budget"
        );
        assert!(ResponseCache::new(0).get(&key(1), 7).is_none());
    }

    #[test]
    fn answers_asked_for_again_outlast_a_stream_asked_for_once() {
        let budget = 160_000;
        let cache = ResponseCache::new(budget);
        for hot in 0..5 {
            cache.put(key(hot), 1, answer(1000));
            assert!(cache.get(&key(hot), 1).is_some());
        }
        // Ten times the budget in answers nobody asks for again.
        for cold in 100..1700 {
            cache.put(key(cold), 1, answer(1000));
        }
        for hot in 0..5 {
            assert!(cache.get(&key(hot), 1).is_some(), "hot answer {hot} kept");
        }
        let inner = cache.inner.lock().unwrap();
        assert!(inner.held() <= budget);
        assert_eq!(
            inner.bytes(),
            inner.entries.values().map(|e| e.cost).sum::<usize>(),
            "the queues' byte counts agree with the entries kept"
        );
        // The cold answer evicted last (the small queue is first in, first out).
        let last_evicted = (100..1700)
            .rev()
            .find(|n| !inner.entries.contains_key(&key(*n)))
            .unwrap();
        drop(inner);
        // A key evicted and asked for again goes straight to the main queue.
        assert!(cache.get(&key(last_evicted), 1).is_none());
        cache.put(key(last_evicted), 1, answer(1000));
        assert!(cache.inner.lock().unwrap().entries[&key(last_evicted)].in_main);
        // A newer version replaces the old in place, at its new size.
        cache.put(key(0), 2, answer(500));
        assert!(cache.get(&key(0), 1).is_none());
        assert!(cache.get(&key(0), 2).is_some());
    }

    fn keyed(text: &str, after: Option<&str>) -> CacheKey {
        CacheKey {
            query: svc_spec::QueryId::new("q"),
            key: text.to_string(),
            page: Some(PageRequest {
                limit: 100,
                offset: 0,
                after: after.map(str::to_string),
            }),
        }
    }

    /// Every invariant of the accounts: the queues' sums are the entries' costs, every
    /// entry has one place, and everything held is within the budget.
    fn check_accounts(cache: &ResponseCache) {
        let inner = cache.inner.lock().unwrap();
        let (small, main): (Vec<&Entry>, Vec<&Entry>) =
            inner.entries.values().partition(|e| !e.in_main);
        assert_eq!(
            inner.small_bytes,
            small.iter().map(|e| e.cost).sum::<usize>()
        );
        assert_eq!(inner.main_bytes, main.iter().map(|e| e.cost).sum::<usize>());
        assert_eq!(inner.small.len() + inner.main.len(), inner.entries.len());
        assert!(
            inner.held() <= cache.budget.bytes,
            "held {} of {}",
            inner.held(),
            cache.budget.bytes
        );
        assert!(inner.ghosts.bytes() <= cache.budget.bytes / GHOST_SHARE + ALLOCATION_SLACK);
        assert!(inner.ghosts.slots() <= cache.budget.ghost_slots);
    }

    #[test]
    fn a_key_is_charged_its_text_and_an_over_long_key_is_not_kept() {
        let cache = ResponseCache::new(1 << 20);
        let charged = |cache: &ResponseCache| cache.inner.lock().unwrap().bytes();
        cache.put(keyed("", None), 1, answer(100));
        let short = charged(&cache);
        assert!(short >= ENTRY_OVERHEAD + 100);
        let long_key = "k".repeat(900);
        cache.put(keyed(&long_key, None), 1, answer(100));
        assert!(
            charged(&cache) - short >= short + 900,
            "the key's 900 bytes counted"
        );
        // A cursor's position counts toward the key's length and its charge.
        let position = "p".repeat(MAX_KEY_BYTES - 24);
        let at_most = keyed(&"k".repeat(24), Some(&position));
        assert!(cache.keeps(&at_most));
        cache.put(at_most.clone(), 1, answer(100));
        assert!(cache.get(&at_most, 1).is_some());
        // One byte longer: answered by its request, never kept.
        let over = keyed(&"k".repeat(25), Some(&position));
        assert!(!cache.keeps(&over));
        assert!(!cache.keeps_key_of(MAX_KEY_BYTES + 1));
        let before = charged(&cache);
        cache.put(over.clone(), 1, answer(100));
        assert!(cache.get(&over, 1).is_none());
        assert_eq!(charged(&cache), before);
        assert!(!cache.inner.lock().unwrap().entries.contains_key(&over));
        check_accounts(&cache);
    }

    /// A stream of distinct keys as long as kept, each with a small answer (as distinct
    /// cursors of a hostile client make), stays within the budget, keys, structures and
    /// ghosts included; and so does any mix of sizes, versions, hits and replacements.
    #[test]
    fn keys_ghosts_and_structures_count_within_the_budget() {
        let budget = 1 << 20;
        let cache = ResponseCache::new(budget);
        let position = "p".repeat(MAX_KEY_BYTES - 16);
        for n in 0..20_000u64 {
            let key = keyed(&format!("{n:016}"), Some(&position));
            cache.put(key, 1, answer(64));
            if n % 997 == 0 {
                check_accounts(&cache);
            }
        }
        check_accounts(&cache);
        let inner = cache.inner.lock().unwrap();
        let keys: usize = inner.entries.keys().map(|k| key_len(k)).sum();
        assert!(keys > budget / 2, "mostly keys: {keys}");
        assert!(keys <= budget);
        // Every ghost slot is in use after 20,000 evictions, and the table stays its size.
        assert_eq!(inner.ghosts.slots(), cache.budget.ghost_slots);
        assert_eq!(cache.budget.ghost_slots, 4096);
        drop(inner);

        // A mixed stream: sizes from nothing to a sixteenth of the budget, keys of every
        // length kept, replacements, hits that expand answers, and versions moving on.
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        let text = page_text(40);
        for round in 0..30_000u64 {
            let n = next(3000);
            let key = keyed(&"k".repeat(next(500) as usize), Some(&format!("{n}")));
            let version = next(3);
            match next(4) {
                0 => cache.put(key, version, Arc::new(kept(&text))),
                1 => cache.put(key, version, answer(next(budget as u64 / 16) as usize)),
                _ => {
                    if let Some(answer) = cache.get(&key, version) {
                        answer.identity().unwrap();
                    }
                }
            }
            if round % 1009 == 0 {
                check_accounts(&cache);
            }
        }
        check_accounts(&cache);
    }

    #[test]
    fn structures_emptied_by_large_answers_give_their_room_back() {
        let budget = 1 << 20;
        let cache = ResponseCache::new(budget);
        // Thousands of small entries grow the map and the queues...
        for n in 0..5_000 {
            cache.put(key(n), 1, answer(10));
        }
        let peak = cache.inner.lock().unwrap().peak_entries;
        assert!(peak > 1000, "{peak}");
        // ...then a few large answers take their place, and the room the small ones needed
        // is given back rather than counted against the large ones.
        for n in 10_000..10_100 {
            cache.put(key(n), 1, answer(budget / 17));
            check_accounts(&cache);
        }
        let inner = cache.inner.lock().unwrap();
        assert!(inner.peak_entries < peak / 4, "{}", inner.peak_entries);
        assert!(inner.entries.len() >= 10, "{}", inner.entries.len());
    }

    #[test]
    fn kept_forms_hold_no_more_than_their_length() {
        let text = page_text(100);
        let block = compress(text.as_bytes());
        assert_eq!(block.capacity(), block.len());
        assert!(block.len() < text.len() / 3);
        let gzip = kept(&text).gzip().unwrap().clone();
        assert!(gzip.len() <= gzip_reserve(&Bytes::from(block)));
    }
}
