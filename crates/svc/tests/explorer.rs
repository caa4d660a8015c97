//! The explorer's front page: counts per kind, readiness, and the newest changes, with every
//! record's text shown as text (a name holding markup is escaped), under a policy that lets
//! the page load nothing but its own stylesheet and run no script.

use svc_testkit as common;

use common::browser::Browser;
use common::peers::peers;
use common::replay::Replay;
use common::*;
use serde_json::json;
use std::time::Duration;

fn vocab_named(time_us: i64, rkey: &str, name: &str) -> (i64, String) {
    let line = json!({"did": "did:plc:jetstream", "time_us": time_us, "kind": "commit", "commit": {
        "rev": tid(time_us), "operation": "create", "collection": "dev.svc.vocab", "rkey": rkey,
        "record": {"$type": "dev.svc.vocab", "name": name, "world": "open", "occurredAt": NOW},
        "cid": CID}});
    (time_us, line.to_string())
}

#[test]
fn the_front_page_shows_the_catalog_and_keeps_strangers_text_inert() {
    let base = now_us() - 1_000_000;
    let hostile = "<script>alert(1)</script>";
    let breakout = "\"><img src=x onerror=alert(2)>";
    let replay = Replay::start(vec![
        vocab_named(base, "3kaaaaaaaaa22", hostile),
        vocab_named(base + 1, "3kaaaaaaaaa23", breakout),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::following(dir.path().join("catalog.db"), &replay.url);
    server.wait_for(
        "/v1/vocabularies/by-world?world=open",
        Duration::from_secs(10),
        |b| b["total"] == 2,
    );
    let response = reqwest::blocking::get(format!("{}/", server.url)).expect("the front page");
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("default-src 'none'"), "{policy}");
    assert!(!policy.contains("unsafe-inline"), "{policy}");
    let page = response.text().unwrap();
    assert!(
        page.contains("<code>dev.svc.vocab</code></td><td class=\"count\">2</td>"),
        "{page}"
    );
    assert!(
        page.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
        "{page}"
    );
    assert!(!page.contains(hostile), "{page}");
    assert!(!page.contains(breakout), "{page}");
    assert_eq!(
        page.matches("<script").count(),
        page.matches("<script src=\"/assets/explorer.js\" defer></script>")
            .count(),
        "no script but the explorer's own: {page}"
    );
    assert!(
        page.contains("href=\"/at/did:plc:jetstream/dev.svc.vocab/3kaaaaaaaaa23\""),
        "{page}"
    );
    let (status, _, style) = server.get_raw("/assets/explorer.css");
    assert_eq!(status, 200);
    assert!(style.contains("prefers-color-scheme: dark"));
}

const CID: &str = "bafyreiehf6uam2ube3lsjvarvyipgubd623dn3kxcsjc2wjzgonk6v3m74";

fn lens_ref(lens: &str) -> serde_json::Value {
    json!({"uri": lens, "cid": {"$link": CID}})
}

fn verification(lens: &str, verifier: &str, kind: &str, result: &str) -> serde_json::Value {
    let property = match kind {
        "roundtrip-test" => json!({"$type": "dev.svc.defs#lpRoundtrip", "domain": "people"}),
        "property-test" => json!({"$type": "dev.svc.defs#lpGenerator", "spec": "people"}),
        _ => json!({"$type": "dev.svc.defs#lpTheorem", "statement": "get (put p) = p"}),
    };
    json!({"$type": "dev.svc.verification", "lens": lens_ref(lens), "kind": kind,
        "verifier": verifier, "tool": {"name": "svc", "version": "0.1.0"},
        "property": property,
        "result": result, "occurredAt": NOW})
}

fn vocab(name: &str, description: &str) -> serde_json::Value {
    json!({"$type": "dev.svc.vocab", "name": name, "world": "open", "description": description,
        "occurredAt": NOW})
}

/// The page's background colour, as computed.
fn background(browser: &Browser) -> serde_json::Value {
    browser.eval("getComputedStyle(document.body).backgroundColor")
}

/// Clicks a link and waits for the page it leads to.
fn follow(browser: &Browser, selector: &str, arrived: &str) {
    browser.eval("window.leaving = true");
    browser.click(selector);
    let loaded = format!(
        "window.leaving === undefined && document.readyState === 'complete' && ({arrived})"
    );
    browser.wait_until(&loaded, Duration::from_secs(10));
}

const HOSTILE_NAME: &str = "<script>window.pwned = 1</script>";
const HOSTILE_BREAKOUT: &str = "\"><img src=x onerror=\"window.pwned = 2\">";

#[test]
fn a_person_follows_a_bounty_to_its_lens_and_watches_records_arrive() {
    let Some(peers) = peers() else { return };
    let Some(browser) = Browser::launch_or_skip("explorer") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &["--firehose", peers.pds_ws.as_str(), "--ready-lag", "5s"],
    );
    let alice = peers.create_account("explorer");
    let lens = format!("at://{}/dev.panproto.schema.lens/3lly2ibq322an", alice.did);
    let bounty = json!({"$type": "dev.svc.bounty", "requester": alice.did,
        "wants": {"$type": "dev.svc.bounty#wantVerification", "lens": lens_ref(&lens),
            "kind": "roundtrip-test"}, "status": "open", "occurredAt": NOW});
    peers.create_record(&alice, "dev.svc.bounty", bounty, None);
    let verified = verification(&lens, &alice.did, "roundtrip-test", "holds");
    peers.create_record(&alice, "dev.svc.verification", verified, None);
    let falsified = verification(&lens, &alice.did, "property-test", "falsified");
    peers.create_record(&alice, "dev.svc.verification", falsified, None);
    let long_rtl = format!("\u{202E}{}", "שלום עולם ".repeat(300));
    let (hostile, _) = peers.create_record(
        &alice,
        "dev.svc.vocab",
        vocab(HOSTILE_NAME, HOSTILE_BREAKOUT),
        None,
    );
    let (long, _) = peers.create_record(
        &alice,
        "dev.svc.vocab",
        vocab("javascript:window.pwned=3", &long_rtl),
        None,
    );
    let lens_query = format!("/v1/verifications?lens_uri={lens}");
    server.wait_for(&lens_query, Duration::from_secs(10), |b| b["total"] == 2);
    server.wait_for(
        "/v1/vocabularies/by-world?world=open",
        Duration::from_secs(10),
        |b| b["total"] == 2,
    );

    // The front page: counts and the newest records.
    browser.navigate(&format!("{}/", server.url));
    let count = browser.eval(
        "document.querySelector('tr[data-kind=\"dev.svc.verification\"] .count').textContent",
    );
    assert_eq!(count, "2");
    browser.shoot("front");

    // The system's dark scheme darkens the page.
    let light = background(&browser);
    browser.dark(true);
    assert_ne!(
        background(&browser),
        light,
        "the page follows the dark scheme"
    );
    browser.dark(false);

    // A query's form, filled in and sent; from the keyboard, the first stop skips to the
    // content and the next ones reach the form's labelled fields.
    browser.navigate(&format!("{}/explore/bountiesByRequester", server.url));
    browser.press("Tab");
    assert_eq!(
        browser.eval("document.activeElement.textContent"),
        "Skip to the content"
    );
    let labelled = "[...document.querySelectorAll('form input, form select')]\
        .every(field => field.labels.length === 1 && field.labels[0].textContent.trim() !== '')";
    assert_eq!(browser.eval(labelled), true);
    browser.fill("#p-requester_did", &alice.did);
    follow(
        &browser,
        "form.query button",
        "document.querySelectorAll('#answer tbody tr').length === 1",
    );
    let json_link = browser.eval("document.getElementById('json').getAttribute('href')");
    assert_eq!(
        json_link,
        format!(
            "/v1/bounties/by-requester?requester_did={}&limit=25",
            alice.did.replace(':', "%3A")
        )
    );
    browser.shoot("query");

    // From the bounty to its lens, and on to the lens's verifications.
    follow(
        &browser,
        "#answer tbody tr td a",
        "document.querySelector('dl.facts') !== null",
    );
    browser.shoot("bounty");
    follow(
        &browser,
        "dl.facts a[href*='dev.panproto.schema.lens']",
        "document.getElementById('verifications') !== null",
    );
    let kinds = browser.eval("[...document.querySelectorAll('#verifications tbody tr')].slice(0, 2).map(tr => [...tr.cells].map(td => td.textContent).join(' '))");
    assert_eq!(
        kinds,
        json!(["roundtrip-test 1 1 yes", "property-test 1 0 no"])
    );
    browser.shoot("lens");
    follow(
        &browser,
        "#lens-verifications",
        "document.querySelectorAll('#answer tbody tr').length === 2",
    );

    // A verification published now appears in the table, without a reload.
    browser.wait_until(
        "document.querySelector('.live-state').textContent.startsWith('Live')",
        Duration::from_secs(10),
    );
    browser.eval("window.stayed = true");
    let formal = verification(&lens, &alice.did, "formal-proof", "holds");
    let (arrived, _) = peers.create_record(&alice, "dev.svc.verification", formal, None);
    let appeared = format!(
        "window.stayed === true && document.querySelector('#answer tr[data-uri=\"{arrived}\"]') !== null && document.getElementById('total').textContent === '3'"
    );
    browser.wait_until(&appeared, Duration::from_secs(10));
    browser.shoot("live-table");
    // The page the server kept is built again once its answer changed.
    let table = browser.eval("location.href");
    browser.navigate(table.as_str().expect("the table's address"));
    assert_eq!(
        browser.eval("document.querySelectorAll('#answer tbody tr').length"),
        3
    );

    // The front page's newest changes follow too.
    browser.navigate(&format!("{}/", server.url));
    browser.wait_until(
        "document.querySelector('.live-state').textContent.startsWith('Live')",
        Duration::from_secs(10),
    );
    browser.eval("window.stayed = true");
    peers.create_record(&alice, "dev.svc.vocab", vocab("Arrived live", "new"), None);
    browser.wait_until(
        "window.stayed === true && document.querySelector('#newest li').textContent.includes('Arrived live')",
        Duration::from_secs(10),
    );

    // Strangers' text stays text: nothing ran, no element was made of it, no link of it.
    let hostile_page = format!("{}/at/{}", server.url, hostile.trim_start_matches("at://"));
    browser.navigate(&hostile_page);
    assert_eq!(
        browser.eval("document.querySelector('h1').textContent"),
        HOSTILE_NAME
    );
    assert_eq!(
        browser.eval("document.querySelectorAll('main img, main script').length"),
        0
    );
    assert_eq!(
        browser.eval("document.body.textContent.includes('window.pwned = 2')"),
        true
    );
    browser.shoot("hostile");
    // Long right-to-left text wraps inside the page, even on a phone.
    browser.navigate(&format!(
        "{}/at/{}",
        server.url,
        long.trim_start_matches("at://")
    ));
    browser.viewport(390, 844, true);
    assert_eq!(
        browser.eval("document.documentElement.scrollWidth <= window.innerWidth"),
        true
    );
    browser.shoot("long-rtl");
    browser.navigate(&format!("{}/at/{}", server.url, alice.did));
    browser.shoot("author");
    assert_eq!(
        browser.eval("document.querySelectorAll('main img, main script').length"),
        0
    );
    assert_eq!(
        browser.eval("[...document.links].filter(a => !a.href.startsWith(location.origin)).length"),
        0
    );
    assert_eq!(browser.eval("window.pwned === undefined"), true);
    assert_eq!(browser.console_errors(), Vec::<String>::new());
}

