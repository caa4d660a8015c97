//! The `svc` command against the reference PDS and PLC directory, and a running `svc serve`.

use svc_testkit as common;

use common::cli::*;
use common::peers::{Account, Peers, peers};
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

/// One record of every kind from the examples, by collection.
fn example_records() -> BTreeMap<String, Value> {
    let text = include_str!("../../../examples/catalog.jsonl");
    let mut records = BTreeMap::new();
    for line in text.lines() {
        let event: Value = serde_json::from_str(line).expect("example line");
        let commit = &event["commit"];
        if commit["operation"] == "create" {
            let collection = commit["collection"].as_str().unwrap().to_string();
            records
                .entry(collection)
                .or_insert_with(|| commit["record"].clone());
        }
    }
    records
}

/// The peers and the account the tests of this file share: the peers start once per test
/// binary, and the account is made once. Each test keeps its own sessions and records.
struct Shared {
    peers: &'static Peers,
    alice: Account,
}

static SHARED: OnceLock<Option<Shared>> = OnceLock::new();

/// `None` when the peers cannot start (outside CI, where that fails instead).
fn shared() -> Option<&'static Shared> {
    SHARED
        .get_or_init(|| {
            let peers = peers()?;
            let alice = peers.create_account("cli");
            Some(Shared { peers, alice })
        })
        .as_ref()
}

/// One test's own session directory and files.
struct Home {
    shared: &'static Shared,
    dir: tempfile::TempDir,
    sessions: PathBuf,
}

impl Home {
    fn new() -> Option<Home> {
        let shared = shared()?;
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join("sessions");
        Some(Home {
            shared,
            dir,
            sessions,
        })
    }

    fn cli(&self) -> Cli<'_> {
        Cli::new(&self.sessions, &self.shared.peers.plc)
    }

    fn session_file(&self) -> PathBuf {
        self.sessions
            .join(format!("{}.json", self.shared.alice.did))
    }

    /// Alice's session as stored.
    fn session(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.session_file()).unwrap()).unwrap()
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Logs alice in at her PDS, with her password from the environment.
    fn log_in(&self, cli: &Cli) -> Output {
        let alice = &self.shared.alice;
        cli.run_with(
            &[
                "oauth",
                "login",
                "--handle",
                &alice.handle,
                "--pds-url",
                &self.shared.peers.pds,
            ],
            None,
            &[("ATPROTO_APP_PASSWORD", &alice.password)],
        )
    }

    /// Alice's password and the tokens of her stored session.
    fn secrets(&self) -> Vec<String> {
        let stored = self.session();
        vec![
            self.shared.alice.password.clone(),
            stored["access_jwt"].as_str().unwrap().to_string(),
            stored["refresh_jwt"].as_str().unwrap().to_string(),
        ]
    }
}

fn assert_no_secret(printed: &str, secrets: &[String]) {
    for secret in secrets {
        assert!(!printed.contains(secret.as_str()), "a secret was printed");
    }
}

/// Only its owner may read a session file.
fn assert_private(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    #[cfg(not(unix))]
    let _ = path;
}

#[test]
fn resolve_names_the_did_method_handle_and_pds() {
    let Some(home) = Home::new() else { return };
    let (peers, alice) = (home.shared.peers, &home.shared.alice);
    let resolved = json_out(&home.cli().run(&["resolve", &alice.did]));
    assert_eq!(resolved["did"], alice.did);
    assert_eq!(resolved["method"], "plc");
    assert_eq!(resolved["handle"], alice.handle);
    assert_eq!(resolved["pds_url"], peers.pds);
    // The reference PDS signs with a K-256 key, which a did:key writes as `zQ3s...`.
    let key = resolved["signing_key"].as_str().expect("a signing key");
    assert!(key.starts_with("did:key:zQ3s"), "{key}");
    assert_eq!(
        resolved["also_known_as"][0],
        format!("at://{}", alice.handle)
    );
}

#[test]
fn a_login_stores_a_private_session_and_prints_no_secret() {
    let Some(home) = Home::new() else { return };
    let alice = &home.shared.alice;
    let cli = home.cli();
    let login = home.log_in(&cli);
    let summary = json_out(&login);
    assert_eq!(summary["did"], alice.did);
    let listed = json_out(&cli.run(&["oauth", "list"]));
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["handle"], alice.handle);
    let secrets = home.secrets();
    for output in [&login.stdout, &login.stderr] {
        assert_no_secret(&String::from_utf8_lossy(output), &secrets);
    }
    assert_private(&home.session_file());
    assert_no_secret(&cli.printed(), &secrets);
}

