//! Records a hostile author can publish (a name holding a NUL, bounties between schemas whose
//! at-uris are as long as the grammar allows), then an ordinary one: through the PDS's
//! firehose, a backfill, Jetstream and an import, SQLite and PostgreSQL index them all, answer
//! them alike and stay ready. A cursor holding a NUL pages alike on both.

use svc_testkit as common;

use common::peers::{Account, Peers, peers};
use common::replay::Replay;
use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// How soon a live record must be answered, as for any other record.
const WITHIN: Duration = Duration::from_secs(2);

const POISON: &str = "poison\u{0}pill";
const AFTER: &str = "after-poison";
/// A valid TID: revisions that are not TIDs are refused.
const REV: &str = "3kaaaaaaaaaa2";
/// The author of the Jetstream and import events.
const AUTHOR: &str = "did:plc:hostileauthor";

/// `len` characters drawn from `alphabet`, the same for the same `seed`.
fn run(alphabet: &[u8], seed: u64, len: usize) -> String {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            char::from(alphabet[(state >> 33) as usize % alphabet.len()])
        })
        .collect()
}

/// A schema's at-uri of `len` characters: a record key of 489 of the characters a record key
/// may hold (at most 512) after a DID (at most 2,048) that is the same for every `seed`, so
/// that the uris differ only at their ends.
fn schema_uri(len: usize, seed: u64) -> String {
    const COLLECTION: &str = "/dev.panproto.schema.schema/";
    let rkey = run(
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:~-",
        seed,
        489,
    );
    let did_len = len - "at://".len() - COLLECTION.len() - rkey.len();
    let did = format!(
        "did:plc:{}",
        run(
            b"abcdefghijklmnopqrstuvwxyz234567",
            7,
            did_len - "did:plc:".len()
        )
    );
    assert!(did.len() <= 2048);
    format!("at://{did}{COLLECTION}{rkey}")
}

fn typed(collection: &str, mut record: Value) -> Value {
    record["$type"] = json!(collection);
    record
}

/// A record as published, and where it must be found.
struct Published {
    what: &'static str,
    collection: &'static str,
    record: Value,
    /// A list query whose answer holds the record.
    lookup: String,
}

/// The records, in the order they are published (the ordinary one last), and queries that
/// must find none of them.
struct Hostile {
    records: Vec<Published>,
    near_misses: Vec<String>,
}

impl Hostile {
    fn new(requester: &str) -> Hostile {
        // Index keys this long exceed a PostgreSQL btree row ("index row size exceeds btree
        // maximum"), and a row the store refuses must not hold back the records behind it.
        let (source, target) = (schema_uri(2570, 11), schema_uri(2570, 12));
        let vocab_record = |name| typed("dev.svc.vocab", vocab(name, "open"));
        let bounty_record = |source: &str, target: &str| {
            typed(
                "dev.svc.bounty",
                bounty(requester, want_lens(source, target), None),
            )
        };
        let records = vec![
            Published {
                what: "R1 (a name holding a NUL)",
                collection: "dev.svc.vocab",
                record: vocab_record(POISON),
                lookup: by_name(POISON),
            },
            Published {
                what: "R2 (a bounty between two 2,570-character at-uris)",
                collection: "dev.svc.bounty",
                record: bounty_record(&source, &target),
                lookup: want_lens_path(&source, &target),
            },
            Published {
                what: "R3 (an ordinary record after them)",
                collection: "dev.svc.vocab",
                record: vocab_record(AFTER),
                lookup: by_name(AFTER),
            },
        ];
        // The part of the name before the NUL, and the schemas swapped, are other keys.
        let near_misses = vec![by_name("poison"), want_lens_path(&target, &source)];
        Hostile {
            records,
            near_misses,
        }
    }

    /// The query that answers the ordinary record, published last.
    fn last_lookup(&self) -> &str {
        &self.records.last().expect("records").lookup
    }

