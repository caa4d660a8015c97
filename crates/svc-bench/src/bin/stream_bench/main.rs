//! Change-stream benchmark, on demand (`bench/stream.sh` runs it). Three runs, each on a fresh
//! catalog with a fresh `svc serve` following an in-process Jetstream replay server fed RATE
//! live vocabulary creates a second (world "open", `time_us` now, so none is a catch-up):
//! 1. no subscribers: the indexer's applied rate and svc's RSS;
//! 2. SUBSCRIBERS to `/v1/changes` (Server-Sent Events over raw TCP, a task each), half to
//!    `query=vocabulariesWithWorld&world=open` and half to every change: commit-to-delivery
//!    latency (p50, p99, max), the applied rate against run 1, svc's RSS per subscriber, and
//!    whether every subscriber got every change once, in order;
//! 3. as 2, with STALLED more that connect and never read: whether the others' figures move,
//!    and what svc did with the stalled ones.
//!
//! With `--nginx BINARY`, the subscribers of every run connect through nginx running
//! deploy/nginx.conf in front of that run's svc.
//!
//! Usage: stream_bench <svc binary> [--subscribers 1000] [--stalled SUBSCRIBERS/10]
//!        [--seconds 30] [--rate 2000] [--warmup 5] [--threads CPUS] [--nginx BINARY]

mod tally;
use tally::*;
mod sse;
use sse::*;
mod subscribers;
use subscribers::*;
mod report;
use report::*;
mod proxy;

use svc_bench as bench_common;
use svc_bench::{cpu_seconds, rss_kb};
use svc_testkit::replay;
use svc_testkit::tid;

use bench_common::{fresh_catalog, start_svc_logged};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

const BY_WORLD: &str = "/v1/changes?query=vocabulariesWithWorld&world=open";
const EVERY_CHANGE: &str = "/v1/changes";
/// Accounts the events are spread over.
const AUTHORS: u64 = 1000;
const CID: &str = "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm";
/// How long, after the stream stops, the subscribers may take to receive its last change.
const TAIL_AT_MOST: Duration = Duration::from_secs(60);
/// How long a stalled subscriber's connection is read at the end, to see what svc left in it.
const STALLED_READ_FOR: Duration = Duration::from_secs(5);

struct Options {
    svc: String,
    subscribers: usize,
    stalled: usize,
    seconds: u64,
    rate: u64,
    warmup: u64,
    threads: usize,
    nginx: Option<String>,
}

fn usage(problem: &str) -> ! {
    eprintln!("stream_bench: {problem}");
    eprintln!(
        "usage: stream_bench <svc binary> [--subscribers 1000] [--stalled SUBSCRIBERS/10] \
         [--seconds 30] [--rate 2000] [--warmup 5] [--threads CPUS] [--nginx BINARY]"
    );
    std::process::exit(2);
}

