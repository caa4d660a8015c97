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

/// A property test's verification: a kind of its own, beside the round trip's.
fn property_test(lens_name: &str, result: &str, at: &str) -> Value {
    json!({"lens": {"uri": lens(lens_name)}, "kind": "property-test", "verifier": AUTHOR,
        "tool": {"name": "svc", "version": "1"},
        "property": {"$type": "dev.svc.defs#lpGenerator", "spec": "all"},
        "result": result, "occurredAt": at})
}

fn events(base: i64, long: &str, too_long: &str) -> Vec<(i64, String)> {
    let (a, b, c, d) = (schema("a"), schema("b"), schema("c"), schema("d"));
    let wanted = json!({"requester": AUTHOR, "status": "open", "occurredAt": NOW,
        "wants": {"$type": "dev.svc.bounty#wantLens", "source": {"uri": a}, "target": {"uri": d}}});
    let roads = [
        ("3kaaaaaaaaa21", encounter("one", &a, &b)),
        ("3kaaaaaaaaa22", encounter("one", &a, &b)),
        ("3kaaaaaaaaa23", encounter("two", &b, &c)),
        ("3kaaaaaaaaa24", encounter("three", &c, &a)),
        ("3kaaaaaaaaa25", encounter("four", &c, long)),
        ("3kaaaaaaaaa26", wanted),
        ("3kaaaaaaaaa2a", encounter("six", &c, too_long)),
        ("3kaaaaaaaaa2b", encounter("three", HOSTILE, &a)),
    ];
    let mut lines: Vec<(i64, String)> = roads
        .into_iter()
        .enumerate()
        .map(|(i, (rkey, record))| {
            let collection = match record.get("wants") {
                Some(_) => "dev.svc.bounty",
                None => "dev.svc.encounter",
            };
            line(base + i as i64, collection, rkey, record)
        })
        .collect();
    let at = base + lines.len() as i64;
    lines.extend(
        verifications(base)
            .into_iter()
            .enumerate()
            .map(|(i, (rkey, record))| line(at + i as i64, "dev.svc.verification", rkey, record)),
    );
    lines
}

/// Lens one holds (this week and last), two is falsified, three holds as a round trip and
/// is falsified by a property test (mixed), and `old` was verified long ago and never since.
fn verifications(base: i64) -> Vec<(&'static str, Value)> {
    let week_ago = svc_syntax::format_unix_micros(base - 7 * 24 * 3_600_000_000);
    let today = svc_syntax::format_unix_micros(base);
    vec![
        ("3kaaaaaaaaa27", verification("one", "holds", &today)),
        ("3kaaaaaaaaa28", verification("one", "holds", &week_ago)),
        ("3kaaaaaaaaa29", verification("two", "falsified", &today)),
        ("3kaaaaaaaaa2c", verification("three", "holds", &today)),
        ("3kaaaaaaaaa2d", property_test("three", "falsified", &today)),
        (
            "3kaaaaaaaaa2e",
            verification("old", "holds", "2025-06-10T12:00:00Z"),
        ),
        (
            "3kaaaaaaaaa2f",
            property_test("old", "falsified", "2025-03-03T08:00:00Z"),
        ),
    ]
}

/// A server following the replay of [`events`], once it has read them all.
fn serve_events() -> (Replay, tempfile::TempDir, Server) {
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
            lens("old").replace(':', "%3A")
        ),
        Duration::from_secs(10),
        |b| b["total"] == 2,
    );
    (replay, dir, server)
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
    let (replay, _dir, server) = serve_events();

    // The whole catalog fits: six schemas, six roads, each in its colour.
    browser.navigate(&format!("{}/map", server.url));
    assert_eq!(count(&browser, "#map .schemas a"), 6);
    assert_eq!(count(&browser, "#map .roads path.road"), 6);
    for (class, n) in [
        ("verified", 1),
        ("mixed", 2),
        ("falsified", 1),
        ("unverified", 1),
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
        ("hops=+2", "hops: must be"),
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

/// Boxes that share more than half a pixel each way (a label's halo may touch).
const OVERLAPS: &str = "const overlaps = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 \
    && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;";

/// Whether the placeholder of the field `id` fits inside it, measured in its own font.
fn placeholder_fits(browser: &Browser, id: &str) -> Value {
    browser.eval(&format!(
        "(field => {{ const style = getComputedStyle(field);
            const pen = document.createElement('canvas').getContext('2d');
            pen.font = style.font;
            const room = field.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
            return {{fits: pen.measureText(field.placeholder).width <= room,
                needs: pen.measureText(field.placeholder).width, room}};
        }})(document.getElementById({id:?}))"
    ))
}

