//! The open client connections and who gives way when all the slots are taken: the
//! connection whose answer has been blocked longest on a client that reads nothing, else the
//! oldest that has not sent a whole request head.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::time::Instant;

/// A free slot, or the slot of a connection that waits on its client, which is closed for it;
/// `None` when every open connection is being served and reads its answers.
pub(crate) async fn take_slot(slots: &Arc<Semaphore>, open: &Open) -> Option<OwnedSemaphorePermit> {
    if let Ok(slot) = Arc::clone(slots).try_acquire_owned() {
        return Some(slot);
    }
    if !open.evict() {
        return None;
    }
    // The evicted connection's task gives its slot back as soon as it runs.
    tokio::time::timeout(Duration::from_secs(1), Arc::clone(slots).acquire_owned())
        .await
        .ok()?
        .ok()
}

/// Why a connection is asked to give its slot to a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GiveWay {
    /// It has not sent a whole request head yet.
    NoRequest,
    /// Its answer has been blocked longest on a client that reads nothing.
    Blocked,
}

/// The open connections, each with the means to close it, and those among them that wait on
/// their client.
#[derive(Default)]
pub(crate) struct Open {
    inner: Mutex<OpenInner>,
}

#[derive(Default)]
struct OpenInner {
    next_id: u64,
    close: BTreeMap<u64, oneshot::Sender<GiveWay>>,
    /// Connections that have not sent a whole request head, oldest (lowest id) first.
    unproven: BTreeSet<u64>,
    /// Connections whose writes are blocked, by when the block began.
    blocked: BTreeSet<(Instant, u64)>,
}

impl Open {
    fn lock(&self) -> std::sync::MutexGuard<'_, OpenInner> {
        // The sets stay consistent whatever panicked while holding them: each step is one
        // insert or remove.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn enter(self: &Arc<Self>) -> (Arc<Place>, oneshot::Receiver<GiveWay>) {
        let (close, evicted) = oneshot::channel();
        let mut inner = self.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        inner.close.insert(id, close);
        inner.unproven.insert(id);
        let place = Place {
            id,
            open: Arc::clone(self),
            proven: AtomicBool::new(false),
        };
        (Arc::new(place), evicted)
    }

    /// Connections whose writes are blocked now.
    #[cfg(test)]
    pub fn blocked_writes(&self) -> usize {
        self.lock().blocked.len()
    }

    /// Tells the connection that waits longest on its client to close: the one whose answer
    /// has been blocked longest (it has had its answers and is not reading them), else the
    /// oldest without a request head (it may still be a real client on a slow link); `false`
    /// when none waits.
    pub fn evict(&self) -> bool {
        let mut inner = self.lock();
        loop {
            let (id, why) = if let Some((_, id)) = inner.blocked.pop_first() {
                (id, GiveWay::Blocked)
            } else if let Some(id) = inner.unproven.pop_first() {
                (id, GiveWay::NoRequest)
            } else {
                return false;
            };
            // A connection already ending has dropped its receiver, and one chosen before
            // has none left: the next one goes instead.
            if let Some(close) = inner.close.remove(&id)
                && close.send(why).is_ok()
            {
                return true;
            }
        }
    }
}

/// One connection's place among the open ones, given up when the connection ends (dropped).
pub(crate) struct Place {
    id: u64,
    open: Arc<Open>,
    proven: AtomicBool,
}

impl Place {
    /// The connection sent a request head: from now on it gives way only while its answer is
    /// blocked.
    pub(crate) fn prove(&self) {
        if !self.proven.swap(true, Ordering::SeqCst) {
            self.open.lock().unproven.remove(&self.id);
        }
    }

    pub(crate) fn is_proven(&self) -> bool {
        self.proven.load(Ordering::SeqCst)
    }

    /// A write began to wait for the client at `since`.
    pub(crate) fn blocked(&self, since: Instant) {
        self.open.lock().blocked.insert((since, self.id));
    }

    /// The write blocked since `since` made progress, or the connection ends.
    pub(crate) fn flowing(&self, since: Instant) {
        self.open.lock().blocked.remove(&(since, self.id));
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut inner = self.open.lock();
        inner.close.remove(&self.id);
        if !self.is_proven() {
            inner.unproven.remove(&self.id);
        }
    }
}
