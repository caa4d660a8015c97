//! Lens and schema records, followed live: schemas are named as their blobs name them (a
//! hostile name stays inert text), lens queries list what connects where, `/v1/routes` ranks
//! the chains between two schemas (sufficient first, then fewer hops, then the weakest class)
//! and a lens deleted, published, taken down or restored changes the routes at once. In Chromium: the map names
//! schemas, a schema's page lists its lenses and asks for a route, the route page links and
//! colours each hop, a lens's page shows its class, schemas by name and steps.

use svc_testkit as common;

use common::browser::Browser;
use common::replay::Replay;
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

const AUTHOR: &str = "did:plc:routes";
const PASSWORD: &str = "correct horse battery staple";
/// A schema's entry vertex that spells markup: its name must stay text.
const HOSTILE: &str = "<img src=x onerror=window.pwned=1>";

fn schema(key: &str) -> String {
    format!("at://{AUTHOR}/dev.panproto.schema.schema/{key}")
}

fn lens(key: &str) -> String {
    format!("at://{AUTHOR}/dev.panproto.schema.lens/{key}")
}

fn line(time_us: i64, collection: &str, rkey: &str, record: Option<Value>) -> (i64, String) {
    let mut commit = json!({"rev": tid(time_us), "operation": "create",
        "collection": collection, "rkey": rkey});
    match record {
        Some(mut record) => {
            record["$type"] = json!(collection);
            commit["record"] = record;
            commit["cid"] = json!(CID);
        }
        None => commit["operation"] = json!("delete"),
    }
    let line = json!({"did": AUTHOR, "time_us": time_us, "kind": "commit", "commit": commit});
    (time_us, line.to_string())
}

fn schema_record(blob: Value) -> Value {
    json!({"protocol": "atproto", "objectHash": "00", "createdAt": NOW, "blob": blob})
}

fn lens_record(source: &str, target: &str, class: &str, steps: &[&str]) -> Value {
    let steps: Vec<Value> = steps.iter().map(|s| json!({"name": s})).collect();
    json!({"sourceSchema": schema(source), "targetSchema": schema(target),
        "roundTripClass": class, "objectHash": "00", "createdAt": NOW,
        "blob": {"steps": steps}})
}

fn holds(lens_key: &str) -> Value {
    json!({"lens": {"uri": lens(lens_key)}, "kind": "roundtrip-test", "verifier": AUTHOR,
        "tool": {"name": "svc", "version": "1"},
        "property": {"$type": "dev.svc.defs#lpRoundtrip", "domain": "all"},
        "result": "holds", "occurredAt": NOW})
}

/// Schemas a, b (hostile name), c and d; lenses a→b (iso) and b→d (projection), both
/// verified; a→c (lossy) and c→d (iso), unverified; and d→b, known only from an encounter.
fn events(base: i64) -> Vec<(i64, String)> {
    let records = [
        (
            "dev.panproto.schema.schema",
            "a",
            schema_record(json!({"entries": ["post"], "nsids": {"post": "app.example.a"}})),
        ),
        (
            "dev.panproto.schema.schema",
            "b",
            schema_record(json!({"entries": [HOSTILE]})),
        ),
        (
            "dev.panproto.schema.schema",
            "c",
            schema_record(json!({"entries": ["post:body"]})),
        ),
        ("dev.panproto.schema.schema", "d", schema_record(json!({}))),
        (
            "dev.panproto.schema.lens",
            "ab",
            lens_record("a", "b", "iso", &["rename_text", "drop_tags"]),
        ),
        (
            "dev.panproto.schema.lens",
            "bd",
            lens_record("b", "d", "projection", &["project"]),
        ),
        (
            "dev.panproto.schema.lens",
            "ac",
            lens_record("a", "c", "lossy", &["squash"]),
        ),
        (
            "dev.panproto.schema.lens",
            "cd",
            lens_record("c", "d", "iso", &["rename"]),
        ),
        ("dev.svc.verification", "3kaaaaaaaaa21", holds("ab")),
        ("dev.svc.verification", "3kaaaaaaaaa22", holds("bd")),
        (
            "dev.svc.encounter",
            "3kaaaaaaaaa23",
            json!({"lens": {"uri": lens("seen")},
            "sourceSchema": {"uri": schema("d")}, "targetSchema": {"uri": schema("b")},
            "use": {"action": "read"}, "kind": "curated", "visibility": "public-detailed",
            "occurredAt": NOW}),
        ),
    ];
    records
        .into_iter()
        .enumerate()
        .map(|(i, (collection, rkey, record))| {
            line(base + i as i64, collection, rkey, Some(record))
        })
        .collect()
}

fn routes(server: &Server, from: &str, to: &str, more: &str) -> Value {
    let (status, body) = server.get(&format!(
        "/v1/routes?from={}&to={}{more}",
        encode(&schema(from)),
        encode(&schema(to))
    ));
    assert_eq!(status, 200, "{body}");
    body
}

