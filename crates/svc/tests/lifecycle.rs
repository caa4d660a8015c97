//! Import rules, restarts, the query specification file, signals and flags of `svc serve`.

use svc_testkit as common;

use common::*;
use serde_json::json;

#[test]
fn stale_revisions_never_roll_a_record_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = Events::new();
    let uri = e.put(
        "did:plc:alice",
        "dev.svc.vocab",
        "3kc0000000001",
        "3kaaaaaaaaab3",
        vocab("Newer", "open"),
    );
    // An older update and an older delete arrive late: both are ignored.
    e.put(
        "did:plc:alice",
        "dev.svc.vocab",
        "3kc0000000001",
        "3kaaaaaaaaaa2",
        vocab("Older", "open"),
    );
    e.delete(
        "did:plc:alice",
        "dev.svc.vocab",
        "3kc0000000001",
        "3kaaaaaaaaaa2",
    );
    // A delete, then an older create of the same uri: it stays deleted.
    e.put(
        "did:plc:bob",
        "dev.svc.vocab",
        "3kc0000000002",
        "3kaaaaaaaaaa5",
        vocab("Gone", "open"),
    );
    e.delete(
        "did:plc:bob",
        "dev.svc.vocab",
        "3kc0000000002",
        "3kaaaaaaaaaa6",
    );
    e.put(
        "did:plc:bob",
        "dev.svc.vocab",
        "3kc0000000002",
        "3kaaaaaaaaaa4",
        vocab("Gone", "open"),
    );
    let path = e.write(&dir.path().join("events.jsonl"));
    let server = Server::start(
        dir.path().join("catalog.db"),
        &["--import", path.to_str().unwrap()],
    );
    assert_eq!(
        server.uris("/v1/vocabularies/by-name?name=Newer"),
        vec![uri.clone()]
    );
    assert!(
        server
            .uris("/v1/vocabularies/by-name?name=Older")
            .is_empty()
    );
    assert!(server.uris("/v1/vocabularies/by-name?name=Gone").is_empty());
    let (_, page) = server.get("/v1/vocabularies/by-name?name=Newer");
    assert_eq!(page["items"][0]["rev"], "3kaaaaaaaaab3");
    assert_eq!(server.get("/v1/stats").1["vocabularies"], 1);
    let summary = server
        .log
        .iter()
        .find(|l| l.starts_with("import "))
        .expect("import summary");
    assert!(summary.contains("6 lines, 3 applied, 3 stale"), "{summary}");
}

#[test]
fn invalid_malformed_and_foreign_lines_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = Events::new();
    let good = e.put(
        "did:plc:alice",
        "dev.svc.vocab",
        "3kc0000000001",
        "3kaaaaaaaaaa2",
        vocab("Good", "open"),
    );
    e.put(
        "did:plc:alice",
        "dev.svc.vocab",
        "3kc0000000002",
        "3kaaaaaaaaaa2",
        vocab("Bad", "closed"),
    );
    e.raw("this is not json");
    e.put(
        "did:plc:alice",
        "app.bsky.feed.post",
        "3kc0000000003",
        "3kaaaaaaaaaa2",
        json!({"text": "hi"}),
    );
    e.raw(r#"{"did":"did:plc:alice","time_us":1,"kind":"identity","identity":{"handle":"alice.test"}}"#);
    e.raw("");
    let after = e.put(
        "did:plc:alice",
        "dev.svc.vocab",
        "3kc0000000004",
        "3kaaaaaaaaaa2",
        vocab("After", "open"),
    );
    let path = e.write(&dir.path().join("events.jsonl"));
    let server = Server::start(
        dir.path().join("catalog.db"),
        &["--import", path.to_str().unwrap()],
    );
    assert_eq!(server.uris("/v1/vocabularies/by-world?world=open"), {
        let mut v = vec![good, after];
        v.sort();
        v
    });
    let log = server.log.join("\n");
    assert!(
        log.contains("at://did:plc:alice/dev.svc.vocab/3kc0000000002"),
        "{log}"
    );
    assert!(log.contains("world: must be one of"), "{log}");
    assert!(
        log.contains("events.jsonl:3: malformed line skipped"),
        "{log}"
    );
    assert!(
        log.contains("7 lines, 2 applied, 0 stale, 1 invalid, 2 ignored, 1 malformed"),
        "{log}"
    );
    let metrics = server.get_raw("/metrics").2;
    assert!(
        metrics.contains("svc_ingest_invalid_records_total 1"),
        "{metrics}"
    );
}

