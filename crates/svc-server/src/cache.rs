//! Encoded answers kept for reuse. An entry records the catalog's change-clock version read
//! before its answer was built, and serves only while that version is current, so a cached
//! answer is never older than the catalog. Bounded in bytes: when full, it starts over.

use axum::body::Bytes;
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    pub query: usize,
    pub key: String,
    pub limit: u32,
    pub offset: u64,
    pub after: Option<String>,
}

pub(crate) struct ResponseCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<CacheKey, (u64, Bytes)>,
    bytes: usize,
}

impl ResponseCache {
    pub fn new(capacity: usize) -> ResponseCache {
        ResponseCache {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn get(&self, key: &CacheKey, version: u64) -> Option<Bytes> {
        if self.capacity == 0 {
            return None;
        }
        let inner = self.inner.lock().ok()?;
        match inner.entries.get(key) {
            Some((v, body)) if *v == version => Some(body.clone()),
            _ => None,
        }
    }

    pub fn put(&self, key: CacheKey, version: u64, body: Bytes) {
        // One answer may take at most a sixteenth of the budget, so a few huge pages cannot
        // keep evicting everything else.
        if self.capacity == 0 || body.len() > self.capacity / 16 {
            return;
        }
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.bytes + body.len() > self.capacity {
            inner.entries.clear();
            inner.bytes = 0;
        }
        inner.bytes += body.len();
        if let Some((_, old)) = inner.entries.insert(key, (version, body)) {
            inner.bytes -= old.len();
        }
    }
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

    #[test]
    fn serves_only_the_current_version_and_stays_within_budget() {
        let cache = ResponseCache::new(1600);
        cache.put(key(1), 7, Bytes::from(vec![b'x'; 100]));
        assert!(cache.get(&key(1), 7).is_some());
        assert!(cache.get(&key(1), 8).is_none());
        for n in 2..40 {
            cache.put(key(n), 7, Bytes::from(vec![b'x'; 100]));
        }
        let inner = cache.inner.lock().unwrap();
        assert!(inner.bytes <= 1600);
        drop(inner);
        cache.put(key(99), 7, Bytes::from(vec![b'x'; 101]));
        assert!(
            cache.get(&key(99), 7).is_none(),
            "larger than a sixteenth of the budget"
        );
        assert!(ResponseCache::new(0).get(&key(1), 7).is_none());
    }
}
