//! Soak benchmark, on demand (`bench/soak.sh` runs it): a realistic query mix at 64
//! connections for MINUTES while the indexer applies a live stream of RATE events/s.
//!
//! 1. `svc serve` imports a base catalog and follows an in-process Jetstream replay server;
//! 2. once ready, a feeder appends events to the replay at RATE/s (their `time_us` set to now,
//!    so they are live), wrk sends the mix (bench/mix.lua), a prober asks `/healthz` 20 times
//!    a second on a connection of its own, and the server's RSS and ingest counters are
//!    sampled every 5 s; a line per minute;
//! 3. after the stream stops and the catalog settles: `/v1/stats` per kind against the events
//!    imported and streamed, and each list route of the mix paged to its end by cursor.
//!
//! Exits 1 when a criterion fails (errors, RSS growth, `/healthz` p99, applied rate, counts),
//! naming it.
//!
//! Usage: soak_bench --svc BIN --base FILE --events FILE --skip N --mix FILE --dir DIR
//!        [--minutes 10] [--rate 2500] [--connections 64] [--script bench/mix.lua]

mod probes;
use probes::*;
mod minutes;
use minutes::*;
mod outcome;
use outcome::*;

use svc_bench::{percentile, rss_kb};
use svc_testkit::replay;

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const PROBE_EVERY: Duration = Duration::from_millis(50);
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
const HEALTHZ_P99_MS: f64 = 5.0;
const RSS_GROWTH: f64 = 1.10;
const MIN_APPLIED_PER_S: f64 = 2000.0;

struct Options {
    svc: String,
    base: PathBuf,
    events: PathBuf,
    skip: usize,
    mix: PathBuf,
    dir: PathBuf,
    minutes: u64,
    rate: u64,
    connections: u64,
    script: PathBuf,
}

fn usage(problem: &str) -> ! {
    eprintln!("soak_bench: {problem}");
    eprintln!(
        "usage: soak_bench --svc BIN --base FILE --events FILE --skip N --mix FILE --dir DIR \
         [--minutes 10] [--rate 2500] [--connections 64] [--script bench/mix.lua]"
    );
    std::process::exit(2);
}

fn options() -> Options {
    let mut flags = BTreeMap::new();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let Some(name) = flag.strip_prefix("--") else {
            usage(&format!("unexpected argument {flag:?}"));
        };
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        flags.insert(name.to_string(), value);
    }
    let mut take = |name: &str, default: Option<&str>| -> String {
        flags
            .remove(name)
            .or(default.map(str::to_string))
            .unwrap_or_else(|| usage(&format!("--{name} is required")))
    };
    let number = |name: &str, value: String| -> u64 {
        value
            .parse()
            .unwrap_or_else(|_| usage(&format!("--{name}: not a number: {value:?}")))
    };
    let default_script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/mix.lua");
    let options = Options {
        svc: take("svc", None),
        base: take("base", None).into(),
        events: take("events", None).into(),
        skip: number("skip", take("skip", None)) as usize,
        mix: take("mix", None).into(),
        dir: take("dir", None).into(),
        minutes: number("minutes", take("minutes", Some("10"))),
        rate: number("rate", take("rate", Some("2500"))),
        connections: number("connections", take("connections", Some("64"))),
        script: take("script", Some(default_script)).into(),
    };
    if let Some(unknown) = flags.keys().next() {
        usage(&format!("unknown flag --{unknown}"));
    }
    if options.minutes == 0 || options.rate == 0 {
        usage("--minutes and --rate must be at least 1");
    }
    options
}

/// The record collection of an event line, `None` for events that are not commits.
fn collection(line: &str) -> Option<String> {
    let event: serde_json::Value = serde_json::from_str(line).ok()?;
    event["commit"]["collection"].as_str().map(str::to_string)
}

fn count_kinds(path: &PathBuf) -> BTreeMap<String, u64> {
    let file = File::open(path).unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    let mut kinds = BTreeMap::new();
    for (number, line) in BufReader::new(file).lines().enumerate() {
        let line = line.unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), number + 1));
        if let Some(kind) = collection(&line) {
            *kinds.entry(kind).or_insert(0) += 1;
        }
    }
    kinds
}