#[test]
fn a_restart_answers_the_same_without_importing_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/catalog.jsonl");
    let first = Server::start(&db, &["--import", examples]);
    let paths = [
        "/v1/stats",
        "/v1/bounties/open?limit=3",
        "/v1/adapters?framework=serde",
        "/v1/vocabularies/by-world?world=open",
    ];
    let before: Vec<_> = paths.iter().map(|p| first.get(p)).collect();
    assert!(
        first.log.iter().any(|l| l.contains("0 invalid")),
        "the examples are all valid: {:?}",
        first.log
    );
    assert!(first.stop().success());
    let second = Server::start(&db, &[]);
    let after: Vec<_> = paths.iter().map(|p| second.get(p)).collect();
    assert_eq!(before, after);
    assert!(second.stop().success());
    // The same file again is recognised as imported.
    let third = Server::start(&db, &["--import", examples]);
    assert!(
        third.log.iter().any(|l| l.contains("already imported")),
        "{:?}",
        third.log
    );
    assert_eq!(third.get("/v1/stats"), before[0]);
}

#[test]
fn a_query_added_to_the_specification_gets_both_routes() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec: serde_json::Value =
        serde_json::from_str(include_str!("../../../spec/queries.json")).unwrap();
    spec["queries"].as_array_mut().unwrap().push(json!({
        "name": "vocabulariesByTop",
        "kind": "dev.svc.vocab",
        "path": "/v1/vocabularies/by-top",
        "description": "Vocabularies by top concept.",
        "params": [{"name": "top", "type": "string", "required": true, "description": "Top concept id."}],
        "filter": [{"op": "eq", "path": "top", "param": "top"}]
    }));
    let spec_path = dir.path().join("queries.json");
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    let mut e = Events::new();
    let mut record = vocab("Animals", "open");
    record["top"] = json!("animal");
    let uri = e.put(
        "did:plc:alice",
        "dev.svc.vocab",
        "3kc0000000001",
        "3kaaaaaaaaaa2",
        record,
    );
    let events = e.write(&dir.path().join("events.jsonl"));
    let db = dir.path().join("catalog.db");
    // Import first with the built-in specification, then start with the extended one: the new
    // query's keys are built from the records already stored.
    drop(Server::start(&db, &["--import", events.to_str().unwrap()]));
    let server = Server::start(&db, &["--spec", spec_path.to_str().unwrap()]);
    assert_eq!(
        server.uris("/v1/vocabularies/by-top?top=animal"),
        vec![uri.clone()]
    );
    assert_eq!(
        server.uris("/xrpc/dev.svc.query.vocabulariesByTop?top=animal"),
        vec![uri.clone()]
    );
    assert_eq!(server.get("/v1/vocabularies/by-top").0, 400);
    assert!(server.get("/openapi.json").1["paths"]["/v1/vocabularies/by-top"].is_object());
    // The explorer lists it, makes its form and shows its answer.
    let (_, _, front) = server.get_raw("/");
    assert!(
        front.contains("href=\"/explore/vocabulariesByTop\""),
        "{front}"
    );
    let (status, _, page) = server.get_raw("/explore/vocabulariesByTop?top=animal");
    assert_eq!(status, 200);
    assert!(
        page.contains("<input id=\"p-top\" name=\"top\" value=\"animal\""),
        "{page}"
    );
    assert!(page.contains(&format!("<tr data-uri=\"{uri}\">")), "{page}");
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path().join("catalog.db"), &[]);
    let status = server.stop();
    assert!(status.success(), "{status}");
}