#[test]
fn pages_work_without_script_and_say_what_is_wrong() {
    let base = now_us() - 1_000_000;
    let replay = Replay::start(vec![
        vocab_named(base, "3kaaaaaaaaa22", "Birds"),
        vocab_named(base + 1, "3kaaaaaaaaa23", "Fish"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::following(dir.path().join("catalog.db"), &replay.url);
    let world = "/v1/vocabularies/by-world?world=open";
    server.wait_for(world, Duration::from_secs(10), |b| b["total"] == 2);
    let page = |path: &str, status: u16, contains: &str| {
        let response = reqwest::blocking::get(format!("{}{path}", server.url)).expect(path);
        assert_eq!(response.status(), status, "{path}");
        assert_eq!(
            response.headers()["content-type"],
            "text/html; charset=utf-8"
        );
        let policy = response.headers()["content-security-policy"]
            .to_str()
            .unwrap();
        assert!(policy.starts_with("default-src 'none'"), "{path}: {policy}");
        let body = response.text().unwrap();
        assert!(body.contains(contains), "{path} lacks {contains}: {body}");
    };
    // A form sends its empty fields too; the answer is the API's, one page, with its JSON.
    page(
        "/explore/vocabulariesWithWorld?world=open&limit=1",
        200,
        "<a href=\"/explore/vocabulariesWithWorld?world=open&#38;cursor=",
    );
    page(
        "/explore/vocabulariesWithWorld?world=open&limit=",
        200,
        "href=\"/v1/vocabularies/by-world?world=open&#38;limit=25\"",
    );
    page("/explore/vocabulariesWithWorld", 200, "to see the answer");
    // A bad value is named as the API names it, above the form that sent it.
    page(
        "/explore/vocabulariesWithWorld?world=flat",
        400,
        "world: must be one of closed-with-default, open, hierarchy-closed</p>",
    );
    page(
        "/explore/vocabulariesWithWorld?world=open&limit=0",
        400,
        "limit: must be an integer from 1 to 1000",
    );
    page("/explore/noSuchQuery", 404, "Not in this catalog");
    let record = "/at/did:plc:jetstream/dev.svc.vocab/3kaaaaaaaaa23";
    page(record, 200, "<span class=\"text\">Fish</span>");
    // A record laid out whole links its JSON all the same.
    let json = format!("<a href=\"{record}?format=json\" id=\"json\">As JSON</a>");
    page(record, 200, &json);
    page(
        "/at/did:plc:jetstream/dev.svc.vocab/3kzzzzzzzzz22",
        404,
        "holds no record",
    );
    page(
        "/at/did:plc:jetstream/dev.svc.vocab/no%20key",
        400,
        "at-uri",
    );
    page("/at/did:plc:jetstream", 200, &format!("href=\"{record}\""));
    page("/at/not-a-did", 400, "not-a-did");
    // One collection of an author's; its kind cells lead there.
    let vocabularies = "/at/did:plc:jetstream/dev.svc.vocab";
    page(vocabularies, 200, &format!("href=\"{record}\""));
    page(
        "/at/did:plc:jetstream",
        200,
        &format!("href=\"{vocabularies}\""),
    );
    page(
        "/at/did:plc:jetstream/dev.svc.bounty",
        200,
        "holds no record",
    );
    page("/at/did:plc:jetstream/not%20an%20nsid", 400, "not an nsid");
    let after = "/at/did:plc:jetstream?after=at%3A%2F%2Fdid%3Aplc%3Ajetstream%2Fdev.svc.vocab%2F3kaaaaaaaaa22";
    page(after, 200, &format!("href=\"{record}\""));
}

/// The API's 404 for `path`, word for word.
fn assert_is_the_json_404(headers: &reqwest::header::HeaderMap, body: &str, path: &str) {
    assert_eq!(headers["content-type"], "application/json", "{path}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(body).unwrap(),
        json!({"error": "not_found", "message": format!("no endpoint at {path}")}),
        "{path}"
    );
}

/// The page a browser gets at `path`: under the pages' policy, naming the address, with
/// the ways on.
fn assert_is_the_lost_page(headers: &reqwest::header::HeaderMap, page: &str, path: &str) {
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("default-src 'none'"), "{path}: {policy}");
    for way in [
        "href=\"/\"",
        "href=\"/#queries\"",
        "href=\"/map\"",
        "action=\"/search\"",
    ] {
        assert!(page.contains(way), "{path} lacks {way}: {page}");
    }
    assert!(
        page.contains(&format!("<code class=\"text\">{path}</code>")),
        "{page}"
    );
}

/// A browser asking for an address nothing answers gets a page with the ways on, under the
/// pages' policy; any other client keeps the API's JSON 404, word for word. `/explore` and
/// `/explore/` lead to the front page's list of queries.
#[test]
fn a_lost_browser_gets_a_page_and_every_other_client_json() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path().join("catalog.db"), &[]);
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap();
    let ask = |path: &str, accept: Option<&str>| {
        let mut request = client.get(format!("{}{path}", server.url));
        if let Some(accept) = accept {
            request = request.header("accept", accept);
        }
        let response = request.send().expect(path);
        let headers = response.headers().clone();
        (
            response.status().as_u16(),
            headers,
            response.text().unwrap(),
        )
    };
    let chromium = "text/html,application/xhtml+xml,application/xml;q=0.9,\
        image/avif,image/webp,image/apng,*/*;q=0.8";
    for path in ["/explorer", "/no/such/page", "/at", "/v2/nothing"] {
        let (status, headers, page) = ask(path, Some(chromium));
        assert_eq!(status, 404, "{path}");
        assert_eq!(
            headers["content-type"], "text/html; charset=utf-8",
            "{path}"
        );
        assert_is_the_lost_page(&headers, &page, path);
        for accept in [None, Some("*/*"), Some("application/json")] {
            let (status, headers, body) = ask(path, accept);
            assert_eq!(status, 404, "{path} {accept:?}");
            assert_is_the_json_404(&headers, &body, path);
        }
    }
    for path in ["/explore", "/explore/"] {
        for accept in [Some(chromium), None] {
            let (status, headers, _) = ask(path, accept);
            assert_eq!(status, 303, "{path} {accept:?}");
            assert_eq!(headers["location"], "/#queries", "{path}");
        }
    }
    let (status, _, front) = ask("/", Some(chromium));
    assert_eq!(status, 200);
    assert!(
        front.contains("<section aria-labelledby=\"queries-title\" id=\"queries\">"),
        "{front}"
    );
}

