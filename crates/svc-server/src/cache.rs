//! Encoded answers kept for reuse. An entry records the catalog's change-clock version read
//! before its answer was built, and serves only while that version is current, so a cached
//! answer is never older than the catalog. Bounded in bytes: when full, it starts over.
//! An entry also keeps its gzip form once a client that accepts gzip has asked for it, so
//! an answer is compressed once, not once per request. Concurrent misses on one key and
//! version share one build (a flight): after a change to a hot key, the clients asking for it
//! wait for one query instead of each running their own.

use axum::body::Bytes;
use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    pub query: usize,
    pub key: String,
    pub limit: u32,
    pub offset: u64,
    pub after: Option<String>,
}

/// One encoded answer, in the forms asked for so far.
pub(crate) struct Answer {
    pub identity: Bytes,
    gzip: OnceLock<Bytes>,
}

/// Answers shorter than this go out as they are: gzip would save a packet at most.
const GZIP_MIN_BYTES: usize = 1024;

impl Answer {
    pub fn new(identity: Bytes) -> Answer {
        Answer {
            identity,
            gzip: OnceLock::new(),
        }
    }

    /// The gzip form, compressed on first use; `None` for answers too short to gain.
    pub fn gzip(&self) -> Option<&Bytes> {
        if self.identity.len() < GZIP_MIN_BYTES {
            return None;
        }
        Some(self.gzip.get_or_init(|| gzip(&self.identity)))
    }
}

fn gzip(data: &[u8]) -> Bytes {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 4),
        flate2::Compression::new(4),
    );
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(data);
    Bytes::from(encoder.finish().unwrap_or_default())
}

/// An answer being built; those who join it wait for the one build.
pub(crate) type Flight = Arc<tokio::sync::OnceCell<Arc<Answer>>>;

pub(crate) struct ResponseCache {
    capacity: usize,
    inner: Mutex<Inner>,
    flights: Mutex<HashMap<(CacheKey, u64), Flight>>,
}

/// Ends a flight when its build ends, however it ends (done, failed, or dropped with the
/// request that ran it).
pub(crate) struct Landing<'a> {
    cache: &'a ResponseCache,
    key: (CacheKey, u64),
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if let Ok(mut flights) = self.cache.flights.lock() {
            flights.remove(&self.key);
        }
    }
}

#[derive(Default)]
struct Inner {
    entries: HashMap<CacheKey, (u64, Arc<Answer>)>,
    bytes: usize,
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

    /// The flight building the answer for this key and version, joined or started.
    pub fn flight(&self, key: &CacheKey, version: u64) -> Flight {
        let Ok(mut flights) = self.flights.lock() else {
            return Flight::default();
        };
        Arc::clone(flights.entry((key.clone(), version)).or_default())
    }

    /// Taken by the build of a flight: the flight ends when this is dropped, so put the
    /// answer in the cache first.
    pub fn landing(&self, key: &CacheKey, version: u64) -> Landing<'_> {
        Landing {
            cache: self,
            key: (key.clone(), version),
        }
    }

    pub fn get(&self, key: &CacheKey, version: u64) -> Option<Arc<Answer>> {
        if self.capacity == 0 {
            return None;
        }
        let inner = self.inner.lock().ok()?;
        match inner.entries.get(key) {
            Some((v, answer)) if *v == version => Some(Arc::clone(answer)),
            _ => None,
        }
    }

    /// Keeps an answer; its gzip form, when made, counts against the budget at a quarter of
    /// the identity size (gzip takes JSON answers to a fifth to a tenth).
    pub fn put(&self, key: CacheKey, version: u64, answer: Arc<Answer>) {
        let cost = charge(&answer);
        // One answer may take at most a sixteenth of the budget, so a few huge pages cannot
        // keep evicting everything else.
        if self.capacity == 0 || cost > self.capacity / 16 {
            return;
        }
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.bytes + cost > self.capacity {
            inner.entries.clear();
            inner.bytes = 0;
        }
        inner.bytes += cost;
        if let Some((_, old)) = inner.entries.insert(key, (version, answer)) {
            inner.bytes -= charge(&old);
        }
    }
}

fn charge(answer: &Answer) -> usize {
    answer.identity.len() + answer.identity.len() / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> CacheKey {
        CacheKey {
            query: 0,
            key: String::new(),
            limit: 100,
            offset: n,
            after: None,
        }
    }

    fn answer(len: usize) -> Arc<Answer> {
        Arc::new(Answer::new(Bytes::from(vec![b'x'; len])))
    }

    #[test]
    fn gzip_form_inflates_to_the_answer_and_short_answers_stay_plain() {
        let text: String = (0..200).map(|n| format!("{{\"n\":{n}}},")).collect();
        let answer = Answer::new(Bytes::from(text.clone()));
        let compressed = answer.gzip().expect("long enough").clone();
        assert!(compressed.len() < text.len() / 3);
        let mut inflated = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(&compressed[..]),
            &mut inflated,
        )
        .unwrap();
        assert_eq!(inflated, text);
        assert!(Answer::new(Bytes::from_static(b"{}")).gzip().is_none());
    }

    #[test]
    fn serves_only_the_current_version_and_stays_within_budget() {
        let cache = ResponseCache::new(1600);
        cache.put(key(1), 7, answer(80));
        assert!(cache.get(&key(1), 7).is_some());
        assert!(cache.get(&key(1), 8).is_none());
        for n in 2..40 {
            cache.put(key(n), 7, answer(80));
        }
        let inner = cache.inner.lock().unwrap();
        assert!(inner.bytes <= 1600);
        drop(inner);
        cache.put(key(99), 7, answer(81));
        assert!(
            cache.get(&key(99), 7).is_none(),
            "larger than a sixteenth of the budget"
        );
        assert!(ResponseCache::new(0).get(&key(1), 7).is_none());
    }
}
