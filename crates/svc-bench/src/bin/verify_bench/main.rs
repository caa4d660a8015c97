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

mod generate;
use generate::*;
mod peers;
use peers::*;

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
