//! Verification benchmark, on demand (`bench/verify.sh` runs it). Repositories with real K-256
//! keys and signed commits (svc-repo's `author`), a PLC directory that names their keys and a
//! `subscribeRepos` WebSocket that replays their frames, all on loopback; `svc serve` runs
//! against them on fresh catalogs, side by side with `--verify all` and `--verify none`:
//! 1. family commits (creates of `dev.svc.vocab` records), each repository's chained, timed
//!    from the start of svc to every record queryable; the two rates and their ratio;
//! 2. a network-shaped replay, 99.9% `app.bsky.feed.post` commits of other repositories and
//!    0.1% family commits: frames per second of svc's CPU time (user + system);
//! 3. memory per tracked repository: the resident set after one commit from each of many
//!    repositories, against the same from a few, verified.
//!
//! Generated frames are kept under the work directory (signing them is most of the cost).
//!
//! Usage: verify_bench <svc binary> <work dir> [--repos R] [--commits N] [--frames F]
//!        [--memory M] [--memory-base B]
//! Defaults: 2,000 repositories, 200,000 commits, 1,000,000 frames, 100,000 against 1,000.

use svc_bench as bench_common;
use svc_bench::{cpu_seconds, rss_kb};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bench_common::{fresh_catalog, get_json, start_svc};
use futures_util::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::io::{BufWriter, Read, Write as _};
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use svc_repo::author::{Repository, SigningKey, Write};
use svc_repo::crypto::Curve;
use svc_repo::dagcbor::Cbor;
use svc_syntax::{Did, Tid, UnixMicros};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response as WsResponse};
use tokio_tungstenite::tungstenite::{Bytes, Message};

/// Bumped whenever what is generated changes, so that a stale cache is not read.
const FORMAT: &str = "v1";
/// 2026-06-01T00:00:00Z: frames and revisions are in the past, as in a replay.
const T0: i64 = 1_780_272_000_000_000;
/// One family commit in this many frames of the network-shaped replay.
const FAMILY_EVERY: usize = 1000;
/// Repositories posting at once in the network-shaped replay, and how many commits each makes
/// before another takes its place.
const POSTING_AT_ONCE: usize = 1000;
const POSTS_PER_REPOSITORY: u32 = 20;

struct Args {
    svc: String,
    work: PathBuf,
    repos: usize,
    commits: usize,
    frames: usize,
    memory: usize,
    memory_base: usize,
}

fn args() -> Args {
    let all: Vec<String> = std::env::args().collect();
    let usage = "usage: verify_bench <svc binary> <work dir> [--repos R] [--commits N] \
                 [--frames F] [--memory M] [--memory-base B]";
    let (Some(svc), Some(work)) = (all.get(1), all.get(2)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let mut args = Args {
        svc: svc.clone(),
        work: PathBuf::from(work),
        repos: 2_000,
        commits: 200_000,
        frames: 1_000_000,
        memory: 100_000,
        memory_base: 1_000,
    };
    let mut rest = all[3..].iter();
    while let Some(flag) = rest.next() {
        let value = rest
            .next()
            .and_then(|v| v.replace('_', "").parse::<usize>().ok());
        let Some(value) = value.filter(|v| *v > 0) else {
            eprintln!("{flag}: a positive number is needed\n{usage}");
            std::process::exit(2);
        };
        match flag.as_str() {
            "--repos" => args.repos = value,
            "--commits" => args.commits = value,
            "--frames" => args.frames = value,
            "--memory" => args.memory = value,
            "--memory-base" => args.memory_base = value,
            _ => {
                eprintln!("unknown argument {flag}\n{usage}");
                std::process::exit(2);
            }
        }
    }
    if args.memory_base >= args.memory {
        eprintln!("--memory-base must be below --memory");
        std::process::exit(2);
    }
    args
}

/// splitmix64's mixing: a bijection of u64, so distinct inputs stay distinct.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fixed pseudo-random sequence, so that every run generates the same frames.
struct Random(u64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(1);
        (mix(self.0) % n as u64) as usize
    }
}

/// A repository of the benchmark, by what it is for and its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Repo {
    Family(u32),
    NetworkFamily(u32),
    Poster(u32),
    Memory(u32),
}