#[test]
fn every_kind_publishes_and_fetches_back_as_sent() {
    let Some(home) = Home::new() else { return };
    let alice = &home.shared.alice;
    let cli = home.cli();
    json_out(&home.log_in(&cli));
    let records = example_records();
    assert_eq!(records.len(), 22, "the family, lenses and schemas");
    for (collection, record) in &records {
        let path = home.write("record.json", &record.to_string());
        // By the name the command line takes: `bounty`, `lens`, `schema`.
        let kind = collection.rsplit('.').next().unwrap_or(collection);
        let published = json_out(&cli.run(&[
            "publish",
            kind,
            "--record",
            path.to_str().unwrap(),
            "--did",
            &alice.did,
        ]));
        let uri = published["uri"].as_str().unwrap();
        assert!(
            uri.starts_with(&format!("at://{}/{collection}/", alice.did)),
            "{uri}"
        );
        assert!(published["cid"].as_str().unwrap().starts_with("bafyrei"));
        let fetched = json_out(&cli.run(&["fetch", uri]));
        assert_eq!(&fetched, record, "{collection}");
    }
    assert_no_secret(&cli.printed(), &home.secrets());
}

#[test]
fn the_orchestrator_asks_a_server_following_the_pds() {
    let Some(home) = Home::new() else { return };
    let (peers, alice) = (home.shared.peers, &home.shared.alice);
    let cli = home.cli();
    json_out(&home.log_in(&cli));
    let server = Server::launch(
        home.dir.path().join("catalog.db"),
        &["--firehose", peers.pds_ws.as_str(), "--ready-lag", "5s"],
    );
    let records = example_records();
    let adapter = home.write("adapter.json", &records["dev.svc.adapter"].to_string());
    json_out(&cli.run(&[
        "publish",
        "adapter",
        "--record",
        adapter.to_str().unwrap(),
        "--did",
        &alice.did,
    ]));
    let url = server.url.clone();
    let framework = records["dev.svc.adapter"]["framework"]
        .as_str()
        .unwrap()
        .to_string();
    let by_alice = |b: &Value| {
        b["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["author"] == alice.did)
    };
    server.wait_for(
        &format!("/v1/adapters?framework={framework}"),
        std::time::Duration::from_secs(5),
        by_alice,
    );
    let adapters = json_out(&cli.run(&[
        "--url",
        &url,
        "orchestrator",
        "adapters",
        "--framework",
        &framework,
    ]));
    assert!(by_alice(&adapters));
    let mine = json_out(&cli.run(&[
        "--url",
        &url,
        "orchestrator",
        "bounties",
        "--requester-did",
        records["dev.svc.bounty"]["requester"].as_str().unwrap(),
        "--limit",
        "1",
    ]));
    assert_eq!(mine["limit"], 1);
    let sufficiency = json_out(&cli.run(&[
        "--url",
        &url,
        "orchestrator",
        "sufficiency",
        "--lens-uri",
        LENS,
        "--kinds",
        "roundtrip-test",
    ]));
    assert_eq!(
        (
            &sufficiency["sufficient"],
            &sufficiency["required_kinds"][0]
        ),
        (&Value::Bool(false), &Value::from("roundtrip-test")),
        "{sufficiency}"
    );
    let mut printed = cli.printed();
    printed.push_str(&server.kill9().join("\n"));
    assert_no_secret(&printed, &home.secrets());
}

const LENS: &str = "at://did:plc:lenses/dev.panproto.schema.lens/3kaaaaaaaaaa2";
const SOURCE: &str = "at://did:plc:schemas/dev.panproto.schema.schema/3kaaaaaaaaaa2";

#[test]
fn an_encounter_from_piped_answers_is_published() {
    let Some(home) = Home::new() else { return };
    let cli = home.cli();
    json_out(&home.log_in(&cli));
    let encounter = json_out(&cli.run_with(
        &[
            "encounter",
            "record",
            "--lens",
            LENS,
            "--source-schema",
            SOURCE,
        ],
        Some("translate\nprofile records\n\ncli test\n"),
        &[],
    ));
    assert_eq!(encounter["$type"], "dev.svc.encounter");
    assert_eq!(encounter["use"]["action"], "translate");
    assert_eq!(encounter["use"]["material"]["scope"], "profile records");
    assert!(encounter["use"].get("purpose").is_none());
    assert_eq!(encounter["use"]["actor"], "cli test");
    assert_eq!(
        (encounter["kind"].as_str(), encounter["visibility"].as_str()),
        (Some("invocation-log"), Some("public-detailed"))
    );
    assert!(encounter.get("targetSchema").is_none());
    let path = home.write("encounter.json", &encounter.to_string());
    let published =
        json_out(&cli.run(&["publish", "encounter", "--record", path.to_str().unwrap()]));
    assert!(
        published["uri"]
            .as_str()
            .unwrap()
            .contains("/dev.svc.encounter/")
    );
    assert_no_secret(&cli.printed(), &home.secrets());
}

/// A vocabulary of two actions, the second described.
fn vocabulary() -> Value {
    serde_json::json!({"name": "actions", "world": "open", "occurredAt": NOW,
        "actions": [{"id": "read", "parents": []}, {"id": "translate", "parents": ["read"], "description": "change shape"}]})
}

#[test]
fn an_encounter_action_is_chosen_by_number_from_a_vocabulary() {
    let Some(home) = Home::new() else { return };
    let cli = home.cli();
    json_out(&home.log_in(&cli));
    let vocab_path = home.write("vocab.json", &vocabulary().to_string());
    let vocab_uri = json_out(&cli.run(&[
        "publish",
        "vocabulary",
        "--record",
        vocab_path.to_str().unwrap(),
    ]))["uri"]
        .as_str()
        .unwrap()
        .to_string();
    let chosen = cli.run_with(
        &[
            "encounter",
            "record",
            "--lens",
            LENS,
            "--source-schema",
            SOURCE,
            "--action-vocab",
            &vocab_uri,
            "--kind",
            "curated",
        ],
        Some("2\n\n\n\n"),
        &[],
    );
    let chosen_json = json_out(&chosen);
    assert_eq!(chosen_json["use"]["action"], "translate");
    assert_eq!(chosen_json["use"]["actionVocabulary"]["uri"], vocab_uri);
    assert_eq!(chosen_json["kind"], "curated");
    assert!(
        stderr(&chosen).contains("2) translate: change shape"),
        "{}",
        stderr(&chosen)
    );
    assert_no_secret(&cli.printed(), &home.secrets());
}

#[test]
fn a_text_only_encounter_keeps_the_text_as_its_action() {
    let Some(home) = Home::new() else { return };
    let text_only = json_out(&home.cli().run_with(
        &[
            "encounter",
            "record",
            "--lens",
            LENS,
            "--source-schema",
            SOURCE,
            "--target-schema",
            SOURCE,
            "--text-only",
        ],
        Some("read the whole catalog\n"),
        &[],
    ));
    assert_eq!(text_only["use"]["action"], "read the whole catalog");
    assert_eq!(text_only["targetSchema"]["uri"], SOURCE);
}

#[test]
fn a_refused_access_token_is_refreshed_once_and_the_session_rewritten() {
    let Some(home) = Home::new() else { return };
    let cli = home.cli();
    json_out(&home.log_in(&cli));
    let secrets = home.secrets();
    let vocab_path = home.write("vocab.json", &vocabulary().to_string());
    let session_file = home.session_file();
    let mut stale = home.session();
    let old_refresh = stale["refresh_jwt"].as_str().unwrap().to_string();
    stale["access_jwt"] = Value::String("not-a-valid-token".into());
    std::fs::write(&session_file, stale.to_string()).unwrap();
    let refreshed = cli.run(&["publish", "vocab", "--record", vocab_path.to_str().unwrap()]);
    json_out(&refreshed);
    let renewed = home.session();
    assert_ne!(renewed["access_jwt"], "not-a-valid-token");
    assert_ne!(renewed["refresh_jwt"].as_str().unwrap(), old_refresh);
    assert_private(&session_file);
    assert_no_secret(&cli.printed(), &secrets);
}

#[test]
fn a_wrong_password_fails_the_login() {
    let Some(home) = Home::new() else { return };
    let (peers, alice) = (home.shared.peers, &home.shared.alice);
    let wrong = home.cli().run(&[
        "oauth",
        "login",
        "--handle",
        &alice.handle,
        "--pds-url",
        &peers.pds,
        "--app-password",
        "wrong-password",
    ]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        stderr(&wrong).starts_with("error: login failed"),
        "{}",
        stderr(&wrong)
    );
}

#[test]
fn a_login_with_what_is_no_handle_is_a_usage_error() {
    let Some(home) = Home::new() else { return };
    let not_a_handle = home
        .cli()
        .run(&["oauth", "login", "--handle", "not a handle"]);
    assert_eq!(not_a_handle.status.code(), Some(2));
    assert_eq!(
        stderr(&not_a_handle),
        "error: --handle \"not a handle\" is not a handle (like alice.example.com)\n"
    );
}

#[test]
fn publishing_an_unknown_kind_is_a_usage_error() {
    let Some(home) = Home::new() else { return };
    let unknown = home
        .cli()
        .run_with(&["publish", "gizmo", "--record", "-"], Some("{}"), &[]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("unknown record kind"));
}

#[test]
fn publishing_an_invalid_record_is_refused() {
    let Some(home) = Home::new() else { return };
    let cli = home.cli();
    json_out(&home.log_in(&cli));
    let invalid = cli.run_with(
        &["publish", "vocab", "--record", "-"],
        Some(r#"{"name":"x","world":"flat","occurredAt":"2026-01-01T00:00:00Z"}"#),
        &[],
    );
    assert_eq!(invalid.status.code(), Some(1));
    assert!(
        stderr(&invalid).contains("world: must be one of"),
        "{}",
        stderr(&invalid)
    );
    assert_no_secret(&cli.printed(), &home.secrets());
}

#[test]
fn the_orchestrator_says_when_it_cannot_reach_the_service() {
    let Some(home) = Home::new() else { return };
    let down = home
        .cli()
        .run(&["--url", "http://127.0.0.1:9", "orchestrator", "stats"]);
    assert_eq!(down.status.code(), Some(1));
    assert!(
        stderr(&down).starts_with("error: cannot reach"),
        "{}",
        stderr(&down)
    );
}

#[test]
fn the_orchestrator_reports_the_services_refusal() {
    let Some(home) = Home::new() else { return };
    let server = Server::start(home.dir.path().join("catalog.db"), &[]);
    let bad = home.cli().run(&[
        "--url",
        &server.url,
        "orchestrator",
        "verifications",
        "--lens_uri",
        "nope",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).starts_with("error: 400 invalid_request: lens_uri: "),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn a_logout_removes_the_session_once_and_publishing_then_has_none() {
    let Some(home) = Home::new() else { return };
    let alice = &home.shared.alice;
    let cli = home.cli();
    json_out(&home.log_in(&cli));
    let secrets = home.secrets();
    let out = json_out(&cli.run(&["oauth", "logout", "--did", &alice.did]));
    assert_eq!(out["removed"], true);
    let again = json_out(&cli.run(&["oauth", "logout", "--did", &alice.did]));
    assert_eq!(again["removed"], false);
    assert_eq!(
        json_out(&cli.run(&["oauth", "list"])),
        serde_json::json!([])
    );
    let missing = cli.run_with(
        &["publish", "vocab", "--record", "-"],
        Some(r#"{"name":"x","world":"open","occurredAt":"2026-01-01T00:00:00Z"}"#),
        &[],
    );
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("no stored session"),
        "{}",
        stderr(&missing)
    );
    assert_no_secret(&cli.printed(), &secrets);
}

#[test]
fn a_password_over_plain_http_to_another_machine_is_warned_about() {
    let Some(home) = Home::new() else { return };
    let alice = &home.shared.alice;
    let cli = home.cli();
    let plain = cli.run(&[
        "oauth",
        "login",
        "--handle",
        &alice.handle,
        "--pds-url",
        "http://0.0.0.0:9",
        "--app-password",
        &alice.password,
    ]);
    assert_eq!(plain.status.code(), Some(1));
    assert!(
        stderr(&plain).starts_with("warning: --pds-url http://0.0.0.0:9 is plain HTTP"),
        "{}",
        stderr(&plain)
    );
    assert_no_secret(&cli.printed(), std::slice::from_ref(&alice.password));
}

#[test]
fn help_version_completions_and_usage_errors() {
    let version = svc().arg("version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("svc {}", env!("CARGO_PKG_VERSION"))
    );
    for flag in ["--version", "-V"] {
        assert_eq!(
            String::from_utf8_lossy(&svc().arg(flag).output().unwrap().stdout).trim(),
            format!("svc {}", env!("CARGO_PKG_VERSION"))
        );
    }
    let help = String::from_utf8_lossy(
        &svc()
            .args(["help", "orchestrator"])
            .output()
            .unwrap()
            .stdout,
    )
    .to_string();
    let spec: Value = serde_json::from_str(include_str!("../../../spec/queries.json")).unwrap();
    for query in spec["queries"].as_array().unwrap() {
        let command = query["cli"]["command"].as_str().unwrap();
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{command} "))),
            "{command} missing:\n{help}"
        );
    }
    assert!(help.contains("stats"));
    for shell in ["bash", "zsh", "fish"] {
        let script = svc().args(["completions", shell]).output().unwrap();
        assert!(
            script.status.success() && script.stdout.len() > 200,
            "{shell}"
        );
        // Flags are spelled one way, as the README and `--help` spell them.
        let text = String::from_utf8_lossy(&script.stdout);
        assert!(text.contains("community-uri"), "{shell}");
        assert!(!text.contains("community_uri"), "{shell}");
    }
    let unknown = svc()
        .args(["orchestrator", "bounties", "--nope"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).starts_with("error: "));
    let missing = svc().args(["fetch"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    let both = svc()
        .args([
            "orchestrator",
            "bounties",
            "--requester_did=did:plc:a",
            "--limit=2",
            "--url",
            "http://127.0.0.1:9",
        ])
        .output()
        .unwrap();
    assert_eq!(
        both.status.code(),
        Some(1),
        "flags in --flag=value form parse; only the server is missing"
    );
}

#[test]
fn a_query_added_to_the_specification_becomes_a_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec: Value = serde_json::from_str(include_str!("../../../spec/queries.json")).unwrap();
    spec["queries"].as_array_mut().unwrap().push(serde_json::json!({
        "name": "vocabulariesByTop", "kind": "dev.svc.vocab", "path": "/v1/vocabularies/by-top",
        "description": "Vocabularies by top concept.", "cli": {"command": "vocabularies-by-top"},
        "params": [{"name": "top_id", "type": "string", "required": true, "description": "Top concept id."}],
        "filter": [{"op": "eq", "path": "top", "param": "top_id"}]
    }));
    let path = dir.path().join("queries.json");
    std::fs::write(&path, spec.to_string()).unwrap();
    let help = svc()
        .args(["help", "orchestrator"])
        .env("SVC_SPEC", &path)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("vocabularies-by-top"));
    let sub = svc()
        .args(["orchestrator", "vocabularies-by-top", "--help"])
        .env("SVC_SPEC", &path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&sub.stdout);
    assert!(text.contains("--top-id"), "{text}");
}

/// The flags a help text lists, each with its description (empty when it has none).
fn flags_in_help(args: &[&str]) -> Vec<(String, String)> {
    let output = svc().args(args).output().expect("svc");
    assert!(output.status.success(), "{args:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .map(|line| {
            let (flag, about) = line.split_once("  ").unwrap_or((line, ""));
            (flag.to_string(), about.trim().to_string())
        })
        .collect()
}

#[test]
fn every_flag_is_described_and_url_is_only_where_it_is_read() {
    let encounter = flags_in_help(&["encounter", "record", "--help"]);
    for flag in [
        "--lens",
        "--source-schema",
        "--target-schema",
        "--action-vocab",
        "--kind",
        "--visibility",
        "--text-only",
    ] {
        assert!(
            encounter
                .iter()
                .any(|(f, _)| f.starts_with(&format!("{flag} ")) || f == flag),
            "{flag} missing: {encounter:?}"
        );
    }
    for (flag, about) in &encounter {
        assert!(!about.is_empty(), "{flag} has no description");
    }
    let has_url = |args: &[&str]| {
        flags_in_help(args)
            .iter()
            .any(|(flag, _)| flag.starts_with("--url "))
    };
    for args in [
        &["resolve", "--help"][..],
        &["fetch", "--help"],
        &["publish", "--help"],
        &["oauth", "login", "--help"],
        &["encounter", "record", "--help"],
        &["verify", "roundtrip-test", "--help"],
        &["serve", "--help"],
    ] {
        assert!(!has_url(args), "{args:?} lists --url");
    }
    assert!(
        has_url(&["--help"]),
        "svc --help names --url, which orchestrator reads"
    );
    assert!(has_url(&["orchestrator", "--help"]));
    assert!(has_url(&["orchestrator", "bounties", "--help"]));
    // Given before the command, it still reaches the orchestrator, and is refused elsewhere.
    let server = FakePds::answering(serde_json::json!({"bounties": 0}));
    let stats = svc()
        .args(["--url", &server.url, "orchestrator", "stats"])
        .output()
        .unwrap();
    assert!(stats.status.success(), "{stats:?}");
    assert!(server.requests()[0].starts_with("GET /v1/stats"));
    let elsewhere = svc()
        .args(["--url", &server.url, "resolve", "did:plc:x"])
        .output()
        .unwrap();
    assert_eq!(elsewhere.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&elsewhere.stderr).contains("orchestrator"));
}

/// A loopback port nothing listens on: bound, then let go.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A loopback server that answers any bytes with plain HTTP, and its port: TLS to it fails.
fn plain_http_port() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}");
                // Open until the client hangs up, so that it reads the answer first.
                while matches!(stream.read(&mut buffer), Ok(n) if n > 0) {}
            });
        }
    });
    port
}

