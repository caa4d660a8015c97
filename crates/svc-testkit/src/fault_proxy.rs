//! A TCP proxy on loopback that stands between svc and one of its peers (the PLC directory, a
//! PDS's firehose) and fails on demand, the way networks and servers fail: it answers 503 or
//! 429 for the peer, resets the connection in the middle of an answer, or never answers; and it
//! drops live connections, a WebSocket's included, at any moment the test picks.
//!
//! ```ignore
//! let directory = FaultProxy::start(peers.plc_port);
//! let server = Server::launch(db, &["--plc-url", &directory.url(), ...]);
//! directory.set(Mode::Unavailable);
//! // ... svc meets 503s ...
//! directory.set(Mode::Pass);
//! ```
//!
//! Each accepted connection is served, on a thread of its own, in the mode of the moment it
//! was accepted; every mode switch closes all live connections, so that a client holding
//! pooled keep-alive connections (reqwest) meets the new mode at its next request. In `Pass`
//! the proxy relays bytes both ways and nothing else, so a WebSocket works through it.
//! Everything is bounded: at most `MAX_CONNECTIONS` connections at once (two threads each in
//! `Pass`, one otherwise), fixed buffers, time limits on what a fault waits for. Dropping the
//! proxy closes every connection and stops it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How the proxy treats the connections it accepts from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Relays bytes both ways, untouched.
    Pass,
    /// Answers each request `503 Service Unavailable` (a small JSON body, `Connection:
    /// close`) itself: the target never hears of it.
    Unavailable,
    /// Answers each request `429 Too Many Requests` with `Retry-After`, as `Unavailable` does.
    RateLimited { retry_after_secs: u64 },
    /// Forwards the request, relays the head and part of the body of the answer, then resets
    /// the connection (SO_LINGER 0 and close).
    ResetMidBody,
    /// Accepts and reads whatever comes, and never answers.
    Stall,
}

/// Connections open at once; one more is reset as it comes.
const MAX_CONNECTIONS: usize = 128;
/// A relay's buffer, and the most of a request head or of a partial answer kept.
const BUFFER: usize = 16 * 1024;
/// The most of a request body read before the proxy answers for the target.
const MAX_BODY: u64 = 1 << 20;
/// The proxy's threads keep their buffers on the heap.
const STACK: usize = 256 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a faulty connection waits for the client's request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `ResetMidBody` waits for the target's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a refused client gets to read the answer and close before the proxy does.
const LINGER_AFTER_ANSWER: Duration = Duration::from_secs(2);
/// How long a stalled connection stays silent at most if nothing closes it: longer than any
/// stall a test asks for, so it is the test's mode switch that ends it.
const STALL_LIMIT: Duration = Duration::from_secs(120);

const UNAVAILABLE: &str = r#"{"error":"ServiceUnavailable","message":"a peer that is down"}"#;
const RATE_LIMITED: &str = r#"{"error":"RateLimitExceeded","message":"a peer that is busy"}"#;

/// A running proxy to one target; see the module's documentation.
pub struct FaultProxy {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    target: SocketAddr,
    state: Mutex<State>,
    /// Connections accepted so far.
    connections: AtomicU64,
    /// Connections accepted in a mode other than `Pass`.
    faulted: AtomicU64,
}

struct State {
    mode: Mode,
    /// The sockets of each open connection (the client's, and the target's once connected):
    /// what a mode switch and `drop_connections` close. A connection no longer here was closed.
    live: HashMap<u64, Vec<TcpStream>>,
    next: u64,
    stopped: bool,
}