fn options() -> Options {
    let mut args = std::env::args().skip(1);
    let Some(svc) = args.next().filter(|a| !a.starts_with("--")) else {
        usage("the svc binary comes first");
    };
    let mut options = Options {
        svc,
        subscribers: 1000,
        stalled: usize::MAX,
        seconds: 30,
        rate: 2000,
        warmup: 5,
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        nginx: None,
    };
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let number = || -> u64 {
            value
                .parse()
                .unwrap_or_else(|_| usage(&format!("{flag}: not a number: {value}")))
        };
        match flag.as_str() {
            "--subscribers" => options.subscribers = number() as usize,
            "--stalled" => options.stalled = number() as usize,
            "--seconds" => options.seconds = number().max(1),
            "--rate" => options.rate = number().max(1),
            "--warmup" => options.warmup = number(),
            "--threads" => options.threads = number().max(1) as usize,
            "--nginx" => options.nginx = Some(value),
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    if options.stalled == usize::MAX {
        options.stalled = options.subscribers / 10;
    }
    options
}

/// A did:plc of 24 base32 characters for an account number.
fn author(n: u64) -> String {
    format!("did:plc:streambench{}", tid(n as i64))
}

/// The `n`th event: a new vocabulary in the world "open", made at `time_us`.
fn vocabulary_create(n: u64, time_us: i64) -> String {
    let key = tid(time_us);
    serde_json::json!({
        "did": author(n % AUTHORS), "time_us": time_us, "kind": "commit",
        "commit": {"rev": key, "operation": "create", "collection": "dev.svc.vocab",
            "rkey": key, "cid": CID,
            "record": {"$type": "dev.svc.vocab", "name": format!("stream-bench-{n}"),
                "world": "open", "occurredAt": svc_syntax::format_unix_micros(time_us)}},
    })
    .to_string()
}

/// Appends `rate` events a second to the replay until `stop`; the number appended.
fn spawn_feeder(
    state: Arc<Mutex<replay::ReplayState>>,
    rate: u64,
    stop: Arc<AtomicBool>,
) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut sent = 0u64;
        let mut last_time = 0i64;
        while !stop.load(Ordering::Acquire) {
            let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
            let batch: Vec<(i64, String)> = (sent..due)
                .map(|n| {
                    // Live means now: the indexer takes an event from the past for a
                    // catch-up, and the lag it reports is measured from time_us.
                    let time = svc_syntax::now_unix_micros().max(last_time + 1);
                    last_time = time;
                    (time, vocabulary_create(n, time))
                })
                .collect();
            sent = due;
            if !batch.is_empty() {
                state
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .events
                    .extend(batch);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        sent
    })
}

/// What svc's `/metrics` says of the live source and the change stream.
#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    applied: u64,
    lag_s: f64,
    subscribers: u64,
    too_slow: u64,
}

fn counters(client: &reqwest::blocking::Client, url: &str) -> Counters {
    let text = client
        .get(format!("{url}/metrics"))
        .send()
        .and_then(|r| r.text())
        .unwrap_or_default();
    let mut counters = Counters::default();
    for line in text.lines() {
        let value = line.rsplit(' ').next().unwrap_or_default();
        let number = || value.parse::<f64>().unwrap_or(0.0);
        if line.starts_with("svc_ingest_events_total{")
            && line.contains("source=\"firehose\"")
            && line.contains("outcome=\"applied\"")
        {
            counters.applied += number() as u64;
        } else if line.starts_with("svc_ingest_lag_seconds ") {
            counters.lag_s = number();
        } else if line.starts_with("svc_stream_subscribers ") {
            counters.subscribers = number() as u64;
        } else if line.starts_with("svc_stream_too_slow_total ") {
            counters.too_slow = number() as u64;
        }
    }
    counters
}

/// Bytes waiting in the kernel send queues of the sockets svc accepted on `port`, in KB
/// (`/proc/net/tcp`, `tcp6`: the `tx_queue` of every socket whose local port it is).
fn send_queues_kb(port: u16) -> u64 {
    let mut bytes = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = fields.get(1).and_then(|a| a.rsplit(':').next());
            let ours = local.and_then(|p| u16::from_str_radix(p, 16).ok()) == Some(port);
            let queued = fields.get(4).and_then(|q| q.split(':').next());
            if let (true, Some(queued)) = (ours, queued) {
                bytes += u64::from_str_radix(queued, 16).unwrap_or(0);
            }
        }
    }
    bytes / 1024
}

fn own_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The figures of one run.
struct Run {
    subscribers: usize,
    stalled: usize,
    applied_per_s: f64,
    lowest_per_s: f64,
    lag_end_s: f64,
    rss_idle_kb: u64,
    rss_connected_kb: u64,
    rss_end_kb: u64,
    rss_peak_kb: u64,
    /// The most bytes waiting in svc's sockets' kernel send queues, in KB.
    send_queues_peak_kb: u64,
    svc_cores: f64,
    bench_cores: f64,
    latencies: Latencies,
    slices: Vec<Slice>,
    /// Changes committed in the window, each owed to every subscriber.
    window_changes: u64,
    /// How long the last change of the window had waited when the benchmark stopped reading:
    /// the least latency of any still owed.
    owed_waited_s: f64,
    changes: u64,
    missed: u64,
    repeated: u64,
    /// Subscribers (not stalled) whose stream ended before the run did, and why.
    ended: Vec<String>,
    /// Subscribers that received the run's last change with no gap.
    complete: usize,
    tail_s: f64,
    last_seq: i64,
    /// The lowest seq a subscriber had reached when the benchmark stopped reading.
    slowest_seq: i64,
    too_slow: u64,
    subscribers_at_end: u64,
    stalled_found: Vec<Stalled>,
    warnings: Vec<String>,
    wall_s: f64,
    /// `/healthz` answer times during the window, in ms.
    healthz_ms: Vec<f64>,
}

