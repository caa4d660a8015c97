//! Label ingest benchmark, on demand (`bench/labels.sh` runs it). A local labeler holds N
//! signed labels; `svc serve --labeler` on a fresh catalog reads them from cursor 0, checks
//! each signature and stores them; timed from the first label counted to the last:
//! 1. the labeler double of the tests (`svc_testkit::labeler`), which serves pre-signed
//!    frames as fast as the socket takes them: svc's own rate;
//! 2. with `--skyware M`, the test peers' `@skyware/labeler`, its M labels created through its
//!    control endpoint first: the rate from a labeler the network runs.
//!
//! 3. with `--storm R`, a storm: 2,000 labels alternating `!takedown` and its negation on
//!    one account of R records (imported first), `--per-frame K` to a frame (default 500):
//!    svc's CPU time until the last is stored, and whether the account ends shown; with
//!    `--spaced-ms MS`, a frame every MS once svc follows the labeler (a live storm). Live
//!    ingest's pace beside it: svc follows a Jetstream stand-in, which gets one record of
//!    another account every 50 ms, each timed from its publication until the API counts it,
//!    for 4 s before the storm and then through it.
//!
//! Usage: label_bench <svc binary> <work dir> [--labels N] [--skyware M] [--storm R]
//!        [--per-frame K]
//! Defaults: 100,000 labels from the double, none from skyware, no storm.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use svc_bench::{cpu_seconds, fresh_catalog, percentile, rss_kb, start_svc};
use svc_testkit::labeler::HostileLabeler;
use svc_testkit::replay::Replay;

struct Args {
    svc: String,
    work: std::path::PathBuf,
    labels: usize,
    skyware: usize,
    storm: usize,
    per_frame: usize,
    spaced_ms: usize,
}

