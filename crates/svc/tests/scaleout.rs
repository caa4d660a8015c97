//! Scale-out: one indexer, query replicas (`--no-indexer`) and a standby indexer on one
//! catalog. Replicas answer as the indexer does, and their answer caches stay exact through
//! the replication log; a replica's readiness follows the indexer's heartbeat; a standby takes over
//! from an indexer killed mid-burst with every event present once; a replica reading a
//! streaming hot standby of PostgreSQL answers the same; a PostgreSQL restart is survived by
//! every process.

use svc_testkit as common;

use common::replay::Replay;
use common::stream::{next, subscribe};
use common::*;
use serde_json::Value;
use std::time::{Duration, Instant};
use svc_spec::QuerySet;

/// The vocabularies the live source publishes in these tests are in the world "open".
const OPEN: &str = "/v1/vocabularies/by-world?world=open&limit=100";

fn total(server: &Server, path: &str) -> u64 {
    let (status, body) = server.get(path);
    assert_eq!(status, 200, "{path}: {body}");
    body["total"].as_u64().expect("total")
}

/// A catalog of every kind, from the benchmark's generator: the file and its records.
fn generated(dir: &std::path::Path) -> (std::path::PathBuf, Vec<Value>) {
    generated_events(dir, 1500, 11)
}

/// Requests over every public query: no parameter, and each parameter given the first string
/// of some records of the query's kind.
fn requests(events: &[Value]) -> Vec<String> {
    let queries = QuerySet::embedded();
    let mut requests = vec!["/v1/stats".to_string()];
    for (_, query) in queries.public() {
        requests.push(format!("{}?limit=100", query.def().path));
        let records = events
            .iter()
            .filter(|e| e["commit"]["collection"] == query.kind())
            .map(|e| &e["commit"]["record"]);
        for record in records.take(8) {
            let Some(object) = record.as_object() else {
                continue;
            };
            let values: Vec<&str> = object.values().filter_map(Value::as_str).collect();
            let params: Vec<String> = query
                .params()
                .iter()
                .zip(values.iter().cycle())
                .map(|(p, v)| format!("{}={}", p.name, encode(v)))
                .collect();
            requests.push(format!(
                "{}?{}&limit=25",
                query.def().path,
                params.join("&")
            ));
        }
    }
    requests
}

fn answer(server: &Server, path: &str) -> (u16, String) {
    let (status, _, body) = server.get_raw(path);
    (status, body)
}

/// An indexer of `db` that imports `file` and follows a replay server with nothing in it yet.
fn indexer_importing(db: &str, file: &std::path::Path) -> (Replay, Server) {
    let replay = Replay::start(Vec::new());
    let args = [
        "--firehose",
        replay.url.as_str(),
        "--import",
        file.to_str().unwrap(),
        "--ready-lag",
        "60s",
    ];
    let indexer = Server::launch(db, &args);
    (replay, indexer)
}

/// A replica of `db`: queries only, not ready once the indexer's heartbeat is 2 s old.
fn replica(db: &str) -> Server {
    Server::launch(db, &["--no-indexer", "--ready-lag", "2s"])
}

