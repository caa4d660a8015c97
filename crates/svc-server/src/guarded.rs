//! A client connection's stream with a guard around its reads and writes: the stream's I/O is
//! passed through once here, and each guard (the socket budget, the write time limit) says
//! only what it does around a read or a write.

use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a guard does around the I/O of the stream `S` it guards.
pub(crate) trait Guard<S> {
    /// Before a read: an error fails the read, which ends the connection.
    fn before_read(&mut self, _stream: &S) -> std::io::Result<()> {
        Ok(())
    }

    /// A write, flush or shutdown of `stream`, which `io` performs.
    fn write<T>(
        &mut self,
        stream: Pin<&mut S>,
        cx: &mut Context<'_>,
        io: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>>;
}

/// `stream`, its reads and writes passed through `guard`.
pub(crate) struct Guarded<S, G> {
    pub(crate) stream: S,
    pub(crate) guard: G,
}

impl<S: Unpin, G: Guard<S> + Unpin> Guarded<S, G> {
    fn write<T>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        io: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        let this = self.get_mut();
        this.guard.write(Pin::new(&mut this.stream), cx, io)
    }
}

impl<S: AsyncRead + Unpin, G: Guard<S> + Unpin> AsyncRead for Guarded<S, G> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.guard.before_read(&this.stream)?;
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin, G: Guard<S> + Unpin> AsyncWrite for Guarded<S, G> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.write(cx, |stream, cx| stream.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.write(cx, |stream, cx| stream.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.write(cx, |stream, cx| stream.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.write(cx, |stream, cx| stream.poll_shutdown(cx))
    }
}
