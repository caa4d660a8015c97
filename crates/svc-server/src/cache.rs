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
//! version share one build (a flight): after a change to a hot key, the clients asking for it
//! wait for one query instead of each running their own.

use axum::body::Bytes;
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use crate::ApiError;
use svc_catalog::PageRequest;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    pub query: svc_catalog::spec::QueryId,
    pub key: String,
    /// The page, for list answers.
    pub page: Option<PageRequest>,
}

/// One encoded answer, in the forms asked for so far.
pub(crate) struct Answer {
    body: Body,
    /// For an LZ4 body asked for often: the answer expanded, kept.
    expanded: OnceLock<Bytes>,
    gzip: OnceLock<Option<Bytes>>,
}

enum Body {
    /// As it goes out: short, or not kept.
    Plain(Bytes),
    /// Kept in the cache, where memory is the limit: LZ4 takes JSON answers to about a
    /// quarter (so the budget holds about three times more of them) and expands them at
    /// several GB/s, microseconds per answer, far less than reading them again.
    Lz4 { block: Bytes, len: usize },
}

/// Answers shorter than this are kept and sent as they are: compressing them would save a
/// packet at most.
const COMPRESS_MIN_BYTES: usize = 1024;

/// An answer in the form the cache keeps, made where the answer is written (off the runtime's
/// threads): LZ4, the expanded length first.
pub(crate) fn compress(json: &[u8]) -> Vec<u8> {
    lz4_flex::block::compress_prepend_size(json)
}

fn expand(block: &[u8]) -> Result<Bytes, ApiError> {
    lz4_flex::block::decompress_size_prepended(block)
        .map(Bytes::from)
        .map_err(|e| ApiError::Internal(format!("a cached answer does not expand: {e}")))
}

impl Answer {
    /// An answer that goes out as it is (and never gets a gzip form).
    pub fn new(identity: Bytes) -> Answer {
        Answer {
            body: Body::Plain(identity),
            expanded: OnceLock::new(),
            gzip: OnceLock::new(),
        }
    }

    /// An answer `compress` made; a short one is expanded now and kept as it is.
    pub fn from_compressed(block: Bytes) -> Result<Answer, ApiError> {
        let prefix = block
            .first_chunk::<4>()
            .ok_or_else(|| ApiError::Internal("a compressed answer without its length".into()))?;
        let len = u32::from_le_bytes(*prefix) as usize;
        if len < COMPRESS_MIN_BYTES {
            return Ok(Answer::new(expand(&block)?));
        }
        Ok(Answer {
            body: Body::Lz4 { block, len },
            expanded: OnceLock::new(),
            gzip: OnceLock::new(),
        })
    }

    /// The answer as it goes to a client that takes no compression.
    pub fn identity(&self) -> Result<Bytes, ApiError> {
        match (&self.body, self.expanded.get()) {
            (Body::Plain(bytes), _) | (Body::Lz4 { .. }, Some(bytes)) => Ok(bytes.clone()),
            (Body::Lz4 { block, .. }, None) => expand(block),
        }
    }

    /// The length of the expanded form an LZ4 body could keep; 0 for a plain body.
    fn expanded_len(&self) -> usize {
        match &self.body {
            Body::Lz4 { len, .. } => *len,
            Body::Plain(_) => 0,
        }
    }

    /// Keeps the expanded form of an LZ4 body.
    fn keep_expanded(&self) {
        if let Body::Lz4 { block, .. } = &self.body
            && let Ok(bytes) = expand(block)
        {
            // Another request may have kept it meanwhile: the same bytes.
            let _ = self.expanded.set(bytes);
        }
    }

    /// The gzip form, compressed on first use; `None` for answers that go out as they are.
    pub fn gzip(&self) -> Option<&Bytes> {
        if matches!(self.body, Body::Plain(_)) {
            return None;
        }
        self.gzip
            .get_or_init(|| gzip(&self.identity().ok()?))
            .as_ref()
    }

    /// What the answer costs the cache's budget: what it keeps, and for a compressed one a
    /// fifth of its length for the gzip form it may get (gzip takes these answers to a sixth
    /// or less).
    fn charge(&self) -> usize {
        match &self.body {
            Body::Plain(bytes) => bytes.len(),
            Body::Lz4 { block, len } => block.len() + len / 5,
        }
    }
}

fn gzip(data: &[u8]) -> Option<Bytes> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 4),
        flate2::Compression::new(4),
    );
    encoder.write_all(data).ok()?;
    encoder.finish().ok().map(Bytes::from)
}

/// An answer being built, and how the build ended; those who join it share the outcome.
pub(crate) type Flight = Arc<tokio::sync::OnceCell<Result<Arc<Answer>, ApiError>>>;