#[test]
fn a_community_s_page_gathers_its_members_dialects_changes_releases_and_federations() {
    let dir = tempfile::tempdir().unwrap();
    let example_file = examples::path();
    let server = Server::start(
        dir.path().join("catalog.db"),
        &["--import", example_file.to_str().unwrap()],
    );
    let guild = "/at/did:plc:g56efo4jid4ea4nywn25ol7o/dev.svc.community/3lqmgnelz3dop";
    let (status, _, page) = server.get_raw(guild);
    assert_eq!(status, 200);
    for section in [
        "<h2>Members</h2>",
        "<h2>Dialects (",
        "<h2>Change proposals (1)</h2>",
        "<h2>Releases (1)</h2>",
        "<h2>Federations it declares (0)</h2>",
        "<h2>Federations naming it as peer (2)</h2>",
    ] {
        assert!(page.contains(section), "{section}: {page}");
    }
    // A change proposal's page leads to the migration runs of the change.
    let change = "/explore/migrationRunsForChange?change_uri=";
    let (_, _, openings) = server.get_raw("/explore/openChangeProposals");
    assert!(
        openings.contains("<span id=\"total\">2</span>"),
        "{openings}"
    );
    let (_, _, released) = server.get_raw(guild);
    assert!(
        released.contains("href=\"/at/did:plc:g56efo4jid4ea4nywn25ol7o/dev.svc.changeProposal/")
    );
    let proposal = released
        .split("href=\"/at/did:plc:g56efo4jid4ea4nywn25ol7o/dev.svc.changeProposal/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a change proposal's link");
    let page = server
        .get_raw(&format!(
            "/at/did:plc:g56efo4jid4ea4nywn25ol7o/dev.svc.changeProposal/{proposal}"
        ))
        .2;
    assert!(page.contains("<h2>Migration runs (1)</h2>"), "{page}");
    assert!(page.contains(change), "{page}");
}

