//! Peers that misbehave on purpose, written here: a live source that never answers the
//! WebSocket upgrade, backfill servers that repeat their cursor forever, answer without end or
//! never finish, and a DID directory that does the same. Each must cost svc a bounded wait and
//! bounded memory, and svc must go on serving and indexing.

use svc_testkit as common;

use common::replay::{Replay, spawn_async};
use common::*;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What a fake peer does with one request.
enum Answer {
    Json(Value),
    /// 404 with an XRPC error: the method is not there.
    Missing,
    /// The head of a JSON answer of unannounced length, then spaces, 1.5 GB of them, or until
    /// the client hangs up.
    Endless,
    /// The head of an answer announcing 100 bytes, then nothing.
    Stall,
    /// The answer, once the gate is open.
    After(Arc<AtomicBool>, Box<Answer>),
}

type Handler = dyn Fn(&str) -> Answer + Send + Sync;

/// An HTTP server answering each request (`path?query`) as its handler says, one request per
/// connection.
struct Peer {
    url: String,
    /// Every request's `path?query`, in order.
    requests: Arc<Mutex<Vec<String>>>,
    /// The bytes of endless bodies the peer got into the socket.
    endless_sent: Arc<AtomicU64>,
}

impl Peer {
    fn start(handler: impl Fn(&str) -> Answer + Send + Sync + 'static) -> Peer {
        let handler: Arc<Handler> = Arc::new(handler);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let endless_sent = Arc::new(AtomicU64::new(0));
        let (sender, receiver) = std::sync::mpsc::channel();
        let (shared_requests, shared_sent) = (Arc::clone(&requests), Arc::clone(&endless_sent));
        spawn_async(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            sender
                .send(listener.local_addr().expect("address"))
                .expect("port");
            while let Ok((stream, _)) = listener.accept().await {
                let handler = Arc::clone(&handler);
                let requests = Arc::clone(&shared_requests);
                let sent = Arc::clone(&shared_sent);
                tokio::spawn(async move {
                    let _ = serve(stream, handler.as_ref(), &requests, &sent).await;
                });
            }
        });
        let address = receiver.recv().expect("the peer started");
        Peer {
            url: format!("http://{address}"),
            requests,
            endless_sent,
        }
    }

    /// How many requests held every one of `needles`.
    fn asked(&self, needles: &[&str]) -> usize {
        let requests = self.requests.lock().unwrap();
        requests
            .iter()
            .filter(|r| needles.iter().all(|n| r.contains(n)))
            .count()
    }
}

async fn serve(
    mut stream: TcpStream,
    handler: &Handler,
    requests: &Mutex<Vec<String>>,
    endless_sent: &AtomicU64,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1024];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).await?;
        if n == 0 || head.len() > 64 << 10 {
            return Ok(());
        }
        head.extend_from_slice(&byte[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let target = head.split(' ').nth(1).unwrap_or_default().to_string();
    requests.lock().unwrap().push(target.clone());
    let mut answer = handler(&target);
    while let Answer::After(gate, then) = answer {
        while !gate.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        answer = *then;
    }
    match answer {
        Answer::Json(body) => {
            let body = body.to_string();
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
        }
        Answer::Missing => {
            let body = r#"{"error":"MethodNotImplemented","message":"not here"}"#;
            let head = format!(
                "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
        }
        Answer::Endless => {
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            let spaces = vec![b' '; 64 << 10];
            let mut sent = 0u64;
            while sent < 1_500_000_000 {
                stream.write_all(&spaces).await?;
                sent += spaces.len() as u64;
                endless_sent.fetch_add(spaces.len() as u64, Ordering::Relaxed);
            }
        }
        Answer::Stall => {
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            tokio::time::sleep(Duration::from_secs(600)).await;
        }
        Answer::After(..) => unreachable!("opened above"),
    }
    stream.flush().await
}

/// The value of query parameter `name` in a request target, percent-decoded.
fn param(target: &str, name: &str) -> Option<String> {
    let query = target.split_once('?')?.1;
    let value = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)?
        .1;
    let bytes = value.as_bytes();
    let mut decoded = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
                decoded.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                decoded.push(b' ');
                i += 1;
            }
            other => {
                decoded.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded).ok()
}

/// The DID document of `did`, naming `pds` as its PDS.
fn did_document(did: &str, pds: &str) -> Value {
    json!({
        "id": did,
        "alsoKnownAs": [],
        "service": [{"id": "#atproto_pds", "type": "AtprotoPersonalDataServer",
            "serviceEndpoint": pds}],
    })
}