#[test]
fn flags_read_environment_variables_and_bad_flags_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = Events::new();
    e.put(
        "did:plc:alice",
        "dev.svc.vocab",
        "3kc0000000001",
        "3kaaaaaaaaaa2",
        vocab("Env", "open"),
    );
    let events = e.write(&dir.path().join("events.jsonl"));
    let mut child = svc()
        .arg("serve")
        .env("SVC_FIREHOSE", "none")
        .env("SVC_LISTEN", "127.0.0.1:0")
        .env("SVC_DB", dir.path().join("env.db"))
        .env("SVC_IMPORT", &events)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let url = loop {
        let line = lines.next().expect("a log line").unwrap();
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.trim().to_string();
        }
    };
    let ready = loop {
        let line = lines.next().expect("a log line").unwrap();
        if line.contains("ready") {
            break line;
        }
    };
    assert!(ready.contains("ready"));
    let body: serde_json::Value = common::http()
        .get(format!("{url}/v1/vocabularies/by-name?name=Env"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(body["total"], 1);
    let _ = child.kill();
    let _ = child.wait();
    assert!(dir.path().join("env.db").exists());

    let output = svc().args(["serve", "--no-such-flag"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("error: unexpected argument '--no-such-flag'")
    );
    let output = svc()
        .args(["serve", "--listen", "not-an-address"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let output = svc()
        .args(["serve", "--firehose", "none", "--db"])
        .arg(dir.path().join("x.db"))
        .args([
            "--import",
            "/nonexistent/file.jsonl",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    // Refused before the port is taken, and the OS error said once.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "error: --import /nonexistent/file.jsonl: No such file or directory (os error 2)\n"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
    // --db takes a path, sqlite:PATH or a PostgreSQL URL; anything else is a usage error that
    // names the accepted forms and never echoes a password.
    for db in [
        "mysql://svc:hunter2@db.example/catalog",
        "postgres:hunter2@db",
    ] {
        let output = svc()
            .args(["serve", "--firehose", "none", "--db", db])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{db}: {stderr}");
        assert!(stderr.starts_with("error: --db: "), "{stderr}");
        assert!(stderr.contains("postgres://"), "{stderr}");
        assert!(!stderr.contains("hunter2"), "{stderr}");
    }
    let by_url = dir.path().join("by-url.db");
    let server = Server::start(
        std::path::Path::new(&format!("sqlite:{}", by_url.display())),
        &[],
    );
    assert!(by_url.exists(), "sqlite:PATH opens PATH: {:?}", server.log);
    drop(server);
    let output = svc().arg("version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("svc {}", env!("CARGO_PKG_VERSION"))
    );
}

/// Batches of an import are prepared side by side but applied in the file's order: two events
/// of one uri at one revision apply in arrival order, so only the later one may stand, however
/// many batches lie between them; a malformed line far into the file is reported by its number.
fn an_import_of_many_batches_applies_them_in_the_files_order(backend: Backend) {
    const FILLER: usize = 20_000;
    let _cluster = shared_cluster();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let mut e = Events::new();
    let (did, kind, rev) = ("did:plc:alice", "dev.svc.vocab", "3kaaaaaaaaaa2");
    e.put(did, kind, "3kc0000000001", rev, vocab("First", "open"));
    e.put(did, kind, "3kc0000000002", rev, vocab("Deleted", "open"));
    for i in 0..FILLER {
        e.put(
            &format!("did:plc:filler{i:06}"),
            kind,
            "3kc0000000001",
            rev,
            vocab(&format!("filler-{i}"), "hierarchy-closed"),
        );
    }
    e.raw("{not json");
    let malformed_line = FILLER + 3;
    let last = e.put(did, kind, "3kc0000000001", rev, vocab("Last", "open"));
    e.delete(did, kind, "3kc0000000002", rev);
    let path = e.write(&dir.path().join("events.jsonl"));
    let server = Server::start(&db, &["--import", path.to_str().unwrap()]);
    let (status, body) = server.get("/v1/vocabularies/by-world?world=open");
    assert_eq!(status, 200, "{body}");
    let items = body["items"].as_array().expect("items");
    let names: Vec<_> = items.iter().map(|i| &i["record"]["name"]).collect();
    assert_eq!(names, [&json!("Last")], "{body}");
    assert_eq!(items[0]["uri"], json!(last));
    let closed = server
        .get("/v1/vocabularies/by-world?world=hierarchy-closed&limit=1")
        .1;
    assert_eq!(closed["total"], json!(FILLER), "{closed}");
    let log = server.log.join("\n");
    let lines = FILLER + 5;
    assert!(
        log.contains(&format!(
            "events.jsonl:{malformed_line}: malformed line skipped"
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "{lines} lines, {} applied, 0 stale, 0 invalid, 0 ignored, 1 malformed",
            lines - 1
        )),
        "{log}"
    );
}

each_backend!(an_import_of_many_batches_applies_them_in_the_files_order);

/// An address in use is refused before anything is made: a new catalog's file stays unmade.
#[test]
fn an_address_in_use_leaves_no_new_catalog_behind() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");
    let output = svc()
        .args([
            "serve",
            "--firehose",
            "none",
            "--listen",
            address.as_str(),
            "--db",
        ])
        .arg(&db)
        .output()
        .expect("svc serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("--listen {address}")), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?} left behind");
}
