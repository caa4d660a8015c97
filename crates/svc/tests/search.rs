//! Search through the API, against a running server on each engine: `/v1/search` and
//! `/xrpc/dev.svc.query.search` answer the list envelope, best match first, paged by cursor,
//! one kind when asked; a bad parameter is a JSON 400 naming it; hostile queries (either
//! engine's search syntax, NUL, right-to-left marks, hundreds of letters or words) are a 200
//! or a 400, never a 500; a record the live source changes is found by its new words at once.

use svc_testkit as common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;

fn vocab(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "world": "open", "occurredAt": NOW})
}

fn community(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "createdAt": NOW})
}

/// The catalog searched: a few named records and 30 that share a word.
fn catalog(dir: &std::path::Path) -> std::path::PathBuf {
    let mut events = Events::new();
    let mut put = |did: &str, collection: &str, rkey: &str, record: Value| {
        events.put(did, collection, rkey, &tid(1_700_000_000_000_000), record);
    };
    put(
        "did:plc:a",
        "dev.svc.vocab",
        "3kaaaaaaaaa22",
        vocab("GeoJSON to KML", "Maps."),
    );
    put(
        "did:plc:a",
        "dev.svc.vocab",
        "3kaaaaaaaaa23",
        vocab("Dublin Core", "Métadonnées, café"),
    );
    put(
        "did:plc:b",
        "dev.svc.vocab",
        "3kaaaaaaaaa24",
        vocab("東京都の地図", "Tokyo"),
    );
    put(
        "did:plc:b",
        "dev.svc.community",
        "3kaaaaaaaaa25",
        community("Bibliographic records", "Talk of catalogues"),
    );
    for n in 0..30 {
        let rkey = format!("3kaaaaaaab{n:03}");
        put(
            "did:plc:c",
            "dev.svc.vocab",
            &rkey,
            vocab(&format!("Shared {n}"), "plenty"),
        );
    }
    events.write(&dir.join("events.jsonl"))
}

fn search(server: &Server, query: &str) -> (u16, Value) {
    server.get(&format!("/v1/search?{query}"))
}

