//! What a client connection may hold in the kernel, and how a request's handler changes it.
//!
//! Every connection's send buffer is fixed (`SO_SNDBUF`, which the kernel doubles for its own
//! bookkeeping) instead of left to autotuning, so that the kernel memory a client that reads
//! nothing can hold is known: an answer connection takes a full page of records in one write,
//! a change-stream subscriber, whose messages are small and steady, far less. A subscriber the
//! stream gives up on is hung up: if its answer is still blocked on a client that reads
//! nothing, the connection is reset at once (`SO_LINGER` 0) instead of lingering with its
//! unsent bytes until the write time limit.

use crate::guarded::{Guard, Guarded};
use futures_util::task::AtomicWaker;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use tokio::net::TcpStream;

/// Send buffer asked for an answer connection: a page of records (about 70 KB) in one write.
pub const ANSWER_SEND_BUFFER: usize = 128 * 1024;
/// Send buffer asked for a change-stream subscriber.
pub const STREAM_SEND_BUFFER: usize = 16 * 1024;

/// A connection's budget as the request layers see it (a request extension).
#[derive(Debug, Default)]
pub(crate) struct SocketBudget {
    streaming: AtomicBool,
    hung_up: AtomicBool,
    waker: AtomicWaker,
}

impl SocketBudget {
    /// The connection now carries a change stream: its send buffer shrinks at its next write.
    pub fn carries_a_stream(&self) {
        self.streaming.store(true, Ordering::Release);
    }

    /// Resets the connection if its writes are blocked on a client that reads nothing; a
    /// connection whose writes flow goes on to its graceful end.
    pub fn hang_up(&self) {
        self.hung_up.store(true, Ordering::Release);
        self.waker.wake();
    }
}

/// A client's TCP stream under its [`SocketBudget`].
pub(crate) type Budgeted = Guarded<TcpStream, BudgetKeeper>;

impl Budgeted {
    pub fn new(stream: TcpStream, budget: Arc<SocketBudget>) -> Budgeted {
        let _ = stream.set_nodelay(true);
        let _ = socket2::SockRef::from(&stream).set_send_buffer_size(ANSWER_SEND_BUFFER);
        let guard = BudgetKeeper {
            budget,
            shrunk: false,
            write_blocked: false,
        };
        Guarded { stream, guard }
    }
}

/// What keeps a connection's socket to its budget.
pub(crate) struct BudgetKeeper {
    budget: Arc<SocketBudget>,
    shrunk: bool,
    write_blocked: bool,
}

impl BudgetKeeper {
    /// Applies what the handlers asked; an error once the connection was hung up while
    /// blocked.
    fn settle(&mut self, stream: &TcpStream) -> std::io::Result<()> {
        if !self.shrunk && self.budget.streaming.load(Ordering::Acquire) {
            self.shrunk = true;
            let _ = socket2::SockRef::from(stream).set_send_buffer_size(STREAM_SEND_BUFFER);
        }
        if self.write_blocked && self.budget.hung_up.load(Ordering::Acquire) {
            // Dropped with a zero linger time, the socket is reset and its unsent bytes freed.
            let _ = socket2::SockRef::from(stream).set_linger(Some(std::time::Duration::ZERO));
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "a subscriber that fell behind was hung up",
            ));
        }
        Ok(())
    }
}

impl Guard<TcpStream> for BudgetKeeper {
    fn before_read(&mut self, stream: &TcpStream) -> std::io::Result<()> {
        self.settle(stream)
    }

    fn write<T>(
        &mut self,
        mut stream: Pin<&mut TcpStream>,
        cx: &mut Context<'_>,
        io: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        self.settle(&stream)?;
        match io(stream.as_mut(), cx) {
            Poll::Pending => {
                self.write_blocked = true;
                self.budget.waker.register(cx.waker());
                // A hang-up between the write and the registration is not missed.
                self.settle(&stream)?;
                Poll::Pending
            }
            ready => {
                self.write_blocked = false;
                ready
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn pair() -> (Budgeted, Arc<SocketBudget>, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let client = TcpStream::connect(address).await.unwrap();
        let (ours, _) = listener.accept().await.unwrap();
        let budget = Arc::new(SocketBudget::default());
        (Budgeted::new(ours, Arc::clone(&budget)), budget, client)
    }

    fn send_buffer(stream: &Budgeted) -> usize {
        socket2::SockRef::from(&stream.stream)
            .send_buffer_size()
            .unwrap()
    }

    #[tokio::test]
    async fn a_stream_s_send_buffer_shrinks_at_its_next_write() {
        let (mut ours, budget, _client) = pair().await;
        // The kernel doubles what it is asked for.
        assert_eq!(send_buffer(&ours), 2 * ANSWER_SEND_BUFFER);
        budget.carries_a_stream();
        ours.write_all(b"data: {}\n\n").await.unwrap();
        assert_eq!(send_buffer(&ours), 2 * STREAM_SEND_BUFFER);
    }

    #[tokio::test]
    async fn a_hang_up_spares_a_connection_whose_writes_flow() {
        let (mut ours, budget, _client) = pair().await;
        budget.hang_up();
        ours.write_all(b"data: {}\n\n").await.unwrap();
        ours.flush().await.unwrap();
    }

    #[tokio::test]
    async fn a_hang_up_resets_a_blocked_write_at_once() {
        let (mut ours, budget, client) = pair().await;
        let _ = socket2::SockRef::from(&client).set_recv_buffer_size(4096);
        let blocked = tokio::spawn(async move {
            let chunk = vec![0u8; 64 * 1024];
            loop {
                if let Err(error) = ours.write_all(&chunk).await {
                    return error;
                }
            }
        });
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!blocked.is_finished(), "the writes filled the buffers");
        let hung_up = std::time::Instant::now();
        budget.hang_up();
        let error = blocked.await.unwrap();
        assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset);
        assert!(hung_up.elapsed() < std::time::Duration::from_secs(1));
    }
}
