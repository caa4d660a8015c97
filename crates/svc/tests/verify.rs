//! `svc verify` against lens and schema records published to the reference PDS, and a small
//! XRPC server standing in for a version-control service's coercion-law method.

use svc_testkit as common;

use common::cli::*;
use common::peers::{Account, Peers, peers};
use common::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Output;
use std::sync::{Arc, Mutex};

const LENS: &str = "dev.panproto.schema.lens";
const SCHEMA: &str = "dev.panproto.schema.schema";

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/../svc-verify/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture JSON")
}

/// A test account holding the probe's lens and schema records (their at-uris rewritten to it),
/// logged in as the only stored session.
struct Published {
    account: Account,
    dir: tempfile::TempDir,
    sessions: PathBuf,
    plc: String,
    lens_cid: String,
}

impl Published {
    fn new(peers: &Peers, name: &str) -> Published {
        let account = peers.create_account(name);
        let rewrite = |record: Value| -> Value {
            let text = record
                .to_string()
                .replace("at://did:plc:example/", &format!("at://{}/", account.did));
            serde_json::from_str(&text).expect("rewritten record")
        };
        for (rkey, file) in [
            ("src", "source-schema-record.json"),
            ("tgt", "target-schema-record.json"),
            ("lossy-src", "lossy-source-schema-record.json"),
            ("lossy-tgt", "lossy-target-schema-record.json"),
        ] {
            peers.put_record(&account, SCHEMA, rkey, rewrite(fixture(file)));
        }
        let (_, lens_cid) =
            peers.put_record(&account, LENS, "iso", rewrite(fixture("lens-record.json")));
        peers.put_record(
            &account,
            LENS,
            "lossy",
            rewrite(fixture("lossy-lens-record.json")),
        );
        let mut other_target = rewrite(fixture("lens-record.json"));
        other_target["targetSchema"] = json!(format!("at://{}/{SCHEMA}/lossy-tgt", account.did));
        peers.put_record(&account, LENS, "other-target", other_target);
        let mut no_schema = rewrite(fixture("lens-record.json"));
        no_schema["targetSchema"] = json!(format!("at://{}/{SCHEMA}/missing", account.did));
        peers.put_record(&account, LENS, "no-schema", no_schema);
        let mut corrupt = rewrite(fixture("lens-record.json"));
        corrupt["blob"] =
            json!({"steps": [{"name": "x", "source": {"transform": {"FromTheFuture": 1}}}]});
        peers.put_record(&account, LENS, "corrupt", corrupt);

        let dir = tempfile::tempdir().expect("temp dir");
        let published = Published {
            sessions: dir.path().join("sessions"),
            plc: peers.plc.clone(),
            dir,
            account,
            lens_cid,
        };
        let login = published.cli().run_with(
            &[
                "oauth",
                "login",
                "--handle",
                &published.account.handle,
                "--pds-url",
                &peers.pds,
            ],
            None,
            &[("ATPROTO_APP_PASSWORD", &published.account.password)],
        );
        json_out(&login);
        published
    }

    fn cli(&self) -> Cli<'_> {
        Cli::new(&self.sessions, &self.plc)
    }

    fn lens(&self, rkey: &str) -> String {
        format!("at://{}/{LENS}/{rkey}", self.account.did)
    }

    fn corpus(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("corpus");
        path.to_str().expect("utf-8 path").to_string()
    }

    /// `roundtrip-test` of one of the published lenses over a corpus written from `text`.
    fn roundtrip(&self, lens: &str, name: &str, text: &str) -> Output {
        let corpus = self.corpus(name, text);
        self.verify(&[
            "roundtrip-test",
            "--lens",
            &self.lens(lens),
            "--corpus",
            &corpus,
        ])
    }

    fn verify(&self, args: &[&str]) -> Output {
        let mut all = vec!["verify"];
        all.extend_from_slice(args);
        self.cli().run(&all)
    }
}