struct Server {
    child: Child,
    url: String,
    bulk_checkpointed: Arc<AtomicBool>,
}

fn start_svc(options: &Options, firehose: &str) -> Server {
    let db = options.dir.join("soak.db");
    for suffix in ["", "-wal", "-shm"] {
        let mut path = db.clone().into_os_string();
        path.push(suffix);
        let _ = std::fs::remove_file(path);
    }
    let log_path = options.dir.join("soak-server.log");
    let mut log = File::create(&log_path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", log_path.display()));
    let mut child = Command::new(&options.svc)
        .args(["serve", "--listen", "127.0.0.1:0", "--firehose", firehose])
        .arg("--db")
        .arg(&db)
        .arg("--import")
        .arg(&options.base)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", options.svc));
    let stderr = child.stderr.take().expect("the server's stderr is piped");
    let bulk_checkpointed = Arc::new(AtomicBool::new(false));
    let checkpointed = Arc::clone(&bulk_checkpointed);
    let (sender, receiver) = mpsc::channel();
    // The log is read to the end, or the server would block on a full pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(log, "{line}");
            if let Some(rest) = line.split("listening on ").nth(1) {
                let _ = sender.send(rest.trim().to_string());
            }
            if line.contains("checkpoint") && line.contains("after the bulk load") {
                checkpointed.store(true, Ordering::Release);
            }
        }
    });
    let url = receiver.recv().unwrap_or_else(|_| {
        panic!(
            "svc serve exited before listening; see {}",
            log_path.display()
        )
    });
    Server {
        child,
        url,
        bulk_checkpointed,
    }
}

struct Feed {
    streamed: AtomicU64,
    kinds: Mutex<BTreeMap<String, u64>>,
}