/// The map and the tables for a newcomer: the colours say what they mean, in the legend, in
/// each road's title and in the list (a lens that holds for one kind and is falsified for
/// another is mixed, not falsified); no label covers an arrowhead; the schema field shows its
/// whole placeholder, on a phone too; a schema the catalog does not know is a 404 saying so.
/// A table's columns are headed by words, a short word never breaks and a long uri is cut
/// with an ellipsis. A lens verified long ago charts the weeks up to its newest. A mistyped
/// address is a page with the ways on, and `/explore` leads to the queries.
#[test]
fn the_map_and_tables_read_at_a_glance() {
    let Some(browser) = Browser::launch_or_skip("explorer map at a glance") else {
        return;
    };
    let (_replay, _dir, server) = serve_events();
    colours_say_what_they_mean(&browser, &server);
    fields_and_tables_fit(&browser, &server);
    an_old_lens_charts_its_newest_weeks(&browser, &server);
    lost_addresses_lead_on(&browser, &server);
}

/// The legend, the list and each road's title say what a colour means; no label covers an
/// arrowhead.
fn colours_say_what_they_mean(browser: &Browser, server: &Server) {
    browser.navigate(&format!("{}/map", server.url));
    let legend = browser
        .eval("[...document.querySelectorAll('#legend li')].map(li => li.textContent.trim())");
    assert_eq!(
        legend,
        json!([
            "verified: holds for every kind verified; none falsified",
            "mixed: holds for some kinds, falsified for others",
            "falsified: falsified, and holds for no kind",
            "unverified: no verification holds or fails (none, or only inconclusive)",
            "wanted: dashed: no lens yet; open bounties ask for one"
        ])
    );
    let said = |lens_name: &str| {
        browser.eval(&format!(
            "[...document.querySelectorAll('#roads tbody tr')].filter(tr => tr.cells[1].querySelector('a').title.endsWith('/{lens_name}'))\
                .map(tr => [tr.cells[3].className, tr.cells[3].textContent])"
        ))
    };
    let mixed = "mixed: holds for 1 kind, falsified for 1";
    assert_eq!(said("three"), json!([["mixed", mixed], ["mixed", mixed]]));
    assert_eq!(
        said("two"),
        json!([[
            "falsified",
            "falsified: falsified for 1 kind, holds for none"
        ]])
    );
    assert_eq!(
        said("one"),
        json!([["verified", "verified: holds for 1 kind, none falsified"]])
    );
    let titles = browser.eval(&format!(
        "[...document.querySelectorAll('#map .roads a')].filter(a => a.getAttribute('href').endsWith('/three'))\
            .map(a => a.querySelector('title').textContent.includes({mixed:?}))"
    ));
    assert_eq!(titles, json!([true, true]), "each road's title says it");

    // No label covers an arrowhead: each road has one, and every schema its label.
    let covered = browser.eval(&format!(
        "(() => {{ {OVERLAPS}
            const heads = [...document.querySelectorAll('#map path.arrowhead')].map(p => p.getBoundingClientRect());
            const labels = [...document.querySelectorAll('#map text')];
            const covering = labels.filter(t => heads.some(h => overlaps(t.getBoundingClientRect(), h)));
            return {{heads: heads.length, labels: labels.length, covering: covering.map(t => t.textContent)}};
        }})()"
    ));
    assert_eq!(
        covered,
        json!({"heads": 6, "labels": 6, "covering": []}),
        "no label over an arrowhead"
    );
    browser.shoot("map-legend");
}

