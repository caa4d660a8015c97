//! Replica benchmark, on demand (`bench/replicas.sh` runs it): one indexer and two query
//! replicas (`--no-indexer`) on one catalog (`SVC_BENCH_DB`, or an SQLite file).
//! 1. Propagation: a vocabulary is published through the indexer's live source (a Jetstream
//!    replay server); once the indexer answers it, each replica is asked, with its answer
//!    cache on and the old answer cached, until it answers it too. Prints p50 and p99 of that
//!    delay: how long a replica can answer the old state after the indexer shows the new.
//! 2. Throughput with wrk: one replica's `/healthz` and a cached list answer, then the list
//!    on both replicas at once, as ratios of the yardstick's (`SVC_YARDSTICK_URL`: nginx
//!    answering a constant, which `bench/replicas.sh` starts), measured the same way.
//!
//! Usage: replica_bench <svc binary> [probes] [events.jsonl to import first]

use svc_bench as bench_common;
use svc_bench::percentile;
use svc_bench::wrk;
use svc_testkit::replay;

use bench_common::{fresh_catalog, get_json, start_svc};
use std::time::{Duration, Instant};

const OPEN: &str = "/v1/vocabularies/by-world?world=open&limit=10";

fn total(client: &reqwest::blocking::Client, url: &str) -> u64 {
    get_json(client, &format!("{url}{OPEN}"))["total"]
        .as_u64()
        .unwrap_or(0)
}

/// Polls until the answer's total is `wanted`; the time it took.
fn until_total(client: &reqwest::blocking::Client, url: &str, wanted: u64) -> Duration {
    let started = Instant::now();
    while total(client, url) != wanted {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{url} never showed {wanted}"
        );
        std::thread::sleep(Duration::from_micros(500));
    }
    started.elapsed()
}

/// Requests per second wrk measures for one URL.
fn wrk(url: &str, connections: usize) -> f64 {
    wrk::requests_per_second(&["-t1", &format!("-c{connections}"), "-d5s"], url)
        .expect("wrk runs (apt-get install wrk)")
        .unwrap_or(0.0)
}

/// The sum of what wrk measures for each URL, all driven at once.
fn wrk_together(urls: &[String], connections: usize) -> f64 {
    let handles: Vec<_> = urls
        .iter()
        .cloned()
        .map(|url| std::thread::spawn(move || wrk(&url, connections)))
        .collect();
    handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
}

fn ready(client: &reqwest::blocking::Client, url: &str) -> bool {
    client
        .get(format!("{url}/readyz"))
        .send()
        .is_ok_and(|r| r.status().is_success())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let svc = args
        .get(1)
        .expect("usage: replica_bench <svc> [probes] [events.jsonl]");
    let probes: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200);
    let import: Vec<&str> = match args.get(3) {
        Some(path) => vec!["--import", path.as_str()],
        None => Vec::new(),
    };
    svc_atproto::install_crypto();
    let client = reqwest::blocking::Client::new();
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = fresh_catalog(dir.path());
    let replay = replay::Replay::start(Vec::new());
    let (mut indexer, indexer_url) = start_svc(svc, &db, &replay.url, &import);
    while !ready(&client, &indexer_url) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let replicas: Vec<_> = (0..2)
        .map(|_| start_svc(svc, &db, "none", &["--no-indexer"]))
        .collect();
    let urls: Vec<&str> = replicas.iter().map(|(_, url)| url.as_str()).collect();

    let base = svc_syntax::now_unix_micros() - 3_600_000_000;
    let mut delays = Vec::with_capacity(probes * 2);
    let mut expected = total(&client, &indexer_url);
    let revs = svc_syntax::TidGenerator::new(0);
    for i in 0..probes {
        for url in &urls {
            total(&client, url); // the old answer, cached
        }
        let rkey = format!("propagation{i:06}");
        let line = serde_json::json!({"did": "did:plc:replicabench", "time_us": base + i as i64,
            "kind": "commit", "commit": {"rev": revs.next_tid(), "operation": "create",
            "collection": "dev.svc.vocab", "rkey": rkey, "cid":
            "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm", "record": {
            "$type": "dev.svc.vocab", "name": rkey, "world": "open",
            "occurredAt": "2026-11-01T12:00:00Z"}}});
        replay.publish([(base + i as i64, line.to_string())]);
        expected += 1;
        until_total(&client, &indexer_url, expected);
        for url in &urls {
            delays.push(until_total(&client, url, expected).as_secs_f64() * 1000.0);
        }
    }
    delays.sort_by(f64::total_cmp);
    println!(
        "propagation, indexer answer to replica answer ({} probes x 2 replicas): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        probes,
        percentile(&delays, 0.5),
        percentile(&delays, 0.99),
        delays.last().copied().unwrap_or(0.0)
    );

    let healthz = wrk(&format!("{}/healthz", urls[0]), 32);
    let one = wrk(&format!("{}{OPEN}", urls[0]), 32);
    let two = wrk_together(
        &urls
            .iter()
            .map(|u| format!("{u}{OPEN}"))
            .collect::<Vec<_>>(),
        16,
    );
    let yardstick_url =
        std::env::var("SVC_YARDSTICK_URL").expect("SVC_YARDSTICK_URL (bench/replicas.sh sets it)");
    let yardstick = wrk(&yardstick_url, 32);
    println!(
        "yardstick (nginx constant): {yardstick:.0} requests/s; one replica /healthz: {healthz:.0}"
    );
    println!(
        "cached list, one replica: {one:.0} /s ({:.3} of the yardstick); two replicas together: {two:.0} /s ({:.3})",
        one / yardstick,
        two / yardstick
    );
    for (mut child, _) in replicas {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = indexer.kill();
    let _ = indexer.wait();
}
