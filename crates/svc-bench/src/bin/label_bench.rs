//! Label ingest benchmark, on demand (`bench/labels.sh` runs it). A local labeler holds N
//! signed labels; `svc serve --labeler` on a fresh catalog reads them from cursor 0, checks
//! each signature and stores them; timed from the first label counted to the last:
//! 1. the labeler double of the tests (`svc_testkit::labeler`), which serves pre-signed
//!    frames as fast as the socket takes them: svc's own rate;
//! 2. with `--skyware M`, the test peers' `@skyware/labeler`, its M labels created through its
//!    control endpoint first: the rate from a labeler the network runs.
//!
//! Usage: label_bench <svc binary> <work dir> [--labels N] [--skyware M]
//! Defaults: 100,000 labels from the double, none from skyware.

use std::time::{Duration, Instant};
use svc_bench::{cpu_seconds, fresh_catalog, rss_kb, start_svc};
use svc_testkit::labeler::HostileLabeler;

struct Args {
    svc: String,
    work: std::path::PathBuf,
    labels: usize,
    skyware: usize,
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
    };
    while let Some(flag) = argv.next() {
        let value: usize = argv
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{flag} takes a number"));
        match flag.as_str() {
            "--labels" => args.labels = value,
            "--skyware" => args.skyware = value,
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

/// `svc_labels_total` of `labeler` with outcome `applied`.
fn applied(client: &reqwest::blocking::Client, url: &str, labeler: &str) -> u64 {
    let series = format!("svc_labels_total{{labeler=\"{labeler}\",outcome=\"applied\"}} ");
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
        let stored = applied(&client, &url, labeler);
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

fn main() {
    svc_atproto::install_crypto();
    let args = args();
    std::fs::create_dir_all(&args.work).expect("the work directory");
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