/// The printed record, after checking the exit status.
fn record(output: &Output, status: i32) -> Value {
    assert_eq!(
        output.status.code(),
        Some(status),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        stderr(output)
    );
    serde_json::from_slice(&output.stdout).expect("a verification record on stdout")
}

fn says(output: &Output, message: &str) {
    assert!(stderr(output).contains(message), "{}", stderr(output));
}

fn no_verdict(output: &Output, message: &str) {
    assert_eq!(output.status.code(), Some(2), "stderr: {}", stderr(output));
    assert!(output.stdout.is_empty(), "no record is printed");
    assert!(stderr(output).contains(message), "{}", stderr(output));
}

#[test]
fn roundtrip_and_property_tests_on_published_lenses() {
    let Some(peers) = peers() else { return };
    let p = Published::new(peers, "verify-rt");
    let iso = p.lens("iso");

    // Without a corpus: {"text": ""}; the verifier defaults to the only session.
    let holds = record(&p.verify(&["roundtrip-test", "--lens", &iso]), 0);
    assert_eq!(holds["$type"], "dev.svc.verification");
    assert_eq!(holds["kind"], "roundtrip-test");
    assert_eq!(
        holds["lens"],
        json!({"uri": iso, "cid": {"$link": p.lens_cid}})
    );
    assert_eq!(holds["verifier"], p.account.did);
    assert_eq!(holds["tool"]["name"], "svc-verify/roundtrip-test");
    assert_eq!(holds["tool"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        holds["property"],
        json!({"$type": "dev.svc.defs#lpRoundtrip", "domain": "corpus of 1 record(s)"})
    );
    assert_eq!(holds["result"], "holds");
    assert!(svc_syntax::check_datetime(holds["occurredAt"].as_str().unwrap()).is_ok());

    // With a corpus, flags in both spellings; the printed record publishes as it is.
    let corpus = p.corpus("good.jsonl", "{\"text\":\"a\"}\n\n{\"text\":\"b c\"}\n");
    let output = p.verify(&[
        "roundtrip-test",
        &format!("--lens={iso}"),
        "--corpus",
        &corpus,
        &format!("--verifier-did={}", p.account.did),
    ]);
    let holds = record(&output, 0);
    assert_eq!(holds["property"]["domain"], "corpus of 2 record(s)");
    let published = p.cli().run_with(
        &["publish", "verification", "--record", "-"],
        Some(&String::from_utf8_lossy(&output.stdout)),
        &[],
    );
    assert!(
        json_out(&published)["uri"]
            .as_str()
            .unwrap()
            .contains("/dev.svc.verification/")
    );

    // An array where the schema has a string does not come back.
    let output = p.roundtrip(
        "iso",
        "array.json",
        r#"[{"text": "ok"}, {"text": ["a", "b"]}]"#,
    );
    assert_eq!(record(&output, 1)["result"], "falsified");
    says(&output, "falsified by corpus record 1 (case 1)");
    says(&output, "at $.text");
    says(&output, "[\"a\",\"b\"]");

    // Undeclared keys: reported, and no verdict on a record outside the lens's domain.
    let output = p.roundtrip(
        "iso",
        "extra.jsonl",
        "{\"text\":\"a\"}\n{\"text\":\"b\",\"mood\":\"x\"}\n",
    );
    assert_eq!(record(&output, 1)["result"], "inconclusive");
    says(
        &output,
        "corpus record 1 (line 2) does not fit the source schema: $.mood: a key the schema does not declare",
    );

    // The lossy lens drops createdAt from the view; the complement restores it.
    let corpus = r#"[{"text": "hi", "createdAt": "2026-01-01T00:00:00.000Z"}]"#;
    let output = p.roundtrip("lossy", "lossy.json", corpus);
    assert_eq!(record(&output, 0)["result"], "holds");

    // property-test cycles the corpus: 7 cases over 2 records.
    let corpus = p.corpus("two.jsonl", "{\"text\":\"a\"}\n{\"text\":\"b\"}\n");
    let property_test = |corpus: &str, budget: &str| {
        let budget = format!("--budget={budget}");
        p.verify(&["property-test", "--lens", &iso, "--corpus", corpus, &budget])
    };
    let output = property_test(&corpus, "7");
    let holds = record(&output, 0);
    assert_eq!(holds["kind"], "property-test");
    assert_eq!(holds["property"]["$type"], "dev.svc.defs#lpGenerator");
    assert!(
        holds["property"]["spec"]
            .as_str()
            .unwrap()
            .contains("budget 7")
    );
    says(&output, "7 of 7 case(s) run over 2 corpus record(s)");
    // The falsifying record is reached only when the budget reaches it.
    let corpus = p.corpus("bad-second.jsonl", "{\"text\":\"a\"}\n{\"text\":[\"x\"]}\n");
    let run = |budget| property_test(&corpus, budget);
    assert_eq!(record(&run("1"), 0)["result"], "holds");
    let output = run("5");
    assert_eq!(record(&output, 1)["result"], "falsified");
    says(&output, "corpus record 1 (line 2) (case 1)");

    // Usage errors: budget 0, an empty corpus, no lens at-uri.
    let empty = p.corpus("empty.json", "[]");
    for bad in [
        vec![
            "property-test",
            "--lens",
            &iso,
            "--corpus",
            &corpus,
            "--budget",
            "0",
        ],
        vec!["property-test", "--lens", &iso, "--corpus", &empty],
        vec!["roundtrip-test", "--lens", "not-an-at-uri"],
        vec!["roundtrip-test"],
    ] {
        let output = p.verify(&bad);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{bad:?}: {}",
            stderr(&output)
        );
    }
    let bad_corpus = p.corpus("bad.jsonl", "{\"text\":\"a\"}\n{\"text\":\n");
    no_verdict(
        &p.verify(&["roundtrip-test", "--lens", &iso, "--corpus", &bad_corpus]),
        "corpus line 2",
    );
}