/// A page of `listRecords` holding one vocabulary of `did`.
fn one_vocab(did: &str, name: &str, cursor: Option<&str>) -> Value {
    let mut page = json!({"records": [{
        "uri": format!("at://{did}/dev.svc.vocab/{name}"),
        "cid": CID,
        "value": {"$type": "dev.svc.vocab", "name": name, "world": "open", "occurredAt": NOW},
    }]});
    if let Some(cursor) = cursor {
        page["cursor"] = json!(cursor);
    }
    page
}

/// What every fake repository server answers alike: the latest commit, and no records in
/// any collection but vocabularies.
fn common_answer(target: &str) -> Option<Answer> {
    if target.contains("com.atproto.sync.getLatestCommit") {
        return Some(Answer::Json(
            json!({"cid": CID, "rev": tid(now_us() - 60_000_000)}),
        ));
    }
    if target.contains("com.atproto.repo.listRecords")
        && param(target, "collection").as_deref() != Some("dev.svc.vocab")
    {
        return Some(Answer::Json(json!({"records": []})));
    }
    None
}

/// `svc serve` with no live source, backfilling from `peer`, which is also its DID directory,
/// as soon as it listens.
fn backfilling_from(db: std::path::PathBuf, peer: &str) -> Server {
    Server::listening(
        db,
        &["--firehose", "none", "--backfill", peer, "--plc-url", peer],
    )
}

fn metric(server: &Server, name: &str) -> u64 {
    let text = server.get_raw("/metrics").2;
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map(|value| value as u64)
        .unwrap_or(0)
}

fn readyz(server: &Server) -> (u16, String) {
    let (status, _, body) = server.get_raw("/readyz");
    (status, body)
}

fn vocabularies(server: &Server) -> u64 {
    server.get("/v1/stats").1["vocabularies"]
        .as_u64()
        .expect("a count")
}

/// A line of `/proc/<pid>/status` in kB (`VmRSS`, `VmHWM`).
fn memory_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("the field")
}

