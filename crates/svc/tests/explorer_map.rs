//! The map and the charts, in Chromium: the map draws the catalog's schemas and the roads
//! between them in the colour their verifications give, each a link; a neighbourhood is
//! chosen by a form whose values stay in the address, and a bound out of range is a 400 page
//! naming it; the keyboard goes through the form, the schemas and then the list of roads; a
//! stranger's long uri is cut. The front page charts its activity, and a change arriving live
//! grows the current minute's bar; a lens's page charts its verifications by week. No
//! console error, no policy violation, light and dark.

use svc_testkit as common;

use common::browser::Browser;
use common::replay::Replay;
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

const AUTHOR: &str = "did:plc:mapper";
/// A schema whose author's DID spells markup, percent-encoded as a DID may be.
const HOSTILE: &str = "at://did:web:evil%22%3E%3Cimg%20src%3Dx%20onerror%3Dwindow.pwned%3D1%3E/dev.panproto.schema.schema/h";

fn schema(name: &str) -> String {
    format!("at://did:plc:schemas/dev.panproto.schema.schema/{name}")
}

fn lens(name: &str) -> String {
    format!("at://did:plc:lenses/dev.panproto.schema.lens/{name}")
}

fn line(time_us: i64, collection: &str, rkey: &str, mut record: Value) -> (i64, String) {
    record["$type"] = json!(collection);
    let line = json!({"did": AUTHOR, "time_us": time_us, "kind": "commit", "commit": {
        "rev": tid(time_us), "operation": "create", "collection": collection, "rkey": rkey,
        "record": record, "cid": CID}});
    (time_us, line.to_string())
}

fn encounter(lens_name: &str, source: &str, target: &str) -> Value {
    json!({"lens": {"uri": lens(lens_name)}, "sourceSchema": {"uri": source},
        "targetSchema": {"uri": target}, "use": {"action": "read"}, "kind": "curated",
        "visibility": "public-detailed", "occurredAt": NOW})
}

fn verification(lens_name: &str, result: &str, at: &str) -> Value {
    json!({"lens": {"uri": lens(lens_name)}, "kind": "roundtrip-test", "verifier": AUTHOR,
        "tool": {"name": "svc", "version": "1"},
        "property": {"$type": "dev.svc.defs#lpRoundtrip", "domain": "all"},
        "result": result, "occurredAt": at})
}

fn events(base: i64, long: &str, too_long: &str) -> Vec<(i64, String)> {
    let (a, b, c, d) = (schema("a"), schema("b"), schema("c"), schema("d"));
    let week_ago = svc_syntax::format_unix_micros(base - 7 * 24 * 3_600_000_000);
    let today = svc_syntax::format_unix_micros(base);
    let wanted = json!({"requester": AUTHOR, "status": "open", "occurredAt": NOW,
        "wants": {"$type": "dev.svc.bounty#wantLens", "source": {"uri": a}, "target": {"uri": d}}});
    vec![
        line(
            base,
            "dev.svc.encounter",
            "3kaaaaaaaaa21",
            encounter("one", &a, &b),
        ),
        line(
            base + 1,
            "dev.svc.encounter",
            "3kaaaaaaaaa22",
            encounter("one", &a, &b),
        ),
        line(
            base + 2,
            "dev.svc.encounter",
            "3kaaaaaaaaa23",
            encounter("two", &b, &c),
        ),
        line(
            base + 3,
            "dev.svc.encounter",
            "3kaaaaaaaaa24",
            encounter("three", &c, &a),
        ),
        line(
            base + 4,
            "dev.svc.encounter",
            "3kaaaaaaaaa25",
            encounter("four", &c, long),
        ),
        line(base + 5, "dev.svc.bounty", "3kaaaaaaaaa26", wanted),
        line(
            base + 6,
            "dev.svc.verification",
            "3kaaaaaaaaa27",
            verification("one", "holds", &today),
        ),
        line(
            base + 7,
            "dev.svc.verification",
            "3kaaaaaaaaa28",
            verification("one", "holds", &week_ago),
        ),
        line(
            base + 8,
            "dev.svc.verification",
            "3kaaaaaaaaa29",
            verification("two", "falsified", &today),
        ),
        line(
            base + 9,
            "dev.svc.encounter",
            "3kaaaaaaaaa2a",
            encounter("six", &c, too_long),
        ),
        line(
            base + 10,
            "dev.svc.encounter",
            "3kaaaaaaaaa2b",
            encounter("three", HOSTILE, &a),
        ),
    ]
}

