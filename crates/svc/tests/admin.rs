//! Takedowns through the network's admin methods, against a running server: HTTP Basic as
//! `admin` with the operator's password; a record or an account leaves answers, counts and
//! reads and stays down across a restart and a new import of its records; lifted, it comes
//! back. Without the password file the methods are not there; a wrong password is a 401,
//! repeated ones a 429, and the password appears nowhere the server writes.

use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use svc_testkit as common;
use svc_testkit::*;

const PASSWORD: &str = "correct horse battery staple";
const REQUESTER: &str = "did:plc:requester";

fn events(dir: &std::path::Path) -> (std::path::PathBuf, Vec<String>) {
    let mut events = Events::new();
    let uris = ["did:plc:alice", "did:plc:alice", "did:plc:bob"]
        .iter()
        .enumerate()
        .map(|(n, did)| {
            let rkey = format!("3kaaaaaaaaa2{n}");
            let record = bounty(REQUESTER, want_lens(&schema(1), &schema(2)), None);
            events.put(
                did,
                "dev.svc.bounty",
                &rkey,
                &tid(1_700_000_000_000_000 + n as i64),
                record,
            )
        })
        .collect();
    (events.write(&dir.join("events.jsonl")), uris)
}

fn listed(server: &Server) -> Vec<String> {
    server.uris(&format!(
        "/v1/bounties/by-requester?requester_did={REQUESTER}"
    ))
}

/// The operator's password, written to a file in `dir` as `text`; the file's path.
fn password_file(dir: &std::path::Path, text: &str) -> String {
    let path = dir.join("admin-password");
    svc_testkit::write_private(&path, text);
    path.to_str().unwrap().to_string()
}

/// Asks the status of an account with `password`.
fn ask_status(server: &Server, password: &str) -> reqwest::blocking::Response {
    let path = "getSubjectStatus?did=did:plc:a";
    admin(server, reqwest::Method::GET, path, password)
        .send()
        .unwrap()
}

fn admin(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    password: &str,
) -> reqwest::blocking::RequestBuilder {
    http()
        .request(
            method,
            format!("{}/xrpc/com.atproto.admin.{path}", server.url),
        )
        .basic_auth("admin", Some(password))
}

fn update(server: &Server, subject: Value, takedown: Value) -> (u16, Value) {
    let response = admin(
        server,
        reqwest::Method::POST,
        "updateSubjectStatus",
        PASSWORD,
    )
    .json(&json!({"subject": subject, "takedown": takedown}))
    .send()
    .expect("the update");
    let status = response.status().as_u16();
    (status, response.json().expect("a JSON answer"))
}

fn status(server: &Server, query: &str) -> (u16, Value) {
    let response = admin(
        server,
        reqwest::Method::GET,
        &format!("getSubjectStatus?{query}"),
        PASSWORD,
    )
    .send()
    .expect("the status");
    let status = response.status().as_u16();
    (status, response.json().expect("a JSON answer"))
}

fn record_ref(uri: &str) -> Value {
    json!({"$type": "com.atproto.repo.strongRef", "uri": uri, "cid": CID})
}

fn takedowns_hide_what_they_name_until_lifted_and_last_across_a_restart(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let (file, uris) = events(dir.path());
    let password = password_file(dir.path(), &format!("{PASSWORD}\n"));
    let args = [
        "--import",
        file.to_str().unwrap(),
        "--admin-password-file",
        password.as_str(),
    ];
    let server = Server::start(&db, &args);
    assert_eq!(listed(&server), uris);

    let (code, answer) = update(
        &server,
        record_ref(&uris[0]),
        json!({"applied": true, "ref": "ticket 7"}),
    );
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        answer["takedown"],
        json!({"applied": true, "ref": "ticket 7"})
    );
    assert_eq!(listed(&server), uris[1..]);
    let path = uris[0].replace("at://", "/at/");
    assert_eq!(server.get_raw(&format!("{path}?format=json")).0, 404);
    let (code, _, page) = server.get_raw(&path);
    assert_eq!(code, 410, "{page}");
    assert!(
        page.contains("The operator of this catalog took this record down"),
        "{page}"
    );
    assert!(
        page.contains("Taken down") && !page.contains(REQUESTER),
        "{page}"
    );
    let (code, answer) = status(&server, &format!("uri={}", encode(&uris[0])));
    assert_eq!(
        (code, &answer["takedown"]),
        (200, &json!({"applied": true, "ref": "ticket 7"}))
    );

    let alice = json!({"$type": "com.atproto.admin.defs#repoRef", "did": "did:plc:alice"});
    let (code, _) = update(&server, alice.clone(), json!({"applied": true}));
    assert_eq!(code, 200);
    assert_eq!(listed(&server), uris[2..]);
    let (_, stats) = server.get("/v1/stats");
    assert_eq!(stats["bounties"], 1, "{stats}");

    // A restart imports the same records again: they stay down.
    drop(server);
    let server = Server::start(&db, &args);
    assert_eq!(listed(&server), uris[2..], "after a restart");

    let (code, _) = update(&server, alice, json!({"applied": false}));
    assert_eq!(code, 200);
    assert_eq!(listed(&server), uris[1..]);
    let (code, _) = update(&server, record_ref(&uris[0]), json!({"applied": false}));
    assert_eq!(code, 200);
    assert_eq!(listed(&server), uris);
    let (_, answer) = status(&server, "did=did:plc:alice");
    assert_eq!(answer["takedown"], json!({"applied": false}));

    let log: Vec<String> = server
        .log
        .iter()
        .cloned()
        .chain(server.stderr.try_iter())
        .collect();
    assert!(
        !log.join("\n").contains(PASSWORD),
        "the password was logged"
    );
}