fn take_down(server: &Server, uri: &str, applied: bool) {
    let subject = json!({"$type": "com.atproto.repo.strongRef", "uri": uri, "cid": CID});
    assert_eq!(server.set_takedown(PASSWORD, subject, applied), 200);
}

fn lenses_of(route: &Value) -> Vec<String> {
    route["hops"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|hop| {
            hop["lens"]
                .as_str()
                .unwrap_or_default()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn lens_records_make_routes_that_the_api_ranks_and_the_explorer_shows() {
    let base = now_us() - 2_000_000;
    let replay = Replay::start(events(base));
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("admin-password");
    write_private(&password, PASSWORD);
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &[
            "--firehose",
            &replay.url,
            "--ready-lag",
            "5s",
            "--admin-password-file",
            password.to_str().unwrap(),
        ],
    );
    server.wait_for("/v1/stats", Duration::from_secs(10), |b| {
        b["lenses"] == 4 && b["schemas"] == 4
    });

    // Named as their blobs name them, found by name in any case, listed by their ends.
    let (_, found) = server.get("/v1/schemas/by-name?name=APP.EXAMPLE.A");
    assert_eq!(found["items"][0]["uri"], schema("a"));
    let (_, from_a) = server.get(&format!(
        "/v1/lenses/from?source_uri={}",
        encode(&schema("a"))
    ));
    assert_eq!(from_a["total"], 2);
    let (_, between) = server.get(&format!(
        "/v1/lenses/between?source_uri={}&target_uri={}",
        encode(&schema("c")),
        encode(&schema("d"))
    ));
    assert_eq!(between["total"], 1, "the encounter's lens has no record");
    let (_, searched) = server.get("/v1/search?q=body&kind=dev.panproto.schema.schema");
    assert_eq!(searched["items"][0]["uri"], schema("c"), "{searched}");

    // The verified chain first, though longer chains of better classes exist beside it.
    let answer = routes(&server, "a", "d", "");
    let chains: Vec<Vec<String>> = answer["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(lenses_of)
        .collect();
    assert_eq!(chains, [vec!["ab", "bd"], vec!["ac", "cd"]], "{answer}");
    assert_eq!(answer["routes"][0]["sufficient"], true);
    assert_eq!(answer["routes"][0]["hops"][0]["class"], "iso");
    assert_eq!(
        answer["routes"][0]["hops"][0]["verifications"]["roundtrip-test"],
        json!({"held": 1, "failed": 0})
    );
    assert_eq!(answer["names"][schema("a")], "app.example.a");
    assert_eq!(answer["names"][schema("b")], HOSTILE);
    assert_eq!(answer["names"][schema("d")], "d", "no blob: its record key");
    // A kind no lens has: nothing suffices, so fewer hops then the weaker class decide.
    let strict = routes(&server, "a", "d", "&kinds=formal-proof&max_hops=2");
    assert_eq!(strict["routes"][0]["sufficient"], false);
    assert_eq!(
        lenses_of(&strict["routes"][0]),
        ["ab", "bd"],
        "projection beats lossy"
    );
    assert_eq!(
        routes(&server, "a", "d", "&max_hops=1")["routes"],
        json!([])
    );
    assert_eq!(
        routes(&server, "a", "x", "")["routes"],
        json!([]),
        "an unknown schema"
    );
    let there = routes(&server, "a", "a", "");
    assert_eq!(
        there["routes"],
        json!([{"hops": [], "sufficient": true}]),
        "no lens needed"
    );
    assert_eq!(there["names"][schema("a")], "app.example.a");
    let (status, _) = server.get(&format!(
        "/v1/routes?from={}&to={}&max_hops=7",
        encode(&schema("a")),
        encode(&schema("d"))
    ));
    assert_eq!(status, 400);

    // A lens deleted, and another published, change the routes at once.
    let first = |b: &Value| b["routes"][0]["hops"][0]["lens"].clone();
    let a_to_d = format!(
        "/v1/routes?from={}&to={}",
        encode(&schema("a")),
        encode(&schema("d"))
    );
    let within = Duration::from_secs(10);
    replay.publish([line(base + 100, "dev.panproto.schema.lens", "ab", None)]);
    server.wait_for(&a_to_d, within, |b| {
        b["routes"].as_array().is_some_and(|r| r.len() == 1)
    });
    let direct = lens_record("a", "d", "iso", &["direct"]);
    replay.publish([line(
        base + 101,
        "dev.panproto.schema.lens",
        "ad",
        Some(direct),
    )]);
    server.wait_for(&a_to_d, within, |b| first(b) == lens("ad"));
    // Taken down by the operator, the lens leaves every route; restored, it comes back.
    take_down(&server, &lens("ad"), true);
    server.wait_for(&a_to_d, within, |b| first(b) == lens("ac"));
    take_down(&server, &lens("ad"), false);
    server.wait_for(&a_to_d, within, |b| first(b) == lens("ad"));
    let known = routes(&server, "d", "b", "");
    assert_eq!(
        known["routes"][0]["hops"][0]["known_by"], "encounters",
        "{known}"
    );
    assert_eq!(known["routes"][0]["hops"][0]["class"], Value::Null);

    let Some(browser) = Browser::launch_or_skip("explorer routes") else {
        return;
    };
    // The map names schemas; the hostile one is text.
    browser.navigate(&format!("{}/map", server.url));
    let labels =
        browser.eval("[...document.querySelectorAll('#map text')].map(t => t.textContent)");
    assert!(labels.to_string().contains("app.example.a"), "{labels}");
    assert!(labels.to_string().contains("post:body"), "{labels}");
    assert_eq!(
        browser.eval(
            "window.pwned === undefined && document.querySelectorAll('main img').length === 0"
        ),
        true
    );

    // A schema's page: its name, its lenses, and a form asking for a route.
    browser.navigate(&format!(
        "{}/at/{AUTHOR}/dev.panproto.schema.schema/c",
        server.url
    ));
    assert_eq!(browser.text("h1"), "post:body");
    assert!(browser.text("main").contains("Lenses from it"));
    browser.fill("#route-to", "D"); // by its name, in any case
    browser.eval("window.leaving = true");
    browser.click("form.route button");
    browser.wait_until("window.leaving === undefined && document.readyState === 'complete' && document.querySelector('#routes-summary') !== null", Duration::from_secs(10));
    assert_eq!(
        browser.eval("document.querySelectorAll('#routes > li').length"),
        1
    );
    assert_eq!(
        browser.eval("document.querySelector('#routes a.lens').getAttribute('href')"),
        format!("/at/{AUTHOR}/dev.panproto.schema.lens/cd")
    );

    // Through the hostile schema: every hop linked, the name text, the verified lens green.
    browser.navigate(&format!(
        "{}/routes?from={}&to={}&max_hops=3",
        server.url,
        encode(&schema("b")),
        encode(&schema("d"))
    ));
    assert_eq!(
        browser.eval("document.querySelector('#routes a.lens').className"),
        "lens verified"
    );
    assert!(
        browser.text("#routes").contains(HOSTILE),
        "{}",
        browser.text("#routes")
    );
    assert_eq!(
        browser.eval(
            "window.pwned === undefined && document.querySelectorAll('main img').length === 0"
        ),
        true
    );
    let (status, _, page) =
        server.get_raw(&format!("/routes?from={0}&to={0}", encode(&schema("a"))));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("no lens is needed"), "{page}");
    let (status, _, page) = server.get_raw("/routes?from=app.example.a&to=nowhere");
    assert_eq!(status, 400, "{page}");
    assert!(
        page.contains("to: no schema is named &#34;nowhere&#34;"),
        "{page}"
    );

    // A lens's page: its class, its ends by name, its steps, beside its verifications.
    browser.navigate(&format!(
        "{}/at/{AUTHOR}/dev.panproto.schema.lens/bd",
        server.url
    ));
    let facts = browser.text("dl.facts");
    assert!(
        facts.contains("projection") && facts.contains("project"),
        "{facts}"
    );
    assert!(facts.contains(HOSTILE), "{facts}");
    assert!(browser.text("#verifications").contains("roundtrip-test"));
    assert!(
        browser.console_errors().is_empty(),
        "{:?}",
        browser.console_errors()
    );
}

/// A hub with more lenses out than a question may read schemas: four hops would read past the
/// bound, and are refused naming it; two hops read the hub and the target alone, and answer.
#[test]
fn a_route_question_past_its_bounds_is_refused_naming_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut events = Events::new();
    for i in 0..2_100 {
        let record = lens_record("hub", &format!("s{i}"), "iso", &["spread"]);
        events.put(
            AUTHOR,
            "dev.panproto.schema.lens",
            &format!("h{i}"),
            &tid(i + 1),
            record,
        );
    }
    let last = lens_record("s0", "end", "iso", &["arrive"]);
    events.put(
        AUTHOR,
        "dev.panproto.schema.lens",
        "last",
        &tid(3_000),
        last,
    );
    let file = events.write(&dir.path().join("hub.jsonl"));
    let server = Server::start(
        dir.path().join("catalog.db"),
        &["--import", file.to_str().unwrap()],
    );
    let ask = |hops: u32| {
        server.get(&format!(
            "/v1/routes?from={}&to={}&max_hops={hops}",
            encode(&schema("hub")),
            encode(&schema("end"))
        ))
    };
    let (status, refused) = ask(4);
    assert_eq!(status, 400, "{refused}");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("2000 schemas") && message.contains("max_hops"),
        "{message}"
    );
    let (status, answer) = ask(2);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(lenses_of(&answer["routes"][0]), ["h0", "last"]);
}
