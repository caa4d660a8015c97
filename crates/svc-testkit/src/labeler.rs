//! A labeler that misbehaves on demand, speaking the real wire format: its DID is
//! `did:web:localhost%3A<port>`, whose document (served on that port) names its label key and
//! its `subscribeLabels` stream (on a second port). Each connection gets what the test set:
//! signed labels from the cursor on (a flood of them, if asked), then silence that answers
//! pings; or a hang, or garbage first. The real labeler of the peers (`@skyware/labeler`) cannot be made to misbehave.

use crate::replay::{serve_appended, spawn_async};
use futures_util::SinkExt;
use std::sync::{Arc, Mutex};
use svc_repo::author::SigningKey;
use svc_repo::crypto::Curve;
use svc_repo::dagcbor::{self, Cbor};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

/// What the next connections get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// The labels from the cursor on, then live ones as they are added; pings answered.
    Serve,
    /// The handshake, then nothing: no frame, no pong.
    Hang,
    /// A binary message that is no frame, then the labels as `Serve` sends them.
    GarbageFirst,
}

pub struct HostileLabeler {
    pub did: String,
    key: SigningKey,
    state: Arc<Mutex<State>>,
}

struct State {
    /// Encoded `#labels` frames; frame `n` has sequence number `n + 1`.
    frames: Vec<Vec<u8>>,
    behaviour: Behaviour,
    /// The cursor each connection asked for.
    cursors: Vec<Option<i64>>,
}

fn text(value: &str) -> Cbor {
    Cbor::Text(value.to_string())
}

