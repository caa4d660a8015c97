//! The accept loop: HTTP/1.1 connections with a time limit on each request head (which is also
//! the limit on a keep-alive connection's idleness), a cap on open connections below the
//! process's file-descriptor limit, and the peer address handed to the request layers.
//!
//! axum's own `serve` sets no timer, so a connection that stalls in its request head, or sits
//! idle, is never closed: enough of them exhaust the file descriptors.

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

/// Descriptors kept for everything but client connections: the catalog's files, its reader
/// connections, outgoing sockets of the live source and backfill, logs.
pub const RESERVED_DESCRIPTORS: u64 = 256;

#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Longest wait for a complete request head, counted from the end of the previous answer
    /// on a kept-alive connection.
    pub head_timeout: Duration,
    /// Open client connections at most; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Bytes of a request head hyper buffers at most (beyond: hyper's own 431).
    pub max_head_bytes: usize,
}

/// The soft limit on open file descriptors, when the system says it.
pub fn descriptor_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Serves `router` on `listener` until `stop` turns true, then lets open connections finish
/// their current request (for at most `drain`).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
    drain: Duration,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .max_buf_size(limits.max_head_bytes);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped(&mut stop) => break,
        };
        let (stream, peer) = match accepted {
            Ok(connection) => connection,
            Err(error) => {
                // Out of descriptors (EMFILE/ENFILE) or a connection reset before it was
                // taken: wait a little rather than spin, and go on.
                tracing::warn!("accepting a connection failed: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // Full: closing at once keeps the descriptor free for the connections that are
            // already being served.
            drop(stream);
            continue;
        };
        let (http, router, stop) = (http.clone(), router.clone(), stop.clone());
        tokio::spawn(async move {
            serve_connection(&http, stream, peer, router, stop).await;
            drop(slot);
        });
    }
    // Every slot back means every connection has ended.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(drain, slots.acquire_many(all)).await;
}

async fn serve_connection(
    http: &hyper::server::conn::http1::Builder,
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    mut stop: watch::Receiver<bool>,
) {
    // Answers go out whole: no Nagle delay on small ones, and a send buffer that takes a full
    // page of records (about 70 KB) in one write.
    let _ = stream.set_nodelay(true);
    let _ = socket2::SockRef::from(&stream).set_send_buffer_size(1 << 20);
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(request.map(axum::body::Body::new))
    });
    let connection = http.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = stopped(&mut stop) => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}
