//! The write time limit of a client connection: a write that the client leaves blocked (it
//! reads nothing) for the limit fails, and the connection is closed; while blocked, the
//! connection is among the first to give its place to a newcomer.

use crate::connections::Place;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A client connection's stream whose writes have a time limit: a write (or flush, or
/// shutdown) that stays blocked for `timeout`, because the client reads nothing, fails with
/// `TimedOut`, and hyper closes the connection. While a write is blocked the connection is
/// among the first to give way to a newcomer.
pub(crate) struct WriteTimed<S> {
    stream: S,
    timeout: Duration,
    place: Arc<Place>,
    /// When the write that is blocked began to wait.
    blocked_since: Option<Instant>,
    /// Made at the first blocked write and reset at each later one: a write that completes
    /// at once, which is nearly every write, costs no timer.
    deadline: Option<Pin<Box<Sleep>>>,
    timed_out: bool,
}

impl<S> WriteTimed<S> {
    pub fn new(stream: S, timeout: Duration, place: Arc<Place>) -> Self {
        WriteTimed {
            stream,
            timeout,
            place,
            blocked_since: None,
            deadline: None,
            timed_out: false,
        }
    }

    /// Whether a timer was made: only a write that had to wait makes one.
    #[cfg(test)]
    pub fn has_timer(&self) -> bool {
        self.deadline.is_some()
    }

    /// `poll` on the stream, failing once it has been blocked for the timeout.
    fn timed<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>>
    where
        S: Unpin,
    {
        if self.timed_out {
            return Poll::Ready(Err(write_timed_out()));
        }
        match poll(Pin::new(&mut self.stream), cx) {
            Poll::Pending => self.wait(cx),
            ready => {
                if let Some(since) = self.blocked_since.take() {
                    self.place.flowing(since);
                }
                ready
            }
        }
    }

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

impl<S> Drop for WriteTimed<S> {
    fn drop(&mut self) {
        if let Some(since) = self.blocked_since {
            self.place.flowing(since);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteTimed<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteTimed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut()
            .timed(cx, |stream, cx| stream.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut()
            .timed(cx, |stream, cx| stream.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().timed(cx, |stream, cx| stream.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut()
            .timed(cx, |stream, cx| stream.poll_shutdown(cx))
    }
}
