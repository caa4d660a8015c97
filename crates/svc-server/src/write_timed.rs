//! The write time limit of a client connection: a write that the client leaves blocked (it
//! reads nothing) for the limit fails, and the connection is closed; while blocked, the
//! connection is among the first to give its place to a newcomer.

use crate::guarded::{Guard, Guarded};
use crate::open_slots::Place;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// A client connection's stream whose writes have a time limit: a write (or flush, or
/// shutdown) that stays blocked for `timeout`, because the client reads nothing, fails with
/// `TimedOut`, and hyper closes the connection. While a write is blocked the connection is
/// among the first to give way to a newcomer.
pub(crate) type WriteTimed<S> = Guarded<S, WriteTimer>;

impl<S> WriteTimed<S> {
    pub fn new(stream: S, timeout: Duration, place: Arc<Place>) -> Self {
        let guard = WriteTimer {
            timeout,
            place,
            blocked_since: None,
            deadline: None,
            timed_out: false,
        };
        Guarded { stream, guard }
    }

    /// Whether a timer was made: only a write that had to wait makes one.
    #[cfg(test)]
    pub fn has_timer(&self) -> bool {
        self.guard.deadline.is_some()
    }
}

/// The write time limit of one connection.
pub(crate) struct WriteTimer {
    timeout: Duration,
    place: Arc<Place>,
    /// When the write that is blocked began to wait.
    blocked_since: Option<Instant>,
    /// Made at the first blocked write and reset at each later one: a write that completes
    /// at once, which is nearly every write, costs no timer.
    deadline: Option<Pin<Box<Sleep>>>,
    timed_out: bool,
}

impl<S> Guard<S> for WriteTimer {
    /// The write, failing once it has been blocked for the timeout.
    fn write<T>(
        &mut self,
        stream: Pin<&mut S>,
        cx: &mut Context<'_>,
        io: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if self.timed_out {
            return Poll::Ready(Err(write_timed_out()));
        }
        match io(stream, cx) {
            Poll::Pending => self.wait(cx),
            ready => {
                if let Some(since) = self.blocked_since.take() {
                    self.place.flowing(since);
                }
                ready
            }
        }
    }
}

impl WriteTimer {
    fn wait<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        if self.blocked_since.is_none() {
            let now = Instant::now();
            self.blocked_since = Some(now);
            self.place.blocked(now);
            let deadline = now + self.timeout;
            match self.deadline.as_mut() {
                Some(sleep) => sleep.as_mut().reset(deadline),
                None => self.deadline = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        let expired = self
            .deadline
            .as_mut()
            .is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready());
        if !expired {
            return Poll::Pending;
        }
        self.timed_out = true;
        crate::metrics::WRITE_TIMEOUTS.inc();
        Poll::Ready(Err(write_timed_out()))
    }
}

fn write_timed_out() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the client read nothing for the write timeout",
    )
}

impl Drop for WriteTimer {
    fn drop(&mut self) {
        if let Some(since) = self.blocked_since {
            self.place.flowing(since);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WriteTimed;
    use crate::metrics::WRITE_TIMEOUTS;
    use crate::open_slots::{GiveWay, Open};
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_write_the_client_never_reads_fails_after_the_timeout() {
        let open = Arc::new(Open::default());
        let (place, _evicted) = open.enter();
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut stream = WriteTimed::new(ours, Duration::from_millis(100), place);
        stream.write_all(&[0; 64]).await.unwrap();
        assert!(!stream.has_timer(), "a write that went through set a timer");
        let counted = WRITE_TIMEOUTS.get();
        let started = std::time::Instant::now();
        let error = stream.write_all(&[0; 1]).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert!(WRITE_TIMEOUTS.get() > counted);
        // Failed for good, and counted once.
        let counted = WRITE_TIMEOUTS.get();
        assert!(stream.write_all(&[0; 1]).await.is_err());
        assert!(stream.flush().await.is_err());
        assert_eq!(WRITE_TIMEOUTS.get(), counted);
        drop(stream);
        assert!(open.blocked_writes() == 0);
    }

    #[tokio::test]
    async fn a_client_that_reads_slowly_is_never_timed_out() {
        let open = Arc::new(Open::default());
        let (place, _evicted) = open.enter();
        let (ours, mut theirs) = tokio::io::duplex(16);
        let mut stream = WriteTimed::new(ours, Duration::from_millis(200), place);
        let reader = tokio::spawn(async move {
            let mut buffer = [0u8; 16];
            let mut read = 0;
            while read < 160 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                read += theirs.read(&mut buffer).await.unwrap();
            }
        });
        // Ten times the timeout in all, never more than a quarter of it without progress.
        stream.write_all(&[0; 160]).await.unwrap();
        reader.await.unwrap();
        assert!(open.blocked_writes() == 0);
    }

    #[tokio::test]
    async fn a_blocked_connection_gives_way_before_one_without_a_request() {
        let open = Arc::new(Open::default());
        let (_waiting, mut waiting_evicted) = open.enter();
        let (place, mut evicted) = open.enter();
        place.prove();
        let (reading, mut reading_evicted) = open.enter();
        reading.prove();
        let (ours, mut theirs) = tokio::io::duplex(16);
        let mut stream = WriteTimed::new(ours, Duration::from_secs(60), Arc::clone(&place));
        let blocked = tokio::time::timeout(Duration::from_millis(50), stream.write_all(&[0; 32]));
        assert!(blocked.await.is_err(), "the write went through");
        assert_eq!(open.blocked_writes(), 1);
        // Progress takes it off the blocked ones.
        theirs.read_exact(&mut [0; 16]).await.unwrap();
        stream.write_all(&[0; 1]).await.unwrap();
        assert!(open.blocked_writes() == 0);
        let blocked = tokio::time::timeout(Duration::from_millis(50), stream.write_all(&[0; 32]));
        assert!(blocked.await.is_err(), "the write went through");

        assert!(open.evict());
        assert_eq!(evicted.try_recv(), Ok(GiveWay::Blocked));
        assert!(waiting_evicted.try_recv().is_err());
        assert!(open.evict());
        assert_eq!(waiting_evicted.try_recv(), Ok(GiveWay::NoRequest));
        // A connection that reads its answers never gives way.
        assert!(!open.evict());
        assert!(reading_evicted.try_recv().is_err());
    }
}
