//! Answers stay byte for byte what they were. A fixed sample of requests (bench/mix.py over a
//! generated catalog: every query kind, page sizes, offsets and cursors) is answered, and each
//! answer's status and body hash compared with those committed in `tests/answers.txt`, on both
//! engines. A change to how answers are computed (statements, serialization, caching) must
//! move none of them; `SVC_BLESS=1` rewrites the file when the specification or the rules change on purpose.

use svc_testkit as common;

use common::*;
use std::fmt::Write as _;
use std::process::Command;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/answers.txt");

/// FNV-1a, 64 bits: stable across platforms and Rust versions, which is all a fingerprint of
/// an answer needs here.
fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn sample_requests(events: &std::path::Path, dir: &std::path::Path) -> Vec<String> {
    let mix = dir.join("mix.txt");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/mix.py");
    let output = Command::new("python3")
        .arg(script)
        .arg(events)
        .arg(&mix)
        .args(["--lines", "600", "--seed", "3"])
        .output()
        .expect("python3 runs bench/mix.py");
    assert!(
        output.status.success(),
        "bench/mix.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut requests: Vec<String> = std::fs::read_to_string(&mix)
        .expect("the mix file")
        .lines()
        .map(str::to_string)
        .collect();
    requests.sort();
    requests.dedup();
    requests
}

fn answers_are_unchanged(backend: Backend) {
    let _cluster = shared_cluster();
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let (events, _) = generated_events(dir.path(), 3000, 5);
    let events = events.to_string_lossy().into_owned();
    let server = Server::start(&db, &["--import", &events]);
    let mut answered = String::new();
    for request in sample_requests(events.as_ref(), dir.path()) {
        let (status, _, body) = server.get_raw(&request);
        writeln!(
            answered,
            "{status} {:016x} {request}",
            fingerprint(body.as_bytes())
        )
        .expect("write to a string");
    }
    if std::env::var_os("SVC_BLESS").is_some() && backend == Backend::Sqlite {
        std::fs::write(GOLDEN, &answered).expect("write tests/answers.txt");
        return;
    }
    let committed = std::fs::read_to_string(GOLDEN).expect("tests/answers.txt");
    let moved: Vec<(&str, &str)> = committed
        .lines()
        .zip(answered.lines())
        .filter(|(before, now)| before != now)
        .take(5)
        .collect();
    assert!(
        moved.is_empty(),
        "answers moved on {backend:?} (committed, now): {moved:#?}"
    );
    assert_eq!(
        committed.lines().count(),
        answered.lines().count(),
        "the sample has as many requests as the committed one"
    );
}

each_backend!(answers_are_unchanged);
