//! Following Jetstream (through a replay server that speaks its wire format): cursors,
//! rewind on resume, reconnects, endpoint checks, and events that must be skipped.

use svc_testkit as common;

use common::replay::{Fault, Replay};
use common::vocab_events as events;
use common::*;
use serde_json::json;
use std::time::Duration;

/// The arguments of a server following `replay`.
fn live_args(replay: &Replay) -> [&str; 6] {
    [
        "--firehose",
        replay.url.as_str(),
        "--ready-lag",
        "5s",
        "--liveness",
        "3s",
    ]
}

/// `svc serve` following `replay`, as soon as it listens.
fn jetstream_listening(dir: &tempfile::TempDir, replay: &Replay, extra: &[&str]) -> Server {
    let mut args = live_args(replay).to_vec();
    args.extend_from_slice(extra);
    Server::listening(dir.path().join("catalog.db"), &args)
}

/// `svc serve` following `replay`, once it is ready.
fn jetstream_server(dir: &tempfile::TempDir, replay: &Replay, extra: &[&str]) -> Server {
    let mut server = jetstream_listening(dir, replay, extra);
    server.wait_ready();
    server
}

fn total(server: &Server) -> u64 {
    server.get("/v1/vocabularies/by-world?world=open&limit=1").1["total"]
        .as_u64()
        .unwrap()
}

