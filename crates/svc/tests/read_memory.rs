//! Repositories read whole share one memory budget (`SVC_READ_MEMORY_MB`): sixteen large
//! `getRepo` answers at once, four hosts of four, cost the budget and not their sum. What the
//! budget has no room for goes on to disk and waits for memory to be verified; none of it is
//! dropped: every repository ends up read.

use svc_testkit as common;

use common::replay::spawn_async;
use common::*;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use svc_repo::author::{Repository, SigningKey, Write};
use svc_repo::crypto::Curve;
use svc_repo::dagcbor::{Cbor, cid_of};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const REPOSITORIES: usize = 16;
const HOSTS: usize = 4;
/// Each `getRepo` answer, padded with blocks no tree names.
const BODY_BYTES: usize = 16 << 20;
/// The budget svc is given: one answer's worth, each verified alone.
const BUDGET_MB: &str = "16";
/// Growth of svc's peak RSS over its RSS at start that the budget keeps within: the budget,
/// one copy's blocks beside it, and what sixteen downloads at full speed cost outside the
/// bodies (the HTTP client's and the allocator's buffers, some 70 MB in a debug build). All
/// sixteen answers held at once, as before the budget, grow it by about 370 MB.
const GROWTH_WITHIN_KB: u64 = 192 << 10;

fn key() -> SigningKey {
    SigningKey::from_seed(Curve::K256, b"the large repositories' key")
}

fn did(n: usize) -> String {
    format!("did:plc:largerepository{n:02}")
}

/// A multiformats varint.
fn varint(mut value: usize, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A signed repository of one vocabulary, its CAR padded past `BODY_BYTES` with blocks of
/// 1 MiB that are each their CID but that no tree names.
fn padded_repository(n: usize) -> Vec<u8> {
    let record = Cbor::Map(vec![
        ("$type".into(), Cbor::Text("dev.svc.vocab".into())),
        ("name".into(), Cbor::Text(format!("large{n}"))),
        ("world".into(), Cbor::Text("open".into())),
        (
            "occurredAt".into(),
            Cbor::Text("2026-01-01T00:00:00Z".into()),
        ),
    ]);
    let did = svc_syntax::Did::new(did(n)).expect("a DID");
    let mut repository = Repository::new(did, key());
    repository
        .commit(&[Write::create("dev.svc.vocab", "large", record)])
        .expect("a commit");
    let mut car = repository.car().expect("an export");
    let mut block = 0u32;
    while car.len() < BODY_BYTES {
        let mut data = vec![(n as u8) ^ (block as u8); 1 << 20];
        data[..4].copy_from_slice(&block.to_be_bytes());
        data[4] = n as u8;
        let cid = cid_of(&data);
        varint(cid.as_bytes().len() + data.len(), &mut car);
        car.extend_from_slice(cid.as_bytes());
        car.extend_from_slice(&data);
        block += 1;
    }
    car
}

fn param(target: &str, name: &str) -> Option<String> {
    let query = target.split_once('?')?.1;
    let found = query
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))?;
    Some(found.replace("%3A", ":"))
}