#[test]
fn admin_requests_are_refused_plainly_and_guessing_never_locks_the_operator_out() {
    let dir = tempfile::tempdir().unwrap();
    let without = Server::start(dir.path().join("without.db"), &[]);
    let response = ask_status(&without, PASSWORD);
    assert_eq!(response.status(), 404);
    assert_eq!(
        response.json::<Value>().unwrap()["error"],
        "MethodNotImplemented"
    );
    drop(without);

    let file = &password_file(dir.path(), PASSWORD);
    let server = Server::start(dir.path().join("with.db"), &["--admin-password-file", file]);
    let (code, answer) = update(
        &server,
        json!({"$type": "x.y#z", "did": "did:plc:a"}),
        json!({"applied": true}),
    );
    assert_eq!(code, 400, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("$type"),
        "{answer}"
    );
    let (code, answer) = status(&server, "did=plc:nope");
    assert_eq!(code, 400, "{answer}");
    let guesses: Vec<_> = (0..8)
        .map(|n| {
            let url = server.url.clone();
            std::thread::spawn(move || {
                let path = format!("{url}/xrpc/com.atproto.admin.getSubjectStatus?did=did:plc:a");
                let guess = http()
                    .get(path)
                    .basic_auth("admin", Some(format!("guess {n}")));
                guess.send().expect("a guess").status().as_u16()
            })
        })
        .collect();
    // However many wrong guesses, from the same client, the right password is taken at once.
    let started = std::time::Instant::now();
    assert_eq!(ask_status(&server, PASSWORD).status(), 200);
    assert!(started.elapsed() < std::time::Duration::from_millis(400));
    for guess in guesses {
        assert_eq!(guess.join().unwrap(), 401);
    }
    assert_eq!(ask_status(&server, PASSWORD).status(), 200);
    let metrics = server.get_raw("/metrics").2;
    assert!(!metrics.contains(PASSWORD));
    assert!(
        metrics.contains("svc_admin_wrong_passwords_total 8"),
        "counted"
    );

    for (name, weak) in [("short", "short"), ("weak", "password1234")] {
        refused_at_start(dir.path(), name, weak);
    }
}