#[test]
fn skips_foreign_and_bad_events_and_reconnects_with_a_rewound_cursor() {
    let base = now_us() - 60_000_000;
    let mut list = events(base, 0, 10);
    list.push((base + 10_500_000, "{not json".to_string()));
    list.push(vocab_event(
        base + 10_600_000,
        "bbbbbbbbbbbb2",
        "bad-world",
        "closed",
    ));
    list.push((base + 10_700_000, json!({"did": "did:plc:x", "time_us": base + 10_700_000, "kind": "commit",
        "commit": {"rev": tid(base + 10_700_000), "operation": "create", "collection": "app.bsky.feed.post", "rkey": "1",
        "record": {"$type": "app.bsky.feed.post", "text": "hi"}}}).to_string()));
    list.extend(events(base, 11, 20));
    let replay = Replay::start(list);
    replay.state.lock().unwrap().disconnect_after = Some(7);
    let dir = tempfile::tempdir().unwrap();
    let server = jetstream_server(&dir, &replay, &[]);
    server.wait_for(
        "/v1/vocabularies/by-world?world=open&limit=1",
        Duration::from_secs(15),
        |b| b["total"] == 19,
    );
    let state = replay.state.lock().unwrap();
    assert!(
        state.cursors.len() >= 2,
        "it reconnected: {:?}",
        state.cursors
    );
    assert_eq!(
        state.cursors[0], None,
        "a fresh catalog starts at the live tail"
    );
    // Resumed a few seconds before the last event it had stored.
    let resumed = state.cursors[1].expect("a cursor on reconnect");
    assert!(
        resumed <= base + 6_000_000 - 5_000_000 + 1_000_000,
        "{resumed} vs {base}"
    );
    assert!(resumed >= base - 5_000_000, "{resumed} vs {base}");
    assert_eq!(state.wanted[0], ["dev.panproto.schema.*", "dev.svc.*"]);
    drop(state);
    // The replayed events were applied once each (the rewind re-delivers, nothing doubles).
    let uris = server.uris("/v1/vocabularies/by-world?world=open&limit=1000");
    assert_eq!(uris.len(), 19);
    assert_eq!(
        server.get("/v1/vocabularies/by-name?name=bad-world").1["total"],
        0
    );
    let metrics = server.get_raw("/metrics").2;
    assert!(
        metrics.contains("svc_ingest_malformed_events_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("svc_ingest_events_total{source=\"firehose\",outcome=\"invalid\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("svc_ingest_reconnects_total ") && !l.ends_with(" 0")),
        "{metrics}"
    );
    // Jetstream carries no proofs, and /readyz says so.
    assert_eq!(
        server.get_raw("/readyz").2,
        "ready\nnote: the live source's events are applied unverified\n"
    );
    assert!(metrics.contains("svc_ingest_live_verified 0"), "{metrics}");
}

#[test]
fn a_restart_resumes_from_the_stored_cursor_of_the_same_endpoint_only() {
    let base = now_us() - 30_000_000;
    let replay = Replay::start(events(base, 0, 5));
    let dir = tempfile::tempdir().unwrap();
    let first = jetstream_server(&dir, &replay, &[]);
    first.wait_for(
        "/v1/vocabularies/by-world?world=open&limit=1",
        Duration::from_secs(10),
        |b| b["total"] == 5,
    );
    assert!(first.stop().success());
    replay.publish(events(base, 5, 8));
    let second = jetstream_server(&dir, &replay, &[]);
    second.wait_for(
        "/v1/vocabularies/by-world?world=open&limit=1",
        Duration::from_secs(10),
        |b| b["total"] == 8,
    );
    let resumed = replay.state.lock().unwrap().cursors[1].expect("the stored cursor");
    assert_eq!(
        resumed,
        base + 4_000_000 - 5_000_000,
        "the last stored time, rewound 5 s"
    );
    assert!(second.stop().success());
    // Another endpoint: the stored cursor is not reused unless forced.
    let other = Replay::start(events(base, 0, 8));
    let third = jetstream_server(&dir, &other, &[]);
    assert!(
        third
            .log
            .iter()
            .any(|l| l.contains("belongs to another endpoint")),
        "{:?}",
        third.log
    );
    assert_eq!(other.state.lock().unwrap().cursors[0], None);
    assert!(third.stop().success());
    let forced = jetstream_server(&dir, &other, &["--force-cursor"]);
    assert!(other.state.lock().unwrap().cursors[1].is_some());
    assert_eq!(total(&forced), 8);
}

#[test]
fn compressed_events_are_read_with_the_jetstream_dictionary() {
    let base = now_us() - 30_000_000;
    let replay = Replay::start(events(base, 0, 6));
    let dir = tempfile::tempdir().unwrap();
    let server = jetstream_server(&dir, &replay, &["--jetstream-zstd"]);
    server.wait_for(
        "/v1/vocabularies/by-world?world=open&limit=1",
        Duration::from_secs(10),
        |b| b["total"] == 6,
    );
    let metrics = server.get_raw("/metrics").2;
    assert!(
        metrics.contains("svc_ingest_malformed_events_total 0"),
        "{metrics}"
    );
    let compressed = replay.state.lock().unwrap().compressed.clone();
    assert_eq!(compressed, vec![true], "it asked for compression");
}

#[test]
fn a_catch_up_into_an_empty_catalog_is_bulk_loaded_and_survives_a_crash() {
    // Old events and an empty catalog: the source is caught up with a bulk load.
    let base = now_us() - 3_600_000_000;
    let replay = Replay::start(events(base, 0, 2000));
    let dir = tempfile::tempdir().unwrap();
    let first = Server::listening(
        dir.path().join("catalog.db"),
        &["--firehose", replay.url.as_str(), "--ready-lag", "5s"],
    );
    // Killed while it catches up (as soon as the events went out, before the source is quiet).
    let started = std::time::Instant::now();
    while replay.state.lock().unwrap().cursors.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never connected"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    let log = first.kill9();
    assert!(
        log.iter()
            .any(|l| l.contains("catching up with a bulk load")),
        "{log:?}"
    );
    assert!(
        !log.iter().any(|l| l.contains("catch-up settled")),
        "killed too late to test the crash: {log:?}"
    );
    // The restart replays from just before the first event, and every event lands once.
    let mut second = Server::listening(
        dir.path().join("catalog.db"),
        &["--firehose", replay.url.as_str(), "--ready-lag", "5s"],
    );
    second.wait_ready();
    assert_eq!(total(&second), 2000);
    let cursors = replay.state.lock().unwrap().cursors.clone();
    assert_eq!(cursors[0], None);
    let resumed = cursors[1].expect("a resume point was stored before the catch-up");
    assert!(
        resumed <= base && resumed >= base - 6_000_000,
        "{resumed} vs {base}"
    );
    // A later catch-up (after a clean stop) is visible too.
    assert!(second.stop().success());
    replay.publish(events(base, 2000, 2100));
    let third = jetstream_server(&dir, &replay, &[]);
    third.wait_for(
        "/v1/vocabularies/by-world?world=open&limit=1",
        Duration::from_secs(10),
        |b| b["total"] == 2100,
    );
    assert!(
        third
            .log
            .iter()
            .all(|l| !l.contains("catching up with a bulk load")),
        "a catalog with a cursor is not bulk-loaded"
    );
}

/// A source that misbehaves in the middle of its stream is left and opened again from the
/// stored cursor; every event lands once, and the server answers throughout.
fn a_misbehaving_source_is_reopened(fault: Fault, log_says: &str) {
    let base = now_us() - 60_000_000;
    let replay = Replay::start(events(base, 0, 40));
    replay.state.lock().unwrap().fault_after = Some((20, fault));
    let dir = tempfile::tempdir().unwrap();
    let server = jetstream_listening(&dir, &replay, &[]);
    let took = server.wait_for(
        "/v1/vocabularies/by-world?world=open&limit=1",
        Duration::from_secs(20),
        |b| b["total"] == 40,
    );
    // Reopened from where the catalog stood, not from the start.
    let cursors = replay.state.lock().unwrap().cursors.clone();
    assert!(cursors.len() >= 2, "{fault:?}: never reopened: {cursors:?}");
    assert_eq!(cursors[0], None);
    assert!(cursors[1].is_some(), "{fault:?}: reopened without a cursor");
    let log = server.kill9();
    assert!(
        log.iter().any(|l| l.contains(log_says)),
        "{fault:?}: no {log_says:?} in {log:?}"
    );
    eprintln!("{fault:?}: all 40 events in {took:?}");
}

#[test]
fn a_source_dropping_mid_frame_is_reopened() {
    a_misbehaving_source_is_reopened(Fault::DropMidFrame, "live source:");
}

#[test]
fn a_source_sending_garbage_is_reopened() {
    a_misbehaving_source_is_reopened(Fault::Garbage, "live source:");
}

#[test]
fn a_stalled_source_is_reopened_after_the_liveness_timeout() {
    a_misbehaving_source_is_reopened(Fault::Stall, "nothing heard for");
}

/// A Jetstream commit of a vocabulary (none for a delete) in the world "open".
fn vocab_commit(
    did: &str,
    rkey: &str,
    time_us: i64,
    rev: &str,
    operation: &str,
    name: &str,
) -> String {
    let mut commit = json!({"rev": rev, "operation": operation, "collection": "dev.svc.vocab",
        "rkey": rkey});
    if operation != "delete" {
        commit["record"] = json!({"$type": "dev.svc.vocab", "name": name, "world": "open",
            "occurredAt": NOW});
        commit["cid"] = json!(CID);
    }
    json!({"did": did, "time_us": time_us, "kind": "commit", "commit": commit}).to_string()
}

fn named(server: &Server, name: &str) -> Vec<String> {
    server.uris(&format!("/v1/vocabularies/by-name?name={name}"))
}

/// What a source says is checked before it is trusted: a rev that is no TID is skipped and
/// counted, so it cannot pin a record against the real changes that follow; a `time_us` no
/// clock shows yet is not where a restart resumes; a made-up account status still hides the
/// account, stored in a bounded form.
fn what_jetstream_says_is_checked_before_it_is_trusted(backend: Backend) {
    let _cluster = shared_cluster();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let base = now_us() - 60_000_000;
    let at = |seconds: f64| base + (seconds * 1e6) as i64;
    let (did, rkey) = ("did:plc:jetstream", "pinned");
    let pinned = format!("at://{did}/dev.svc.vocab/{rkey}");
    let commit = |time: i64, rev: &str, operation: &str, name: &str| {
        (time, vocab_commit(did, rkey, time, rev, operation, name))
    };
    let mut list = events(base, 0, 3);
    // `~~~` sorts above every TID: stored, it would make every real change stale.
    list.push(commit(at(3.1), "~~~", "create", "hostile"));
    list.push(commit(at(3.2), "", "create", "empty"));
    list.push(commit(at(3.3), &tid(at(3.3)), "create", "pinned-first"));
    list.push(commit(at(3.4), &tid(at(3.4)), "update", "pinned-second"));
    let hidden = vocab_commit(
        "did:plc:hidden",
        "one",
        at(3.5),
        &tid(at(3.5)),
        "create",
        "hidden",
    );
    list.push((at(3.5), hidden));
    // PostgreSQL's text refuses the NUL: stored as it came, the account would stay visible.
    let status = format!("take\u{0}down{}", "x".repeat(10_000));
    let account = json!({"did": "did:plc:hidden", "time_us": at(3.6), "kind": "account",
        "account": {"active": false, "did": "did:plc:hidden", "seq": 1, "status": status}});
    list.push((at(3.6), account.to_string()));
    list.extend(events(base, 4, 6));
    let replay = Replay::start(list);
    let mut server = Server::listening(&db, &live_args(&replay));
    server.wait_ready();
    server.wait_for(
        "/v1/vocabularies/by-name?name=js-005",
        Duration::from_secs(15),
        |b| b["total"] == 1,
    );
    assert_eq!(named(&server, "pinned-second"), vec![pinned.clone()]);
    for name in ["hostile", "empty", "pinned-first", "hidden"] {
        assert!(named(&server, name).is_empty(), "{name}");
    }
    let metrics = server.get_raw("/metrics").2;
    assert!(
        metrics.contains("svc_ingest_events_total{source=\"firehose\",outcome=\"invalid\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("svc_ingest_invalid_records_total 2"),
        "{metrics}"
    );
    // The real delete applies; then an event whose time_us no clock shows yet comes last, its
    // record applied, its time neither the cursor nor the newest event's time.
    replay.publish([commit(at(7.0), &tid(at(7.0)), "delete", "")]);
    let far = vocab_commit(did, "far", i64::MAX, &tid(at(7.5)), "create", "far-future");
    replay.publish([(at(7.5), far)]);
    server.wait_for(
        "/v1/vocabularies/by-name?name=far-future",
        Duration::from_secs(10),
        |b| b["total"] == 1,
    );
    assert!(named(&server, "pinned-second").is_empty());
    let metrics = server.get_raw("/metrics").2;
    let lag = metrics
        .lines()
        .find_map(|l| l.strip_prefix("svc_ingest_lag_seconds "))
        .and_then(|v| v.parse::<f64>().ok())
        .expect("the lag gauge");
    assert!(
        lag >= 50.0,
        "the lag is measured from a plausible time: {lag}"
    );
    assert!(server.stop().success());
    // Resumed from the last plausible time (rewound 5 s), so what came meanwhile arrives.
    replay.publish(events(base, 8, 10));
    let mut again = Server::listening(&db, &live_args(&replay));
    again.wait_ready();
    again.wait_for(
        "/v1/vocabularies/by-name?name=js-009",
        Duration::from_secs(15),
        |b| b["total"] == 1,
    );
    let resumed = replay.state.lock().unwrap().cursors[1];
    assert_eq!(resumed, Some(at(7.0) - 5_000_000));
    assert_eq!(named(&again, "far-future").len(), 1);
    assert!(named(&again, "pinned-second").is_empty());
}

each_backend!(what_jetstream_says_is_checked_before_it_is_trusted);

#[test]
fn a_stored_cursor_that_cannot_be_true_is_not_resumed_from() {
    let base = now_us() - 30_000_000;
    let replay = Replay::start(events(base, 0, 3));
    let dir = tempfile::tempdir().unwrap();
    let first = jetstream_server(&dir, &replay, &[]);
    first.wait_for(
        "/v1/vocabularies/by-world?world=open&limit=1",
        Duration::from_secs(10),
        |b| b["total"] == 3,
    );
    assert!(first.stop().success());
    // As an earlier version could have stored it from a `time_us` of the year 292277.
    let db = rusqlite::Connection::open(dir.path().join("catalog.db")).unwrap();
    let changed = db
        .execute(
            "UPDATE cursors SET cursor = ?1 WHERE source = 'firehose'",
            [i64::MAX.to_string()],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);
    replay.publish(events(base, 3, 5));
    let mut second = jetstream_listening(&dir, &replay, &[]);
    second.wait_log("cannot be true", Duration::from_secs(10));
    second.wait_ready();
    assert_eq!(
        replay.state.lock().unwrap().cursors[1],
        None,
        "the live tail"
    );
    second.wait_for(
        "/v1/vocabularies/by-world?world=open&limit=1",
        Duration::from_secs(10),
        |b| b["total"] == 5,
    );
}