fn args() -> Args {
    let mut argv = std::env::args().skip(1);
    let svc = argv
        .next()
        .expect("usage: label_bench <svc> <work dir> [--labels N] [--skyware M]");
    let work = argv.next().expect("a work directory").into();
    let mut args = Args {
        svc,
        work,
        labels: 100_000,
        skyware: 0,
        storm: 0,
        per_frame: 500,
        spaced_ms: 0,
    };
    while let Some(flag) = argv.next() {
        let value: usize = argv
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{flag} takes a number"));
        match flag.as_str() {
            "--labels" => args.labels = value,
            "--skyware" => args.skyware = value,
            "--storm" => args.storm = value,
            "--per-frame" => args.per_frame = value,
            "--spaced-ms" => args.spaced_ms = value,
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

/// Runs svc against `labeler` until `n` labels are stored; prints the figures.
fn measure(args: &Args, name: &str, labeler: &str, n: usize, extra: &[&str]) {
    let dir = tempfile::tempdir_in(&args.work).expect("a run directory");
    let db = fresh_catalog(dir.path());
    let mut flags = vec!["--labeler", labeler];
    flags.extend_from_slice(extra);
    let (mut child, url) = start_svc(&args.svc, &db, "none", &flags);
    let client = reqwest::blocking::Client::new();
    let started = Instant::now();
    let mut first: Option<Instant> = None;
    let mut peak_kb = 0;
    loop {
        let stored = counted(&client, &url, labeler, "applied");
        if stored > 0 && first.is_none() {
            first = Some(Instant::now());
        }
        peak_kb = peak_kb.max(rss_kb(child.id()).unwrap_or(0));
        if stored >= n as u64 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "{name}: {stored} of {n} labels stored in 600 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = first.map_or(Duration::ZERO, |first| first.elapsed());
    let cpu = cpu_seconds(child.id());
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "{name}: {n} labels stored in {:.2} s: {:.0} labels/s; svc CPU {cpu:.1} s; peak RSS {} MB",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64().max(1e-9),
        peak_kb / 1024
    );
}

/// The labels counted of `labeler` with `outcome`.
fn counted(client: &reqwest::blocking::Client, url: &str, labeler: &str, outcome: &str) -> u64 {
    let series = format!("svc_labels_total{{labeler=\"{labeler}\",outcome=\"{outcome}\"}} ");
    let text = client
        .get(format!("{url}/metrics"))
        .send()
        .and_then(|r| r.text())
        .unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

/// 2,000 `!takedown` toggles on an account of `args.storm` records: svc's CPU time.
/// The account the storm labels.
const STORM_ACCOUNT: &str = "did:plc:storm";

/// How many of the account's records the vocabularies list shows.
fn shown(client: &reqwest::blocking::Client, url: &str) -> serde_json::Value {
    let list = format!("{url}/v1/vocabularies/by-world?world=open");
    svc_bench::get_json(client, &list)["total"].clone()
}

/// A catalog in `dir` holding the storm's account of `records` records, imported.
fn account_catalog(args: &Args, dir: &std::path::Path) -> std::ffi::OsString {
    let db = fresh_catalog(dir);
    let mut events = svc_testkit::Events::new();
    for n in 0..args.storm {
        let rkey = svc_testkit::tid(1_700_000_000_000_000 + n as i64);
        let record = svc_testkit::vocab("v", "open");
        events.put(STORM_ACCOUNT, "dev.svc.vocab", &rkey, &rkey, record);
    }
    let file = events.write(&dir.join("account.jsonl"));
    let import = ["--import", file.to_str().expect("a path")];
    let (mut child, url) = start_svc(&args.svc, &db, "none", &import);
    let client = reqwest::blocking::Client::new();
    while shown(&client, &url) != args.storm {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    db
}

fn storm(args: &Args) {
    const TOGGLES: usize = 2_000;
    let dir = tempfile::tempdir_in(&args.work).expect("a run directory");
    let db = account_catalog(args, dir.path());
    let client = reqwest::blocking::Client::new();
    let labeler = HostileLabeler::start();
    let toggles: Vec<(String, String, bool)> = (0..TOGGLES)
        .map(|n| {
            (
                STORM_ACCOUNT.to_string(),
                "!takedown".to_string(),
                n % 2 == 1,
            )
        })
        .collect();
    if args.spaced_ms == 0 {
        labeler.add_in_frames(&toggles, args.per_frame);
    }
    let replay = Replay::start(Vec::new());
    let (mut child, url) = start_svc(&args.svc, &db, &replay.url, &["--labeler", &labeler.did]);
    let live = LiveProbe::start(replay, url.clone());
    std::thread::sleep(Duration::from_secs(4));
    let calm = live.delays_so_far();
    let started = Instant::now();
    // A live storm: a frame every `spaced_ms`, as the labeler states them.
    for frame in toggles
        .chunks(args.per_frame.max(1))
        .filter(|_| args.spaced_ms > 0)
    {
        labeler.add_in_frames(frame, args.per_frame);
        std::thread::sleep(Duration::from_millis(args.spaced_ms as u64));
    }
    let settled = |outcome| counted(&client, &url, &labeler.did, outcome);
    while settled("applied") + settled("stale") < TOGGLES as u64 {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the storm within 600 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = started.elapsed();
    let cpu = cpu_seconds(child.id());
    let during = live.stop();
    let (applied, stale) = (settled("applied"), settled("stale"));
    let ready = || {
        let answer = client.get(format!("{url}/readyz")).send();
        answer.is_ok_and(|answer| answer.status().is_success())
    };
    while !ready() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let ends_shown = shown(&client, &url);
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "storm: {TOGGLES} !takedown toggles, {} a frame, on an account of {} records: {:.2} s, \
         svc CPU {cpu:.1} s ({applied} applied, {stale} stale); records shown at the end: \
         {ends_shown}",
        args.per_frame,
        args.storm,
        took.as_secs_f64()
    );
    print_pace(&calm, &during);
}

/// Live ingest's delays before the storm and through it.
fn print_pace(calm: &[f64], during: &[f64]) {
    let pace = |delays: &[f64]| {
        format!(
            "{} records, p50 {:.1} ms, p99 {:.1} ms",
            delays.len(),
            percentile(delays, 0.5),
            percentile(delays, 0.99)
        )
    };
    println!(
        "live ingest, a record every 50 ms until counted: before the storm {}; during it {}",
        pace(calm),
        pace(during)
    );
}

/// Live records published to the Jetstream stand-in one every 50 ms, each timed until the
/// API counts it.
struct LiveProbe {
    done: Arc<AtomicBool>,
    delays: Arc<Mutex<Vec<f64>>>,
    thread: std::thread::JoinHandle<()>,
}

/// The world the probe's records name: no other record does.
const PROBE_WORLD: &str = "hierarchy-closed";

impl LiveProbe {
    fn start(replay: Replay, url: String) -> LiveProbe {
        let done = Arc::new(AtomicBool::new(false));
        let delays = Arc::new(Mutex::new(Vec::new()));
        let (stop, kept) = (done.clone(), delays.clone());
        let thread = std::thread::spawn(move || {
            let client = reqwest::blocking::Client::new();
            let counted = format!("{url}/v1/vocabularies/by-world?world={PROBE_WORLD}");
            let revs = svc_syntax::TidGenerator::new(0);
            let base = svc_syntax::now_unix_micros();
            for n in 0u64.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let rkey = format!("probe{n:06}");
                let event = serde_json::json!({"did": "did:plc:liveprobe", "time_us": base + n as i64,
                    "kind": "commit", "commit": {"rev": revs.next_tid(), "operation": "create",
                    "collection": "dev.svc.vocab", "rkey": rkey, "cid":
                    "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm", "record": {
                    "$type": "dev.svc.vocab", "name": rkey, "world": PROBE_WORLD,
                    "occurredAt": "2026-11-01T12:00:00Z"}}});
                let published = Instant::now();
                replay.publish([(base + n as i64, event.to_string())]);
                while svc_bench::get_json(&client, &counted)["total"].as_u64() < Some(n + 1)
                    && published.elapsed() < Duration::from_secs(30)
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                let took = published.elapsed();
                kept.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(took.as_secs_f64() * 1000.0);
                std::thread::sleep(Duration::from_millis(50).saturating_sub(took));
            }
        });
        LiveProbe {
            done,
            delays,
            thread,
        }
    }

    /// The delays measured so far, sorted, and forgotten.
    fn delays_so_far(&self) -> Vec<f64> {
        taken_sorted(&self.delays)
    }

    /// Stops publishing; the delays since the last look.
    fn stop(self) -> Vec<f64> {
        self.done.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        taken_sorted(&self.delays)
    }
}

fn taken_sorted(delays: &Mutex<Vec<f64>>) -> Vec<f64> {
    let mut taken = std::mem::take(&mut *delays.lock().unwrap_or_else(PoisonError::into_inner));
    taken.sort_by(f64::total_cmp);
    taken
}

fn main() {
    svc_atproto::install_crypto();
    let args = args();
    std::fs::create_dir_all(&args.work).expect("the work directory");
    if args.storm > 0 {
        storm(&args);
        return;
    }
    let double = HostileLabeler::start();
    let signing = Instant::now();
    double.flood(args.labels);
    eprintln!(
        "signed {} labels in {:.1} s",
        args.labels,
        signing.elapsed().as_secs_f64()
    );
    measure(&args, "labeler double", &double.did, args.labels, &[]);
    if args.skyware > 0 {
        let peers = svc_testkit::peers::peers().expect("the test peers");
        let creating = Instant::now();
        for at in 0..args.skyware {
            let uri = format!("at://did:plc:nobody{at}/dev.svc.bounty/1");
            peers.label(&uri, "bench", false, None);
        }
        eprintln!(
            "created {} labels in skyware in {:.1} s",
            args.skyware,
            creating.elapsed().as_secs_f64()
        );
        let plc = ["--plc-url", peers.plc.as_str()];
        measure(
            &args,
            "@skyware/labeler",
            &peers.labeler_did,
            args.skyware,
            &plc,
        );
    }
}