#[test]
fn a_peer_that_cannot_be_reached_is_named_with_what_failed() {
    let closed = closed_port();
    let tls = plain_http_port();
    let did = "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa";
    let cases: [(&[&str], Option<String>, String); 6] = [
        (
            &[
                "orchestrator",
                "stats",
                "--url",
                &format!("http://127.0.0.1:{closed}"),
            ],
            None,
            format!("connecting to 127.0.0.1:{closed}: connection refused"),
        ),
        (
            &["resolve", did],
            Some(format!("http://127.0.0.1:{closed}")),
            format!("connecting to 127.0.0.1:{closed}: connection refused"),
        ),
        (
            &[
                "orchestrator",
                "stats",
                "--url",
                "http://no-such-host.invalid",
            ],
            None,
            "resolving no-such-host.invalid: ".to_string(),
        ),
        (
            &["resolve", "did:web:no-such-host.invalid"],
            None,
            "resolving no-such-host.invalid: ".to_string(),
        ),
        (
            &[
                "orchestrator",
                "stats",
                "--url",
                &format!("https://127.0.0.1:{tls}"),
            ],
            None,
            format!("TLS with 127.0.0.1:{tls}: "),
        ),
        (
            &["resolve", did],
            Some(format!("https://127.0.0.1:{tls}")),
            format!("TLS with 127.0.0.1:{tls}: "),
        ),
    ];
    for (args, plc, said) in cases {
        let mut command = svc();
        command.args(args);
        if let Some(plc) = plc {
            command.env("SVC_PLC_URL", plc);
        }
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(stderr.contains(&said), "{args:?}: {stderr}");
        assert!(!stderr.contains("error sending request"), "{stderr}");
    }
}

