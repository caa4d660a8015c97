//! The accept loop: HTTP/1.1 connections with a time limit on each request head (which is also
//! the limit on a keep-alive connection's idleness), a time limit on each write of an answer
//! that makes no progress, a cap on open connections below the process's file-descriptor limit,
//! and the peer address handed to the request layers. When every slot is taken, a connection
//! that waits on its client gives its slot to the newcomer: first the one whose answer has been
//! blocked longest on a client that reads nothing, then the oldest that has not yet sent a
//! whole request head. A flood of slow clients, or of clients that never read, cannot lock out
//! real ones.
//!
//! Connections are accepted on a thread of their own, which hands every connection whose first
//! request is a health or readiness probe to the probe lane, a thread that serves only those,
//! and the others to the runtime that answers queries. Under a full query load a probe then
//! waits for no query's turn (an orchestrator that restarts a server whose liveness probe is
//! slow would otherwise restart a busy server that is fine), and a flood of new connections
//! delays only the accepting of new ones.
//!
//! axum's own `serve` sets no timer, so a connection that stalls in its request head, or sits
//! idle, is never closed: enough of them exhaust the file descriptors. hyper's header timer
//! does not run while an answer is being written, so a client that pipelines requests and
//! never reads the answers would hold its connection, and the buffers of its unsent answers,
//! for ever without the write time limit.

use crate::health::PROBES;
use crate::open_slots::{GiveWay, Open, Place, take_slot};
use crate::socket_budget::{Budgeted, SocketBudget};
use crate::write_timed::WriteTimed;
use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};
use tower::ServiceExt;

/// Descriptors kept for everything but client connections: the catalog's files, its reader
/// connections, outgoing sockets of the live source and backfill, logs.
pub const RESERVED_DESCRIPTORS: u64 = 256;

#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Longest wait for a complete request head, counted from the end of the previous answer
    /// on a kept-alive connection.
    pub head_timeout: Duration,
    /// Open client connections at most; one more takes the slot of a connection that waits on
    /// its client, or is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Longest time a write of an answer may make no progress (the client reads nothing)
    /// before the connection is closed.
    pub write_timeout: Duration,
    /// Bytes of a request head hyper buffers at most (beyond: a 431, made JSON by
    /// `JsonHeadErrors`).
    pub max_head_bytes: usize,
}

/// Starts serving `router` on `listener`: every step that can fail is taken before this
/// returns, so that a server that says it is listening is. The future it returns resolves once
/// `stop` has turned true and open connections have finished their current request (for at
/// most `drain`). Queries are answered on the runtime this is called on; connections are
/// accepted on a thread of their own, and probes answered on another, both started here.
pub fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    stop: watch::Receiver<bool>,
    drain: Duration,
) -> std::io::Result<impl Future<Output = std::io::Result<()>> + Send + 'static> {
    let queries = tokio::runtime::Handle::current();
    let accepting = one_thread_runtime()?;
    let listener = {
        // Registered with the accepting runtime's reactor, where it is polled.
        let _inside = accepting.enter();
        TcpListener::from_std(listener.into_std()?)?
    };
    let (probes, probes_running) = lane_thread("http-probes")?;
    let (finished, done) = oneshot::channel();
    std::thread::Builder::new()
        .name("http-accept".into())
        .spawn(move || {
            let lanes = Lanes { probes, queries };
            accepting.block_on(accept(listener, router, limits, stop, drain, lanes));
            // The probe lane ends with the accept loop: every connection has ended or been
            // given up on by then.
            drop(probes_running);
            let _ = finished.send(());
        })?;
    Ok(async move {
        done.await
            .map_err(|_| std::io::Error::other("the accepting thread ended early"))
    })
}

fn one_thread_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// A thread running a one-thread runtime until the returned sender is dropped; the runtime's
/// handle, to spawn on it.
fn lane_thread(name: &str) -> std::io::Result<(tokio::runtime::Handle, oneshot::Sender<()>)> {
    let runtime = one_thread_runtime()?;
    let handle = runtime.handle().clone();
    let (keep_running, ended) = oneshot::channel::<()>();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = runtime.block_on(ended);
        })?;
    Ok((handle, keep_running))
}

/// The runtimes connections are served on.
struct Lanes {
    probes: tokio::runtime::Handle,
    queries: tokio::runtime::Handle,
}

async fn accept(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
    drain: Duration,
    lanes: Lanes,
) {
    let lanes = Arc::new(lanes);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let open = Arc::new(Open::default());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .max_buf_size(limits.max_head_bytes);
    while let Some((stream, peer)) = next_connection(&listener, &mut stop).await {
        let Some(slot) = take_slot(&slots, &open).await else {
            // Full of connections that are all being served and reading their answers:
            // closing at once keeps the descriptor free for them.
            drop(stream);
            continue;
        };
        let (place, evicted) = open.enter();
        let connection = Connection {
            http: http.clone(),
            peer,
            router: router.clone(),
            stop: stop.clone(),
            write_timeout: limits.write_timeout,
            place,
            slot,
            // Until its first bytes say otherwise.
            lane: Lane::Queries,
        };
        let lanes = Arc::clone(&lanes);
        tokio::spawn(serve_on_its_lane(
            connection,
            stream,
            evicted,
            lanes,
            limits.head_timeout,
        ));
    }
    // Every slot back means every connection has ended.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(drain, slots.acquire_many(all)).await;
}