/// (a) A source that accepts TCP and never answers the upgrade costs one handshake time limit
/// per connection, counted as a reconnect; once it answers, its events are indexed.
#[test]
fn a_source_that_never_answers_the_upgrade_is_left_and_reconnected() {
    const HANGING: usize = 2;
    let base = now_us() - 20_000_000;
    let replay = Replay::start(vocab_events(base, 0, 5));
    let upstream = replay
        .url
        .trim_start_matches("ws://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    // The first connections are held open in silence; later ones are passed to the replay.
    let connections = Arc::new(AtomicUsize::new(0));
    let (sender, receiver) = std::sync::mpsc::channel();
    let counted = Arc::clone(&connections);
    spawn_async(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        sender
            .send(listener.local_addr().expect("address"))
            .expect("port");
        while let Ok((mut client, _)) = listener.accept().await {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if n < HANGING {
                    let mut sink = [0u8; 4096];
                    while client.read(&mut sink).await.is_ok_and(|n| n > 0) {}
                    return;
                }
                let Ok(mut server) = TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    let address = receiver.recv().expect("the proxy started");
    let source = format!("ws://{address}/subscribe");
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut server = Server::listening(
        dir.path().join("catalog.db"),
        &[
            "--firehose",
            source.as_str(),
            "--liveness",
            "2s",
            "--ready-lag",
            "60s",
        ],
    );
    let gave_up = server.wait_log("no WebSocket handshake", Duration::from_secs(30));
    eprintln!("{gave_up}");
    server.wait_for("/v1/stats", Duration::from_secs(60), |s| {
        s["vocabularies"] == 5
    });
    let took = started.elapsed();
    let reconnects = metric(&server, "svc_ingest_reconnects_total");
    eprintln!(
        "{} connections, {reconnects} reconnects, events indexed {took:?} after start",
        connections.load(Ordering::SeqCst)
    );
    assert!(reconnects >= HANGING as u64, "reconnects: {reconnects}");
    // Two handshake limits of 2 s and their backoff, with a wide margin.
    assert!(took < Duration::from_secs(40), "{took:?}");
    server.wait_ready();
    // And it keeps following: a new event lands.
    replay.publish(vocab_events(now_us() - 1_000_000, 5, 6));
    server.wait_for("/v1/stats", Duration::from_secs(20), |s| {
        s["vocabularies"] == 6
    });
}

/// (b) A server whose listing pages repeat their cursor forever: one page more and the listing
/// ends with a warning; the backfill finishes and svc is ready.
#[test]
fn listings_that_repeat_their_cursor_end_and_the_backfill_finishes() {
    // An empty page naming the same cursor, for every listing of repositories.
    let empty = Peer::start(|target| {
        if target.contains("com.atproto.sync.listRepos") {
            Answer::Json(json!({"repos": [], "cursor": "again"}))
        } else {
            Answer::Missing
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut server = backfilling_from(dir.path().join("empty.db"), &empty.url);
    server.wait_ready();
    let warned = server.wait_log("the listing ends here", Duration::from_secs(1));
    eprintln!("{warned}");
    let asked = empty.asked(&["listReposByCollection"]);
    eprintln!(
        "ready {:?} after start; {asked} listings asked",
        started.elapsed()
    );
    // One request per collection: nothing close to the tens of thousands of before.
    assert!(asked <= 50, "{asked}");
    server.wait_log("backfill finished", Duration::from_secs(1));

    // Pages that hold something and repeat their cursor: the listing of repositories and
    // each repository's records end at the first repeat, and what they held is indexed.
    let did = "did:plc:repeatscursor";
    let repeating = Arc::new(Mutex::new(String::new()));
    let url = Arc::clone(&repeating);
    let peer = Peer::start(move |target| {
        if let Some(answer) = common_answer(target) {
            return answer;
        }
        if target.contains("listReposByCollection") {
            return Answer::Json(json!({"repos": [{"did": did}], "cursor": "again"}));
        }
        if target.contains("listRecords") {
            return Answer::Json(one_vocab(did, "repeated", Some("again")));
        }
        if target.starts_with(&format!("/{did}")) {
            return Answer::Json(did_document(did, &url.lock().unwrap()));
        }
        Answer::Missing
    });
    *repeating.lock().unwrap() = peer.url.clone();
    let mut server = backfilling_from(dir.path().join("repeating.db"), &peer.url);
    server.wait_ready();
    let warned = server.wait_log("gave this cursor before", Duration::from_secs(1));
    eprintln!("{warned}");
    assert_eq!(vocabularies(&server), 1);
    let records = peer.asked(&["listRecords"]);
    assert!(records <= 50, "listRecords asked {records} times");
    assert_eq!(peer.asked(&["listRecords", "collection=dev.svc.vocab"]), 2);
    let finished = server.wait_log("backfill finished", Duration::from_secs(1));
    assert!(finished.contains("failed=0"), "{finished}");
}

/// (c) A repository whose PDS answers `listRecords` without end, and one whose DID document
/// never ends: svc reads each up to its cap and no further (memory stays flat), skips the
/// first and names it on `/readyz` while the backfill runs, reads the second from the named
/// server, and indexes the rest.
#[test]
fn endless_answers_are_cut_at_their_cap_and_the_repository_skipped_and_named() {
    let endless = "did:plc:aaaendlessrecords";
    let endless_document = "did:plc:bbbendlessdocument";
    let good = "did:plc:cccgood";
    let listing = Arc::new(AtomicBool::new(false));
    let last = Arc::new(AtomicBool::new(false));
    let own_url = Arc::new(Mutex::new(String::new()));
    let (listing_gate, last_gate, url) = (
        Arc::clone(&listing),
        Arc::clone(&last),
        Arc::clone(&own_url),
    );
    let peer = Peer::start(move |target| {
        if let Some(answer) = common_answer(target) {
            return answer;
        }
        if target.contains("listReposByCollection") {
            let page =
                json!({"repos": [{"did": endless}, {"did": endless_document}, {"did": good}]});
            return Answer::After(Arc::clone(&listing_gate), Box::new(Answer::Json(page)));
        }
        if target.contains("listRecords") {
            let repo = param(target, "repo").unwrap_or_default();
            return match repo.as_str() {
                r if r == endless => Answer::Endless,
                r if r == good => Answer::After(
                    Arc::clone(&last_gate),
                    Box::new(Answer::Json(one_vocab(good, "good", None))),
                ),
                r => Answer::Json(one_vocab(r, "fromrelay", None)),
            };
        }
        if target.starts_with(&format!("/{endless_document}")) {
            return Answer::Endless;
        }
        if let Some(did) = target.strip_prefix('/').filter(|d| d.starts_with("did:")) {
            return Answer::Json(did_document(did, &url.lock().unwrap()));
        }
        Answer::Missing
    });
    *own_url.lock().unwrap() = peer.url.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut server = backfilling_from(dir.path().join("catalog.db"), &peer.url);
    let pid = server.child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while peer.asked(&["listReposByCollection"]) == 0 {
        assert!(Instant::now() < deadline, "the backfill never listed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = memory_kb(pid, "VmRSS");
    listing.store(true, Ordering::Release);

    // The backfill now waits on the last repository: the skipped one is named meanwhile.
    let deadline = Instant::now() + Duration::from_secs(60);
    let reason = loop {
        let (status, body) = readyz(&server);
        if body.contains(endless) {
            assert_eq!(status, 503, "{body}");
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz never named {endless}: {body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    eprint!("/readyz while backfilling: {reason}");
    let skipped = server.wait_log("backfill skipped a repository", Duration::from_secs(5));
    eprintln!("{skipped}");
    assert!(
        skipped.contains(endless) && skipped.contains("16 MiB"),
        "{skipped}"
    );
    let fallback = server.wait_log("no PDS from the DID document", Duration::from_secs(5));
    eprintln!("{fallback}");
    assert!(fallback.contains("64 KiB"), "{fallback}");
    let peak = memory_kb(pid, "VmHWM");
    eprintln!("RSS now {} MB", memory_kb(pid, "VmRSS") / 1024);
    let sent = peer.endless_sent.load(Ordering::Relaxed);
    eprintln!(
        "RSS {} MB before the endless answers, peak {} MB after; the peers got {} MB into \
         the sockets",
        before / 1024,
        peak / 1024,
        sent >> 20
    );
    assert!(
        peak.saturating_sub(before) < 64 * 1024,
        "RSS grew from {before} kB to a peak of {peak} kB"
    );
    assert!(
        sent < 200 << 20,
        "{sent} bytes were taken from the endless answers"
    );

    last.store(true, Ordering::Release);
    server.wait_ready();
    let finished = server.wait_log("backfill finished", Duration::from_secs(1));
    assert!(finished.contains("failed=1"), "{finished}");
    server.wait_log("1 repository skipped", Duration::from_secs(1));
    // The good repository and the one read from the named server are there.
    assert_eq!(vocabularies(&server), 2);
    assert_eq!(metric(&server, "svc_backfill_repos_skipped"), 1);
    let answer = server.get_raw("/v1/stats");
    assert_eq!(answer.0, 200);
}

/// (d) A DID directory that sends an answer's head and then nothing: each request is cut once
/// its body falls behind the least pace (10 s), and the backfill reads the repository from the
/// named server.
#[test]
fn an_answer_that_never_finishes_times_out_and_the_backfill_goes_on() {
    let did = "did:plc:stalleddocument";
    let stalled = Peer::start(|_| Answer::Stall);
    let peer = Peer::start(move |target| {
        if let Some(answer) = common_answer(target) {
            return answer;
        }
        if target.contains("listReposByCollection") {
            return Answer::Json(json!({"repos": [{"did": did}]}));
        }
        if target.contains("listRecords") {
            return Answer::Json(one_vocab(did, "afterwait", None));
        }
        Answer::Missing
    });
    // The command line's requests are timed alike; it waits meanwhile.
    let command = {
        let plc = stalled.url.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let output = svc()
                .args(["resolve", did])
                .env("SVC_PLC_URL", plc)
                .output()
                .expect("svc resolve");
            (output, started.elapsed())
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut server = Server::listening(
        dir.path().join("catalog.db"),
        &[
            "--firehose",
            "none",
            "--backfill",
            peer.url.as_str(),
            "--plc-url",
            stalled.url.as_str(),
        ],
    );
    // Meanwhile svc answers.
    std::thread::sleep(Duration::from_secs(2));
    let (status, body) = readyz(&server);
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("warming: backfilling\n"), "{body}");
    assert_eq!(server.get_raw("/v1/stats").0, 200);
    let timed_out = server.wait_log("no PDS from the DID document", Duration::from_secs(60));
    let waited = started.elapsed();
    eprintln!("{timed_out} ({waited:?} after start)");
    // The head came, then nothing: cut at the least pace (nothing in its first 10 s), long
    // before the request's 30 s.
    assert!(timed_out.contains("came slower than"), "{timed_out}");
    assert!(waited >= Duration::from_secs(8), "{waited:?}");
    server.wait_ready();
    assert_eq!(vocabularies(&server), 1);

    let (output, took) = command.join().expect("the command's thread");
    let message = String::from_utf8_lossy(&output.stderr);
    eprintln!("svc resolve: {} ({took:?})", message.trim());
    assert!(!output.status.success());
    assert!(message.contains("came slower than"), "{message}");
    assert!(took < Duration::from_secs(60), "{took:?}");
}

/// A DID document may name any address as its PDS. Run as a public service, svc reaches none
/// that is loopback or private, literal or by name, and counts the repository as refused; a
/// repository whose document names no PDS is read from the server the operator named, which
/// is reached as given. With `--allow-private-peers` the same addresses are asked.
#[test]
fn private_addresses_the_network_names_are_refused_unless_allowed() {
    let internal = Peer::start(|_| Answer::Json(json!({"records": []})));
    let literal = "did:plc:aaainternalliteral";
    let named = "did:plc:bbbinternalbyname";
    let unnamed = "did:plc:cccnopds";
    let internal_url = internal.url.clone();
    let by_name = internal.url.replace("127.0.0.1", "localhost");
    let operator = Peer::start(move |target| {
        if let Some(answer) = common_answer(target) {
            return answer;
        }
        if target.contains("listReposByCollection") {
            let page = json!({"repos": [{"did": literal}, {"did": named}, {"did": unnamed}]});
            return Answer::Json(page);
        }
        if target.contains("listRecords") {
            let repo = param(target, "repo").unwrap_or_default();
            return Answer::Json(one_vocab(&repo, "fromoperator", None));
        }
        match target.strip_prefix('/') {
            Some(did) if did == literal => Answer::Json(did_document(did, &internal_url)),
            Some(did) if did == named => Answer::Json(did_document(did, &by_name)),
            Some(did) if did == unnamed => Answer::Json(json!({"id": did, "alsoKnownAs": []})),
            _ => Answer::Missing,
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--firehose",
        "none",
        "--backfill",
        operator.url.as_str(),
        "--plc-url",
        operator.url.as_str(),
        "--verify",
        "none",
    ];
    let mut public = Server::listening_in_public(dir.path().join("public.db"), &args);
    let refused = public.wait_log("a loopback address", Duration::from_secs(30));
    eprintln!("{refused}");
    public.wait_ready();
    assert_eq!(internal.asked(&[""]), 0, "the internal service was asked");
    assert_eq!(
        public.uris("/v1/vocabularies/by-world?world=open"),
        [format!("at://{unnamed}/dev.svc.vocab/fromoperator")]
    );
    // Each is refused once per listing that names it (one per collection at most).
    let refusals = metric(&public, "svc_ingest_resyncs_total{outcome=\"refused\"}");
    assert!(refusals >= 2, "{refusals} refusals");
    drop(public);
    let allowed = Server::launch(dir.path().join("allowed.db"), &args);
    let asked = internal.asked(&[""]);
    assert!(asked >= 2, "the internal service was asked {asked} times");
    drop(allowed);
}

/// Twenty repositories on a PDS that answers with a head and then nothing take no slot from
/// the repository of another host: its read starts at once, though the twenty are queued
/// before it and are more than the reader's slots.
#[test]
fn a_stalling_host_cannot_hold_the_slots_of_the_others() {
    let stalling = Peer::start(|_| Answer::Stall);
    let honest = Peer::start(|target| {
        common_answer(target).unwrap_or_else(|| {
            let repo = param(target, "repo").unwrap_or_default();
            Answer::Json(one_vocab(&repo, "honest", None))
        })
    });
    let slow: Vec<String> = (0..20).map(|n| format!("did:plc:aaaslow{n:02}")).collect();
    let good = "did:plc:zzzhonest";
    let listed: Vec<Value> = slow
        .iter()
        .map(|did| json!({"did": did}))
        .chain([json!({"did": good})])
        .collect();
    let (stalling_url, honest_url) = (stalling.url.clone(), honest.url.clone());
    let operator = Peer::start(move |target| {
        if target.contains("listReposByCollection") {
            return Answer::Json(json!({"repos": listed}));
        }
        match target.strip_prefix('/') {
            Some(did) if did == good => Answer::Json(did_document(did, &honest_url)),
            Some(did) if did.starts_with("did:plc:") => {
                Answer::Json(did_document(did, &stalling_url))
            }
            _ => Answer::Missing,
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let server = Server::listening(
        dir.path().join("catalog.db"),
        &[
            "--firehose",
            "none",
            "--backfill",
            operator.url.as_str(),
            "--plc-url",
            operator.url.as_str(),
            "--verify",
            "none",
        ],
    );
    let uri = format!("at://{good}/dev.svc.vocab/honest");
    while !server
        .uris("/v1/vocabularies/by-world?world=open")
        .contains(&uri)
    {
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "the honest repository was not read while the stalling host held its reads"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("read after {:?}", started.elapsed());
    // The stalling host was asked for no more than its share at once.
    assert!(stalling.asked(&[""]) <= 20);
}