/// A request's part in a flight. The last one to leave takes the flight off the board, so the
/// next miss starts afresh (after a failure, too), and a flight whose requests all went away
/// before it was built does not stay behind.
pub(crate) struct Ticket<'a> {
    cache: &'a ResponseCache,
    key: (CacheKey, u64),
    flight: Option<Flight>,
}

impl Ticket<'_> {
    pub fn flight(&self) -> &Flight {
        // `Some` from `join` until `drop`, which takes it only to count what is left.
        self.flight
            .as_ref()
            .expect("a ticket holds its flight until dropped")
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        // Flights are cloned and dropped under this lock only, so the count is exact.
        let Ok(mut flights) = self.cache.flights.lock() else {
            return;
        };
        self.flight = None;
        if flights
            .get(&self.key)
            .is_some_and(|flight| Arc::strong_count(flight) == 1)
        {
            flights.remove(&self.key);
        }
    }
}

pub(crate) struct ResponseCache {
    capacity: usize,
    inner: Mutex<Inner>,
    flights: Mutex<HashMap<(CacheKey, u64), Flight>>,
}

/// Hits an entry can bank against eviction from the main queue.
const MOST_HITS: u8 = 3;

struct Entry {
    version: u64,
    answer: Arc<Answer>,
    /// What the entry is charged against the budget.
    cost: usize,
    hits: u8,
    in_main: bool,
    /// Bytes of `cost` reserved for the answer's expanded form (0: none kept).
    expanded: usize,
}

/// Every entry has exactly one place in one queue: entries leave only when their place is
/// taken from the queue's front, and a newer answer for a kept key keeps the old one's place.
#[derive(Default)]
struct Inner {
    entries: HashMap<CacheKey, Entry>,
    small: VecDeque<CacheKey>,
    main: VecDeque<CacheKey>,
    small_bytes: usize,
    main_bytes: usize,
    /// Keys recently evicted from the small queue: asked for again, they go straight to main.
    ghosts: HashSet<CacheKey>,
    ghost_order: VecDeque<CacheKey>,
    /// Bytes reserved for expanded forms, across entries.
    expanded_bytes: usize,
}

/// The share of the budget expanded forms may take.
const EXPANDED_SHARE: usize = 32;

impl Inner {
    fn bytes(&self) -> usize {
        self.small_bytes + self.main_bytes
    }