/// Appends `count` events from `reader` to the replay at `rate` per second until told to stop.
fn spawn_feeder(
    mut reader: BufReader<File>,
    path: PathBuf,
    count: u64,
    rate: u64,
    state: Arc<Mutex<replay::ReplayState>>,
    stop: Arc<AtomicBool>,
    feed: Arc<Feed>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut last_time = 0i64;
        let mut sent = 0u64;
        let mut line = String::new();
        while sent < count && !stop.load(Ordering::Acquire) {
            let due = ((start.elapsed().as_secs_f64() * rate as f64) as u64).min(count);
            let mut batch = Vec::new();
            let mut kinds = Vec::new();
            while sent + (batch.len() as u64) < due {
                line.clear();
                let read = reader
                    .read_line(&mut line)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                if read == 0 {
                    eprintln!(
                        "soak: {} ran out after {} streamed events",
                        path.display(),
                        sent + batch.len() as u64
                    );
                    stop.store(true, Ordering::Release);
                    break;
                }
                // Live means now: the indexer's lag and readiness are measured from time_us.
                let time = svc_syntax::now_unix_micros().max(last_time + 1);
                last_time = time;
                let text = line.trim_end();
                kinds.push(collection(text));
                batch.push((time, with_time(text, time)));
            }
            if !batch.is_empty() {
                sent += batch.len() as u64;
                state.lock().expect("replay state").events.extend(batch);
                let mut counted = feed.kinds.lock().expect("kinds");
                for kind in kinds.into_iter().flatten() {
                    *counted.entry(kind).or_insert(0) += 1;
                }
                drop(counted);
                feed.streamed.store(sent, Ordering::Release);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

/// The event line with its `time_us` replaced, and nothing else changed.
fn with_time(line: &str, time: i64) -> String {
    const KEY: &str = "\"time_us\":";
    let Some(at) = line.find(KEY) else {
        panic!("an event without time_us: {line}");
    };
    let digits = at + KEY.len();
    let end = line[digits..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(line.len(), |n| digits + n);
    format!("{}{time}{}", &line[..digits], &line[end..])
}

/// wrk's latency like `812.00us`, `1.23ms`, `2.01s`, in milliseconds.
fn wrk_ms(text: &str) -> f64 {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let value: f64 = text[..split].parse().unwrap_or(f64::NAN);
    match &text[split..] {
        "us" => value / 1000.0,
        "ms" => value,
        "s" => value * 1000.0,
        "m" => value * 60_000.0,
        _ => f64::NAN,
    }
}

struct WrkFigures {
    requests_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    socket_errors: u64,
    non_2xx: u64,
}

fn wrk_figures(output: &str) -> WrkFigures {
    let mut figures = WrkFigures {
        requests_per_s: f64::NAN,
        p50_ms: f64::NAN,
        p99_ms: f64::NAN,
        socket_errors: 0,
        non_2xx: 0,
    };
    for line in output.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", rate] => figures.requests_per_s = rate.parse().unwrap_or(f64::NAN),
            ["50%", value] => figures.p50_ms = wrk_ms(value),
            ["99%", value] => figures.p99_ms = wrk_ms(value),
            ["Socket", "errors:", ..] => {
                figures.socket_errors = line
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|n| n.parse::<u64>().ok())
                    .sum();
            }
            // The script's count covers 3xx too, which wrk's own line leaves out.
            ["mix:", n, "non-2xx", ..] => {
                figures.non_2xx = figures.non_2xx.max(n.parse().unwrap_or(u64::MAX))
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => {
                figures.non_2xx = figures.non_2xx.max(n.parse().unwrap_or(u64::MAX))
            }
            _ => {}
        }
    }
    figures
}

/// Pages a list query to its end by cursor: (total announced, items seen, distinct uris, pages).
fn page_through(
    client: &reqwest::blocking::Client,
    url: &str,
    route: &str,
) -> Result<(u64, u64, usize, u64), String> {
    let (path, query) = route.split_once('?').unwrap_or((route, ""));
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| {
            !p.is_empty()
                && !p.starts_with("limit=")
                && !p.starts_with("offset=")
                && !p.starts_with("cursor=")
        })
        .collect();
    let mut base = format!("{url}{path}?");
    for param in kept {
        base.push_str(param);
        base.push('&');
    }
    base.push_str("limit=1000");
    let (mut total, mut items, mut pages) = (None, 0u64, 0u64);
    let mut uris = HashSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let page_url = match &cursor {
            Some(c) => format!("{base}&cursor={c}"),
            None => base.clone(),
        };
        let page = get_json(client, &page_url)?;
        pages += 1;
        let page_total = page["total"]
            .as_u64()
            .ok_or_else(|| format!("{page_url}: no total"))?;
        if *total.get_or_insert(page_total) != page_total {
            return Err(format!(
                "{path}: total moved from {total:?} to {page_total} while paging a settled catalog"
            ));
        }
        let list = page["items"]
            .as_array()
            .ok_or_else(|| format!("{page_url}: no items"))?;
        for item in list {
            items += 1;
            let uri = item["uri"]
                .as_str()
                .ok_or_else(|| format!("{page_url}: an item without uri"))?;
            uris.insert(uri.to_string());
        }
        match page["cursor"].as_str() {
            Some(next) if !list.is_empty() => cursor = Some(next.to_string()),
            _ => break,
        }
        if pages > 1_000_000 {
            return Err(format!("{path}: paging does not end"));
        }
    }
    Ok((total.unwrap_or(0), items, uris.len(), pages))
}

type Http = reqwest::blocking::Client;

