//! What the benchmark examples share: a fresh catalog, `svc serve` started on a free port,
//! JSON over HTTP.

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
        .env("SVC_LOG", "warn,svc::serve=info")
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
