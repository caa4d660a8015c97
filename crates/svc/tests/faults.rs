//! Faults the service must ride out: the disk filling under the catalog, the PDS restarting in
//! the middle of a backfill, and a kill -9 during a bulk import or the checkpoint after it.

use svc_testkit as common;

use common::peers::peers;
use common::replay::Replay;
use common::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// Sets the soft file-size limit of process `pid` (writes past it fail with EFBIG, which SQLite
/// reports as a full disk), keeping the hard limit as it is.
fn set_file_size_limit(pid: u32, bytes: libc::rlim_t) {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit reads `new` and writes `old`, both valid for the call.
    let read = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            std::ptr::null(),
            &mut current,
        )
    };
    assert_eq!(read, 0, "reading the file-size limit of {pid}");
    let wanted = libc::rlimit {
        rlim_cur: bytes.min(current.rlim_max),
        rlim_max: current.rlim_max,
    };
    // SAFETY: as above.
    let set = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &wanted,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(set, 0, "setting the file-size limit of {pid}");
}

fn integrity(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).expect("open the catalog");
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check")
}

fn vocabularies(server: &Server) -> u64 {
    let (status, stats) = server.get("/v1/stats");
    assert_eq!(status, 200, "{stats}");
    stats["vocabularies"].as_u64().expect("a count")
}

fn readyz(server: &Server) -> (u16, String) {
    let (status, _, body) = server.get_raw("/readyz");
    (status, body)
}

#[test]
fn a_full_disk_is_waited_out_and_nothing_acknowledged_is_lost() {
    let base = now_us() - 120_000_000;
    let replay = Replay::start(vocab_events(base, 0, 50));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let args = ["--firehose", replay.url.as_str(), "--ready-lag", "30s"];
    let server = Server::launch(&db, &args);
    server.wait_for("/v1/stats", Duration::from_secs(20), |s| {
        s["vocabularies"] == 50
    });

    // No file of the catalog may grow past 4 KiB from now on: the next commit cannot be written.
    let pid = server.child.id();
    set_file_size_limit(pid, 4096);
    replay.publish(vocab_events(base, 50, 100));
    let started = Instant::now();
    let reason = loop {
        let (status, body) = readyz(&server);
        if status == 503 && body.contains("catalog writes are failing") {
            break body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "/readyz never said the writes fail; last: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    eprint!("while the disk is full, /readyz: {reason}");
    // Up, answering, and holding everything it had acknowledged.
    std::thread::sleep(Duration::from_secs(1));
    let mut server = server;
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the process died"
    );
    assert_eq!(server.get_raw("/healthz").0, 200);
    assert_eq!(vocabularies(&server), 50);

    // Space returns: the writes resume on their own, and every event lands once.
    set_file_size_limit(pid, libc::RLIM_INFINITY);
    let took = server.wait_for("/v1/stats", Duration::from_secs(60), |s| {
        s["vocabularies"] == 100
    });
    eprintln!("all events written {took:?} after space returned");
    let uris = server.uris("/v1/vocabularies/by-world?world=open&limit=1000");
    assert_eq!(uris.len(), 100);
    server.wait_ready();
    assert!(server.stop().success());
    assert_eq!(integrity(&db), "ok");
}

/// An import file of `count` vocabularies, each in its own repository.
fn import_file(dir: &Path, count: usize) -> std::path::PathBuf {
    let mut events = Events::new();
    for i in 0..count {
        events.put(
            &format!("did:plc:import{i:07}"),
            "dev.svc.vocab",
            "3kimportvocab",
            "3kaaaaaaaaaa2",
            vocab(&format!("imported-{i}"), "open"),
        );
    }
    events.write(&dir.join("events.jsonl"))
}

/// Imports 100,000 vocabularies, kills the server with SIGKILL when `kill_when` returns, and
/// checks that no line of its log is `too_late` (the crash came where the test means it to);
/// then starts it again with the same import and checks that its log holds every line of
/// `restart_says`, that every record is there once, and that the file passes integrity_check.
fn kill9_during_an_import(
    kill_when: impl FnOnce(&mut Server),
    too_late: fn(&str) -> bool,
    restart_says: &[&str],
) {
    const COUNT: usize = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let file = import_file(dir.path(), COUNT);
    let file = file.to_str().unwrap();
    let mut first = Server::listening(&db, &["--firehose", "none", "--import", file]);
    kill_when(&mut first);
    let log = first.kill9();
    assert!(
        !log.iter().any(|l| too_late(l)),
        "killed too late to test the crash: {log:?}"
    );
    let second = Server::start(&db, &["--import", file]);
    let restarted = |needle: &&str| second.log.iter().any(|l| l.contains(needle));
    assert!(restart_says.iter().all(restarted), "{:?}", second.log);
    assert_eq!(vocabularies(&second), COUNT as u64);
    assert!(second.stop().success());
    assert_eq!(integrity(&db), "ok");
}

#[test]
fn kill9_during_a_bulk_import_then_a_restart_imports_every_event_once() {
    kill9_during_an_import(
        |_| std::thread::sleep(Duration::from_millis(400)),
        |line| line.starts_with("import "),
        &["an interrupted bulk load was rolled back", "import "],
    );
}

#[test]
fn kill9_during_the_checkpoint_after_a_bulk_import_loses_nothing() {
    // The import is committed once its summary is printed; the checkpoint runs after it. The
    // same file again is then recognised as imported.
    kill9_during_an_import(
        |server| drop(server.wait_log("import ", Duration::from_secs(120))),
        |line| line.contains("catalog checkpointed after the bulk load"),
        &["already imported"],
    );
}

#[test]
fn a_pds_restarting_during_a_backfill_is_asked_again() {
    let Some(peers) = peers() else { return };
    let mut written = std::collections::BTreeSet::new();
    for n in 0..30 {
        let account = peers.create_account("restart");
        for i in 0..3 {
            let record = vocab(&format!("restart-{n}-{i}"), "open");
            written.insert(
                peers
                    .create_record(&account, "dev.svc.vocab", record, None)
                    .0,
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::listening(
        dir.path().join("catalog.db"),
        &[
            "--firehose",
            "none",
            "--backfill",
            peers.pds.as_str(),
            "--plc-url",
            peers.plc.as_str(),
        ],
    );
    server.wait_log("backfill started", Duration::from_secs(30));
    peers.restart_pds();
    server.wait_ready();
    peers.wait_pds_healthy(Duration::from_secs(60));
    let asked_again = server.wait_log("asking again", Duration::from_secs(1));
    eprintln!("{asked_again}");
    let finished = server.wait_log("backfill finished", Duration::from_secs(1));
    assert!(finished.contains("failed=0"), "{finished}");
    let found: std::collections::BTreeSet<String> = server
        .uris("/v1/vocabularies/by-world?world=open&limit=1000")
        .into_iter()
        .collect();
    assert_eq!(found, written);
}