fn replicas_answer_as_the_indexer_and_follow_its_changes(backend: Backend) {
    let _cluster = shared_cluster();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let (file, events) = generated(dir.path());
    let (replay, mut indexer) = indexer_importing(&db, &file);
    // What follows a bulk load in the background (SQLite's checkpoint, PostgreSQL's vacuum of
    // the records) ends, and answers are the same after it.
    let done = indexer.wait_log("after the bulk load in", Duration::from_secs(60));
    assert!(
        done.contains(match backend {
            Backend::Sqlite => "catalog checkpointed",
            Backend::Postgres => "catalog vacuumed",
        }),
        "{done}"
    );
    let replicas = [replica(&db), replica(&db)];
    let requests = requests(&events);
    assert!(requests.len() > 50, "{}", requests.len());
    for path in &requests {
        let expected = answer(&indexer, path);
        for replica in &replicas {
            assert_eq!(answer(replica, path), expected, "{path}");
        }
    }

    // Published after start, with the answer cache on: the replicas' cached answers must
    // not outlive the change.
    let before = total(&indexer, OPEN);
    for replica in &replicas {
        assert_eq!(total(replica, OPEN), before);
    }
    // A replica serves the change stream too, from the catalog the indexer writes.
    let changes = subscribe(
        &replicas[1],
        "/v1/changes?query=vocabulariesWithWorld&world=open",
    );
    let base = now_us() - 60_000_000;
    replay.publish(vocab_events(base, 0, 1));
    indexer.wait_for(OPEN, Duration::from_secs(20), |b| b["total"] == before + 1);
    let entered = next(&changes);
    assert_eq!(entered.data["op"], "enter", "{:?}", entered.data);
    assert_eq!(entered.data["item"]["record"]["name"], "js-000");
    let published = Instant::now();
    for replica in &replicas {
        replica.wait_for(OPEN, Duration::from_secs(1), |b| b["total"] == before + 1);
    }
    eprintln!(
        "both replicas answered the change {:?} after the indexer",
        published.elapsed()
    );

    // The indexer gone: replicas keep answering, and say they are behind once its heartbeat
    // is older than their --ready-lag.
    indexer.kill9();
    for replica in &replicas {
        assert_eq!(total(replica, OPEN), before + 1);
        let body = readiness_becomes(replica, 503, Duration::from_secs(20));
        assert!(body.contains("heartbeat"), "{body}");
        assert_eq!(total(replica, OPEN), before + 1);
    }
}