/// Asks `/healthz` every 50 ms until `done`; each answer's time, in ms.
fn probe_healthz(url: String, done: Arc<AtomicBool>) -> JoinHandle<Vec<f64>> {
    std::thread::spawn(move || {
        let client = reqwest::blocking::Client::new();
        let mut times = Vec::new();
        while !done.load(Ordering::Acquire) {
            let asked = Instant::now();
            if client.get(format!("{url}/healthz")).send().is_ok() {
                times.push(asked.elapsed().as_secs_f64() * 1000.0);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        times
    })
}

/// The p50 and p99 of some times.
fn p50_p99(times: &[f64]) -> (f64, f64) {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| {
        sorted
            .get(((sorted.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    (at(0.5), at(0.99))
}

fn wait_for(what: &str, at_most: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < at_most,
            "{what}: not within {at_most:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run(
    options: &Options,
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::blocking::Client,
    subscribers: usize,
    stalled_ones: usize,
) -> Run {
    let wall = Instant::now();
    let replay = replay::Replay::start(Vec::new());
    let dir = tempfile::tempdir().expect("temporary directory");
    let most = (subscribers + stalled_ones + 16).to_string();
    let (mut child, url, warnings) = start_svc_logged(
        &options.svc,
        &fresh_catalog(dir.path()),
        &replay.url,
        // Every subscriber comes from one address here.
        &[
            "--max-subscribers",
            &most,
            "--max-subscribers-per-client",
            &most,
        ],
    );
    let pid = child.id();
    wait_for(
        "svc connects to the replay",
        Duration::from_secs(30),
        || {
            !replay
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .cursors
                .is_empty()
        },
    );
    std::thread::sleep(Duration::from_secs(1));
    let rss_idle_kb = rss_kb(pid).unwrap_or(0);

    let addr: SocketAddr = url
        .trim_start_matches("http://")
        .parse()
        .expect("svc's address");
    let proxy = options
        .nginx
        .as_deref()
        .map(|binary| proxy::start(binary, addr));
    let addr = proxy.as_ref().map_or(addr, |nginx| nginx.addr);
    let shared = Arc::new(Shared {
        window_after_seq: AtomicI64::new(i64::MAX),
        window_last_seq: AtomicI64::new(i64::MAX),
        window_from_us: AtomicI64::new(0),
        connected: AtomicUsize::new(0),
        last_seq: (0..subscribers).map(|_| AtomicI64::new(0)).collect(),
    });
    let (stop, stopped) = watch::channel(false);
    let readers: Vec<_> = (0..subscribers)
        .map(|i| {
            let path = if i % 2 == 0 { BY_WORLD } else { EVERY_CHANGE };
            runtime.spawn(subscriber(
                i,
                addr,
                path,
                Arc::clone(&shared),
                stopped.clone(),
            ))
        })
        .collect();
    let stalls: Vec<_> = (0..stalled_ones)
        .map(|i| {
            let path = if i % 2 == 0 { BY_WORLD } else { EVERY_CHANGE };
            runtime.spawn(stalled(addr, path, Arc::clone(&shared), stopped.clone()))
        })
        .collect();
    let everyone = subscribers + stalled_ones;
    let connecting = Instant::now();
    while shared.connected.load(Ordering::Acquire) < everyone
        || (counters(client, &url).subscribers as usize) < everyone
    {
        if readers.iter().any(|task| task.is_finished()) {
            let errors: Vec<String> = runtime.block_on(async {
                let mut errors = Vec::new();
                for task in readers {
                    if task.is_finished()
                        && let Ok(Err(error)) = task.await
                    {
                        errors.push(error);
                    }
                }
                errors
            });
            panic!("subscribers failed to connect: {errors:?}");
        }
        assert!(
            connecting.elapsed() < Duration::from_secs(60),
            "{} of {everyone} subscribers connected after 60 s (svc counts {})",
            shared.connected.load(Ordering::Acquire),
            counters(client, &url).subscribers
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    let rss_connected_kb = rss_kb(pid).unwrap_or(0);

    let stop_feeding = Arc::new(AtomicBool::new(false));
    let feeder = spawn_feeder(
        Arc::clone(&replay.state),
        options.rate,
        Arc::clone(&stop_feeding),
    );
    wait_for(
        "svc applies the first event",
        Duration::from_secs(30),
        || counters(client, &url).applied > 0,
    );
    std::thread::sleep(Duration::from_secs(options.warmup));

    let before = counters(client, &url);
    let (svc_cpu_before, own_cpu_before) = (cpu_seconds(pid), own_cpu_seconds());
    let started = Instant::now();
    // A fresh catalog whose every change is a create: the applied counter is the newest seq.
    shared
        .window_from_us
        .store(svc_syntax::now_unix_micros(), Ordering::Release);
    shared
        .window_after_seq
        .store(before.applied as i64, Ordering::Release);
    let probing_done = Arc::new(AtomicBool::new(false));
    let prober = probe_healthz(url.clone(), Arc::clone(&probing_done));
    let mut rss_peak_kb = 0;
    let mut send_queues_peak_kb = 0;
    let port = addr.port();
    let mut lowest_per_s = f64::MAX;
    let mut previous = (before.applied, started);
    for second in 1..=options.seconds {
        let next = started + Duration::from_secs(second);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let now = counters(client, &url);
        let at = Instant::now();
        let per_s = (now.applied - previous.0) as f64 / (at - previous.1).as_secs_f64();
        lowest_per_s = lowest_per_s.min(per_s);
        previous = (now.applied, at);
        rss_peak_kb = rss_peak_kb.max(rss_kb(pid).unwrap_or(0));
        send_queues_peak_kb = send_queues_peak_kb.max(send_queues_kb(port));
    }
    let after = counters(client, &url);
    let seconds = started.elapsed().as_secs_f64();
    probing_done.store(true, Ordering::Release);
    let healthz_ms = prober.join().expect("the /healthz prober");
    shared
        .window_last_seq
        .store(after.applied as i64, Ordering::Release);
    let window_ended = Instant::now();
    let svc_cores = (cpu_seconds(pid) - svc_cpu_before) / seconds;
    let bench_cores = (own_cpu_seconds() - own_cpu_before) / seconds;
    let rss_end_kb = rss_kb(pid).unwrap_or(0);

    stop_feeding.store(true, Ordering::Release);
    let streamed = feeder.join().expect("the feeder");
    let applying = Instant::now();
    while counters(client, &url).applied < streamed && applying.elapsed() < TAIL_AT_MOST {
        std::thread::sleep(Duration::from_millis(50));
    }
    let last_seq = counters(client, &url).applied as i64;
    let tail = Instant::now();
    while tail.elapsed() < TAIL_AT_MOST
        && shared
            .last_seq
            .iter()
            .any(|seq| seq.load(Ordering::Acquire) < last_seq)
        && readers.iter().any(|task| !task.is_finished())
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let tail_s = tail.elapsed().as_secs_f64();
    let end = counters(client, &url);
    let _ = stop.send(true);
    let owed_waited_s = window_ended.elapsed().as_secs_f64();

    let (tallies, stalled_found) = runtime.block_on(async {
        let mut tallies = Vec::new();
        for task in readers {
            tallies.push(task.await.expect("a subscriber task"));
        }
        let mut found = Vec::new();
        for task in stalls {
            found.push(task.await.expect("a stalled task"));
        }
        (tallies, found)
    });
    let _ = child.kill();
    let _ = child.wait();

    let mut latencies = Latencies::new();
    let mut slices: Vec<Slice> = Vec::new();
    let (mut changes, mut missed, mut repeated, mut complete) = (0, 0, 0, 0);
    let mut slowest_seq = i64::MAX;
    let mut ended = Vec::new();
    for tally in tallies {
        let tally = tally.unwrap_or_else(|e| panic!("a subscriber failed: {e}"));
        latencies.merge(&tally.latencies);
        if slices.len() < tally.slices.len() {
            slices.resize(tally.slices.len(), Slice::default());
        }
        for (all, one) in slices.iter_mut().zip(&tally.slices) {
            all.sum_us += one.sum_us;
            all.n += one.n;
            all.max_us = all.max_us.max(one.max_us);
        }
        changes += tally.changes;
        missed += tally.missed;
        repeated += tally.repeated;
        slowest_seq = slowest_seq.min(tally.last_seq);
        if tally.missed == 0 && tally.last_seq >= last_seq {
            complete += 1;
        }
        ended.extend(tally.ended);
    }
    Run {
        subscribers,
        stalled: stalled_ones,
        applied_per_s: (after.applied - before.applied) as f64 / seconds,
        lowest_per_s,
        lag_end_s: after.lag_s,
        rss_idle_kb,
        rss_connected_kb,
        rss_end_kb,
        rss_peak_kb,
        send_queues_peak_kb,
        svc_cores,
        bench_cores,
        latencies,
        slices,
        window_changes: after.applied - before.applied,
        owed_waited_s,
        changes,
        missed,
        repeated,
        ended,
        complete,
        tail_s,
        last_seq,
        slowest_seq,
        too_slow: end.too_slow,
        subscribers_at_end: end.subscribers,
        stalled_found: stalled_found
            .into_iter()
            .map(|s| s.unwrap_or_else(|e| panic!("a stalled subscriber failed: {e}")))
            .collect(),
        warnings: warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            // Said once by every svc that follows Jetstream: no news.
            .filter(|line| !line.contains("Jetstream carries no proofs"))
            .cloned()
            .collect(),
        wall_s: wall.elapsed().as_secs_f64(),
        healthz_ms,
    }
}

fn main() {
    let options = options();
    // reqwest is built with rustls and no provider of its own.
    svc_atproto::install_crypto();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads)
        .enable_all()
        .build()
        .expect("runtime");
    let client = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let started = Instant::now();
    println!(
        "stream: {} events/s for {} s after {} s of warm-up; {} subscribers, then {} stalled \
         more; {} CPUs{}",
        options.rate,
        options.seconds,
        options.warmup,
        options.subscribers,
        options.stalled,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if options.nginx.is_some() {
            "; subscribers through nginx"
        } else {
            ""
        }
    );
    let none = run(&options, &runtime, &client, 0, 0);
    report("none", &none, None, &options);
    let active = run(&options, &runtime, &client, options.subscribers, 0);
    let label = format!("{} subscribers", options.subscribers);
    report(&label, &active, Some(&none), &options);
    let stalled = run(
        &options,
        &runtime,
        &client,
        options.subscribers,
        options.stalled,
    );
    let label = format!("+{} stalled", options.stalled);
    report(&label, &stalled, Some(&none), &options);
    let ratio = active.applied_per_s / none.applied_per_s.max(1.0);
    println!(
        "summary: applied rate with {} subscribers {ratio:.3} of none (goal >= 0.9: {}); with \
         {} stalled more {:.3}; latency {}; with the stalled {}; {:.1} KB RSS per subscriber; \
         all runs {:.0} s",
        options.subscribers,
        if ratio >= 0.9 { "met" } else { "missed" },
        options.stalled,
        stalled.applied_per_s / none.applied_per_s.max(1.0),
        latency_figures(&active),
        latency_figures(&stalled),
        (active.rss_end_kb as f64 - none.rss_end_kb as f64) / active.subscribers.max(1) as f64,
        started.elapsed().as_secs_f64()
    );
}