impl Repo {
    fn label(self) -> String {
        match self {
            Repo::Family(n) => format!("family/{n}"),
            Repo::NetworkFamily(n) => format!("network-family/{n}"),
            Repo::Poster(n) => format!("poster/{n}"),
            Repo::Memory(n) => format!("memory/{n}"),
        }
    }

    fn number(self) -> u64 {
        let (kind, n) = match self {
            Repo::Family(n) => (1, n),
            Repo::NetworkFamily(n) => (2, n),
            Repo::Poster(n) => (3, n),
            Repo::Memory(n) => (4, n),
        };
        (kind << 32) | u64::from(n)
    }

    /// A did:plc of 24 base32 characters, distinct for each repository.
    fn did(self) -> Did {
        const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
        let (a, b) = (mix(self.number()), mix(!self.number()));
        let bits = (u128::from(a) << 64) | u128::from(b);
        let id: String = (0..24)
            .map(|i| char::from(BASE32[((bits >> (i * 5)) & 31) as usize]))
            .collect();
        Did::new(format!("did:plc:{id}")).expect("a did:plc")
    }

    fn key(self) -> SigningKey {
        SigningKey::from_seed(Curve::K256, self.label().as_bytes())
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Vocab,
    Post,
}

/// One commit to generate: a create in `repo`.
#[derive(Debug, Clone, Copy)]
struct Planned {
    repo: Repo,
    kind: Kind,
}

fn family_plan(repos: usize, commits: usize) -> Vec<Planned> {
    let mut random = Random(1);
    (0..commits)
        .map(|_| Planned {
            repo: Repo::Family(random.below(repos) as u32),
            kind: Kind::Vocab,
        })
        .collect()
}

/// Mostly posts from a changing crowd of repositories, a family commit every
/// `FAMILY_EVERY` frames and as the very last one (so that the last record queryable means
/// every frame was read).
fn network_plan(repos: usize, frames: usize) -> Vec<Planned> {
    let mut random = Random(2);
    let mut slots: Vec<(u32, u32)> = (0..POSTING_AT_ONCE as u32).map(|n| (n, 0)).collect();
    let mut next_poster = POSTING_AT_ONCE as u32;
    let mut family = 0u32;
    (0..frames)
        .map(|i| {
            if (i + 1) % FAMILY_EVERY == 0 || i + 1 == frames {
                family += 1;
                return Planned {
                    repo: Repo::NetworkFamily((family - 1) % repos as u32),
                    kind: Kind::Vocab,
                };
            }
            let slot = &mut slots[random.below(POSTING_AT_ONCE)];
            if slot.1 == POSTS_PER_REPOSITORY {
                *slot = (next_poster, 0);
                next_poster += 1;
            }
            slot.1 += 1;
            Planned {
                repo: Repo::Poster(slot.0),
                kind: Kind::Post,
            }
        })
        .collect()
}

fn memory_plan(repos: usize) -> Vec<Planned> {
    (0..repos as u32)
        .map(|n| Planned {
            repo: Repo::Memory(n),
            kind: Kind::Vocab,
        })
        .collect()
}

fn text(value: &str) -> Cbor {
    Cbor::Text(value.into())
}

/// The record of commit `i`: a valid family record, or a post.
fn write(kind: Kind, i: usize, rkey: &str) -> Write {
    match kind {
        Kind::Vocab => Write::create(
            "dev.svc.vocab",
            rkey,
            Cbor::Map(vec![
                ("$type".into(), text("dev.svc.vocab")),
                ("name".into(), text(&format!("bench vocabulary {i}"))),
                ("world".into(), text("open")),
                ("occurredAt".into(), text("2026-01-01T00:00:00Z")),
            ]),
        ),
        Kind::Post => Write::create(
            "app.bsky.feed.post",
            rkey,
            Cbor::Map(vec![
                ("$type".into(), text("app.bsky.feed.post")),
                (
                    "text".into(),
                    text(&format!("post number {i}, of no family")),
                ),
                ("langs".into(), Cbor::Array(vec![text("en")])),
                ("createdAt".into(), text("2026-06-01T00:00:00.000Z")),
            ]),
        ),
    }
}

/// Frames in seq order (frame `i` has seq `i + 1`), and every repository's DID and key.
struct Stream {
    frames: Vec<Bytes>,
    keys: Vec<(String, String)>,
}

/// What one generating thread made: frames by index, and its repositories' DIDs and keys.
type Generated = (Vec<(usize, Vec<u8>)>, Vec<(String, String)>);

/// Signs and encodes every planned commit, on `threads` threads, each owning the
/// repositories whose number falls to it. A repository is dropped after its last commit.
fn generate(plan: &[Planned], threads: usize) -> Stream {
    let mut last_use = HashMap::new();
    for (i, planned) in plan.iter().enumerate() {
        last_use.insert(planned.repo, i);
    }
    let owner = |repo: Repo| (mix(repo.number() ^ 0x5eed) % threads as u64) as usize;
    let started = Instant::now();
    let parts: Vec<Generated> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let last_use = &last_use;
                scope.spawn(move || {
                    let mut repos: HashMap<Repo, Repository> = HashMap::new();
                    let (mut frames, mut keys) = (Vec::new(), Vec::new());
                    for (i, planned) in plan.iter().enumerate() {
                        if thread == 0 && i > 0 && i % (plan.len() / 10).max(1) == 0 {
                            eprintln!(
                                "  generated {}% in {:.0} s",
                                i * 100 / plan.len(),
                                started.elapsed().as_secs_f64()
                            );
                        }
                        if owner(planned.repo) != thread {
                            continue;
                        }
                        let repo = repos.entry(planned.repo).or_insert_with(|| {
                            let repo = Repository::new(planned.repo.did(), planned.repo.key());
                            keys.push((repo.did().to_string(), repo.public().multikey()));
                            repo
                        });
                        let time = UnixMicros(T0 + i as i64 * 1000);
                        let rkey = Tid::from_time(time, 1);
                        let event = repo
                            .commit_at(time, &[write(planned.kind, i, &rkey)])
                            .expect("a create of a new record");
                        frames.push((i, event.frame(i as i64 + 1, time)));
                        if last_use[&planned.repo] == i {
                            repos.remove(&planned.repo);
                        }
                    }
                    (frames, keys)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a generating thread"))
            .collect()
    });
    let mut frames = vec![Bytes::new(); plan.len()];
    let mut keys = Vec::new();
    for (part, part_keys) in parts {
        for (i, frame) in part {
            frames[i] = Bytes::from(frame);
        }
        keys.extend(part_keys);
    }
    Stream { frames, keys }
}

/// The stream cached at `path`, or generated and cached there.
fn stream(path: &FsPath, plan: impl FnOnce() -> Vec<Planned>) -> Stream {
    let started = Instant::now();
    if let Some(stream) = load(path) {
        eprintln!(
            "  {} frames read from {} in {:.1} s",
            stream.frames.len(),
            path.display(),
            started.elapsed().as_secs_f64()
        );
        return stream;
    }
    let plan = plan();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let stream = generate(&plan, threads);
    let bytes: usize = stream.frames.iter().map(Bytes::len).sum();
    eprintln!(
        "  {} frames ({} MB) generated in {:.1} s; kept in {}",
        stream.frames.len(),
        bytes >> 20,
        started.elapsed().as_secs_f64(),
        path.display()
    );
    save(path, &stream);
    stream
}

fn save(path: &FsPath, stream: &Stream) {
    let partial = path.with_extension("partial");
    let file = std::fs::File::create(&partial).expect("create the frame cache");
    let mut out = BufWriter::new(file);
    let mut put = |bytes: &[u8]| {
        out.write_all(&(bytes.len() as u32).to_le_bytes())
            .and_then(|()| out.write_all(bytes))
            .expect("write the frame cache");
    };
    put(&(stream.frames.len() as u64).to_le_bytes());
    for frame in &stream.frames {
        put(frame);
    }
    put(&(stream.keys.len() as u64).to_le_bytes());
    for (did, key) in &stream.keys {
        put(did.as_bytes());
        put(key.as_bytes());
    }
    out.flush().expect("write the frame cache");
    drop(out);
    std::fs::rename(&partial, path).expect("keep the frame cache");
}

fn load(path: &FsPath) -> Option<Stream> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .read_to_end(&mut bytes)
        .ok()?;
    let all = Bytes::from(bytes);
    let mut at = 0usize;
    let mut next = || -> Option<Bytes> {
        let length = u32::from_le_bytes(all.get(at..at + 4)?.try_into().ok()?) as usize;
        let item = all
            .get(at + 4..at + 4 + length)
            .map(|_| all.slice(at + 4..at + 4 + length));
        at += 4 + length;
        item
    };
    let count = |item: Bytes| Some(u64::from_le_bytes(item.as_ref().try_into().ok()?) as usize);
    let frames = (0..count(next()?)?)
        .map(|_| next())
        .collect::<Option<Vec<Bytes>>>()?;
    let keys = (0..count(next()?)?)
        .map(|_| {
            let did = String::from_utf8(next()?.to_vec()).ok()?;
            let key = String::from_utf8(next()?.to_vec()).ok()?;
            Some((did, key))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Stream { frames, keys })
}

/// What the loopback servers serve, changed between runs.
#[derive(Default)]
struct Served {
    /// The firehose's frames for the next connection.
    frames: RwLock<Arc<Vec<Bytes>>>,
    /// Multikeys by DID, for the PLC directory.
    keys: RwLock<HashMap<String, String>>,
    /// This server's own base URL, the PDS every DID document names.
    base: RwLock<String>,
    documents: AtomicU64,
    unknown: AtomicU64,
    get_repo: AtomicU64,
    connections: AtomicU64,
}

impl Served {
    fn serve(&self, frames: &[Bytes]) {
        *self.frames.write().expect("frames") = Arc::new(frames.to_vec());
    }