/// Runs `svc <args>` as `svc <args> | head -c 16` would: reads 16 bytes of its standard output,
/// then closes it. Its exit status and standard error.
fn with_reader_gone(args: &[&str]) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let mut child = svc()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("svc");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 16];
    stdout.read_exact(&mut first).expect("the first bytes");
    drop(stdout);
    let output = child.wait_with_output().expect("svc ends");
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_reader_that_stops_reading_ends_a_command_quietly() {
    // Each prints more than a pipe holds (64 KiB), so the reader leaves while it writes.
    let items: Vec<Value> = (0..2_000)
        .map(|i| serde_json::json!({"uri": format!("at://did:plc:a/dev.svc.bounty/{i}")}))
        .collect();
    let server = FakePds::answering(serde_json::json!({"items": items, "total": 2_000}));
    let completions = ["completions", "bash"];
    let query = ["orchestrator", "bounties", "--url", &server.url];
    for args in [&completions[..], &query[..]] {
        let (status, stderr) = with_reader_gone(args);
        assert!(status.success(), "{args:?}: {status:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// A PDS that answers every request, whatever it asks, with `answer`, and keeps each request
/// it was sent (head and body).
struct FakePds {
    url: String,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl FakePds {
    fn answering(answer: Value) -> FakePds {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = std::sync::Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                // The head, then as much body as it announces.
                let complete = |request: &[u8]| {
                    let text = String::from_utf8_lossy(request);
                    let Some((head, body)) = text.split_once("\r\n\r\n") else {
                        return false;
                    };
                    let length = head
                        .lines()
                        .find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    body.len() >= length
                };
                while !complete(&request) {
                    match stream.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                kept.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&request).to_string());
                let body = answer.to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        FakePds { url, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn session_answer(did: &str, handle: &str) -> Value {
    serde_json::json!({
        "did": did,
        "handle": handle,
        "accessJwt": "forged-access-token",
        "refreshJwt": "forged-refresh-token",
    })
}

#[test]
fn a_login_stores_the_account_asked_for_or_nothing() {
    let Some(peers) = peers() else { return };
    let alice = peers.create_account("asked");
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    let cli = Cli::new(&sessions, &peers.plc);
    let password = [("ATPROTO_APP_PASSWORD", alice.password.as_str())];
    let session_file = sessions.join(format!("{}.json", alice.did));

    // By DID, resolved through the PLC directory to the PDS, which must answer for that DID.
    let by_did = cli.run_with(&["oauth", "login", "--handle", &alice.did], None, &password);
    assert_eq!(json_out(&by_did)["did"], alice.did);
    assert_eq!(stderr(&by_did), "");
    // The same account again, by handle at its PDS: replaced, and said so.
    let again = cli.run_with(
        &[
            "oauth",
            "login",
            "--handle",
            &alice.handle.to_ascii_uppercase(),
            "--pds-url",
            &peers.pds,
        ],
        None,
        &password,
    );
    assert_eq!(json_out(&again)["handle"], alice.handle);
    assert_eq!(
        stderr(&again),
        format!(
            "replacing the stored session of {} ({})\n",
            alice.did, alice.handle
        )
    );
    let stored = std::fs::read_to_string(&session_file).unwrap();

    // A PDS that answers a login as mallory.test with alice's session.
    let forger = FakePds::answering(session_answer(&alice.did, &alice.handle));
    let forged = cli.run(&[
        "oauth",
        "login",
        "--handle",
        "mallory.test",
        "--pds-url",
        &forger.url,
        "--app-password",
        "mallory-password",
    ]);
    assert_eq!(forged.status.code(), Some(1), "{}", stderr(&forged));
    assert_eq!(
        stderr(&forged),
        format!(
            "error: the PDS {} answered with a session for {} ({}), not for mallory.test: \
             refused, nothing stored\n",
            forger.url, alice.handle, alice.did
        )
    );
    let asked = forger.requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].starts_with("POST /xrpc/com.atproto.server.createSession "),
        "{}",
        asked[0]
    );
    assert!(
        asked[0].contains(r#""identifier":"mallory.test""#),
        "{}",
        asked[0]
    );

    // One that reports the handle asked for, with alice's DID: her stored session is another
    // handle's, and nothing resolved says they are one account.
    let claimer = FakePds::answering(session_answer(&alice.did, "mallory.test"));
    let claimed = cli.run(&[
        "oauth",
        "login",
        "--handle",
        "mallory.test",
        "--pds-url",
        &claimer.url,
        "--app-password",
        "mallory-password",
    ]);
    assert_eq!(claimed.status.code(), Some(1), "{}", stderr(&claimed));
    assert!(
        stderr(&claimed).starts_with(&format!(
            "error: the PDS {} answered with a session for mallory.test ({}), but the session \
             stored for {} is {}'s: refused, nothing stored",
            claimer.url, alice.did, alice.did, alice.handle
        )),
        "{}",
        stderr(&claimed)
    );

    // A DID asked for, another DID answered.
    let other = FakePds::answering(session_answer(
        "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa",
        &alice.handle,
    ));
    let swapped = cli.run_with(
        &[
            "oauth",
            "login",
            "--handle",
            &alice.did,
            "--pds-url",
            &other.url,
        ],
        None,
        &password,
    );
    assert_eq!(swapped.status.code(), Some(1), "{}", stderr(&swapped));
    assert!(
        stderr(&swapped).contains(&format!(
            "(did:plc:aaaaaaaaaaaaaaaaaaaaaaaa), not for {}: refused, nothing stored",
            alice.did
        )),
        "{}",
        stderr(&swapped)
    );

    // None of them stored anything, nor touched alice's session.
    assert_eq!(std::fs::read_to_string(&session_file).unwrap(), stored);
    let listed = json_out(&cli.run(&["oauth", "list"]));
    assert_eq!(
        listed,
        serde_json::json!([{"did": alice.did, "handle": alice.handle, "pds_url": peers.pds}])
    );
    assert!(
        !cli.printed().contains("forged-"),
        "a forged token was printed"
    );
}