async fn request_target(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 4096];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut buffer).await.ok()?;
        if n == 0 || head.len() > 64 << 10 {
            return None;
        }
        head.extend_from_slice(&buffer[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    head.split(' ').nth(1).map(str::to_string)
}

async fn answer_json(stream: &mut TcpStream, status: &str, body: &Value) {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
}

/// A PDS serving `getRepo` from `cars` as the reference PDS streams it (no length, the end of
/// the connection its end). Each answer's first 64 KiB go out at once, the rest once all
/// `REPOSITORIES` answers have begun (or 5 s passed), so that every read is in flight at once.
fn host(cars: Arc<HashMap<String, Vec<u8>>>, begun: Arc<AtomicUsize>) -> String {
    let (sender, receiver) = std::sync::mpsc::channel();
    spawn_async(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        sender
            .send(listener.local_addr().expect("address"))
            .expect("port");
        while let Ok((mut stream, _)) = listener.accept().await {
            let (cars, begun) = (Arc::clone(&cars), Arc::clone(&begun));
            tokio::spawn(async move {
                let target = request_target(&mut stream).await.unwrap_or_default();
                let car = param(&target, "did").and_then(|did| cars.get(&did).cloned());
                let Some(car) = car.filter(|_| target.contains("getRepo")) else {
                    let missing = json!({"error": "RepoNotFound", "message": "not here"});
                    return answer_json(&mut stream, "400 Bad Request", &missing).await;
                };
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.ipld.car\r\n\
                            connection: close\r\n\r\n";
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&car[..64 << 10]).await;
                begun.fetch_add(1, Ordering::SeqCst);
                let started = Instant::now();
                while begun.load(Ordering::SeqCst) < REPOSITORIES
                    && started.elapsed() < Duration::from_secs(5)
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let _ = stream.write_all(&car[64 << 10..]).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    format!("http://{}", receiver.recv().expect("the host started"))
}

/// The server svc backfills from, also the DIDs' directory: it lists every repository under
/// vocabularies, and each DID's document names its key and its host.
fn operator(hosts: Vec<String>) -> String {
    let (sender, receiver) = std::sync::mpsc::channel();
    let multikey = key().public().multikey();
    spawn_async(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        sender
            .send(listener.local_addr().expect("address"))
            .expect("port");
        while let Ok((mut stream, _)) = listener.accept().await {
            let (hosts, multikey) = (hosts.clone(), multikey.clone());
            tokio::spawn(async move {
                let target = request_target(&mut stream).await.unwrap_or_default();
                let answer = directory_answer(&target, &hosts, &multikey);
                answer_json(&mut stream, "200 OK", &answer).await;
            });
        }
    });
    format!("http://{}", receiver.recv().expect("the operator started"))
}

fn directory_answer(target: &str, hosts: &[String], multikey: &str) -> Value {
    if target.contains("listReposByCollection") {
        let repos: Vec<Value> = match param(target, "collection").as_deref() {
            Some("dev.svc.vocab") => (0..REPOSITORIES).map(|n| json!({"did": did(n)})).collect(),
            _ => Vec::new(),
        };
        return json!({"repos": repos});
    }
    let Some(n) = (0..REPOSITORIES).find(|n| target == format!("/{}", did(*n))) else {
        return json!({"error": "NotFound"});
    };
    let did = did(n);
    json!({
        "id": did,
        "alsoKnownAs": [],
        "verificationMethod": [{"id": format!("{did}#atproto"), "type": "Multikey",
            "controller": did, "publicKeyMultibase": multikey}],
        "service": [{"id": "#atproto_pds", "type": "AtprotoPersonalDataServer",
            "serviceEndpoint": hosts[n % HOSTS]}],
    })
}

fn memory_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("the field")
}

fn metric(server: &Server, name: &str) -> u64 {
    let text = server.get_raw("/metrics").2;
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

#[test]
fn large_answers_at_once_cost_the_budget_and_every_repository_is_read() {
    let cars: HashMap<String, Vec<u8>> = (0..REPOSITORIES)
        .map(|n| (did(n), padded_repository(n)))
        .collect();
    let cars = Arc::new(cars);
    let begun = Arc::new(AtomicUsize::new(0));
    let hosts: Vec<String> = (0..HOSTS)
        .map(|_| host(Arc::clone(&cars), Arc::clone(&begun)))
        .collect();
    let operator = operator(hosts);
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: the only test of this binary, and no other thread reads the environment yet
    // (the peers above run on threads of their own that never do).
    unsafe { std::env::set_var("SVC_READ_MEMORY_MB", BUDGET_MB) };
    let mut server = Server::listening(
        dir.path().join("catalog.db"),
        &[
            "--firehose",
            "none",
            "--backfill",
            &operator,
            "--plc-url",
            &operator,
        ],
    );
    let pid = server.child.id();
    let at_start = memory_kb(pid, "VmRSS");
    let finished = server.wait_log("backfill finished", Duration::from_secs(120));
    eprintln!("{finished}");
    let peak = memory_kb(pid, "VmHWM");
    let growth = peak.saturating_sub(at_start);
    eprintln!(
        "RSS {} MB at start, peak {} MB: {} MB for {REPOSITORIES} answers of {} MiB at once",
        at_start >> 10,
        peak >> 10,
        growth >> 10,
        BODY_BYTES >> 20
    );
    for name in [
        "svc_ingest_read_memory_waits_total",
        "svc_ingest_read_spills_total",
        "svc_ingest_read_memory_bytes",
    ] {
        eprintln!("{name} {}", metric(&server, name));
    }
    let begun = begun.load(Ordering::SeqCst);
    assert!(begun >= REPOSITORIES, "{begun} answers began");
    assert_eq!(
        server.get("/v1/stats").1["vocabularies"],
        REPOSITORIES,
        "every repository read"
    );
    assert!(growth < GROWTH_WITHIN_KB, "peak RSS grew {growth} kB");
    assert!(metric(&server, "svc_ingest_read_memory_waits_total") >= 1);
    assert!(metric(&server, "svc_ingest_read_spills_total") >= 1);
    assert_eq!(metric(&server, "svc_ingest_read_memory_bytes"), 0);
}