    fn add_keys(&self, keys: &[(String, String)]) {
        self.keys
            .write()
            .expect("keys")
            .extend(keys.iter().cloned());
    }
}

async fn did_document(State(served): State<Arc<Served>>, Path(did): Path<String>) -> Response {
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
async fn get_repo(State(served): State<Arc<Served>>) -> Response {
    served.get_repo.fetch_add(1, Ordering::Relaxed);
    let error = serde_json::json!({"error": "RepoNotFound", "message": "not kept"});
    (StatusCode::BAD_REQUEST, axum::Json(error)).into_response()
}

// The callback type is the handshake API's own.
#[allow(clippy::result_large_err)]
async fn firehose(stream: tokio::net::TcpStream, served: Arc<Served>) {
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
fn start_servers(served: Arc<Served>) -> (String, String) {
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
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .filter(|line| line.starts_with(name))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The benchmark's settings and the loopback servers it runs svc against.
struct Bench {
    args: Args,
    served: Arc<Served>,
    /// The PLC directory's base URL and the firehose's.
    plc: String,
    firehose: String,
    client: reqwest::blocking::Client,
}

struct Run {
    seconds: f64,
    cpu: f64,
    rss_kb: u64,
    verified: u64,
    refused: u64,
    documents: u64,
}

/// One `svc serve` on a fresh catalog, from its start until `records` records are queryable.
fn run(bench: &Bench, verify: bool, records: u64) -> Run {
    let (args, served, client) = (&bench.args, &bench.served, &bench.client);
    let dir = tempfile::tempdir_in(&args.work).expect("temporary directory");
    let documents_before = served.documents.load(Ordering::Relaxed);
    let started = Instant::now();
    let flags = [
        "--verify",
        if verify { "all" } else { "none" },
        "--plc-url",
        &bench.plc,
    ];
    let (mut child, url) = start_svc(
        &args.svc,
        &fresh_catalog(dir.path()),
        &bench.firehose,
        &flags,
    );
    let pid = child.id();
    let mut last_report = Instant::now();
    loop {
        let total = get_json(client, &format!("{url}/v1/stats"))["total"]
            .as_u64()
            .unwrap_or(0);
        if total >= records {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            eprintln!(
                "    {total} of {records} records after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        if started.elapsed() > Duration::from_secs(3600) {
            let _ = child.kill();
            panic!("{total} of {records} records after an hour");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid);
    let rss_kb = rss_kb(pid).unwrap_or(0);
    let metrics = client
        .get(format!("{url}/metrics"))
        .send()
        .and_then(|r| r.text())
        .unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    Run {
        seconds,
        cpu,
        rss_kb,
        verified: counter(&metrics, "svc_ingest_verified_total"),
        refused: counter(&metrics, "svc_ingest_unverified_total"),
        documents: served.documents.load(Ordering::Relaxed) - documents_before,
    }
}

fn mode(verify: bool) -> &'static str {
    if verify { "all " } else { "none" }
}

fn family_bench(bench: &Bench) {
    let (args, served) = (&bench.args, &bench.served);
    println!(
        "1. family commits: {} creates of dev.svc.vocab over {} repositories, each chained",
        args.commits, args.repos
    );
    let path = args.work.join(format!(
        "family-{}-{}-{FORMAT}.frames",
        args.repos, args.commits
    ));
    let stream = stream(&path, || family_plan(args.repos, args.commits));
    served.add_keys(&stream.keys);
    served.serve(&stream.frames);
    drop(stream);
    let mut rates = Vec::new();
    for verify in [true, false] {
        let run = run(bench, verify, args.commits as u64);
        let rate = args.commits as f64 / run.seconds;
        println!(
            "   --verify {}: {} records queryable in {:.1} s: {rate:.0} records/s \
             (svc CPU {:.1} s; verified {}, refused {}; {} DID documents read)",
            mode(verify),
            args.commits,
            run.seconds,
            run.cpu,
            run.verified,
            run.refused,
            run.documents
        );
        rates.push(rate);
    }
    println!(
        "   verified / unverified rate: {:.2} (goal >= 0.5)",
        rates[0] / rates[1]
    );
}

fn network_bench(bench: &Bench) {
    let (args, served) = (&bench.args, &bench.served);
    let family = args.frames.div_ceil(FAMILY_EVERY);
    println!(
        "2. network-shaped replay: {} frames, {family} of them family commits, the rest \
         app.bsky.feed.post commits of other repositories",
        args.frames
    );
    let path = args.work.join(format!(
        "network-{}-{}-{FORMAT}.frames",
        args.repos, args.frames
    ));
    let stream = stream(&path, || network_plan(args.repos, args.frames));
    served.add_keys(&stream.keys);
    served.serve(&stream.frames);
    drop(stream);
    for verify in [true, false] {
        let run = run(bench, verify, family as u64);
        let goal = if verify { ", goal >= 50000" } else { "" };
        println!(
            "   --verify {}: {} frames in {:.1} s ({:.0} frames/s); svc CPU {:.1} s: \
             {:.0} frames/s per core{goal} (verified {}, refused {})",
            mode(verify),
            args.frames,
            run.seconds,
            args.frames as f64 / run.seconds,
            run.cpu,
            args.frames as f64 / run.cpu,
            run.verified,
            run.refused
        );
    }
}

fn memory_bench(bench: &Bench) {
    let (args, served) = (&bench.args, &bench.served);
    println!(
        "3. memory: one family commit from each of {} repositories, against {}, verified",
        args.memory, args.memory_base
    );
    let path = args
        .work
        .join(format!("memory-{}-{FORMAT}.frames", args.memory));
    let stream = stream(&path, || memory_plan(args.memory));
    served.add_keys(&stream.keys);
    let mut resident = Vec::new();
    for repos in [args.memory_base, args.memory] {
        served.serve(&stream.frames[..repos]);
        let run = run(bench, true, repos as u64);
        println!(
            "   {repos} repositories: queryable in {:.1} s, RSS {} MB (verified {}, refused {})",
            run.seconds,
            run.rss_kb >> 10,
            run.verified,
            run.refused
        );
        resident.push(run.rss_kb as f64 * 1024.0);
    }
    println!(
        "   {:.0} bytes per tracked repository (RSS difference / repositories difference)",
        (resident[1] - resident[0]) / (args.memory - args.memory_base) as f64
    );
}

fn main() {
    let args = args();
    std::fs::create_dir_all(&args.work).expect("the work directory");
    svc_atproto::install_crypto();
    let client = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let served = Arc::new(Served::default());
    let (plc, firehose) = start_servers(Arc::clone(&served));
    let bench = Bench {
        args,
        served,
        plc,
        firehose,
        client,
    };
    let started = Instant::now();
    for (name, part) in [
        ("family", family_bench as fn(&Bench)),
        ("network", network_bench),
        ("memory", memory_bench),
    ] {
        let part_started = Instant::now();
        part(&bench);
        println!(
            "   ({name}: {:.0} s, with generating or reading its frames)",
            part_started.elapsed().as_secs_f64()
        );
    }
    let served = &bench.served;
    println!(
        "done in {:.0} s; PLC: {} documents served, {} unknown DIDs; getRepo asked {} times; \
         {} firehose connections",
        started.elapsed().as_secs_f64(),
        served.documents.load(Ordering::Relaxed),
        served.unknown.load(Ordering::Relaxed),
        served.get_repo.load(Ordering::Relaxed),
        served.connections.load(Ordering::Relaxed)
    );
}