fn map(fields: Vec<(&str, Cbor)>) -> Cbor {
    Cbor::Map(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

impl HostileLabeler {
    pub fn start() -> HostileLabeler {
        let key = SigningKey::from_seed(Curve::K256, b"the hostile labeler's key");
        let state = Arc::new(Mutex::new(State {
            frames: Vec::new(),
            behaviour: Behaviour::Serve,
            cursors: Vec::new(),
        }));
        let (ports, receiver) = std::sync::mpsc::channel();
        let (shared, public) = (Arc::clone(&state), key.public().multikey());
        spawn_async(async move {
            let stream = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let documents = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let stream_port = stream.local_addr().expect("address").port();
            let document_port = documents.local_addr().expect("address").port();
            ports.send(document_port).expect("ports");
            let did = format!("did:web:localhost%3A{document_port}");
            let document = serde_json::json!({
                "id": did,
                "verificationMethod": [{"id": format!("{did}#atproto_label"), "type": "Multikey",
                    "controller": did, "publicKeyMultibase": public}],
                "service": [{"id": "#atproto_labeler", "type": "AtprotoLabeler",
                    "serviceEndpoint": format!("http://127.0.0.1:{stream_port}")}]
            })
            .to_string();
            tokio::spawn(serve_documents(documents, document));
            while let Ok((socket, _)) = stream.accept().await {
                tokio::spawn(serve(socket, Arc::clone(&shared)));
            }
        });
        let port = receiver.recv().expect("the labeler started");
        HostileLabeler {
            did: format!("did:web:localhost%3A{port}"),
            key,
            state,
        }
    }

    /// Adds a label (signed, or with its signature damaged) as the next frame.
    pub fn add(&self, uri: &str, val: &str, neg: bool, forged: bool) {
        let frame = self.frame(uri, val, neg, forged);
        self.lock().frames.push(frame);
    }

    /// Adds signed labels `(uri, val, neg)`, `per_frame` to a frame.
    pub fn add_in_frames(&self, labels: &[(String, String, bool)], per_frame: usize) {
        for chunk in labels.chunks(per_frame.max(1)) {
            let signed = chunk
                .iter()
                .map(|(uri, val, neg)| self.signed(uri, val, *neg, false))
                .collect();
            let seq = self.lock().frames.len() as i128 + 1;
            let frame = labels_frame(seq, signed);
            self.lock().frames.push(frame);
        }
    }

    fn frame(&self, uri: &str, val: &str, neg: bool, forged: bool) -> Vec<u8> {
        let label = self.signed(uri, val, neg, forged);
        let seq = self.lock().frames.len() as i128 + 1;
        labels_frame(seq, vec![label])
    }

    /// A label, its signature damaged when `forged`.
    fn signed(&self, uri: &str, val: &str, neg: bool, forged: bool) -> Cbor {
        let mut fields = vec![
            ("ver", Cbor::Integer(1)),
            ("src", text(&self.did)),
            ("uri", text(uri)),
            ("val", text(val)),
            ("neg", Cbor::Bool(neg)),
            ("cts", text("2026-11-29T00:00:00.000Z")),
        ];
        let unsigned = dagcbor::encode(&map(fields.clone())).expect("encode");
        let mut sig = self.key.sign(&unsigned).to_vec();
        if forged {
            sig[31] ^= 1;
        }
        fields.push(("sig", Cbor::Bytes(sig)));
        map(fields)
    }

    /// Adds `n` signed labels, each on a record nobody holds, one frame each.
    pub fn flood(&self, n: usize) {
        for at in 0..n {
            let uri = format!("at://did:plc:nobody{at}/dev.svc.bounty/1");
            self.add(&uri, "flood", false, false);
        }
    }

    pub fn behave(&self, behaviour: Behaviour) {
        self.lock().behaviour = behaviour;
    }

    /// Forgets every label, as a labeler whose database was lost: sequence numbers start
    /// again at 1, and a cursor past them is answered `FutureCursor`.
    pub fn forget_all(&self) {
        self.lock().frames.clear();
    }

    /// The cursor each connection so far asked for.
    pub fn cursors(&self) -> Vec<Option<i64>> {
        self.lock().cursors.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn labels_frame(seq: i128, labels: Vec<Cbor>) -> Vec<u8> {
    let header = map(vec![("op", Cbor::Integer(1)), ("t", text("#labels"))]);
    let body = map(vec![
        ("seq", Cbor::Integer(seq)),
        ("labels", Cbor::Array(labels)),
    ]);
    let mut bytes = dagcbor::encode(&header).expect("header");
    bytes.extend(dagcbor::encode(&body).expect("body"));
    bytes
}

/// Answers every request on `listener` with the DID document.
async fn serve_documents(listener: TcpListener, document: String) {
    while let Ok((mut socket, _)) = listener.accept().await {
        let document = document.clone();
        tokio::spawn(async move {
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{document}",
                document.len()
            );
            let _ = socket.write_all(answer.as_bytes()).await;
        });
    }
}

// The callback type is the handshake API's own.
#[allow(clippy::result_large_err)]
async fn serve(stream: tokio::net::TcpStream, state: Arc<Mutex<State>>) {
    let mut uri = String::new();
    let callback = |request: &Request, response: Response| {
        uri = request.uri().to_string();
        Ok(response)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let cursor = crate::replay::query_values(&uri, "cursor")
        .first()
        .and_then(|value| value.parse::<i64>().ok());
    let (behaviour, held) = {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        state.cursors.push(cursor);
        (state.behaviour.clone(), state.frames.len() as i64)
    };
    if cursor.is_some_and(|cursor| cursor > held) {
        let header = map(vec![("op", Cbor::Integer(-1))]);
        let body = map(vec![
            ("error", text("FutureCursor")),
            ("message", text("ahead")),
        ]);
        let mut frame = dagcbor::encode(&header).expect("header");
        frame.extend(dagcbor::encode(&body).expect("body"));
        let _ = socket.send(Message::Binary(frame.into())).await;
        return;
    }
    match behaviour {
        Behaviour::Hang => {
            // Holds the connection without reading it, so no ping is answered.
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            return;
        }
        Behaviour::GarbageFirst => {
            let garbage = Message::Binary(b"\xa1\x62op\xff not a frame".to_vec().into());
            if socket.send(garbage).await.is_err() {
                return;
            }
        }
        Behaviour::Serve => {}
    }
    let mut sent = usize::try_from(cursor.unwrap_or(0).max(0)).unwrap_or(0);
    serve_appended(&mut socket, || {
        let state = state.lock().unwrap_or_else(|p| p.into_inner());
        let fresh: Vec<Message> = state
            .frames
            .get(sent..)
            .unwrap_or_default()
            .iter()
            .map(|frame| Message::Binary(frame.clone().into()))
            .collect();
        sent += fresh.len();
        fresh
    })
    .await;
}