fn uris(body: &Value) -> Vec<String> {
    body["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|item| item["uri"].as_str().map(str::to_string))
        .collect()
}

each_backend!(search_answers_as_people_type_and_refuses_plainly);

fn search_answers_as_people_type_and_refuses_plainly(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let file = catalog(dir.path());
    let server = Server::start(&db, &["--import", file.to_str().unwrap()]);
    let geo = "at://did:plc:a/dev.svc.vocab/3kaaaaaaaaa22";
    let dublin = "at://did:plc:a/dev.svc.vocab/3kaaaaaaaaa23";
    let (status, body) = search(&server, "q=geoj");
    assert_eq!(status, 200, "{body}");
    assert_eq!(uris(&body), [geo]);
    assert_eq!(
        (body["total"].clone(), body["limit"].clone()),
        (json!(1), json!(100))
    );
    assert_eq!(body["items"][0]["author"], "did:plc:a");
    assert_eq!(body["items"][0]["record"]["name"], "GeoJSON to KML");
    let (_, xrpc) = server.get("/xrpc/dev.svc.query.search?q=geoj");
    assert_eq!(xrpc, body, "the XRPC method answers the same");
    assert_eq!(uris(&search(&server, "q=CAFE").1), [dublin]);
    assert_eq!(uris(&search(&server, "q=%22dublin%20core%22").1), [dublin]);
    assert_eq!(
        uris(&search(&server, "q=%E4%BA%AC%E9%83%BD").1).len(),
        1,
        "京都"
    );
    let (_, biblio) = search(&server, "q=bibliographic&kind=community");
    assert_eq!(biblio["total"], 1, "{biblio}");
    assert_eq!(search(&server, "q=bibliographic&kind=vocab").1["total"], 0);

    // The command line asks the same.
    let output = svc()
        .args(["orchestrator", "search", "core dublin", "--kind", "vocab"])
        .args(["--url", &server.url])
        .output()
        .expect("svc runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(uris(&printed), [dublin]);

    // Paged by cursor: every match once, in one order.
    let (_, first) = search(&server, "q=shared&limit=20");
    assert_eq!(
        (first["total"].clone(), uris(&first).len()),
        (json!(30), 20)
    );
    let cursor = first["cursor"].as_str().expect("a cursor").to_string();
    let (_, second) = search(&server, &format!("q=shared&limit=20&cursor={cursor}"));
    assert_eq!(uris(&second).len(), 10);
    assert!(second.get("cursor").is_none(), "{second}");
    let mut all = uris(&first);
    all.extend(uris(&second));
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 30);

    // Bad parameters: a JSON 400 naming what is wrong.
    for (query, names) in [
        ("", "q"),
        ("q=", "q"),
        (&format!("q={}", "x".repeat(257)), "q"),
        ("q=geo&kind=dev.svc.nothing", "kind"),
        ("q=geo&kind=", "kind"),
        ("q=geo&cursor=", "cursor"),
        ("q=geo&cursor=10001", "cursor"),
        ("q=geo&limit=0", "limit"),
        ("q=geo&limit=+5", "limit"),
        ("q=geo&cursor=bm90IGEgY3Vyc29y", "cursor"),
        ("q=geo&offset=3", "offset"),
    ] {
        let (status, body) = search(&server, query);
        assert_eq!(status, 400, "{query}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(names), "{query}: {body}");
    }

    // Hostile queries: a 200 or a 400, never a 500, each in good time.
    let many_words = vec!["a"; 1000].join("%20");
    let rtl = "%E2%80%AEgeojson%E2%80%AC";
    for query in [
        "q=geo%20OR%20dublin",
        "q=NEAR(geo%20dublin)",
        "q=-geo",
        "q=name:geo",
        "q=(geo)",
        "q=%5Egeo",
        "q=geo*",
        "q=%22unclosed%20phrase",
        "q=***",
        "q=a%00b",
        "q=%27%3B%20DROP%20TABLE%20records%3B%20--",
        "q=a%20b%20c%20d%20e%20f%20g%20h%20i%20j%20k%20l%20m%20n%20o%20p%20q",
        &format!("q={}", "a".repeat(256)),
        &format!("q={many_words}"),
        &format!("q={rtl}"),
    ] {
        let started = std::time::Instant::now();
        let (status, body) = search(&server, query);
        assert!(status == 200 || status == 400, "{query}: {status} {body}");
        assert!(body.is_object(), "{query}: {body}");
        assert!(started.elapsed() < Duration::from_secs(5), "{query}");
    }
    assert_eq!(
        uris(&search(&server, &format!("q={rtl}")).1),
        [geo],
        "marks are no letters"
    );
}

#[test]
fn a_record_the_live_source_changes_is_found_by_its_new_words() {
    let base = now_us() - 1_000_000;
    let line = |time: i64, name: &str, operation: &str| {
        let mut record = vocab(name, "live");
        record["$type"] = json!("dev.svc.vocab");
        let event = json!({"did": "did:plc:live", "time_us": time, "kind": "commit", "commit": {
            "rev": tid(time), "operation": operation, "collection": "dev.svc.vocab",
            "rkey": "3kaaaaaaaaa22", "record": record, "cid": CID}});
        (time, event.to_string())
    };
    let replay = common::replay::Replay::start(vec![line(base, "Firstname", "create")]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::following(dir.path().join("catalog.db"), &replay.url);
    let within = Duration::from_secs(10);
    server.wait_for("/v1/search?q=firstname", within, |body| body["total"] == 1);
    replay.publish([line(base + 1, "Secondname", "update")]);
    server.wait_for("/v1/search?q=secondname", within, |body| body["total"] == 1);
    assert_eq!(
        search(&server, "q=firstname").1["total"],
        0,
        "the cached answer is gone"
    );
}