/// The schema field shows its placeholder; a squeezed table keeps its words whole.
fn fields_and_tables_fit(browser: &Browser, server: &Server) {
    // The schema field shows its whole placeholder, wide or on a phone.
    let fits = placeholder_fits(browser, "map-schema");
    assert_eq!(fits["fits"], true, "{fits}");
    browser.viewport(390, 844, true);
    browser.navigate(&format!("{}/map", server.url));
    let fits = placeholder_fits(browser, "map-schema");
    assert_eq!(fits["fits"], true, "on a phone: {fits}");
    browser.shoot("map-phone");

    // A table at a width that makes it squeeze: its headings are words, no short word
    // breaks, and a long uri is cut with an ellipsis.
    browser.viewport(700, 900, false);
    browser.navigate(&format!(
        "{}/explore/verificationsForLens?lens_uri={}",
        server.url,
        lens("three").replace(':', "%3A")
    ));
    let headings =
        browser.eval("[...document.querySelectorAll('#answer th')].map(th => th.textContent)");
    assert_eq!(
        headings,
        json!(["Record", "Author", "Lens", "Kind", "Result", "Tool", "Time"])
    );
    let broken = browser.eval(
        "[...document.querySelectorAll('#answer td')].filter(td => /^[a-z-]{1,16}$/.test(td.textContent))\
            .filter(td => { const r = document.createRange(); \
                r.selectNodeContents(document.createTreeWalker(td, NodeFilter.SHOW_TEXT).nextNode()); \
                return r.getClientRects().length !== 1; }).map(td => td.textContent)",
    );
    assert_eq!(broken, json!([]), "short words stay whole");
    let results = browser.eval("[...document.querySelectorAll('#answer td[data-label=Result]')].map(td => td.textContent).sort()");
    assert_eq!(results, json!(["falsified", "holds"]));
    let cut = browser.eval(
        "[...document.querySelectorAll('#answer td[data-label=Lens] .text')]\
            .map(text => [getComputedStyle(text).textOverflow, text.scrollWidth > text.clientWidth, \
                text.getClientRects().length, text.title.endsWith('/three')])",
    );
    assert_eq!(
        cut,
        json!([["ellipsis", true, 1, true], ["ellipsis", true, 1, true]]),
        "a long uri is cut on one line, whole in its title"
    );
    browser.shoot("table-narrow");
}

/// A lens verified long ago charts the weeks up to its newest.
fn an_old_lens_charts_its_newest_weeks(browser: &Browser, server: &Server) {
    // A lens verified long ago charts the 26 weeks up to its newest, and says so.
    browser.navigate(&format!(
        "{}/at/did:plc:lenses/dev.panproto.schema.lens/old",
        server.url
    ));
    let caption = browser.text("#verifications-by-week figcaption");
    assert!(
        caption.contains(
            "None in the last 26 weeks; the 26 weeks up to its newest, week of 2025-06-09: \
             1 hold, 1 falsified, 0 inconclusive."
        ),
        "{caption}"
    );
    let drawn = browser.eval(
        "[...document.querySelectorAll('#verifications-by-week rect.bar')].filter(r => r.dataset.value !== '0').map(r => r.getAttribute('class'))",
    );
    assert_eq!(drawn, json!(["bar falsified", "bar holds"]));
    browser.shoot("lens-weeks-old");
}

/// An unknown schema, `/explore` and a mistyped address each lead somewhere.
fn lost_addresses_lead_on(browser: &Browser, server: &Server) {
    // A schema the catalog does not know is a 404 page that says so, with the form to fix it.
    let typo = "at://did:plc:schemas/dev.panproto.schema.schema/aa";
    let (status, content_type, page) =
        server.get_raw(&format!("/map?schema={}", typo.replace(':', "%3A")));
    assert_eq!(
        (status, content_type.as_str()),
        (404, "text/html; charset=utf-8")
    );
    assert!(page.contains("This catalog knows no such schema"), "{page}");
    assert!(page.contains("id=\"map-schema\""), "{page}");
    assert!(
        !page.contains("<svg id=\"map\""),
        "no picture of a typo: {page}"
    );
    assert_eq!(
        server
            .get_raw(&format!("/map?schema={}", schema("a").replace(':', "%3A")))
            .0,
        200
    );

    // A browser lost on a mistyped address gets a page with the ways on; `/explore` leads
    // to the list of queries.
    browser.navigate(&format!("{}/explore/", server.url));
    assert_eq!(
        browser.eval("location.pathname + location.hash"),
        "/#queries"
    );
    assert!(count(browser, "#queries li a[href^='/explore/']") > 10);
    browser.navigate(&format!("{}/no/such/page", server.url));
    assert_eq!(browser.text("h1"), "No page here");
    let ways = browser.eval("[...document.querySelectorAll('main a, main form')].map(e => e.getAttribute('href') || e.getAttribute('action'))");
    assert_eq!(
        ways,
        json!(["/", "/#queries", "/map", "/routes", "/search"])
    );
    browser.shoot("lost");
    let errors = browser.console_errors();
    let errors: Vec<&String> = errors.iter().filter(|e| !e.contains("404")).collect();
    assert!(
        errors.is_empty(),
        "no error and no policy violation: {errors:?}"
    );
}
