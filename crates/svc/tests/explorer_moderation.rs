//! What a person sees of moderation in the explorer, in Chromium: a record the operator took
//! down is a "Taken down" page with nothing of its content; a labeler's labels show on the
//! record's page and on its row of a query page, a hostile label's text inert.

use svc_testkit as common;

use common::browser::Browser;
use common::labeler::HostileLabeler;
use common::*;
use serde_json::json;
use std::time::Duration;

const REQUESTER: &str = "did:plc:requester";
const PASSWORD: &str = "correct horse battery staple";
const HOSTILE_LABEL: &str = "<img src=x onerror=\"window.pwned = 1\">";
const SECRET_NAME: &str = "the content nobody may see";

fn records(dir: &std::path::Path) -> (std::path::PathBuf, Vec<String>) {
    let mut events = Events::new();
    let uris = [("3kaaaaaaaaa22", "shown"), ("3kaaaaaaaaa23", SECRET_NAME)]
        .iter()
        .enumerate()
        .map(|(n, (rkey, name))| {
            let wants = want_lens(&schema(n as u32 + 1), &schema(9));
            let mut record = bounty(REQUESTER, wants, None);
            record["description"] = json!(name);
            events.put(
                "did:plc:alice",
                "dev.svc.bounty",
                rkey,
                &tid(1_700_000_000_000_000 + n as i64),
                record,
            )
        })
        .collect();
    (events.write(&dir.join("events.jsonl")), uris)
}

#[test]
fn a_taken_down_record_shows_nothing_and_labels_show_inert() {
    let Some(browser) = Browser::launch_or_skip("explorer moderation") else {
        return;
    };
    let labeler = HostileLabeler::start();
    let dir = tempfile::tempdir().unwrap();
    let (file, uris) = records(dir.path());
    let (shown, gone) = (&uris[0], &uris[1]);
    labeler.add(shown, "spam", false, false);
    labeler.add(shown, HOSTILE_LABEL, false, false);
    let password_file = dir.path().join("admin-password");
    svc_testkit::write_private(&password_file, PASSWORD);
    let server = Server::start(
        dir.path().join("catalog.db"),
        &[
            "--import",
            file.to_str().unwrap(),
            "--labeler",
            labeler.did.as_str(),
            "--admin-password-file",
            password_file.to_str().unwrap(),
        ],
    );
    let taken = http()
        .post(format!(
            "{}/xrpc/com.atproto.admin.updateSubjectStatus",
            server.url
        ))
        .basic_auth("admin", Some(PASSWORD))
        .json(
            &json!({"subject": {"$type": "com.atproto.repo.strongRef", "uri": gone, "cid": CID},
            "takedown": {"applied": true, "ref": "ticket 7"}}),
        )
        .send()
        .expect("the takedown");
    assert_eq!(taken.status(), 200);
    let list = format!("/v1/bounties/by-requester?requester_did={REQUESTER}");
    server.wait_for(&list, Duration::from_secs(10), |body| {
        body["total"] == 1
            && body["items"][0]["labels"]
                .as_array()
                .is_some_and(|l| l.len() == 2)
    });

    let record_path = |uri: &str| format!("{}/at/{}", server.url, &uri["at://".len()..]);
    let (status, _, page) = server.get_raw(&record_path(gone)[server.url.len()..]);
    assert_eq!(status, 410, "{page}");
    browser.navigate(&record_path(shown));
    let labels = browser.text("#labels");
    assert!(labels.contains("spam"), "{labels}");
    assert!(labels.contains(HOSTILE_LABEL), "shown as text: {labels}");
    assert!(labels.contains(&labeler.did), "{labels}");
    browser.shoot("labelled-record");

    let query = format!(
        "{}/explore/bountiesByRequester?requester_did={REQUESTER}",
        server.url
    );
    browser.navigate(&query);
    let row = browser.text("#answer tbody tr");
    assert!(row.contains("spam") && row.contains(HOSTILE_LABEL), "{row}");
    assert_eq!(
        browser.eval("document.querySelectorAll('#answer tbody tr').length"),
        1
    );
    browser.shoot("labelled-rows");

    assert_eq!(browser.eval("window.pwned === undefined"), true);
    assert_eq!(browser.eval("document.querySelectorAll('img').length"), 0);
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "{errors:?}");

    // Last: the browser reports the page's 410 as a console error.
    browser.navigate(&record_path(gone));
    let body = browser.text("body");
    assert!(body.contains("Taken down"), "{body}");
    assert!(!body.contains(SECRET_NAME), "{body}");
    assert!(
        !body.contains(gone.rsplit('/').next().unwrap_or("-")),
        "{body}"
    );
    browser.shoot("taken-down");
}