/// A password a guess could find is refused at start, saying how to make a strong one.
fn refused_at_start(dir: &std::path::Path, name: &str, password: &str) {
    let file = dir.join(name);
    svc_testkit::write_private(&file, password);
    let refused_at_start = svc()
        .args(["serve", "--firehose", "none", "--listen", "127.0.0.1:0"])
        .args(["--db", dir.join(format!("{name}.db")).to_str().unwrap()])
        .args(["--admin-password-file", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused_at_start.status.success());
    let stderr = String::from_utf8_lossy(&refused_at_start.stderr);
    assert!(stderr.contains("--admin-password-file"), "{stderr}");
    assert!(stderr.contains("head -c 24 /dev/urandom"), "{stderr}");
}

fn the_command_line_takes_down_reports_and_restores(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let (file, uris) = events(dir.path());
    let password = &password_file(dir.path(), &format!("{PASSWORD}\n"));
    let args = [
        "--import",
        file.to_str().unwrap(),
        "--admin-password-file",
        password,
    ];
    let server = Server::start(&db, &args);
    let admin = |words: &[&str]| {
        let output = svc()
            .arg("admin")
            .args(words)
            .args(["--url", &server.url, "--password-file", password])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(output.status.success(), "{words:?}: {stderr}");
        serde_json::from_slice::<Value>(&output.stdout).expect("JSON")
    };
    let taken = admin(&["takedown", &uris[2], "--ref", "case 9"]);
    assert_eq!(taken["takedown"], json!({"applied": true, "ref": "case 9"}));
    assert_eq!(listed(&server), uris[..2]);
    let status = admin(&["status", &uris[2]]);
    assert_eq!(
        status["takedown"],
        json!({"applied": true, "ref": "case 9"})
    );
    admin(&["restore", &uris[2]]);
    assert_eq!(listed(&server), uris);
    // `--url` before the command reaches admin as it reaches orchestrator.
    let before = svc()
        .args(["--url", &server.url, "admin", "status", &uris[2]])
        .args(["--password-file", password])
        .env("SVC_URL", "http://127.0.0.1:9")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&before.stderr);
    assert!(before.status.success(), "{stderr}");
    // A wrong password is the server's refusal, said plainly.
    let wrong = svc()
        .args(["admin", "status", "did:plc:bob", "--url", &server.url])
        .env("SVC_ADMIN_PASSWORD", "not the password")
        .output()
        .unwrap();
    assert!(!wrong.status.success());
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(stderr.contains("401 AuthenticationRequired"), "{stderr}");
    assert!(stderr.contains("wrong admin password"), "{stderr}");
    the_command_line_says_what_is_wrong(&server, dir.path());
}

