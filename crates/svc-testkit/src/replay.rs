//! A stand-in for Jetstream, which has no runnable server here: a websocket server that
//! speaks its wire format (JSON text events, `cursor` in microseconds, `wantedCollections`),
//! serves a list of events from the requested cursor on, and can drop a connection on demand.

use futures_util::{SinkExt, StreamExt};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

#[derive(Default)]
pub struct ReplayState {
    /// (time_us, JSON text): sent in this order to every connection, from its cursor on.
    pub events: Vec<(i64, String)>,
    /// Drop the next connection after sending this many events.
    pub disconnect_after: Option<usize>,
    /// Misbehave on the next connection after sending this many events.
    pub fault_after: Option<(usize, Fault)>,
    /// The `cursor` query parameter of each connection, in order (`None`: no cursor).
    pub cursors: Vec<Option<i64>>,
    /// The `wantedCollections` of each connection.
    pub wanted: Vec<Vec<String>>,
    /// Whether each connection asked for zstd compression.
    pub compressed: Vec<bool>,
}

/// How a source can misbehave in the middle of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Half a websocket frame, then the connection is gone.
    DropMidFrame,
    /// Bytes that are no websocket frame at all, on a connection left open.
    Garbage,
    /// Nothing more: no event, no pong, no close, the connection left open.
    Stall,
}

pub struct Replay {
    pub url: String,
    pub state: Arc<Mutex<ReplayState>>,
}

/// The values a request's query gives `name`, in order.
pub(crate) fn query_values(uri: &str, name: &str) -> Vec<String> {
    uri.split_once('?')
        .map(|(_, q)| q)
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v.replace("%2A", "*"))
        .collect()
}

fn wanted(collections: &[String], line: &str) -> bool {
    let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
        return true; // malformed lines go out as they are
    };
    let Some(collection) = event["commit"]["collection"].as_str() else {
        return true; // identity and account events are not filtered
    };
    collections.is_empty()
        || collections.iter().any(|w| match w.strip_suffix('*') {
            Some(prefix) => collection.starts_with(prefix),
            None => collection == w,
        })
}

/// Runs a test server's future on a thread of its own, with a one-thread runtime.
pub fn spawn_async(task: impl std::future::Future<Output = ()> + Send + 'static) {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(task)
    });
}

impl Replay {
    pub fn start(events: Vec<(i64, String)>) -> Replay {
        let state = Arc::new(Mutex::new(ReplayState {
            events,
            ..ReplayState::default()
        }));
        let (sender, receiver) = std::sync::mpsc::channel();
        let shared = Arc::clone(&state);
        spawn_async(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let port = listener.local_addr().expect("address").port();
            sender.send(port).expect("port");
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&shared)));
            }
        });
        let port = receiver.recv().expect("the replay server started");
        Replay {
            url: format!("ws://127.0.0.1:{port}/subscribe"),
            state,
        }
    }

    /// Appends events: connections already open get them next.
    pub fn publish(&self, events: impl IntoIterator<Item = (i64, String)>) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .events
            .extend(events);
    }
}

// The callback type is the handshake API's own.
#[allow(clippy::result_large_err)]
async fn serve(stream: tokio::net::TcpStream, state: Arc<Mutex<ReplayState>>) {
    let mut uri = String::new();
    let callback = |request: &Request, response: Response| {
        uri = request.uri().to_string();
        Ok(response)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let cursor = query_values(&uri, "cursor")
        .first()
        .and_then(|c| c.parse().ok());
    let collections = query_values(&uri, "wantedCollections");
    let compress = query_values(&uri, "compress")
        .first()
        .is_some_and(|c| c == "true");
    let (events, mut seen, disconnect_after, fault) = {
        let mut state = state.lock().expect("state");
        state.cursors.push(cursor);
        state.wanted.push(collections.clone());
        state.compressed.push(compress);
        let events: Vec<String> = state
            .events
            .iter()
            .filter(|(time, _)| cursor.is_none_or(|c| *time >= c))
            .filter(|(_, line)| wanted(&collections, line))
            .map(|(_, line)| line.clone())
            .collect();
        (
            events,
            state.events.len(),
            state.disconnect_after.take(),
            state.fault_after.take(),
        )
    };
    for (sent, line) in events.into_iter().enumerate() {
        if disconnect_after == Some(sent) {
            return; // dropped without a close frame, like a network failure
        }
        if let Some((after, fault)) = fault
            && after == sent
        {
            misbehave(socket, fault).await;
            return;
        }
        if socket.send(message(&line, compress)).await.is_err() {
            return;
        }
    }
    // Live now: events appended to the list go out as they come.
    serve_appended(&mut socket, || {
        let state = state.lock().expect("state");
        let fresh = state.events[seen.min(state.events.len())..]
            .iter()
            .filter(|(_, line)| wanted(&collections, line))
            .map(|(_, line)| message(line, compress))
            .collect();
        seen = state.events.len();
        fresh
    })
    .await;
}

/// Sends what `appended` gives every 10 ms, answering pings, until the connection ends: a
/// source's live tail.
pub(crate) async fn serve_appended(
    socket: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    mut appended: impl FnMut() -> Vec<Message>,
) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(10));
    loop {
        tokio::select! {
            incoming = socket.next() => match incoming {
                Some(Ok(Message::Ping(payload))) => {
                    let _ = socket.send(Message::Pong(payload)).await;
                }
                Some(Ok(_)) => {}
                _ => return,
            },
            _ = tick.tick() => {
                for message in appended() {
                    if socket.send(message).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

fn message(line: &str, compress: bool) -> Message {
    if compress {
        // Jetstream compresses each event with its published dictionary.
        let dictionary = include_bytes!("../../svc-ingest/data/jetstream-zstd-dictionary");
        let mut compressor = zstd::bulk::Compressor::with_dictionary(3, dictionary).expect("zstd");
        Message::Binary(
            compressor
                .compress(line.as_bytes())
                .expect("compress")
                .into(),
        )
    } else {
        Message::Text(line.to_string().into())
    }
}

async fn misbehave(
    mut socket: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    fault: Fault,
) {
    use tokio::io::AsyncWriteExt;
    match fault {
        Fault::DropMidFrame => {
            // A text frame announcing 100 bytes, and 10 of them.
            let _ = socket.get_mut().write_all(b"\x81\x64{\"did\":\"d").await;
            let _ = socket.get_mut().flush().await;
        }
        Fault::Garbage => {
            // Reserved bits and a reserved opcode: no websocket frame starts like this.
            let _ = socket.get_mut().write_all(&[0xff; 64]).await;
            let _ = socket.get_mut().flush().await;
            tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        }
        Fault::Stall => tokio::time::sleep(std::time::Duration::from_secs(60)).await,
    }
}