/// Waits for the page a click leads to.
fn follow(browser: &Browser, selector: &str, arrived: &str) {
    browser.eval("window.leaving = true");
    browser.click(selector);
    browser.wait_until(
        &format!(
            "window.leaving === undefined && document.readyState === 'complete' && ({arrived})"
        ),
        Duration::from_secs(10),
    );
}

fn count(browser: &Browser, selector: &str) -> u64 {
    let js = format!("document.querySelectorAll({selector:?}).length");
    browser.eval(&js).as_u64().unwrap_or_default()
}

#[test]
fn the_map_and_the_charts_draw_the_catalog_for_eyes_keyboards_and_screen_readers() {
    let Some(browser) = Browser::launch_or_skip("explorer map") else {
        return;
    };
    let base = now_us() - 2_000_000;
    // A uri whose label is cut, and one too long for its road to be kept whole.
    let long = schema(&"k".repeat(150));
    let too_long = schema(&"k".repeat(450));
    let replay = Replay::start(events(base, &long, &too_long));
    let dir = tempfile::tempdir().unwrap();
    let server = Server::following(dir.path().join("catalog.db"), &replay.url);
    server.wait_for(
        &format!(
            "/v1/verifications?lens_uri={}",
            lens("two").replace(':', "%3A")
        ),
        Duration::from_secs(10),
        |b| b["total"] == 1,
    );

    // The whole catalog fits: six schemas, six roads, each in its colour.
    browser.navigate(&format!("{}/map", server.url));
    assert_eq!(count(&browser, "#map .schemas a"), 6);
    assert_eq!(count(&browser, "#map .roads path"), 6);
    for (class, n) in [
        ("verified", 1),
        ("failures", 1),
        ("unverified", 3),
        ("wanted", 1),
    ] {
        assert_eq!(
            count(&browser, &format!("#map path.road.{class}")),
            n,
            "{class}"
        );
    }
    assert_eq!(
        count(&browser, "#roads tbody tr"),
        6,
        "the same roads as a list"
    );
    assert!(
        browser
            .text(".left-out")
            .contains("1 record states a road whose uris are too long"),
        "{}",
        browser.text(".left-out")
    );
    let labels =
        browser.eval("[...document.querySelectorAll('#map text')].map(t => t.textContent.length)");
    let longest = labels
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .max();
    assert!(longest.is_some_and(|n| n <= 29), "labels are cut: {labels}");
    assert_eq!(
        browser.eval("document.querySelector('#roads a[href*=\"bountiesForWantLens\"]') !== null"),
        true,
        "a wanted road leads to the bounties asking for it"
    );
    // A stranger's DID that spells markup stays text.
    assert_eq!(browser.eval("window.pwned === undefined"), true);
    assert_eq!(
        browser.eval("document.querySelectorAll('main img').length"),
        0
    );
    assert!(
        browser
            .eval("[...document.querySelectorAll('#map title')].some(t => t.textContent.includes('%3Cimg'))")
            == true
    );
    browser.shoot("map-whole");

    // The keyboard: past the header, the form's labelled fields, then the schemas (the roads
    // in the picture are skipped: the list holds them), then the list.
    let mut order = Vec::new();
    for _ in 0..20 {
        browser.press("Tab");
        order.push(
            browser
                .eval("(e => e.id || (e.closest('#map') ? 'map:' + e.getAttribute('class') : e.closest('#roads') ? 'roads' : e.tagName))(document.activeElement)")
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    let at = |name: &str| {
        order
            .iter()
            .position(|stop| stop.starts_with(name))
            .unwrap_or_else(|| panic!("{name} is never reached: {order:?}"))
    };
    let (schema_field, nodes_field, first_node) =
        (at("map-schema"), at("map-nodes"), at("map:schema"));
    assert!(
        schema_field < nodes_field && nodes_field < first_node && first_node + 6 == at("roads"),
        "the form, the six schemas, then the list: {order:?}"
    );
    assert!(
        !order.iter().any(|stop| stop.contains("road ")),
        "{order:?}"
    );
    let labelled = "[...document.querySelectorAll('form.query input')]\
        .every(field => field.labels.length === 1 && field.labels[0].textContent.trim() !== '')";
    assert_eq!(browser.eval(labelled), true);

    // A schema leads to its neighbourhood, which keeps the form's values in its address.
    let neighbourhood =
        browser.eval("document.querySelector('#map .schemas a').getAttribute('href')");
    browser.navigate(&format!(
        "{}{}",
        server.url,
        neighbourhood.as_str().unwrap_or_default()
    ));
    assert_eq!(count(&browser, "#map .schema.centre"), 1);
    browser.fill("#map-hops", "1");
    browser.fill("#map-nodes", "3");
    follow(
        &browser,
        "form.query button",
        "location.search.includes('nodes=3')",
    );
    assert_eq!(count(&browser, "#map .schemas a"), 3);
    assert!(
        browser.text(".left-out").contains("more schemas"),
        "what was left out is said"
    );
    browser.shoot("map-neighbourhood");

    // Bounds out of range are 400 pages naming them.
    for (query, named) in [
        ("hops=9", "hops: must be"),
        ("nodes=1", "nodes: must be"),
        ("schema=nope", "schema:"),
        ("zoom=2", "zoom"),
    ] {
        let (status, _, page) = server.get_raw(&format!("/map?{query}"));
        assert_eq!(status, 400, "{query}: {page}");
        assert!(page.contains(named), "{query}: {page}");
    }

    // A lens's page charts its verifications by week.
    browser.navigate(&format!(
        "{}/at/did:plc:lenses/dev.panproto.schema.lens/one",
        server.url
    ));
    assert_eq!(count(&browser, "#verifications-by-week rect.bar.holds"), 26);
    let holds = browser.eval(
        "[...document.querySelectorAll('#verifications-by-week rect.holds')].filter(r => r.dataset.value !== '0').length",
    );
    assert_eq!(holds, 2, "this week's and last week's");
    assert!(
        browser
            .text("#verifications-by-week figcaption")
            .contains("2 hold, 0 falsified")
    );
    browser.shoot("lens-weeks");

    // The front page charts its activity, and a change arriving grows this minute's bar.
    browser.navigate(&format!("{}/", server.url));
    assert_eq!(count(&browser, "#changes-per-minute rect.bar"), 60);
    assert_eq!(count(&browser, "#changes-per-hour rect.bar"), 24);
    assert_eq!(count(&browser, "#live-lag path.line"), 1);
    browser.wait_until(
        "document.querySelector('.live-state').textContent.startsWith('Live')",
        Duration::from_secs(10),
    );
    let this_minute =
        "Number(document.querySelector('#changes-per-minute rect.bar:last-of-type').dataset.value)";
    let before = browser.eval(this_minute).as_u64().unwrap_or_default();
    browser.eval("window.stayed = true");
    replay.publish([line(
        now_us(),
        "dev.svc.encounter",
        "3kaaaaaaaab21",
        encounter("five", &schema("d"), &schema("a")),
    )]);
    browser.wait_until(
        &format!("window.stayed === true && {this_minute} > {before}"),
        Duration::from_secs(10),
    );
    browser.shoot("front-charts");
    let errors = browser.console_errors();
    assert!(
        errors.is_empty(),
        "no error and no policy violation: {errors:?}"
    );
}
