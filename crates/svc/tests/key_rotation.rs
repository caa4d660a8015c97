//! An author svc knows only through the real PLC directory: the test holds the account's
//! rotation and signing keys, registers its DID, and serves its repository as a PDS would (a
//! `subscribeRepos` stream of real signed commits, and `getRepo`). Commits signed with the key
//! the directory names apply; once the key changes there (and an `#identity` event says so),
//! commits signed with the new key apply without a restart and the old key's are refused; a
//! commit with an altered signature is refused; the gap a refused commit leaves in the chain
//! is closed by reading the repository whole, which restores exactly the author's records.
//! Passes without running when the peers cannot start outside CI.

use svc_testkit as common;

use base64::Engine as _;
use common::peers::peers;
use common::replay::spawn_async;
use common::*;
use futures_util::{SinkExt, StreamExt};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use svc_repo::author::{CommitEvent, Repository, SigningKey, Write, identity_frame};
use svc_repo::commit::Commit;
use svc_repo::crypto::Curve;
use svc_repo::dagcbor::{self, Cbor};
use svc_syntax::{Did, UnixMicros};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

fn text(value: &str) -> Cbor {
    Cbor::Text(value.into())
}

fn map(entries: Vec<(&str, Cbor)>) -> Cbor {
    Cbor::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::new();
    let (mut buffer, mut bits) = (0u32, 0);
    for &byte in bytes {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// An account of the PLC directory whose rotation key the test holds.
struct PlcAccount {
    did: String,
    rotation: SigningKey,
    /// The CID of the last operation, which the next one names.
    prev: String,
}

/// A PLC operation naming `signing` as the account's key and `pds` as its PDS, signed with
/// the rotation key; the operation as CBOR.
fn plc_operation(
    rotation: &SigningKey,
    signing: &SigningKey,
    pds: &str,
    prev: Option<&str>,
) -> Cbor {
    let mut operation = vec![
        ("type", text("plc_operation")),
        (
            "rotationKeys",
            Cbor::Array(vec![text(&rotation.public().did_key())]),
        ),
        (
            "verificationMethods",
            map(vec![("atproto", text(&signing.public().did_key()))]),
        ),
        ("alsoKnownAs", Cbor::Array(vec![text("at://rotating.test")])),
        (
            "services",
            map(vec![(
                "atproto_pds",
                map(vec![
                    ("type", text("AtprotoPersonalDataServer")),
                    ("endpoint", text(pds)),
                ]),
            )]),
        ),
        ("prev", prev.map_or(Cbor::Null, text)),
    ];
    let unsigned = dagcbor::encode(&map(operation.clone())).expect("an operation");
    let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rotation.sign(&unsigned));
    operation.push(("sig", text(&sig)));
    map(operation)
}

fn to_json(value: &Cbor) -> serde_json::Value {
    match value {
        Cbor::Null => serde_json::Value::Null,
        Cbor::Text(text) => text.as_str().into(),
        Cbor::Array(items) => items.iter().map(to_json).collect(),
        Cbor::Map(entries) => entries
            .iter()
            .map(|(k, v)| (k.clone(), to_json(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        other => panic!("not in a PLC operation: {other:?}"),
    }
}

impl PlcAccount {
    fn register(plc: &str, signing: &SigningKey, pds: &str) -> PlcAccount {
        let rotation = SigningKey::from_seed(Curve::K256, b"rotation key of the test account");
        let genesis = plc_operation(&rotation, signing, pds, None);
        let bytes = dagcbor::encode(&genesis).expect("an operation");
        let digest = {
            use sha2::Digest as _;
            sha2::Sha256::digest(&bytes)
        };
        let did = format!("did:plc:{}", &base32(&digest)[..24]);
        let mut account = PlcAccount {
            did,
            rotation,
            prev: String::new(),
        };
        account.post(plc, &genesis);
        account
    }

    fn post(&mut self, plc: &str, operation: &Cbor) {
        let response = reqwest::blocking::Client::new()
            .post(format!("{plc}/{}", self.did))
            .json(&to_json(operation))
            .send()
            .expect("the PLC directory");
        let status = response.status();
        assert!(status.is_success(), "{status}: {:?}", response.text());
        let bytes = dagcbor::encode(operation).expect("an operation");
        self.prev = svc_syntax::cid_to_string(&dagcbor::cid_of(&bytes));
    }

    /// Names another signing key.
    fn rotate(&mut self, plc: &str, signing: &SigningKey, pds: &str) {
        let prev = self.prev.clone();
        let operation = plc_operation(&self.rotation, signing, pds, Some(&prev));
        self.post(plc, &operation);
    }
}

/// What the test's PDS serves: the frames of its firehose, and the repository whole.
#[derive(Default)]
struct Hosted {
    frames: Vec<Vec<u8>>,
    repository: Vec<u8>,
    /// `getRepo` is not answered while this holds.
    holding: bool,
}

/// Starts the PDS: its HTTP base (for `getRepo`) and its firehose's `ws://` base.
fn start_pds(hosted: Arc<Mutex<Hosted>>) -> (String, String) {
    let (sender, receiver) = std::sync::mpsc::channel();
    let served = Arc::clone(&hosted);
    spawn_async(async move {
        let http = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let ws = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let ports = (
            http.local_addr().expect("port").port(),
            ws.local_addr().expect("port").port(),
        );
        sender.send(ports).expect("ports");
        let repositories = Arc::clone(&served);
        tokio::spawn(async move {
            while let Ok((stream, _)) = http.accept().await {
                tokio::spawn(answer_get_repo(stream, Arc::clone(&repositories)));
            }
        });
        while let Ok((stream, _)) = ws.accept().await {
            tokio::spawn(stream_frames(stream, Arc::clone(&served)));
        }
    });
    let (http, ws) = receiver.recv().expect("the PDS started");
    (
        format!("http://127.0.0.1:{http}"),
        format!("ws://127.0.0.1:{ws}"),
    )
}

async fn answer_get_repo(mut stream: tokio::net::TcpStream, hosted: Arc<Mutex<Hosted>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read_exact(&mut byte).await.is_ok() {
        head.push(byte[0]);
    }
    while hosted.lock().unwrap().holding {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let body = hosted.lock().unwrap().repository.clone();
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.ipld.car\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.write_all(&body).await;
}

/// Sends every frame after the cursor, then each new one as it comes.
// The callback type is the handshake API's own.
#[allow(clippy::result_large_err)]
async fn stream_frames(stream: tokio::net::TcpStream, hosted: Arc<Mutex<Hosted>>) {
    let mut path = String::new();
    let callback = |request: &tokio_tungstenite::tungstenite::handshake::server::Request,
                    response| {
        path = request.uri().to_string();
        Ok(response)
    };
    let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let mut sent = path
        .split("cursor=")
        .nth(1)
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0);
    let (mut sink, mut incoming) = socket.split();
    loop {
        let next = hosted.lock().unwrap().frames.get(sent).cloned();
        match next {
            Some(frame) => {
                if sink.send(Message::Binary(frame.into())).await.is_err() {
                    return;
                }
                sent += 1;
            }
            None => tokio::select! {
                message = incoming.next() => match message {
                    Some(Ok(Message::Ping(payload))) => {
                        let _ = sink.send(Message::Pong(payload)).await;
                    }
                    Some(Ok(_)) => {}
                    _ => return,
                },
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            },
        }
    }
}

fn vocab(name: &str) -> Cbor {
    map(vec![
        ("$type", text("dev.svc.vocab")),
        ("name", text(name)),
        ("world", text("open")),
        ("occurredAt", text("2026-01-01T00:00:00Z")),
    ])
}

/// A commit of `repo` creating a vocabulary named `name`, keyed by the time.
fn commit(repo: &mut Repository, name: &str) -> CommitEvent {
    repo.commit(&[Write::create(
        "dev.svc.vocab",
        svc_syntax::Tid::from_time(UnixMicros::now(), 1).as_ref(),
        vocab(name),
    )])
    .expect("a commit")
}

/// The same commit with one bit of its signature changed, its CID and frame made anew: the
/// blocks all hash right, only the signature is wrong.
fn with_altered_signature(event: &CommitEvent) -> CommitEvent {
    let block = &event
        .blocks
        .iter()
        .find(|(cid, _)| *cid == event.commit)
        .expect("the commit")
        .1;
    let Cbor::Map(mut entries) = dagcbor::decode_block(block).expect("a commit") else {
        panic!("a commit is a map")
    };
    for (key, value) in &mut entries {
        if let ("sig", Cbor::Bytes(sig)) = (key.as_str(), value) {
            sig[7] ^= 0x10;
        }
    }
    let altered = dagcbor::encode(&Cbor::Map(entries)).expect("a commit");
    Commit::decode(&altered).expect("still a commit");
    let cid = dagcbor::cid_of(&altered);
    let mut event = event.clone();
    event.blocks.retain(|(c, _)| *c != event.commit);
    // The slice's commit comes first, as a PDS writes it.
    event.blocks.insert(0, (cid.clone(), altered));
    event.commit = cid;
    event
}

#[test]
fn a_rotated_key_is_followed_and_forged_signatures_are_refused() {
    let Some(peers) = peers() else { return };
    let hosted = Arc::new(Mutex::new(Hosted::default()));
    let (pds, firehose) = start_pds(Arc::clone(&hosted));
    let old_key = SigningKey::from_seed(Curve::K256, b"first signing key");
    let new_key = SigningKey::from_seed(Curve::P256, b"second signing key");
    let mut account = PlcAccount::register(&peers.plc, &old_key, &pds);
    let did = Did::new(account.did.clone()).unwrap();
    let mut repo = Repository::new(did.clone(), old_key.clone());
    let publish = |frame: Vec<u8>, repo: &Repository| {
        let mut hosted = hosted.lock().unwrap();
        hosted.frames.push(frame);
        hosted.repository = repo.car().expect("a repository");
    };
    let seq = || hosted.lock().unwrap().frames.len() as i64 + 1;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &["--firehose", firehose.as_str(), "--ready-lag", "5s"],
    );
    let by_name = |name: &str| format!("/v1/vocabularies/by-name?name={name}");
    let first = commit(&mut repo, "Old-key");
    publish(first.frame(seq(), UnixMicros::now()), &repo);
    server.wait_for(&by_name("Old-key"), Duration::from_secs(10), |b| {
        b["total"] == 1
    });

    // The key changes in the directory, and the account's host says so.
    account.rotate(&peers.plc, &new_key, &pds);
    publish(identity_frame(seq(), &did, UnixMicros::now()), &repo);
    repo.set_key(new_key.clone());
    let rotated = commit(&mut repo, "New-key");
    publish(rotated.frame(seq(), UnixMicros::now()), &repo);
    server.wait_for(&by_name("New-key"), Duration::from_secs(10), |b| {
        b["total"] == 1
    });

    // The old key no longer speaks for the account; an altered signature never did.
    let stale = commit(&mut repo, "Stale-key").signed_by(&old_key);
    publish(stale.frame(seq(), UnixMicros::now()), &repo);
    let altered = with_altered_signature(&commit(&mut repo, "Altered"));
    publish(altered.frame(seq(), UnixMicros::now()), &repo);
    server.wait_for("/v1/stats", Duration::from_secs(10), |_| {
        server
            .get_raw("/metrics")
            .2
            .contains("svc_ingest_unverified_total{reason=\"signature\"} 2")
    });
    assert_eq!(server.get(&by_name("Stale-key")).1["total"], 0);
    assert_eq!(server.get(&by_name("Altered")).1["total"], 0);

    // The next genuine commit does not continue what svc holds: the repository is read whole
    // from the PDS, signed with the new key, and every record the author wrote is there.
    // While the PDS holds its answer, /readyz names the repository waiting.
    hosted.lock().unwrap().holding = true;
    let last = commit(&mut repo, "Last");
    publish(last.frame(seq(), UnixMicros::now()), &repo);
    server.wait_for("/v1/stats", Duration::from_secs(10), |_| {
        let readyz = server.get_raw("/readyz").2;
        readyz.starts_with("ready\nnote: 1 repository waits to be read whole")
            && readyz.contains(&format!("note: the oldest, {did}, waits since"))
    });
    hosted.lock().unwrap().holding = false;
    server.wait_for(&by_name("Last"), Duration::from_secs(20), |b| {
        b["total"] == 1
    });
    server.wait_for("/v1/stats", Duration::from_secs(5), |_| {
        server.get_raw("/readyz").2 == "ready\n"
    });
    for name in ["Old-key", "New-key", "Stale-key", "Altered", "Last"] {
        let (_, body) = server.get(&by_name(name));
        assert_eq!(body["total"], 1, "{name}");
        assert_eq!(body["items"][0]["author"], did.as_str(), "{name}");
    }
    let metrics = server.get_raw("/metrics").2;
    assert!(
        metrics.contains("svc_ingest_resyncs_total{outcome=\"done\"}"),
        "{metrics}"
    );
}

/// An author whose identity host accepts connections and never answers (a `did:web` whose
/// document never comes) costs its own commits only: every commit of an honest author that
/// the stream carries after one of its commits is served within seconds, not after the
/// request time limit, each time.
#[test]
fn a_hanging_identity_host_holds_up_no_other_author() {
    let Some(peers) = peers() else { return };
    let hosted = Arc::new(Mutex::new(Hosted::default()));
    let (pds, firehose) = start_pds(Arc::clone(&hosted));
    let honest_key = SigningKey::from_seed(Curve::K256, b"the honest author's key");
    let account = PlcAccount::register(&peers.plc, &honest_key, &pds);
    let mut honest = Repository::new(Did::new(account.did.clone()).unwrap(), honest_key);
    // A host that takes connections and answers nothing.
    let hanging = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hanging.local_addr().unwrap().port();
    let held = Arc::new(Mutex::new(Vec::new()));
    let holding = Arc::clone(&held);
    std::thread::spawn(move || {
        for stream in hanging.incoming().flatten() {
            holding.lock().unwrap().push(stream);
        }
    });
    let slow_did = Did::new(format!("did:web:localhost%3A{port}")).unwrap();
    let slow_key = SigningKey::from_seed(Curve::K256, b"the slow author's key");
    let mut slow = Repository::new(slow_did, slow_key);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &["--firehose", firehose.as_str(), "--ready-lag", "5s"],
    );
    let by_name = |name: &str| format!("/v1/vocabularies/by-name?name={name}");
    let mut waits = Vec::new();
    for round in 0..4 {
        let stalled = commit(&mut slow, &format!("Slow-{round}"));
        let name = format!("Honest-{round}");
        let prompt = commit(&mut honest, &name);
        let published = std::time::Instant::now();
        {
            let mut hosted = hosted.lock().unwrap();
            let seq = hosted.frames.len() as i64 + 1;
            hosted.frames.push(stalled.frame(seq, UnixMicros::now()));
            hosted.frames.push(prompt.frame(seq + 1, UnixMicros::now()));
            hosted.repository = honest.car().expect("a repository");
        }
        // Long enough to measure a build that waits out the request time limit.
        server.wait_for(&by_name(&name), Duration::from_secs(60), |b| {
            b["total"] == 1
        });
        waits.push(published.elapsed());
        eprintln!("round {round}: served after {:?}", published.elapsed());
    }
    eprintln!("the honest author's commits were served after {waits:?}");
    assert!(
        waits.iter().all(|wait| *wait < Duration::from_secs(4)),
        "{waits:?}"
    );
    assert_eq!(server.get(&by_name("Slow-0")).1["total"], 0);
}