/// The next connection taken; `None` once asked to stop.
async fn next_connection(
    listener: &TcpListener,
    stop: &mut watch::Receiver<bool>,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped(stop) => return None,
        };
        match accepted {
            Ok(connection) => return Some(connection),
            Err(error) => {
                // Out of descriptors (EMFILE/ENFILE) or a connection reset before it was
                // taken: wait a little rather than spin, and go on.
                tracing::warn!("accepting a connection failed: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Hands a connection to the lane its first bytes pick.
async fn serve_on_its_lane(
    connection: Connection,
    stream: TcpStream,
    mut evicted: oneshot::Receiver<GiveWay>,
    lanes: Arc<Lanes>,
    head_timeout: Duration,
) {
    let (lane, runtime) = match first_bytes(&stream, head_timeout, &mut evicted).await {
        Some(Lane::Probes) => (Lane::Probes, &lanes.probes),
        Some(Lane::Queries) => (Lane::Queries, &lanes.queries),
        None => return,
    };
    hand_over(Connection { lane, ..connection }, stream, evicted, runtime);
}

/// Where a connection is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Probes,
    Queries,
}

impl Lane {
    /// The lane of a connection whose first bytes are `start`: a probe's request line begins
    /// `GET ` and a probe's path, whole in the first segment a client sends.
    fn of(start: &[u8]) -> Lane {
        let target = start.strip_prefix(b"GET ").unwrap_or_default();
        let probe = PROBES.iter().any(|path| {
            target.starts_with(path.as_bytes())
                && matches!(target.get(path.len()), Some(b' ' | b'?' | b'\r' | b'\n'))
        });
        if probe { Lane::Probes } else { Lane::Queries }
    }
}

/// The lane of a connection, once its first bytes arrive; `None` when it sends nothing within
/// the head timeout, ends, or gives its slot away first (it is then closed).
async fn first_bytes(
    stream: &TcpStream,
    head_timeout: Duration,
    evicted: &mut oneshot::Receiver<GiveWay>,
) -> Option<Lane> {
    let mut start = [0u8; 16];
    let peeked = tokio::select! {
        peeked = tokio::time::timeout(head_timeout, stream.peek(&mut start)) => peeked,
        Ok(_) = &mut *evicted => return None,
    };
    match peeked {
        Ok(Ok(n)) if n > 0 => Some(Lane::of(&start[..n])),
        _ => None,
    }
}

/// Moves a connection to the runtime of its lane and serves it there.
fn hand_over(
    connection: Connection,
    stream: TcpStream,
    evicted: oneshot::Receiver<GiveWay>,
    lane: &tokio::runtime::Handle,
) {
    let Ok(stream) = stream.into_std() else {
        return;
    };
    lane.spawn(async move {
        // Registered with the lane's own reactor, or closed if it cannot be.
        if let Ok(stream) = TcpStream::from_std(stream) {
            connection.serve(stream, evicted).await;
        }
    });
}

/// An accepted connection with what serving it takes: its slot among the open connections is
/// given back when it is dropped.
struct Connection {
    http: hyper::server::conn::http1::Builder,
    peer: SocketAddr,
    router: Router,
    stop: watch::Receiver<bool>,
    write_timeout: Duration,
    place: Arc<Place>,
    slot: OwnedSemaphorePermit,
    /// The lane it is served on. The probe lane answers one request a connection, the probe
    /// that chose it, and closes it (`Connection: close`; a client's next request comes on a
    /// new connection, which its first bytes place), so that a connection opened with a probe
    /// cannot bring queries or streams onto the probe thread.
    lane: Lane,
}

impl Connection {
    async fn serve(self, stream: TcpStream, evicted: oneshot::Receiver<GiveWay>) {
        let Connection {
            http,
            peer,
            router,
            mut stop,
            write_timeout,
            place,
            slot,
            lane,
        } = self;
        let budget = Arc::new(SocketBudget::default());
        let stream = Budgeted::new(stream, Arc::clone(&budget));
        let service = {
            let place = Arc::clone(&place);
            hyper::service::service_fn(move |mut request: hyper::Request<_>| {
                place.prove();
                request.extensions_mut().insert(ConnectInfo(peer));
                request.extensions_mut().insert(Arc::clone(&budget));
                router.clone().oneshot(request.map(axum::body::Body::new))
            })
        };
        let stream = WriteTimed::new(stream, write_timeout, Arc::clone(&place));
        let stream = crate::json_head_errors::JsonHeadErrors::new(stream);
        let mut http = http;
        if lane == Lane::Probes {
            http.keep_alive(false);
        }
        // Upgrades carry the change stream's WebSocket subscribers; the upgraded connection
        // keeps the write time limit.
        let connection = http
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        tokio::pin!(connection);
        // Dropping the connection closes it. A request whose head arrived just as the
        // connection was chosen for having none is served instead: nothing is cut short.
        let given_way = async {
            match evicted.await {
                Ok(GiveWay::Blocked) => {}
                Ok(GiveWay::NoRequest) if !place.is_proven() => {}
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = connection.as_mut() => {}
            () = given_way => {}
            _ = stopped(&mut stop) => {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
        }
        drop(slot);
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

#[cfg(test)]
mod tests {
    use super::Lane;

    #[test]
    fn probes_are_told_by_their_request_line() {
        for probe in [
            &b"GET /healthz HTTP/1.1\r\n"[..],
            b"GET /readyz HTTP/1.1",
            b"GET /healthz?x=1 HTTP",
            b"GET /readyz\r\n",
        ] {
            assert_eq!(Lane::of(probe), Lane::Probes, "{probe:?}");
        }
        for other in [
            &b"GET /healthzz HTTP/1.1"[..],
            b"GET /v1/stats HTTP/1.1",
            b"POST /healthz HTTP/1.1",
            b"GET /healt",
            b"",
            b"GET /readyz/x HTTP/1.1",
        ] {
            assert_eq!(Lane::of(other), Lane::Queries, "{other:?}");
        }
    }
}
