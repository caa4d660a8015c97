//! Turns between the hosts whole repositories are read from. A host reads at most
//! [`PER_HOST`] repositories at once, and a repository whose host is busy never waits for it
//! holding one of the reader's slots: its read is not started (or given up before asking the
//! host), so that the repositories of a slow host cannot take the slots of all others. Which
//! host each repository was last read from is remembered, so that the queue can pass over
//! the repositories of a busy host without asking anything.

use crate::peer::origin;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use svc_syntax::Did;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Repositories read from one host at once.
pub(crate) const PER_HOST: usize = 4;
/// Hosts and repositories remembered at most (forgotten when full, the busy hosts kept).
const HOSTS_AT_MOST: usize = 10_000;
const REPOSITORIES_AT_MOST: usize = 100_000;

#[derive(Default)]
pub(crate) struct HostTurns {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    hosts: HashMap<String, Arc<Semaphore>>,
    host_of: HashMap<Did, String>,
}

impl HostTurns {
    /// Whether `did` was last read from a host now reading all it may.
    pub fn is_busy(&self, did: &Did) -> bool {
        let inner = self.lock();
        inner
            .host_of
            .get(did)
            .and_then(|host| inner.hosts.get(host))
            .is_some_and(|slots| slots.available_permits() == 0)
    }

    /// A turn at the host of `url` for `did`, if the host has one free now.
    pub fn try_take(&self, did: &Did, url: &str) -> Option<OwnedSemaphorePermit> {
        let host = origin(url);
        let mut inner = self.lock();
        if inner.host_of.len() >= REPOSITORIES_AT_MOST {
            inner.host_of.clear();
        }
        inner.host_of.insert(did.clone(), host.clone());
        if inner.hosts.len() >= HOSTS_AT_MOST {
            inner
                .hosts
                .retain(|_, slots| slots.available_permits() < PER_HOST);
        }
        let slots = inner
            .hosts
            .entry(host)
            .or_insert_with(|| Arc::new(Semaphore::new(PER_HOST)));
        Arc::clone(slots).try_acquire_owned().ok()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn did(n: usize) -> Did {
        Did::new(format!("did:plc:host{n}")).unwrap()
    }

    #[test]
    fn a_busy_host_turns_away_its_repositories_and_no_other() {
        let turns = HostTurns::default();
        let held: Vec<_> = (0..PER_HOST)
            .map(|n| {
                turns
                    .try_take(&did(n), "https://slow.example/xrpc")
                    .unwrap()
            })
            .collect();
        assert!(turns.try_take(&did(9), "https://slow.example").is_none());
        assert!(turns.is_busy(&did(9)), "its host is remembered");
        assert!(!turns.is_busy(&did(10)), "an unknown host is not busy");
        assert!(turns.try_take(&did(10), "https://honest.example").is_some());
        drop(held);
        assert!(!turns.is_busy(&did(9)));
        assert!(turns.try_take(&did(9), "https://slow.example").is_some());
    }
}