/// Asks `/readyz` until it answers `status`, within `within`; its body then.
fn readiness_becomes(server: &Server, status: u16, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let (got, _, body) = server.get_raw("/readyz");
        if got == status {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz still {got} after {within:?}, not {status}: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every uri of the open vocabularies, page by page.
fn open_vocabularies(server: &Server) -> Vec<String> {
    let mut uris = Vec::new();
    for offset in (0..).step_by(100) {
        let path = format!("{OPEN}&offset={offset}");
        let (status, body) = server.get(&path);
        assert_eq!(status, 200, "{path}: {body}");
        let page = body["items"].as_array().expect("items");
        if page.is_empty() {
            return uris;
        }
        uris.extend(
            page.iter()
                .map(|i| i["uri"].as_str().expect("uri").to_string()),
        );
    }
    uris
}

fn a_standby_indexer_takes_over_from_one_killed_mid_burst(backend: Backend) {
    let _cluster = shared_cluster();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let replay = Replay::start(Vec::new());
    let args = ["--firehose", replay.url.as_str(), "--ready-lag", "60s"];
    let first = Server::launch(&db, &args);
    let mut standby = Server::listening(&db, &args);
    standby.wait_log("standing by", Duration::from_secs(20));
    // The standby answers queries meanwhile.
    assert_eq!(standby.get(OPEN).0, 200);

    let base = now_us() - 600_000_000;
    let push = |from, to| replay.publish(vocab_events(base, from, to));
    for chunk in 0..2 {
        push(chunk * 100, chunk * 100 + 100);
        std::thread::sleep(Duration::from_millis(30));
    }
    first.wait_for(OPEN, Duration::from_secs(20), |b| {
        b["total"].as_u64() > Some(0)
    });
    push(200, 300);
    first.kill9();
    push(300, 500);

    standby.wait_log("took over", Duration::from_secs(20));
    standby.wait_for(OPEN, Duration::from_secs(30), |b| b["total"] == 500);
    let mut uris = open_vocabularies(&standby);
    assert_eq!(uris.len(), 500);
    uris.dedup();
    assert_eq!(uris.len(), 500, "every event once");
}

fn an_indexer_without_the_api_serves_health_and_metrics_only(backend: Backend) {
    let _cluster = shared_cluster();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let indexer = Server::start(&db, &["--no-api"]);
    assert_eq!(indexer.get_raw("/healthz").0, 200);
    assert_eq!(indexer.get_raw("/readyz").0, 200);
    let (status, body) = indexer.get("/v1/stats");
    assert_eq!(status, 404, "{body}");
    let (_, _, metrics) = indexer.get_raw("/metrics");
    assert!(metrics.contains("svc_catalog_writer 1"), "{metrics}");
    let replica = replica(&db);
    assert_eq!(replica.get("/v1/stats").0, 200);
    let (_, _, metrics) = replica.get_raw("/metrics");
    assert!(metrics.contains("svc_catalog_writer 0"), "{metrics}");
    assert!(
        metrics.contains("svc_indexer_heartbeat_age_seconds"),
        "{metrics}"
    );
}

each_backend!(
    an_indexer_without_the_api_serves_health_and_metrics_only,
    replicas_answer_as_the_indexer_and_follow_its_changes,
    a_standby_indexer_takes_over_from_one_killed_mid_burst,
);

/// The test database `db` on the streaming standby scripts/test started
/// (`SVC_TEST_POSTGRES_STANDBY`); `None` outside CI when there is none.
fn on_standby(db: &str) -> Option<String> {
    let standby = svc_catalog::testing::test_cluster("SVC_TEST_POSTGRES_STANDBY")?;
    let (_, name) = db.rsplit_once('/')?;
    let (base, _) = standby.rsplit_once('/')?;
    Some(format!("{base}/{name}"))
}

/// Starts a replica on the standby once the indexer's schema has reached it.
fn replica_on_standby(db: &str) -> Server {
    use std::io::BufRead;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut child = svc()
            .args([
                "serve",
                "--no-indexer",
                "--listen",
                "127.0.0.1:0",
                "--db",
                db,
            ])
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("run svc");
        let stderr = child.stderr.take().expect("stderr");
        let mut printed = Vec::new();
        // It listens once the catalog opened; one that cannot open it ends, saying why.
        let opened = std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .inspect(|line| printed.push(line.clone()))
            .any(|line| line.contains("listening on"));
        let _ = child.kill();
        let _ = child.wait();
        if opened {
            return replica(db);
        }
        assert!(
            Instant::now() < deadline,
            "the standby never had the schema: {printed:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_replica_on_a_streaming_standby_answers_the_same() {
    let _cluster = shared_cluster();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = Backend::Postgres.fresh_db(dir.path()) else {
        return;
    };
    let Some(standby_db) = on_standby(&db) else {
        return;
    };
    let (file, events) = generated(dir.path());
    let (replay, indexer) = indexer_importing(&db, &file);
    let replica = replica_on_standby(&standby_db);
    replica.wait_for("/v1/stats", Duration::from_secs(30), |b| {
        b == &indexer.get("/v1/stats").1
    });
    for path in requests(&events) {
        assert_eq!(answer(&replica, &path), answer(&indexer, &path), "{path}");
    }
    let before = total(&replica, OPEN);
    replay.publish(vocab_events(now_us() - 60_000_000, 0, 3));
    replica.wait_for(OPEN, Duration::from_secs(10), |b| b["total"] == before + 3);
    // Records and the indexer's heartbeat (stored every second once it is ready) reach the
    // standby separately: the replica is ready once it has read a heartbeat.
    readiness_becomes(&replica, 200, Duration::from_secs(10));
}

#[test]
fn a_postgres_restart_is_survived_by_every_process() {
    let _alone = cluster_alone();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = Backend::Postgres.fresh_db(dir.path()) else {
        return;
    };
    let replay = Replay::start(vocab_events(now_us() - 60_000_000, 0, 5));
    let args = ["--firehose", replay.url.as_str(), "--ready-lag", "60s"];
    let first = Server::launch(&db, &args);
    let mut standby = Server::listening(&db, &args);
    standby.wait_log("standing by", Duration::from_secs(20));
    let replica = replica(&db);
    replica.wait_for(OPEN, Duration::from_secs(20), |b| b["total"] == 5);

    pg("restart");
    replay.publish(vocab_events(now_us() - 30_000_000, 5, 8));
    // Whichever indexer holds the writer lock after the restart applies them, once.
    replica.wait_for(OPEN, Duration::from_secs(60), |b| b["total"] == 8);
    for server in [&first, &standby, &replica] {
        server.wait_for(OPEN, Duration::from_secs(30), |b| b["total"] == 8);
    }
}