    /// Jetstream commit events creating the records, `AUTHOR`'s, from `time_us` on, and their
    /// uris.
    fn jetstream_lines(&self, time_us: i64) -> (Vec<(i64, String)>, Vec<String>) {
        let mut lines = Vec::new();
        let mut uris = Vec::new();
        for (i, published) in self.records.iter().enumerate() {
            let rkey = format!("3kaaaaaaab2{}a", char::from(b'a' + i as u8));
            let time = time_us + i as i64;
            let collection = published.collection;
            let line = commit_line(AUTHOR, time, collection, &rkey, &published.record);
            lines.push((time, line));
            uris.push(format!("at://{AUTHOR}/{collection}/{rkey}"));
        }
        (lines, uris)
    }
}

fn commit_line(did: &str, time_us: i64, collection: &str, rkey: &str, record: &Value) -> String {
    json!({"did": did, "time_us": time_us, "kind": "commit", "commit": {
        "rev": REV, "operation": "create", "collection": collection, "rkey": rkey,
        "record": record, "cid": CID}})
    .to_string()
}

fn by_name(name: &str) -> String {
    format!("/v1/vocabularies/by-name?name={}", encode(name))
}

fn want_lens_path(source: &str, target: &str) -> String {
    format!(
        "/v1/bounties/want-lens?source_uri={}&target_uri={}",
        encode(source),
        encode(target)
    )
}

/// A request for a message: the long ones cut short.
fn short(path: &str) -> String {
    match path.char_indices().nth(160) {
        Some((end, _)) => format!("{}...", &path[..end]),
        None => path.to_string(),
    }
}

/// A fresh catalog on each engine. Without a PostgreSQL cluster outside CI, `fresh_db` says
/// SKIPPED and SQLite runs alone.
fn catalogs(dir: &Path) -> Vec<(Backend, String)> {
    [Backend::Sqlite, Backend::Postgres]
        .into_iter()
        .filter_map(|backend| {
            let own = dir.join(format!("{backend:?}"));
            std::fs::create_dir_all(&own).expect("a directory per engine");
            let db = backend.fresh_db(&own);
            if db.is_none() {
                eprintln!("SKIPPED on {backend:?}: the other engine runs alone");
            }
            db.map(|db| (backend, db))
        })
        .collect()
}

/// Everything the server logged so far.
fn log_of(server: &mut Server) -> String {
    while let Ok(line) = server.stderr.try_recv() {
        server.log.push(line);
    }
    server.log.join("\n")
}

/// The items of an answer that `author` wrote, as uri, author and record.
fn items_by(server: &mut Server, backend: Backend, path: &str, author: &str) -> Vec<Value> {
    let (status, body) = server.get(path);
    if status != 200 {
        let log = log_of(server);
        let path = short(path);
        panic!("{backend:?}: {path} answered {status}: {body}\nserver log:\n{log}");
    }
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|item| item["author"] == author)
        .map(|item| json!({"uri": item["uri"], "author": item["author"], "record": item["record"]}))
        .collect()
}