fn main() {
    let options = options();
    // reqwest is built without a default TLS provider in this workspace.
    svc_atproto::install_crypto();
    let client = Http::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("an HTTP client");
    let base_kinds = count_kinds(&options.base);
    let base_total: u64 = base_kinds.values().sum();
    let reader = events_after_base(&options);
    let replay = replay::Replay::start(Vec::new());
    let started = Instant::now();
    let mut server = start_svc(&options, &replay.url);
    println!(
        "soak: {} min, {} connections, {} events/s live, base catalog {} events, mix {}",
        options.minutes,
        options.connections,
        options.rate,
        base_total,
        options.mix.display()
    );
    wait_until_imported(&client, &mut server, started, base_total);
    let load = run_load(&options, &client, &server, reader, &replay);
    let settled = settle(&client, &server.url, &load, base_kinds, base_total);
    let paging = page_every_list_route(&client, &server.url, &options.mix);
    let rss_end = rss_kb(server.child.id()).unwrap_or(0);
    let _ = server.child.kill();
    let _ = server.child.wait();
    report(&load, &settled, &paging, rss_end);
    let failed = failures(load, settled, paging);
    if failed.is_empty() {
        println!("\nsoak: every criterion holds");
    } else {
        println!("\nsoak: FAILED");
        for failure in &failed {
            println!("  {failure}");
        }
        std::process::exit(1);
    }
}

/// The events file, read past the lines the base catalog holds: the live stream.
fn events_after_base(options: &Options) -> BufReader<File> {
    let mut reader = BufReader::new(
        File::open(&options.events)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", options.events.display())),
    );
    let mut skipped = String::new();
    for number in 0..options.skip {
        skipped.clear();
        let read = reader
            .read_line(&mut skipped)
            .unwrap_or_else(|e| panic!("{}:{}: {e}", options.events.display(), number + 1));
        if read == 0 {
            panic!(
                "{} holds fewer than {} lines",
                options.events.display(),
                options.skip
            );
        }
    }
    reader
}

/// Waits until the server is ready and what follows its bulk load is done, then reports.
fn wait_until_imported(client: &Http, server: &mut Server, started: Instant, base_total: u64) {
    let url = server.url.clone();
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("svc serve exited with {status}; see soak-server.log");
        }
        let ready = client
            .get(format!("{url}/readyz"))
            .send()
            .is_ok_and(|r| r.status() == 200);
        if ready {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "not ready after 30 minutes"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let ready_after = started.elapsed().as_secs_f64();
    // The bulk load's checkpoint and the kernel's write-back of the new catalog run after the
    // import; measured load must not share the CPU with them.
    while !server.bulk_checkpointed.load(Ordering::Acquire)
        && started.elapsed() < Duration::from_secs(ready_after as u64 + 600)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("sync").status();
    let imported = get_json(client, &format!("{url}/v1/stats"))
        .ok()
        .and_then(|s| s["total"].as_u64())
        .unwrap_or(0);
    println!(
        "import: ready after {ready_after:.1} s, /v1/stats total {imported} (base file {base_total}), RSS {} MB",
        rss_kb(server.child.id()).unwrap_or(0) / 1024
    );
}

/// What the measured minutes gave.
struct Load {
    minutes: Vec<Minute>,
    probes: Probes,
    wrk: WrkFigures,
    wrk_status: std::process::ExitStatus,
    wrk_seconds: f64,
    applied_during: u64,
    streamed: u64,
    streamed_kinds: BTreeMap<String, u64>,
}

fn start_wrk(options: &Options, url: &str) -> (Child, JoinHandle<String>) {
    let mut wrk = Command::new("wrk")
        .args([
            "-t2".to_string(),
            format!("-c{}", options.connections),
            format!("-d{}m", options.minutes),
            "--latency".to_string(),
            "-s".to_string(),
        ])
        .arg(&options.script)
        .arg(url)
        .env("MIX_FILE", &options.mix)
        .stdout(Stdio::piped())
        .spawn()
        .expect("wrk (apt-get install wrk)");
    let mut wrk_stdout = wrk.stdout.take().expect("wrk's stdout is piped");
    let wrk_reader = std::thread::spawn(move || {
        let mut output = String::new();
        let _ = wrk_stdout.read_to_string(&mut output);
        output
    });
    (wrk, wrk_reader)
}

