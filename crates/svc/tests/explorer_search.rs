//! Search in the explorer, in Chromium: the box every page carries leads to the results,
//! each with its kind, its name and the matched words marked, linked to its page and paged
//! by cursor; a stranger's text in the results stays text; a bad query is a 400 page that
//! names it; all of it without script too.

use svc_testkit as common;

use common::browser::Browser;
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

const HOSTILE: &str = "<img src=x onerror=\"window.pwned = 1\"> GeoJSON";

fn vocab(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "world": "open", "occurredAt": NOW})
}

fn catalog(dir: &std::path::Path) -> std::path::PathBuf {
    let mut events = Events::new();
    let time = tid(1_700_000_000_000_000);
    events.put(
        "did:plc:a",
        "dev.svc.vocab",
        "3kaaaaaaaaa22",
        &time,
        vocab(HOSTILE, "maps"),
    );
    events.put(
        "did:plc:a",
        "dev.svc.vocab",
        "3kaaaaaaaaa23",
        &time,
        vocab("Dublin Core", "Métadonnées bibliographiques du café"),
    );
    for n in 0..30 {
        let rkey = format!("3kaaaaaaab{n:03}");
        events.put(
            "did:plc:c",
            "dev.svc.vocab",
            &rkey,
            &time,
            vocab(&format!("Plenty {n}"), "x"),
        );
    }
    events.write(&dir.join("events.jsonl"))
}

#[test]
fn a_person_searches_from_any_page_and_follows_a_result() {
    let Some(browser) = Browser::launch_or_skip("explorer search") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = catalog(dir.path());
    let server = Server::start(
        dir.path().join("catalog.db"),
        &["--import", file.to_str().unwrap()],
    );

    browser.navigate(&format!("{}/", server.url));
    browser.fill("#find-q", "cafe");
    browser.eval("window.leaving = true");
    browser.click(".find button");
    browser.wait_until(
        "window.leaving === undefined && document.readyState === 'complete' && !!document.querySelector('#results')",
        Duration::from_secs(10),
    );
    assert_eq!(browser.text("#total"), "1");
    let marked = browser
        .eval("[...document.querySelectorAll('#results mark')].map(m => m.textContent).join(',')");
    assert_eq!(marked, "café", "the word as written, marked");
    assert_eq!(browser.text("#results code.kind"), "dev.svc.vocab");
    browser.shoot("search-results");
    browser.eval("window.leaving = true");
    browser.click("#results a");
    browser.wait_until(
        "window.leaving === undefined && document.readyState === 'complete' && location.pathname.startsWith('/at/')",
        Duration::from_secs(10),
    );
    assert!(browser.text("h1").contains("Dublin Core"));

    // A stranger's name among the results is text.
    browser.navigate(&format!("{}/search?q=geojson", server.url));
    let title = browser.text("#results a");
    assert_eq!(title, HOSTILE);
    assert_eq!(browser.eval("window.pwned === undefined"), true);
    assert_eq!(
        browser.eval("document.querySelectorAll('main img').length"),
        0
    );

    // Paged by cursor, as the API pages.
    browser.navigate(&format!("{}/search?q=plenty", server.url));
    assert_eq!(
        browser.eval("document.querySelectorAll('#results li').length"),
        25
    );
    browser.eval("window.leaving = true");
    browser.click("#next");
    browser.wait_until(
        "window.leaving === undefined && document.readyState === 'complete' && !!document.querySelector('#results')",
        Duration::from_secs(10),
    );
    assert_eq!(
        browser.eval("document.querySelectorAll('#results li').length"),
        5
    );
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "{errors:?}");

    // Without script: the form is a plain GET; a bad query is a 400 page naming it, and one
    // of no letter finds nothing.
    let (status, _, page) = server.get_raw("/search?q=%2A%2A%2A");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("No record matches"), "{page}");
    let (status, _, page) = server.get_raw(&format!("/search?q={}", "x".repeat(300)));
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("q: must be 1 to 256 characters"), "{page}");
    let (status, _, page) = server.get_raw("/search?q=plenty&kind=nothing");
    assert_eq!(status, 400, "{page}");
    let (status, _, page) = server.get_raw("/search");
    assert_eq!(status, 200);
    assert!(page.contains("id=\"search-q\""), "{page}");
}