/// Waits until the record published last is answered.
fn wait_indexed(
    server: &mut Server,
    backend: Backend,
    hostile: &Hostile,
    author: &str,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        if !items_by(server, backend, hostile.last_lookup(), author).is_empty() {
            return started.elapsed();
        }
        if started.elapsed() > within {
            let log = log_of(server);
            panic!(
                "{backend:?}: the record published last not answered within {within:?}\n\
                 server log:\n{log}"
            );
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Checks that each record is found once, as published (at `uris`), that the near misses find
/// none, and that the server is ready; returns the items found.
fn answers(
    server: &mut Server,
    backend: Backend,
    hostile: &Hostile,
    author: &str,
    uris: &[String],
) -> Vec<Value> {
    let mut found = Vec::new();
    for (published, uri) in hostile.records.iter().zip(uris) {
        let items = items_by(server, backend, &published.lookup, author);
        let expected = vec![json!({"uri": uri, "author": author, "record": published.record})];
        if items != expected {
            let log = log_of(server);
            panic!(
                "{backend:?}: {}: found {:#}, expected {:#}\nserver log:\n{log}",
                published.what,
                json!(items),
                json!(expected)
            );
        }
        found.extend(items);
    }
    for path in &hostile.near_misses {
        let items = items_by(server, backend, path, author);
        assert!(
            items.is_empty(),
            "{backend:?}: {} found {:#}",
            short(path),
            json!(items)
        );
    }
    let (status, _, body) = server.get_raw("/readyz");
    // Ready; a Jetstream source adds a note that its events are not verified.
    if status != 200 || !body.starts_with("ready\n") {
        let log = log_of(server);
        panic!("{backend:?}: /readyz answered {status} {body:?}\nserver log:\n{log}");
    }
    found
}

/// Each engine's answers are those of the first.
fn same_answers(answers: &[(Backend, Vec<Value>)]) {
    let (first, expected) = &answers[0];
    for (backend, found) in &answers[1..] {
        assert_eq!(found, expected, "{backend:?} answers unlike {first:?}");
    }
}

/// Creates the records in `author`'s repository, in order: their uris.
fn publish(peers: &Peers, author: &Account, hostile: &Hostile) -> Vec<String> {
    hostile
        .records
        .iter()
        .map(|published| {
            let record = published.record.clone();
            peers
                .create_record(author, published.collection, record, None)
                .0
        })
        .collect()
}

/// The arguments of a server following `source` live.
fn live_args(source: &str) -> [&str; 6] {
    [
        "--firehose",
        source,
        "--ready-lag",
        "5s",
        "--liveness",
        "5s",
    ]
}

/// A server on each engine following `source` live, as soon as it listens.
fn following(dir: &Path, source: &str) -> Vec<(Backend, Server)> {
    catalogs(dir)
        .into_iter()
        .map(|(backend, db)| (backend, Server::launch(&db, &live_args(source))))
        .collect()
}

#[test]
fn the_pds_firehose_indexes_hostile_records_alike_on_both_engines() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut servers = following(dir.path(), &peers.pds_ws);
    let author = peers.create_account("hostile");
    let hostile = Hostile::new(&author.did);
    let uris = publish(peers, &author, &hostile);
    for (backend, server) in &mut servers {
        let took = wait_indexed(server, *backend, &hostile, &author.did, WITHIN);
        eprintln!("{backend:?}: the last record answered after {took:?}");
    }
    let found: Vec<(Backend, Vec<Value>)> = servers
        .iter_mut()
        .map(|(backend, server)| {
            let found = answers(server, *backend, &hostile, &author.did, &uris);
            (*backend, found)
        })
        .collect();
    same_answers(&found);
}

#[test]
fn a_backfill_finds_hostile_records_alike_on_both_engines() {
    let Some(peers) = peers() else { return };
    let author = peers.create_account("hostilefill");
    let hostile = Hostile::new(&author.did);
    let uris = publish(peers, &author, &hostile);
    let dir = tempfile::tempdir().unwrap();
    // No live source: what is found, the backfill found.
    let backfill = [
        "--backfill",
        peers.pds.as_str(),
        "--plc-url",
        peers.plc.as_str(),
    ];
    let found: Vec<(Backend, Vec<Value>)> = catalogs(dir.path())
        .into_iter()
        .map(|(backend, db)| {
            let mut server = Server::start(&db, &backfill);
            let found = answers(&mut server, backend, &hostile, &author.did, &uris);
            (backend, found)
        })
        .collect();
    same_answers(&found);
}

#[test]
fn jetstream_indexes_hostile_records_alike_on_both_engines() {
    let hostile = Hostile::new(AUTHOR);
    // One event first, so that the servers are caught up and ready before the hostile ones.
    let start = now_us();
    let warm_up = vocab("warm-up", "closed-with-default");
    let replay = Replay::start(vec![(
        start,
        commit_line(
            "did:plc:warmup",
            start,
            "dev.svc.vocab",
            "3kaaaaaaab225",
            &typed("dev.svc.vocab", warm_up),
        ),
    )]);
    let dir = tempfile::tempdir().unwrap();
    let mut servers = following(dir.path(), &replay.url);
    let (lines, uris) = hostile.jetstream_lines(now_us());
    replay.publish(lines);
    for (backend, server) in &mut servers {
        let took = wait_indexed(server, *backend, &hostile, AUTHOR, WITHIN);
        eprintln!("{backend:?}: the last record answered after {took:?}");
    }
    let found: Vec<(Backend, Vec<Value>)> = servers
        .iter_mut()
        .map(|(backend, server)| {
            let found = answers(server, *backend, &hostile, AUTHOR, &uris);
            (*backend, found)
        })
        .collect();
    same_answers(&found);
}

/// A JSON Lines file of `lines`.
fn jsonl_file(dir: &Path, lines: &[String]) -> String {
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let path = dir.join("events.jsonl");
    std::fs::write(&path, text).expect("write the import file");
    path.to_string_lossy().into_owned()
}

#[test]
fn an_import_indexes_hostile_records_alike_on_both_engines() {
    let hostile = Hostile::new(AUTHOR);
    let dir = tempfile::tempdir().unwrap();
    let (lines, uris) = hostile.jetstream_lines(1_700_000_000_000_000);
    let lines: Vec<String> = lines.into_iter().map(|(_, line)| line).collect();
    let file = jsonl_file(dir.path(), &lines);
    let found: Vec<(Backend, Vec<Value>)> = catalogs(dir.path())
        .into_iter()
        .map(|(backend, db)| {
            let mut server = Server::start(&db, &["--import", &file]);
            let found = answers(&mut server, backend, &hostile, AUTHOR, &uris);
            (backend, found)
        })
        .collect();
    same_answers(&found);
}

#[test]
fn a_cursor_holding_a_nul_pages_alike_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    // `did:plc:2early` sorts before `at://did:plc:a`, the second cursor's position.
    let authors = ["did:plc:2early", "did:plc:a", AUTHOR];
    let rkey = "3kaaaaaaab2aa";
    let lines: Vec<String> = authors
        .iter()
        .map(|did| {
            let record = typed("dev.svc.vocab", vocab(did, "open"));
            commit_line(did, 1_700_000_000_000_000, "dev.svc.vocab", rkey, &record)
        })
        .collect();
    let file = jsonl_file(dir.path(), &lines);
    let mut open_vocabs: Vec<String> = authors
        .iter()
        .map(|did| format!("at://{did}/dev.svc.vocab/{rkey}"))
        .collect();
    open_vocabs.sort();
    // base64url of `u:\0` and of `u:at://did:plc:a\0`.
    let cursors = [
        ("dToA", open_vocabs.clone()),
        ("dTphdDovL2RpZDpwbGM6YQA", open_vocabs[1..].to_vec()),
    ];
    let mut bodies: Vec<(Backend, Vec<String>)> = Vec::new();
    for (backend, db) in catalogs(dir.path()) {
        let mut server = Server::start(&db, &["--import", &file]);
        let mut answered = Vec::new();
        for (cursor, expected) in &cursors {
            let path = format!("/v1/vocabularies/by-world?world=open&cursor={cursor}");
            let (status, _, body) = server.get_raw(&path);
            if status != 200 {
                let log = log_of(&mut server);
                panic!("{backend:?}: {path} answered {status}: {body}\nserver log:\n{log}");
            }
            let page: Value = serde_json::from_str(&body).expect("a JSON answer");
            let found: Vec<&str> = page["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|item| item["uri"].as_str().expect("a uri"))
                .collect();
            assert_eq!(found, *expected, "{backend:?}: {path}");
            answered.push(body);
        }
        bodies.push((backend, answered));
    }
    let (first, expected) = &bodies[0];
    for (backend, answered) in &bodies[1..] {
        assert_eq!(answered, expected, "{backend:?} answers unlike {first:?}");
    }
}

fn a_refused_record_is_skipped_counted_and_logged(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let start = now_us();
    let line = |time: i64, rkey: &str, name: &str| {
        let record = typed("dev.svc.vocab", vocab(name, "open"));
        (
            time,
            commit_line(AUTHOR, time, "dev.svc.vocab", rkey, &record),
        )
    };
    let replay = Replay::start(vec![line(start, "3kaaaaaaab2aa", "warm-up")]);
    let mut server = Server::launch(&db, &live_args(&replay.url));
    server.wait_for(&by_name("warm-up"), Duration::from_secs(10), |b| {
        b["total"] == 1
    });
    let location: svc_catalog::Location = db.parse().expect("a catalog location");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(svc_catalog::testing::refuse_records_holding(
            &location, "poison",
        ));
    // Sent together, the three land in one batch: the refusal must not hold back the others.
    let now = now_us();
    replay.publish([
        line(now, "3kaaaaaaab2ab", "kept"),
        line(now + 1, "3kaaaaaaab2ac", "poison"),
        line(now + 2, "3kaaaaaaab2ad", "kept"),
    ]);
    server.wait_for(&by_name("kept"), WITHIN, |b| b["total"] == 2);
    assert_eq!(server.get(&by_name("poison")).1["total"], 0);
    let refused_uri = format!("at://{AUTHOR}/dev.svc.vocab/3kaaaaaaab2ac");
    let log = server.wait_log("the catalog refused a change", Duration::from_secs(5));
    assert!(log.contains(&refused_uri), "{log}");
    let metrics = server.get_raw("/metrics").2;
    assert!(
        metrics.contains("svc_catalog_refused_total{reason=\"constraint\"} 1"),
        "{metrics}"
    );
    assert_eq!(
        server.get_raw("/readyz").2,
        "ready\nnote: the live source's events are applied unverified\n"
    );
    // And the writer goes on.
    replay.publish([line(now_us(), "3kaaaaaaab2ae", "after")]);
    server.wait_for(&by_name("after"), WITHIN, |b| b["total"] == 1);
}

/// Lines an import must pass over, each counted: not UTF-8, longer than a live event may be,
/// not an event; a byte-order mark before the first.
fn an_import_passes_over_broken_lines_and_applies_the_rest(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let line = |rkey: &str, name: &str| {
        let record = typed("dev.svc.vocab", vocab(name, "open"));
        commit_line(
            AUTHOR,
            1_700_000_000_000_000,
            "dev.svc.vocab",
            rkey,
            &record,
        )
    };
    let mut content = "\u{feff}".as_bytes().to_vec();
    content.extend(format!("{}\n", line("3kaaaaaaab2aa", "first")).bytes());
    content.extend(b"{\"did\":\"caf\xe9\"}\n");
    content.extend(std::iter::repeat_n(b'x', 9 << 20));
    content.push(b'\n');
    content.extend(b"[]\n");
    content.extend(format!("{}\n", line("3kaaaaaaab2ab", "last")).bytes());
    let path = dir.path().join("broken.jsonl");
    std::fs::write(&path, &content).expect("write the import file");
    let mut server = Server::start(&db, &["--import", &path.to_string_lossy()]);
    let summary = server.wait_log(" malformed, ", Duration::from_secs(5));
    assert!(
        summary.contains("5 lines, 2 applied, 0 stale, 0 invalid, 0 ignored, 3 malformed"),
        "{summary}"
    );
    for name in ["first", "last"] {
        assert_eq!(server.get(&by_name(name)).1["total"], 1, "{name}");
    }
    let log = log_of(&mut server);
    for what in [
        "not UTF-8 text",
        "bytes one event may have",
        "found an array",
    ] {
        assert!(log.contains(what), "no warning saying {what:?}:\n{log}");
    }
}

each_backend!(
    a_refused_record_is_skipped_counted_and_logged,
    an_import_passes_over_broken_lines_and_applies_the_rest,
);
