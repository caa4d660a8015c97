//! The loopback peers svc runs against: a PLC directory and PDS serving the DID documents, and the repository firehose.

use super::*;

/// What the loopback servers serve, changed between runs.
#[derive(Default)]
pub(crate) struct Served {
    /// The firehose's frames for the next connection.
    pub(crate) frames: RwLock<Arc<Vec<Bytes>>>,
    /// Multikeys by DID, for the PLC directory.
    pub(crate) keys: RwLock<HashMap<String, String>>,
    /// This server's own base URL, the PDS every DID document names.
    pub(crate) base: RwLock<String>,
    pub(crate) documents: AtomicU64,
    pub(crate) unknown: AtomicU64,
    pub(crate) get_repo: AtomicU64,
    pub(crate) connections: AtomicU64,
}

impl Served {
    pub(crate) fn serve(&self, frames: &[Bytes]) {
        *self.frames.write().expect("frames") = Arc::new(frames.to_vec());
    }

    pub(crate) fn add_keys(&self, keys: &[(String, String)]) {
        self.keys
            .write()
            .expect("keys")
            .extend(keys.iter().cloned());
    }
}

pub(crate) async fn did_document(
    State(served): State<Arc<Served>>,
    Path(did): Path<String>,
) -> Response {
    let key = served.keys.read().expect("keys").get(&did).cloned();
    let Some(key) = key else {
        served.unknown.fetch_add(1, Ordering::Relaxed);
        return (StatusCode::NOT_FOUND, "DID not registered").into_response();
    };
    served.documents.fetch_add(1, Ordering::Relaxed);
    let pds = served.base.read().expect("base").clone();
    axum::Json(serde_json::json!({
        "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"],
        "id": did,
        "alsoKnownAs": [],
        "verificationMethod": [{
            "id": format!("{did}#atproto"),
            "type": "Multikey",
            "controller": did,
            "publicKeyMultibase": key,
        }],
        "service": [{
            "id": "#atproto_pds",
            "type": "AtprotoPersonalDataServer",
            "serviceEndpoint": pds,
        }],
    }))
    .into_response()
}

/// The PDS the documents name keeps no repositories: a resync would show here, counted.
pub(crate) async fn get_repo(State(served): State<Arc<Served>>) -> Response {
    served.get_repo.fetch_add(1, Ordering::Relaxed);
    let error = serde_json::json!({"error": "RepoNotFound", "message": "not kept"});
    (StatusCode::BAD_REQUEST, axum::Json(error)).into_response()
}

// The callback type is the handshake API's own.
#[allow(clippy::result_large_err)]
pub(crate) async fn firehose(stream: tokio::net::TcpStream, served: Arc<Served>) {
    let mut uri = String::new();
    let callback = |request: &Request, response: WsResponse| {
        uri = request.uri().to_string();
        Ok(response)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    served.connections.fetch_add(1, Ordering::Relaxed);
    // Frames after the cursor (a seq), or all of them.
    let cursor = uri
        .split_once("cursor=")
        .and_then(|(_, rest)| rest.split('&').next()?.parse::<usize>().ok())
        .unwrap_or(0);
    let frames = Arc::clone(&served.frames.read().expect("frames"));
    for (n, frame) in frames.iter().skip(cursor).enumerate() {
        if socket.feed(Message::Binary(frame.clone())).await.is_err() {
            return;
        }
        if n % 64 == 63 && socket.flush().await.is_err() {
            return;
        }
    }
    if socket.flush().await.is_err() {
        return;
    }
    // Live now, with nothing more to say: pings are answered until svc goes.
    while let Some(Ok(message)) = socket.next().await {
        if let Message::Ping(payload) = message
            && socket.send(Message::Pong(payload)).await.is_err()
        {
            return;
        }
    }
}

/// Starts the PLC directory (and PDS) and the firehose on loopback: their base URLs.
pub(crate) fn start_servers(served: Arc<Served>) -> (String, String) {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let http = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let ws = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let base = format!("http://{}", http.local_addr().expect("address"));
            *served.base.write().expect("base") = base.clone();
            let ws_url = format!("ws://{}", ws.local_addr().expect("address"));
            sender.send((base, ws_url)).expect("urls");
            let router = axum::Router::new()
                .route(
                    "/xrpc/com.atproto.sync.getRepo",
                    axum::routing::get(get_repo),
                )
                .route("/{did}", axum::routing::get(did_document))
                .with_state(Arc::clone(&served));
            tokio::spawn(async move { axum::serve(http, router).await });
            while let Ok((stream, _)) = ws.accept().await {
                tokio::spawn(firehose(stream, Arc::clone(&served)));
            }
        });
    });
    receiver.recv().expect("the servers started")
}

/// The sum of a Prometheus counter's samples whose line starts with `name`.
pub(crate) fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .filter(|line| line.starts_with(name))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}