/// The measured minutes: the live stream fed, wrk's mix, the prober, a sample every 5 s and a
/// line a minute.
fn run_load(
    options: &Options,
    client: &Http,
    server: &Server,
    reader: BufReader<File>,
    replay: &replay::Replay,
) -> Load {
    let (url, pid) = (server.url.as_str(), server.child.id());
    let address: SocketAddr = url
        .trim_start_matches("http://")
        .parse()
        .unwrap_or_else(|_| panic!("not an http://ip:port address: {url}"));
    let stop = Arc::new(AtomicBool::new(false));
    let feed_stop = Arc::new(AtomicBool::new(false));
    let probes = Arc::new(Mutex::new(Probes::default()));
    let feed = Arc::new(Feed {
        streamed: AtomicU64::new(0),
        kinds: Mutex::new(BTreeMap::new()),
    });
    let (applied_before, _, _) = live_counters(client, url).unwrap_or_default();
    let start = Instant::now();
    let feeder = spawn_feeder(
        reader,
        options.events.clone(),
        options.rate * 60 * options.minutes,
        options.rate,
        Arc::clone(&replay.state),
        Arc::clone(&feed_stop),
        Arc::clone(&feed),
    );
    let prober = spawn_prober(address, start, Arc::clone(&stop), Arc::clone(&probes));
    let (mut wrk, wrk_reader) = start_wrk(options, url);
    print_minute_header();
    let mut samples = vec![Sample {
        t: 0.0,
        rss_kb: rss_kb(pid).unwrap_or(0),
        ..Sample::default()
    }];
    let sample = |t: f64| {
        let (applied, _, lag_s) = live_counters(client, url).unwrap_or_default();
        Sample {
            t,
            rss_kb: rss_kb(pid).unwrap_or(0),
            applied: applied.saturating_sub(applied_before),
            streamed: feed.streamed.load(Ordering::Acquire),
            lag_s,
        }
    };
    let mut printed = 0u64;
    let mut next_sample = start + SAMPLE_EVERY;
    let wrk_status = loop {
        if let Ok(Some(status)) = wrk.try_wait() {
            break status;
        }
        let now = Instant::now();
        if now < next_sample {
            std::thread::sleep((next_sample - now).min(Duration::from_millis(200)));
            continue;
        }
        next_sample += SAMPLE_EVERY;
        let t = start.elapsed().as_secs_f64();
        samples.push(sample(t));
        // Minutes are printed as they end, except the last, which waits for wrk's end.
        while printed + 1 < options.minutes && t >= (printed + 1) as f64 * 60.0 {
            let probes = probes.lock().expect("probes");
            print_minute(printed, &minute(printed, false, &probes, &samples));
            printed += 1;
        }
    };
    let wrk_seconds = start.elapsed().as_secs_f64();
    let last = sample(wrk_seconds);
    let applied_during = last.applied;
    samples.push(last);
    stop.store(true, Ordering::Release);
    feed_stop.store(true, Ordering::Release);
    let _ = prober.join();
    let _ = feeder.join();
    let probes = Arc::try_unwrap(probes)
        .ok()
        .and_then(|p| p.into_inner().ok())
        .expect("the prober has stopped");
    let minutes: Vec<Minute> = (0..options.minutes)
        .map(|m| minute(m, m + 1 == options.minutes, &probes, &samples))
        .collect();
    for (m, figures) in minutes.iter().enumerate().skip(printed as usize) {
        print_minute(m as u64, figures);
    }
    let wrk_output = wrk_reader.join().unwrap_or_default();
    println!("\nwrk ({wrk_status}):\n{}", wrk_output.trim_end());
    let streamed_kinds = feed.kinds.lock().expect("kinds").clone();
    Load {
        minutes,
        probes,
        wrk: wrk_figures(&wrk_output),
        wrk_status,
        wrk_seconds,
        applied_during,
        streamed: feed.streamed.load(Ordering::Acquire),
        streamed_kinds,
    }
}

fn print_minute_header() {
    println!(
        "{:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>10} {:>11} {:>8}",
        "minute",
        "healthz",
        "p99 ms",
        "max ms",
        "samples",
        "RSS MB",
        "applied/s",
        "streamed/s",
        "lag s"
    );
    println!("{:>6} {:>9}", "", "p50 ms");
}
