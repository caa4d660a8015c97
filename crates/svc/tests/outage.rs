//! What is particular to PostgreSQL: its password stays out of every output, and the
//! catalog's database going away and coming back is survived: reads answer 503 JSON
//! meanwhile, the indexer waits and resumes from its stored cursor, and neither process
//! needs a restart. The outage is the test cluster's own (scripts/pg pause, resume, restart).

use svc_testkit as common;

use common::*;
use std::time::Duration;

const OPEN: &str = "/v1/vocabularies/by-world?world=open&limit=100";

fn uris(server: &Server) -> Vec<String> {
    let (status, body) = server.get(OPEN);
    assert_eq!(status, 200, "{body}");
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["uri"].as_str().expect("uri").to_string())
        .collect()
}

#[test]
fn a_database_outage_is_answered_503_and_indexing_resumes_without_loss() {
    let _alone = cluster_alone();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = Backend::Postgres.fresh_db(dir.path()) else {
        return;
    };
    let base = now_us() - 60_000_000;
    let replay = common::replay::Replay::start(vocab_events(base, 0, 10));
    let server = Server::launch(
        &db,
        &[
            "--firehose",
            replay.url.as_str(),
            "--ready-lag",
            "60s",
            "--cache-mb",
            "0",
        ],
    );
    server.wait_for(OPEN, Duration::from_secs(20), |b| b["total"] == 10);

    pg("pause");
    let (status, body) = server.get(OPEN);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "unavailable", "{body}");
    // Events arrive while the database is down: the indexer must keep them or re-read them.
    replay.publish(vocab_events(base, 10, 20));
    std::thread::sleep(Duration::from_secs(2));
    pg("resume");

    server.wait_for(OPEN, Duration::from_secs(60), |b| b["total"] == 20);
    let mut found = uris(&server);
    assert_eq!(found.len(), 20);
    found.dedup();
    assert_eq!(found.len(), 20, "every event once");

    // A restart (down and up at once) is survived as well.
    pg("restart");
    replay.publish(vocab_events(base, 20, 25));
    server.wait_for(OPEN, Duration::from_secs(60), |b| b["total"] == 25);
}

/// `db` with a password put into its URL (the test cluster trusts loopback, so any works).
fn with_password(db: &str, password: &str) -> String {
    db.replacen("://svc@", &format!("://svc:{password}@"), 1)
}

#[test]
fn the_database_password_never_appears_in_output() {
    let _cluster = shared_cluster();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = Backend::Postgres.fresh_db(dir.path()) else {
        return;
    };
    // A database that cannot be reached: start fails, naming the URL without its password.
    let unreachable = "postgres://svc:hunter2@127.0.0.1:1/nowhere?password=hunter2";
    let output = svc()
        .args([
            "serve",
            "--firehose",
            "none",
            "--listen",
            "127.0.0.1:0",
            "--db",
            unreachable,
        ])
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(1), "{printed}");
    assert!(
        printed.contains("postgres://svc:***@127.0.0.1:1/nowhere"),
        "{printed}"
    );
    assert!(!printed.contains("hunter2"), "{printed}");

    // A reachable one: nothing the server logs or serves carries the password.
    let db = with_password(&db, "hunter2");
    let events = dir.path().join("events.jsonl");
    let lines: Vec<String> = vocab_events(now_us() - 60_000_000, 0, 5)
        .into_iter()
        .map(|(_, line)| line)
        .collect();
    std::fs::write(&events, lines.join("\n") + "\n").unwrap();
    let server = Server::start(&db, &["--import", events.to_str().unwrap()]);
    let (_, metrics, _) = server.get_raw("/metrics");
    let (_, stats, _) = server.get_raw("/v1/stats");
    let log = server.kill9();
    assert!(log.iter().any(|l| l.contains("svc:***@")), "{log:?}");
    for text in log.iter().chain([&metrics, &stats]) {
        assert!(!text.contains("hunter2"), "{text}");
    }
}