impl FaultProxy {
    /// A proxy on `127.0.0.1:<ephemeral port>` to `127.0.0.1:<target_port>` (where the test
    /// peers listen), passing.
    pub fn start(target_port: u16) -> FaultProxy {
        let target = SocketAddr::from(([127, 0, 0, 1], target_port));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fault proxy");
        let port = listener
            .local_addr()
            .expect("the fault proxy's address")
            .port();
        let shared = Arc::new(Shared {
            target,
            state: Mutex::new(State {
                mode: Mode::Pass,
                live: HashMap::new(),
                next: 0,
                stopped: false,
            }),
            connections: AtomicU64::new(0),
            faulted: AtomicU64::new(0),
        });
        let accepting = Arc::clone(&shared);
        let acceptor = std::thread::Builder::new()
            .name(format!("fault-proxy-{port}"))
            .stack_size(STACK)
            .spawn(move || accept(&listener, &accepting))
            .expect("start the fault proxy");
        FaultProxy {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `ws://127.0.0.1:<port>`: a firehose base, for a proxy in front of a PDS.
    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    pub fn mode(&self) -> Mode {
        self.shared.lock().mode
    }

    /// Switches to `mode` and closes every live connection, so that the next request of every
    /// client, pooled connection or not, meets the new mode.
    pub fn set(&self, mode: Mode) {
        let closed = {
            let mut state = self.shared.lock();
            state.mode = mode;
            std::mem::take(&mut state.live)
        };
        abort_all(closed);
        eprintln!(
            "fault proxy {} to {}: {mode:?}",
            self.url(),
            self.shared.target
        );
    }

    /// Closes every live connection abruptly (a reset), the mode unchanged: a firehose
    /// connection through the proxy breaks as a network failure would break it.
    pub fn drop_connections(&self) {
        let closed = std::mem::take(&mut self.shared.lock().live);
        abort_all(closed);
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Connections accepted in a mode other than `Pass`: the faults a client met.
    pub fn faulted(&self) -> u64 {
        self.shared.faulted.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let closed = {
            let mut state = self.shared.lock();
            state.stopped = true;
            std::mem::take(&mut state.live)
        };
        abort_all(closed);
        // The acceptor waits in accept(): a connection of our own wakes it to see the stop.
        let woken = TcpStream::connect(("127.0.0.1", self.port)).is_ok();
        if let Some(acceptor) = self.acceptor.take().filter(|_| woken) {
            let _ = acceptor.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection ended: its sockets close (the last handle closing each).
    fn forget(&self, id: u64) {
        let sockets = self.lock().live.remove(&id);
        drop(sockets);
    }

    /// A connection to the target for connection `id`, kept among its sockets; `None` when the
    /// target cannot be reached or the connection was closed meanwhile (a mode switch).
    fn connect(&self, id: u64) -> Option<TcpStream> {
        let target = TcpStream::connect_timeout(&self.target, CONNECT_TIMEOUT).ok()?;
        let _ = target.set_nodelay(true);
        let handle = target.try_clone().ok()?;
        let adopted = {
            let mut state = self.lock();
            match state.live.get_mut(&id) {
                Some(sockets) => {
                    sockets.push(handle);
                    true
                }
                None => false,
            }
        };
        if adopted {
            Some(target)
        } else {
            abort(&target);
            None
        }
    }
}

fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    for incoming in listener.incoming() {
        let client = match incoming {
            Ok(client) => client,
            Err(_) if shared.lock().stopped => return,
            // Out of descriptors, or the like: a moment's rest rather than a spin.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let Ok(handle) = client.try_clone() else {
            abort(&client);
            continue;
        };
        // The mode is read and the connection registered under one lock, so a mode switch
        // either closes this connection or comes after it and is met by it.
        let admitted = {
            let mut state = shared.lock();
            if state.stopped {
                return;
            }
            if state.live.len() < MAX_CONNECTIONS {
                let id = state.next;
                state.next += 1;
                state.live.insert(id, vec![handle]);
                Some((id, state.mode))
            } else {
                None
            }
        };
        let Some((id, mode)) = admitted else {
            abort(&client);
            continue;
        };
        shared.connections.fetch_add(1, Ordering::Relaxed);
        if mode != Mode::Pass {
            shared.faulted.fetch_add(1, Ordering::Relaxed);
        }
        let serving = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name(format!("fault-proxy-conn-{id}"))
            .stack_size(STACK)
            .spawn(move || {
                serve(&serving, id, client, mode);
                serving.forget(id);
            });
        if spawned.is_err() {
            let sockets = shared.lock().live.remove(&id).unwrap_or_default();
            for socket in &sockets {
                abort(socket);
            }
        }
    }
}

fn serve(shared: &Shared, id: u64, client: TcpStream, mode: Mode) {
    match mode {
        Mode::Pass => pass(shared, id, &client),
        Mode::Unavailable => refuse(&client, "503 Service Unavailable", "", UNAVAILABLE),
        Mode::RateLimited { retry_after_secs } => refuse(
            &client,
            "429 Too Many Requests",
            &format!("retry-after: {retry_after_secs}\r\n"),
            RATE_LIMITED,
        ),
        Mode::ResetMidBody => reset_mid_body(shared, id, &client),
        Mode::Stall => {
            let _ = client.set_read_timeout(Some(STALL_LIMIT));
            drain(&client);
        }
    }
}

/// Relays both ways until the target ends the connection (or a mode switch does).
fn pass(shared: &Shared, id: u64, client: &TcpStream) {
    let Some(target) = shared.connect(id) else {
        // The target is down (a PDS restarting): the client sees its connection reset.
        abort(client);
        return;
    };
    let _ = client.set_nodelay(true);
    let (Ok(from_client), Ok(to_target)) = (client.try_clone(), target.try_clone()) else {
        abort(client);
        abort(&target);
        return;
    };
    let forward = std::thread::Builder::new()
        .name(format!("fault-proxy-fwd-{id}"))
        .stack_size(STACK)
        .spawn(move || {
            pump(&from_client, &to_target);
            // The client sent all it will: the target hears the end and may still answer.
            let _ = to_target.shutdown(Shutdown::Write);
        });
    let Ok(forward) = forward else {
        abort(client);
        abort(&target);
        return;
    };
    pump(&target, client);
    // The target is done, or the client is gone: so is the connection, both ways.
    let _ = client.shutdown(Shutdown::Both);
    let _ = target.shutdown(Shutdown::Both);
    let _ = forward.join();
}

/// Answers the request for the target with `status`, which the target never sees.
fn refuse(client: &TcpStream, status: &str, headers: &str, body: &str) {
    let _ = client.set_read_timeout(Some(REQUEST_TIMEOUT));
    if read_request(client).is_none() {
        return;
    }
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         {headers}connection: close\r\n\r\n{body}",
        body.len()
    );
    if write_all(client, answer.as_bytes()).is_err() {
        return;
    }
    let _ = client.shutdown(Shutdown::Write);
    // Whatever else comes is read until the client closes: closing with unread bytes would
    // reset the connection, and the client could lose the answer.
    let _ = client.set_read_timeout(Some(LINGER_AFTER_ANSWER));
    drain(client);
}

/// Forwards one request, relays part of the answer, and resets the connection.
fn reset_mid_body(shared: &Shared, id: u64, client: &TcpStream) {
    let _ = client.set_read_timeout(Some(REQUEST_TIMEOUT));
    let Some(request) = read_request(client) else {
        return;
    };
    let Some(target) = shared.connect(id) else {
        abort(client);
        return;
    };
    let _ = target.set_read_timeout(Some(ANSWER_TIMEOUT));
    let part = match write_all(&target, &request) {
        Ok(()) => part_of_answer(&target),
        Err(_) => Vec::new(),
    };
    let _ = target.shutdown(Shutdown::Both);
    let _ = write_all(client, &part);
    // A moment for the part to arrive before the reset overtakes it.
    std::thread::sleep(Duration::from_millis(50));
    // With SO_LINGER 0, the last close of the socket (this thread's handle and the one kept
    // among the live connections, both dropped as the connection is forgotten) sends a reset.
    set_linger_zero(client);
}

/// One request as the client sent it: the head (at most `BUFFER` bytes) and as much of the
/// body as its `content-length` says (at most `MAX_BODY`). `None` when no whole head came.
fn read_request(client: &TcpStream) -> Option<Vec<u8>> {
    let mut request = Vec::new();
    let mut chunk = vec![0u8; 4096];
    let head_end = loop {
        if let Some(end) = find(&request, b"\r\n\r\n") {
            break end + 4;
        }
        if request.len() >= BUFFER {
            return None;
        }
        match read(client, &mut chunk) {
            Some(0) | None => return None,
            Some(n) => request.extend_from_slice(&chunk[..n]),
        }
    };
    let wanted = head_end + content_length(&request[..head_end]).min(MAX_BODY) as usize;
    while request.len() < wanted {
        match read(client, &mut chunk) {
            Some(0) | None => break,
            Some(n) => request.extend_from_slice(&chunk[..n]),
        }
    }
    Some(request)
}

/// The `content-length` a request head announces, 0 without one.
fn content_length(head: &[u8]) -> u64 {
    String::from_utf8_lossy(head)
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0)
}

/// The head of the target's answer and half of the body bytes that came with it (or half of
/// what came, when no whole head did): never the whole answer, unless it has no body.
fn part_of_answer(target: &TcpStream) -> Vec<u8> {
    let mut answer = Vec::new();
    let mut chunk = vec![0u8; 4096];
    let cut = loop {
        if let Some(end) = find(&answer, b"\r\n\r\n") {
            let body = answer.len() - (end + 4);
            if body > 0 {
                break end + 4 + body / 2;
            }
        }
        if answer.len() >= BUFFER {
            break answer.len() / 2;
        }
        match read(target, &mut chunk) {
            Some(0) | None => break answer.len() / 2,
            Some(n) => {
                let room = BUFFER - answer.len();
                answer.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    };
    answer.truncate(cut);
    answer
}

/// Copies `from` to `to` until `from` ends or either fails.
fn pump(from: &TcpStream, to: &TcpStream) {
    let mut buffer = vec![0u8; BUFFER];
    while let Some(n) = read(from, &mut buffer).filter(|n| *n > 0) {
        if write_all(to, &buffer[..n]).is_err() {
            return;
        }
    }
}

/// Reads and drops everything until the stream ends, fails or times out.
fn drain(from: &TcpStream) {
    let mut buffer = vec![0u8; 4096];
    while read(from, &mut buffer).is_some_and(|n| n > 0) {}
}

/// One read, retried when interrupted; `None` on an error (a timeout included).
fn read(mut from: &TcpStream, buffer: &mut [u8]) -> Option<usize> {
    loop {
        match from.read(buffer) {
            Ok(n) => return Some(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

fn write_all(mut to: &TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    to.write_all(bytes)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The socket resets, rather than closes, when its last handle is closed.
fn set_linger_zero(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads `linger`, valid for the call, and the descriptor is the
    // stream's own, open while the stream is borrowed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::from_ref(&linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Ends a connection abruptly: every thread blocked on the socket wakes (shutdown), and its
/// last close sends a reset.
fn abort(stream: &TcpStream) {
    set_linger_zero(stream);
    let _ = stream.shutdown(Shutdown::Both);
}

fn abort_all(connections: HashMap<u64, Vec<TcpStream>>) {
    for socket in connections.into_values().flatten() {
        abort(&socket);
    }
}
