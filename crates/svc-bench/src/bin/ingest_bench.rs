//! Ingest benchmark, on demand (`bench/ingest.sh` runs it):
//! 1. a Jetstream replay server streams N events (default 1,000,000) over loopback into a fresh
//!    `svc serve`; prints events/s from connection to the last one being queryable;
//! 2. end to end from the reference PDS: publish records one at a time and time each from the
//!    `createRecord` answer to its appearance in the API; prints p50 and p99.
//!
//! Usage: ingest_bench <svc binary> <events.jsonl> [N] [--no-pds]

use svc_bench as bench_common;
use svc_bench::percentile;
use svc_testkit::replay;

use bench_common::{fresh_catalog, get_json, start_svc};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn replay_bench(svc: &str, events_path: &str, n: usize, client: &reqwest::blocking::Client) {
    let file = std::fs::File::open(events_path).expect("events file");
    let mut events = Vec::with_capacity(n);
    for line in BufReader::new(file).lines().take(n) {
        let line = line.expect("line");
        let time = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v["time_us"].as_i64())
            .unwrap_or(0);
        events.push((time, line));
    }
    let n = events.len();
    let replay = replay::Replay::start(events);
    let dir = tempfile::tempdir().expect("temporary directory");
    let started = Instant::now();
    let (mut child, url) = start_svc(svc, &fresh_catalog(dir.path()), &replay.url, &[]);
    let mut last_report = Instant::now();
    loop {
        let total = get_json(client, &format!("{url}/v1/stats"))["total"]
            .as_u64()
            .unwrap_or(0);
        if total as usize >= n {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "  {total} applied after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let seconds = started.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "replay: {n} events applied and queryable in {seconds:.1} s: {:.0} events/s",
        n as f64 / seconds
    );
}

fn pds_bench(svc: &str, client: &reqwest::blocking::Client) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut peers = Command::new(format!("{root}/scripts/peers"))
        .arg("run")
        .env("SVC_PEERS_EXIT_ON_STDIN_EOF", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("scripts/peers run");
    let mut out = BufReader::new(peers.stdout.take().expect("stdout")).lines();
    let info: serde_json::Value = loop {
        let line = out.next().expect("peers exited").expect("line");
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line)
            && value.get("pds").is_some()
        {
            break value;
        }
    };
    let pds = info["pds"].as_str().expect("pds").to_string();
    let pds_ws = info["pdsWs"].as_str().expect("pdsWs").to_string();
    let account: serde_json::Value = client
        .post(format!("{pds}/xrpc/com.atproto.server.createAccount"))
        .json(&serde_json::json!({"handle": "bench.test", "email": "bench@example.test", "password": "bench-password"}))
        .send()
        .and_then(|r| r.json())
        .expect("createAccount");
    let did = account["did"].as_str().expect("did").to_string();
    let token = account["accessJwt"].as_str().expect("token").to_string();
    let dir = tempfile::tempdir().expect("temporary directory");
    let (mut child, url) = start_svc(svc, &fresh_catalog(dir.path()), &pds_ws, &[]);
    while client
        .get(format!("{url}/readyz"))
        .send()
        .map(|r| r.status() != 200)
        .unwrap_or(true)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut latencies = Vec::new();
    for i in 0..200 {
        let name = format!("e2e-{i:03}");
        let record = serde_json::json!({"$type": "dev.svc.vocab", "name": name, "world": "open", "occurredAt": "2026-01-01T00:00:00Z"});
        client
            .post(format!("{pds}/xrpc/com.atproto.repo.createRecord"))
            .bearer_auth(&token)
            .json(
                &serde_json::json!({"repo": did, "collection": "dev.svc.vocab", "record": record}),
            )
            .send()
            .expect("createRecord");
        let published = Instant::now();
        loop {
            let answer = get_json(
                client,
                &format!("{url}/v1/vocabularies/by-name?name={name}"),
            );
            if answer["total"] == 1 {
                break;
            }
            assert!(
                published.elapsed() < Duration::from_secs(10),
                "{name} never appeared"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        latencies.push(published.elapsed().as_secs_f64() * 1000.0);
    }
    let _ = child.kill();
    let _ = child.wait();
    drop(peers.stdin.take());
    let _ = peers.wait();
    latencies.sort_by(|a, b| a.total_cmp(b));
    println!(
        "pds firehose: publish to queryable over {} records: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(svc), Some(events)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: ingest_bench <svc binary> <events.jsonl> [N] [--no-pds]");
        std::process::exit(2);
    };
    let n = args
        .get(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    svc_atproto::install_crypto();
    let client = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    replay_bench(svc, events, n, &client);
    if !args.iter().any(|a| a == "--no-pds") {
        pds_bench(svc, &client);
    }
}