#[test]
fn missing_or_unreadable_records_are_errors_not_verdicts() {
    let Some(peers) = peers() else { return };
    let p = Published::new(peers, "verify-err");
    for (runner, lens, message) in [
        ("roundtrip-test", "nothing-here", "fetching the lens"),
        (
            "roundtrip-test",
            "no-schema",
            "fetching the lens's targetSchema",
        ),
        ("static-check", "corrupt", "unparseable lens blob"),
        ("roundtrip-test", "corrupt", "unparseable lens blob"),
    ] {
        no_verdict(&p.verify(&[runner, "--lens", &p.lens(lens)]), message);
    }
    // Two stored sessions: the verifier must be named.
    let other = peers.create_account("verify-other");
    json_out(&p.cli().run_with(
        &[
            "oauth",
            "login",
            "--handle",
            &other.handle,
            "--pds-url",
            &peers.pds,
        ],
        None,
        &[("ATPROTO_APP_PASSWORD", &other.password)],
    ));
    no_verdict(
        &p.verify(&["static-check", "--lens", &p.lens("iso")]),
        "--verifier-did is required",
    );
}

#[test]
fn static_check_compares_the_derived_target_with_the_published_one() {
    let Some(peers) = peers() else { return };
    let p = Published::new(peers, "verify-static");
    let holds = record(&p.verify(&["static-check", "--lens", &p.lens("iso")]), 0);
    assert_eq!(holds["kind"], "static-check");
    assert_eq!(holds["property"]["$type"], "dev.svc.defs#lpChecker");
    assert_eq!(holds["property"]["checker"], "svc-verify/static-check");
    let output = p.verify(&[
        "static-check",
        "--lens",
        &p.lens("other-target"),
        "--pds-url",
        &peers.pds,
    ]);
    assert_eq!(record(&output, 1)["result"], "falsified");
    assert!(
        stderr(&output).contains("derives a target schema"),
        "{}",
        stderr(&output)
    );
}