/// A subject that is neither a DID nor a record's at-uri, and a password file others may read,
/// are refused before anything is sent, each naming what is wrong.
fn the_command_line_says_what_is_wrong(server: &Server, dir: &std::path::Path) {
    let bad_subject = svc()
        .args(["admin", "status", "bob", "--url", &server.url])
        .env("SVC_ADMIN_PASSWORD", PASSWORD)
        .output()
        .unwrap();
    assert_eq!(bad_subject.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad_subject.stderr);
    assert!(stderr.contains("neither an account's DID"), "{stderr}");
    assert!(stderr.contains("at://did/collection/rkey"), "{stderr}");

    let shared = dir.join("shared-password");
    std::fs::write(&shared, PASSWORD).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = svc()
        .args(["admin", "status", "did:plc:bob", "--url", &server.url])
        .args(["--password-file", shared.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("readable by others (mode 0644)"),
        "{stderr}"
    );
    let refused_at_start = svc()
        .args(["serve", "--firehose", "none", "--listen", "127.0.0.1:0"])
        .args(["--db", dir.join("shared.db").to_str().unwrap()])
        .args(["--admin-password-file", shared.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused_at_start.status.success());
    let stderr = String::from_utf8_lossy(&refused_at_start.stderr);
    assert!(stderr.contains("chmod 600"), "{stderr}");
}

/// A Jetstream create of a vocabulary in world "open", by `did`, at `time_us`.
fn vocabulary(did: &str, time_us: i64, rkey: &str) -> (i64, String) {
    let line = json!({"did": did, "time_us": time_us, "kind": "commit", "commit": {
        "rev": tid(time_us), "operation": "create", "collection": "dev.svc.vocab", "rkey": rkey,
        "record": {"$type": "dev.svc.vocab", "name": rkey, "world": "open", "occurredAt": NOW},
        "cid": CID}});
    (time_us, line.to_string())
}

fn open_vocabularies(server: &Server) -> Vec<String> {
    server.uris("/v1/vocabularies/by-world?world=open")
}

fn a_takedown_holds_through_the_live_source_and_says_leave_on_the_stream(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let password = password_file(dir.path(), PASSWORD);
    // Recent events: a source starting in the past would be bulk-loaded.
    let base = now_us() - 1_000_000;
    let (alice, bob) = ("did:plc:alice", "did:plc:bob");
    let replay = common::replay::Replay::start(vec![
        vocabulary(alice, base, "3kaaaaaaaaa22"),
        vocabulary(bob, base + 1, "3kaaaaaaaaa22"),
    ]);
    let args = [
        "--firehose",
        replay.url.as_str(),
        "--ready-lag",
        "5s",
        "--admin-password-file",
        password.as_str(),
    ];
    let server = Server::launch(&db, &args);
    server.wait_for("/v1/stats", std::time::Duration::from_secs(10), |stats| {
        stats["vocabularies"] == 2
    });
    let alice_first = format!("at://{alice}/dev.svc.vocab/3kaaaaaaaaa22");
    let changes = common::stream::subscribe(&server, "/v1/changes");
    let account = json!({"$type": "com.atproto.admin.defs#repoRef", "did": alice});
    assert_eq!(update(&server, account, json!({"applied": true})).0, 200);
    let left = common::stream::next_of(&changes, "after the takedown");
    assert_eq!(
        (left.data["op"].as_str(), left.data["uri"].as_str()),
        (Some("leave"), Some(alice_first.as_str()))
    );

    // What the account publishes afterwards is stored out of sight.
    replay.publish([
        vocabulary(alice, base + 2, "3kaaaaaaaaa23"),
        vocabulary(bob, base + 3, "3kaaaaaaaaa23"),
    ]);
    let bob_second = format!("at://{bob}/dev.svc.vocab/3kaaaaaaaaa23");
    server.wait_for("/v1/stats", std::time::Duration::from_secs(10), |_| {
        open_vocabularies(&server).contains(&bob_second)
    });
    let listed = open_vocabularies(&server);
    assert!(listed.iter().all(|uri| !uri.contains(alice)), "{listed:?}");
    let (_, stats) = server.get("/v1/stats");
    assert_eq!(stats["vocabularies"], 2, "{stats}");
}

each_backend!(
    takedowns_hide_what_they_name_until_lifted_and_last_across_a_restart,
    the_command_line_takes_down_reports_and_restores,
    a_takedown_holds_through_the_live_source_and_says_leave_on_the_stream,
    a_replica_hides_what_the_indexer_took_down,
);

/// A query replica (`--no-indexer`) over the same catalog drops a taken-down record from its
/// answers, cached ones included, as it follows any write; it does not take admin updates.
fn a_replica_hides_what_the_indexer_took_down(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let (file, uris) = events(dir.path());
    let password = &password_file(dir.path(), PASSWORD);
    let indexer_args = [
        "--import",
        file.to_str().unwrap(),
        "--admin-password-file",
        password,
    ];
    let indexer = Server::start(&db, &indexer_args);
    let replica = Server::launch(
        &db,
        &[
            "--no-indexer",
            "--ready-lag",
            "2s",
            "--admin-password-file",
            password,
        ],
    );
    assert_eq!(listed(&replica), uris, "the replica's answer, now cached");
    let (code, _) = update(&indexer, record_ref(&uris[1]), json!({"applied": true}));
    assert_eq!(code, 200);
    let path = format!("/v1/bounties/by-requester?requester_did={REQUESTER}");
    replica.wait_for(&path, std::time::Duration::from_secs(10), |answer| {
        answer["total"] == 2
    });
    assert_eq!(listed(&replica), [uris[0].clone(), uris[2].clone()]);
    let (code, answer) = update(&replica, record_ref(&uris[0]), json!({"applied": true}));
    assert_eq!(
        (code, answer["error"].as_str()),
        (503, Some("NotWriter")),
        "{answer}"
    );
}

/// With `--admin-listen`, the admin methods live on their own address (also beside
/// `--no-api`), and the public address answers them as a server without them.
#[test]
fn the_admin_methods_can_have_an_address_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let password = password_file(dir.path(), PASSWORD);
    let mut server = Server::start(
        dir.path().join("catalog.db"),
        &[
            "--no-api",
            "--admin-password-file",
            &password,
            "--admin-listen",
            "127.0.0.1:0",
        ],
    );
    let line = server.wait_log(
        "admin methods on http://",
        std::time::Duration::from_secs(5),
    );
    let admin_url = line
        .split("admin methods on ")
        .nth(1)
        .map(|rest| rest.trim().to_string())
        .expect("the admin address");
    let public = ask_status(&server, PASSWORD);
    assert_eq!(public.status(), 404);
    assert_eq!(
        public.json::<Value>().unwrap()["error"],
        "MethodNotImplemented"
    );
    let asked = svc()
        .args(["--url", &admin_url, "admin", "status", "did:plc:a"])
        .args(["--password-file", &password])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&asked.stderr);
    assert!(asked.status.success(), "{stderr}");
    let stats = http()
        .get(format!("{admin_url}/v1/stats"))
        .send()
        .expect("asked");
    assert_eq!(stats.status(), 404, "nothing public on the admin address");
    assert_eq!(server.get_raw("/healthz").0, 200);
}