/// A figure of the server's `/proc` status, in MiB.
fn proc_mib(server: &Server, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
        .expect("the server's /proc status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().strip_suffix("kB"))
        .and_then(|value| value.trim().parse().ok())
        .expect("a figure in kB");
    kib / 1024
}

/// What one request makes the server hold at its peak beyond what it held before, in MiB:
/// the peak is reset first (`clear_refs` 5), then read after the answer.
fn peak_growth(server: &Server, path: &str) -> (u64, String) {
    let clear = format!("/proc/{}/clear_refs", server.child.id());
    std::fs::write(clear, "5").expect("reset the server's peak");
    let before = proc_mib(server, "VmRSS");
    let (status, content_type, page) = server.get_raw(path);
    assert_eq!(status, 200, "{path}");
    assert_eq!(content_type, "text/html; charset=utf-8", "{path}");
    let peak = proc_mib(server, "VmHWM");
    eprintln!(
        "{path}: {} bytes, RSS {before} MiB before, peak {peak} MiB",
        page.len()
    );
    (peak.saturating_sub(before), page)
}

/// Records of a million tiny values in a field no lexicon names: a record's page lays out
/// 5,000 of them and says so, linking the whole record's JSON (its stored text), and a query's
/// page of twenty such records reads only the fields it shows. Neither page is over 1 MB, nor
/// does either take the server's peak memory 100 MiB above what it held before. Laying out
/// every value made the record's page 35 MB and took the server 200 MiB up; reading the
/// query's answer whole into `serde_json::Value`s took it 210 MiB up. The author's page picks
/// its titles as each record is read: holding the records whole took it 20 MiB up.
#[test]
fn records_of_a_million_values_cost_their_pages_a_bounded_part() {
    let dir = tempfile::tempdir().unwrap();
    let mut events = Events::new();
    let record = |world: &str, n: usize| {
        json!({"aaa": vec![0; n], "name": format!("Huge {world}"), "world": world,
            "occurredAt": NOW})
    };
    let huge = record("closed-with-default", 1_000_000);
    let uri = events.put(
        "did:plc:huge",
        "dev.svc.vocab",
        "3kaaaaaaaaa22",
        &tid(1),
        huge.clone(),
    );
    for n in 0..20 {
        let rkey = format!("3kaaaaaaaab{n:02}");
        events.put(
            "did:plc:huge",
            "dev.svc.vocab",
            &rkey,
            &tid(2 + n as i64),
            record("open", 500_000),
        );
    }
    let file = events.write(&dir.path().join("huge.jsonl"));
    let server = Server::start(
        dir.path().join("catalog.db"),
        &["--import", file.to_str().unwrap()],
    );
    let world = "/v1/vocabularies/by-world?world=open&limit=1";
    assert_eq!(server.get(world).1["total"], 20);

    let path = uri.replace("at://", "/at/");
    let (grew, page) = peak_growth(&server, &path);
    assert!(page.len() < 1 << 20, "{} bytes", page.len());
    assert!(page.contains("<span class=\"text\">Huge closed-with-default</span>"));
    let note = "This record holds 1,000,006 values; the first 5,000 are shown. \
        The whole record: <a href=\"/at/did:plc:huge/dev.svc.vocab/3kaaaaaaaaa22?format=json\" \
        id=\"json\">its JSON</a>.";
    assert!(page.contains(note), "{}", &page[..4096.min(page.len())]);
    assert!(page.contains("… 995,003 more not shown"));
    assert!(
        grew < 100,
        "the record's page grew the server by {grew} MiB"
    );
    // The whole record, as it is stored.
    let (status, content_type, json) = server.get_raw(&format!("{path}?format=json"));
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    let mut stored = huge;
    stored["$type"] = json!("dev.svc.vocab");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&json).unwrap(),
        stored
    );
    assert_eq!(server.get_raw(&format!("{path}?format=xml")).0, 400);

    let (grew, page) = peak_growth(&server, "/explore/vocabulariesWithWorld?world=open");
    assert!(page.len() < 1 << 20, "{} bytes", page.len());
    assert_eq!(page.matches("<tr data-uri=").count(), 20, "{page}");
    assert!(page.contains(">Huge open</a>"), "{page}");
    assert!(grew < 100, "the query's page grew the server by {grew} MiB");

    let (grew, page) = peak_growth(&server, "/at/did:plc:huge");
    assert_eq!(page.matches(">Huge open</a>").count(), 20, "{page}");
    assert!(grew < 10, "the author's page grew the server by {grew} MiB");
}