/// A version-control service's coercion-law method: answers by the standard asked.
fn coercion_server(seen: Arc<Mutex<Vec<Value>>>) -> String {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let app = axum::Router::new().route(
        "/xrpc/dev.panproto.translate.verifyCoercionLaws",
        axum::routing::post(move |axum::Json(input): axum::Json<Value>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(input.clone());
                match input["standard"].as_str() {
                    Some("clean") => axum::Json(json!({"violations": []})).into_response(),
                    Some("broken") => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        axum::Json(json!({"error": "InternalServerError", "message": "boom"})),
                    )
                        .into_response(),
                    _ => axum::Json(json!({"violations": [
                        {"law": "idempotence", "witness": "a"},
                        {"law": "round-trip", "witness": "b"},
                    ]}))
                    .into_response(),
                }
            }
        }),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    spawn_async(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
        axum::serve(listener, app).await.expect("serve");
    });
    url
}

#[test]
fn coercion_law_asks_the_vcs_service() {
    let Some(peers) = peers() else { return };
    let p = Published::new(peers, "verify-coerce");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let vcs = coercion_server(seen.clone());
    let iso = p.lens("iso");
    let coerce = |standard: &str, extra: &[&str]| {
        let mut args = vec![
            "coercion-law",
            "--lens",
            &iso,
            "--vcs-url",
            &vcs,
            "--standard",
            standard,
        ];
        args.extend_from_slice(extra);
        p.verify(&args)
    };

    let holds = record(&coerce("clean", &["--version", "2.1"]), 0);
    assert_eq!(
        holds["property"],
        json!({"$type": "dev.svc.defs#lpCoercionLaw", "standard": "clean", "version": "2.1"})
    );
    assert_eq!(
        seen.lock().unwrap()[0],
        json!({"lens": iso, "standard": "clean", "version": "2.1"})
    );

    let output = coerce("strict", &[]);
    assert_eq!(record(&output, 1)["result"], "falsified");
    assert!(
        stderr(&output).contains("idempotence"),
        "{}",
        stderr(&output)
    );
    let tolerant = record(&coerce("strict", &["--violation-threshold=2"]), 0);
    assert_eq!(tolerant["property"]["violationThreshold"], 2);

    no_verdict(&coerce("broken", &[]), "500");
    no_verdict(&coerce_unreachable(&p, &iso), "verifyCoercionLaws");
}

fn coerce_unreachable(p: &Published, lens: &str) -> Output {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    p.verify(&[
        "coercion-law",
        "--lens",
        lens,
        "--vcs-url",
        &format!("http://127.0.0.1:{port}"),
        "--standard",
        "s",
    ])
}

#[test]
fn a_published_verification_makes_the_lens_sufficient() {
    let Some(peers) = peers() else { return };
    let p = Published::new(peers, "verify-e2e");
    let server_dir = tempfile::tempdir().expect("temp dir");
    let server = Server::launch(
        server_dir.path().join("catalog.db"),
        &["--firehose", peers.pds_ws.as_str(), "--ready-lag", "5s"],
    );
    let iso = p.lens("iso");
    let sufficient = format!("/v1/verifications/sufficient?lens_uri={iso}&kinds=roundtrip-test");
    let (_, before) = server.get(&sufficient);
    assert_eq!(before["sufficient"], false);

    let output = p.verify(&["roundtrip-test", "--lens", &iso, "--publish"]);
    let printed = record(&output, 0);
    let created: Value = stderr(&output)
        .lines()
        .find_map(|line| serde_json::from_str(line).ok())
        .expect("{uri, cid} on stderr");
    let uri = created["uri"].as_str().expect("uri");
    assert!(uri.starts_with(&format!("at://{}/dev.svc.verification/", p.account.did)));
    assert_eq!(
        json_out(&p.cli().run(&["fetch", uri])),
        printed,
        "the published record is the printed one"
    );
    server.wait_for(&sufficient, std::time::Duration::from_secs(10), |b| {
        b["sufficient"] == true
    });
}

