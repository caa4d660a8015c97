//! svc's benchmarks (`src/bin/`, run on demand by the scripts of `bench/`, never in CI) and what
//! they share: a fresh catalog, `svc serve` started on a free port, JSON over HTTP, a process's
//! memory and CPU time from `/proc`, percentiles, and wrk.

pub mod wrk;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

/// The catalog for one run: a file in `dir`, or the PostgreSQL database of `SVC_BENCH_DB`,
/// emptied first (its public schema dropped, with psql).
pub fn fresh_catalog(dir: &std::path::Path) -> std::ffi::OsString {
    let Ok(url) = std::env::var("SVC_BENCH_DB") else {
        return dir.join("catalog.db").into_os_string();
    };
    let psql = std::env::var("SVC_BENCH_PSQL").unwrap_or_else(|_| "psql".into());
    let status = Command::new(psql)
        .args([
            "-q",
            &url,
            "-c",
            "DROP SCHEMA public CASCADE; CREATE SCHEMA public;",
        ])
        .status()
        .expect("run psql");
    assert!(status.success(), "emptying the benchmark database failed");
    url.into()
}

pub fn start_svc(
    svc: &str,
    db: &std::ffi::OsStr,
    firehose: &str,
    extra: &[&str],
) -> (Child, String) {
    let (child, url, _) = start_svc_logged(svc, db, firehose, extra);
    (child, url)
}

/// As `start_svc`, keeping the warnings and errors svc logs, for a benchmark that reports
/// them: a figure measured while the server complained is not the figure it seems.
pub fn start_svc_logged(
    svc: &str,
    db: &std::ffi::OsStr,
    firehose: &str,
    extra: &[&str],
) -> (Child, String, Arc<Mutex<Vec<String>>>) {
    let mut child = Command::new(svc)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--ready-lag",
            "10s",
            "--liveness",
            "60s",
            "--firehose",
            firehose,
            "--db",
        ])
        .arg(db)
        .args(extra)
        .env("SVC_LOG", "warn,svc::serve=info,svc::listening=info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start svc serve");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("svc serve exited").expect("a log line");
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.trim().to_string();
        }
    };
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&warnings);
    std::thread::spawn(move || {
        for line in lines {
            let Ok(line) = line else { continue };
            if line.contains(" WARN ") || line.contains(" ERROR ") {
                kept.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        }
    });
    (child, url, warnings)
}

pub fn get_json(client: &reqwest::blocking::Client, url: &str) -> serde_json::Value {
    client
        .get(url)
        .send()
        .and_then(|r| r.json())
        .unwrap_or_default()
}

/// The resident memory of process `pid`, in KB (`VmRSS`); `None` once it is gone.
pub fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The CPU time process `pid` has taken, user and system, in seconds; 0 once it is gone.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) as f64 / per_second
}

/// The value at fraction `p` (0 to 1) of `sorted`, nearest rank; NaN when it is empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
