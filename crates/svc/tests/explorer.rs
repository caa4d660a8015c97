//! The explorer's front page: counts per kind, readiness, and the newest changes, with every
//! record's text shown as text (a name holding markup is escaped), under a policy that lets
//! the page load nothing but its own stylesheet and run no script.

mod common;

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
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &["--firehose", replay.url.as_str(), "--ready-lag", "5s"],
    );
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