#[test]
fn lens_and_schema_records_published_by_svc_are_served_as_routes() {
    // Published by `svc publish`, followed live from the firehose, then read by a backfill.
    let Some(peers) = peers() else { return };
    let p = Published::new(peers, "publish-lens");
    let server_dir = tempfile::tempdir().expect("temp dir");
    let server = Server::launch(
        server_dir.path().join("catalog.db"),
        &["--firehose", peers.pds_ws.as_str(), "--ready-lag", "5s"],
    );
    let did = &p.account.did;
    let at = |collection: &str, rkey: &str| format!("at://{did}/{collection}/{rkey}");
    let publish = |kind: &str, rkey: &str, record: &Value| {
        let args = ["publish", kind, "--rkey", rkey, "--record", "-"];
        p.cli().run_with(&args, Some(&record.to_string()), &[])
    };
    for (rkey, file) in [
        ("pub-src", "source-schema-record.json"),
        ("pub-tgt", "target-schema-record.json"),
    ] {
        let output = publish("schema", rkey, &fixture(file));
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let mut lens = fixture("lens-record.json");
    lens["sourceSchema"] = json!(at(SCHEMA, "pub-src"));
    lens["targetSchema"] = json!(at(SCHEMA, "pub-tgt"));
    let mut no_target = lens.clone();
    no_target
        .as_object_mut()
        .expect("object")
        .remove("targetSchema");
    let refused = publish("lens", "pub-bad", &no_target);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("targetSchema"),
        "{}",
        stderr(&refused)
    );
    let output = publish("lens", "pub-lens", &lens);
    assert!(output.status.success(), "{}", stderr(&output));

    // Through the firehose into the catalog, then out by every path.
    let (src, tgt) = (
        encode(&at(SCHEMA, "pub-src")),
        encode(&at(SCHEMA, "pub-tgt")),
    );
    let routes = format!("/v1/routes?from={src}&to={tgt}");
    server.wait_for(&routes, std::time::Duration::from_secs(15), |b| {
        b["routes"].as_array().is_some_and(|r| !r.is_empty())
    });
    let (_, answer) = server.get(&routes);
    assert_eq!(answer["routes"][0]["hops"][0]["lens"], at(LENS, "pub-lens"));
    assert_eq!(answer["routes"][0]["hops"][0]["class"], "iso");
    assert_eq!(answer["names"][at(SCHEMA, "pub-src")], "post:body");
    let (_, xrpc) = server.get(&format!("/xrpc/dev.svc.query.routes?from={src}&to={tgt}"));
    assert_eq!(xrpc, answer);
    let cli = json_out(&p.cli().run(&[
        "--url",
        &server.url,
        "orchestrator",
        "route",
        "--from",
        &at(SCHEMA, "pub-src"),
        "--to",
        &at(SCHEMA, "pub-tgt"),
    ]));
    assert_eq!(cli, answer);
    let between = json_out(&p.cli().run(&[
        "--url",
        &server.url,
        "orchestrator",
        "lenses",
        "--source-uri",
        &at(SCHEMA, "pub-src"),
        "--target-uri",
        &at(SCHEMA, "pub-tgt"),
    ]));
    assert_eq!(between["items"][0]["uri"], at(LENS, "pub-lens"));
    assert_eq!(
        between["items"][0]["record"]["blob"], lens["blob"],
        "the blob kept whole"
    );
    let (_, found) = server.get("/v1/search?q=body&kind=schema");
    assert!(found["total"].as_u64().unwrap_or_default() >= 2, "{found}");
    let (status, _, page) = server.get_raw(&format!("/at/{did}/{LENS}/pub-lens"));
    assert_eq!(status, 200);
    assert!(
        page.contains("post:body") && page.contains(">iso<"),
        "{page}"
    );

    // A backfill reads the same records from the repositories whole, verified.
    let backfill_dir = tempfile::tempdir().expect("temp dir");
    let backfilled = Server::launch(
        backfill_dir.path().join("catalog.db"),
        &[
            "--firehose",
            "none",
            "--backfill",
            peers.pds.as_str(),
            "--plc-url",
            peers.plc.as_str(),
        ],
    );
    backfilled.wait_for(&routes, std::time::Duration::from_secs(30), |b| {
        b["routes"][0]["hops"][0] == answer["routes"][0]["hops"][0] && b["names"] == answer["names"]
    });
}