    /// The answer, and whether to keep its expanded form: an answer with the most hits an
    /// entry banks is worth keeping expanded while expanded forms fit their share, which is
    /// reserved here, before it is made.
    fn get(
        &mut self,
        key: &CacheKey,
        version: u64,
        capacity: usize,
    ) -> Option<(Arc<Answer>, bool)> {
        let entry = self.entries.get_mut(key)?;
        if entry.version != version {
            return None;
        }
        entry.hits = (entry.hits + 1).min(MOST_HITS);
        let len = entry.answer.expanded_len();
        let expand = entry.hits == MOST_HITS
            && entry.expanded == 0
            && len > 0
            && self.expanded_bytes + len <= capacity / EXPANDED_SHARE;
        let (answer, in_main) = (Arc::clone(&entry.answer), entry.in_main);
        if expand {
            entry.expanded = len;
            entry.cost += len;
            self.expanded_bytes += len;
            *self.queue_bytes(in_main) += len;
            self.evict_to(capacity);
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

    fn put(&mut self, key: CacheKey, version: u64, answer: Arc<Answer>, capacity: usize) {
        let cost = answer.charge();
        if let Some(entry) = self.entries.get_mut(&key) {
            // A newer answer for a key kept: it takes the old one's place and standing.
            let (old, old_expanded, in_main) = (entry.cost, entry.expanded, entry.in_main);
            entry.version = version;
            entry.answer = answer;
            entry.cost = cost;
            entry.expanded = 0;
            let queue_bytes = self.queue_bytes(in_main);
            *queue_bytes = *queue_bytes - old + cost;
            self.expanded_bytes -= old_expanded;
        } else {
            let in_main = self.ghosts.remove(&key);
            match in_main {
                true => self.main.push_back(key.clone()),
                false => self.small.push_back(key.clone()),
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
        }
        self.evict_to(capacity);
    }

    fn evict_to(&mut self, capacity: usize) {
        while self.bytes() > capacity {
            let small_share = capacity / 10;
            let evicted = if self.small_bytes > small_share || self.main.is_empty() {
                self.evict_small()
            } else {
                self.evict_main()
            };
            if !evicted {
                break;
            }
        }
    }

    /// The small queue's oldest entry leaves: for the main queue if it was asked for again,
    /// otherwise out, remembered as a ghost. `false` when the queue is empty.
    fn evict_small(&mut self) -> bool {
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
            self.remember_ghost(key);
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

    fn remember_ghost(&mut self, key: CacheKey) {
        // As many ghosts as entries kept, and a floor so that a cache of a few large answers
        // still remembers a useful number.
        let most = self.entries.len().max(1024);
        if self.ghosts.insert(key.clone()) {
            self.ghost_order.push_back(key);
        }
        while self.ghost_order.len() > most {
            if let Some(old) = self.ghost_order.pop_front() {
                self.ghosts.remove(&old);
            }
        }
    }
}

impl ResponseCache {
    pub fn new(capacity: usize) -> ResponseCache {
        ResponseCache {
            capacity,
            inner: Mutex::new(Inner::default()),
            flights: Mutex::new(HashMap::new()),
        }
    }

    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// A part in the flight building the answer for this key and version, joined or started.
    pub fn join(&self, key: &CacheKey, version: u64) -> Ticket<'_> {
        let key = (key.clone(), version);
        let flight = match self.flights.lock() {
            Ok(mut flights) => Arc::clone(flights.entry(key.clone()).or_default()),
            // Alone, then: a flight of its own that nobody else sees.
            Err(_) => Flight::default(),
        };
        Ticket {
            cache: self,
            key,
            flight: Some(flight),
        }
    }

    pub fn get(&self, key: &CacheKey, version: u64) -> Option<Arc<Answer>> {
        if self.capacity == 0 {
            return None;
        }
        let (answer, expand) = self.inner.lock().ok()?.get(key, version, self.capacity)?;
        if expand {
            // Reserved under the lock, made outside it.
            answer.keep_expanded();
        }
        Some(answer)
    }

    /// Keeps an answer, unless it is larger than a sixteenth of the budget (so a few huge
    /// pages cannot keep evicting everything else).
    pub fn put(&self, key: CacheKey, version: u64, answer: Arc<Answer>) {
        if !self.enabled() || answer.charge() > self.capacity / 16 {
            return;
        }
        if let Ok(mut inner) = self.inner.lock() {
            inner.put(key, version, answer, self.capacity);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> CacheKey {
        CacheKey {
            query: svc_catalog::spec::QueryId::new("q"),
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
        assert_eq!(passing.charge(), text.len());
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
        assert_eq!(charged(&cache), before + text.len());
        cache.get(&key(1), 1).unwrap();
        assert_eq!(charged(&cache), before + text.len());
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
            assert!(inner.bytes() <= budget);
            assert!(inner.expanded_bytes <= budget / EXPANDED_SHARE);
            let reserved: usize = inner.entries.values().map(|e| e.expanded).sum();
            assert_eq!(reserved, inner.expanded_bytes);
        }
        assert!(small.inner.lock().unwrap().expanded_bytes > 0);
    }

    #[test]
    fn serves_only_the_current_version_and_stays_within_budget() {
        let cache = ResponseCache::new(1600);
        cache.put(key(1), 7, answer(100));
        assert!(cache.get(&key(1), 7).is_some());
        assert!(cache.get(&key(1), 8).is_none());
        for n in 2..40 {
            cache.put(key(n), 7, answer(100));
        }
        let inner = cache.inner.lock().unwrap();
        assert!(inner.bytes() <= 1600);
        drop(inner);
        cache.put(key(99), 7, answer(101));
        assert!(
            cache.get(&key(99), 7).is_none(),
            "larger than a sixteenth of the budget"
        );
        assert!(ResponseCache::new(0).get(&key(1), 7).is_none());
    }

    #[test]
    fn answers_asked_for_again_outlast_a_stream_asked_for_once() {
        let cache = ResponseCache::new(16_000);
        for hot in 0..5 {
            cache.put(key(hot), 1, answer(1000));
            assert!(cache.get(&key(hot), 1).is_some());
        }
        // Ten times the budget in answers nobody asks for again.
        for cold in 100..260 {
            cache.put(key(cold), 1, answer(1000));
        }
        for hot in 0..5 {
            assert!(cache.get(&key(hot), 1).is_some(), "hot answer {hot} kept");
        }
        let inner = cache.inner.lock().unwrap();
        assert!(inner.bytes() <= 16_000);
        assert_eq!(
            inner.bytes(),
            inner
                .entries
                .values()
                .map(|e| e.answer.charge())
                .sum::<usize>(),
            "the queues' byte counts agree with the entries kept"
        );
        drop(inner);
        // A key evicted once and asked for again goes straight to the main queue.
        assert!(cache.get(&key(100), 1).is_none());
        cache.put(key(100), 1, answer(1000));
        assert!(cache.inner.lock().unwrap().entries[&key(100)].in_main);
        // A newer version replaces the old in place, at its new size.
        cache.put(key(0), 2, answer(500));
        assert!(cache.get(&key(0), 1).is_none());
        assert!(cache.get(&key(0), 2).is_some());
    }
}
