//! The operator's word is final over a followed labeler's: a record a labeler's `!takedown`
//! hides comes back when the operator lifts it, stays shown when the labeler says it again,
//! and `getSubjectStatus` says who holds it down and that the operator keeps it shown; a
//! labeler the operator stops following stops applying.

use svc_testkit as common;

use common::labeler::HostileLabeler;
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

const REQUESTER: &str = "did:plc:requester";
const PASSWORD: &str = "correct horse battery staple";
const WITHIN: Duration = Duration::from_secs(20);

fn listed(server: &Server) -> u64 {
    let (_, body) = server.get(&format!(
        "/v1/bounties/by-requester?requester_did={REQUESTER}"
    ));
    body["total"].as_u64().unwrap_or(u64::MAX)
}

fn admin(server: &Server, method: &str, body: Option<Value>, query: &str) -> Value {
    let url = format!("{}/xrpc/com.atproto.admin.{method}{query}", server.url);
    let request = match body {
        Some(body) => http().post(url).json(&body),
        None => http().get(url),
    };
    let response = request
        .basic_auth("admin", Some(PASSWORD))
        .send()
        .expect("the admin method");
    assert_eq!(response.status(), 200);
    response.json().expect("JSON")
}

fn wait_listed(server: &Server, total: u64) {
    let start = std::time::Instant::now();
    while listed(server) != total {
        assert!(start.elapsed() < WITHIN, "{total} listed within {WITHIN:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_labeler_no_longer_followed_stops_applying() {
    let labeler = HostileLabeler::start();
    let dir = tempfile::tempdir().unwrap();
    let (file, uri) = one_bounty(dir.path(), REQUESTER);
    let db = dir.path().join("catalog.db");
    let following = ["--labeler", labeler.did.as_str()];
    let server = Server::start(
        &db,
        &[&["--import", file.to_str().unwrap()][..], &following].concat(),
    );
    labeler.add(&uri, "!takedown", false, false);
    wait_listed(&server, 0);
    server.stop();

    let mut unfollowed = Server::start(&db, &[]);
    assert_eq!(listed(&unfollowed), 1, "its takedown no longer applies");
    unfollowed.wait_log("no longer followed", Duration::from_secs(5));
    unfollowed.stop();

    // Followed again, it is read from its first label.
    let server = Server::start(&db, &following);
    wait_listed(&server, 0);
}

#[test]
fn the_operator_keeps_shown_what_a_labeler_takes_down() {
    let labeler = HostileLabeler::start();
    let dir = tempfile::tempdir().unwrap();
    let (file, uri) = one_bounty(dir.path(), REQUESTER);
    let password = dir.path().join("admin-password");
    write_private(&password, PASSWORD);
    let server = Server::start(
        dir.path().join("catalog.db"),
        &[
            "--import",
            file.to_str().unwrap(),
            "--labeler",
            labeler.did.as_str(),
            "--admin-password-file",
            password.to_str().unwrap(),
        ],
    );
    let status_query = format!("?uri={}", encode(&uri));
    let status = || admin(&server, "getSubjectStatus", None, &status_query);

    labeler.add(&uri, "!takedown", false, false);
    wait_listed(&server, 0);
    // Its page says who took it down.
    let (code, _, page) = server.get_raw(&uri.replace("at://", "/at/"));
    assert_eq!(code, 410, "{page}");
    assert!(page.contains("A labeler this catalog follows"), "{page}");
    assert!(page.contains(&labeler.did), "{page}");
    let held = status();
    assert_eq!(held["takedown"], json!({"applied": true}), "{held}");
    assert_eq!(held["takenDownBy"], json!([labeler.did]), "{held}");

    let subject = json!({"$type": "com.atproto.repo.strongRef", "uri": uri, "cid": CID});
    let lift = json!({"subject": subject, "takedown": {"applied": false}});
    admin(&server, "updateSubjectStatus", Some(lift), "");
    assert_eq!(listed(&server), 1, "the operator's lift shows it at once");
    let shown = status();
    assert_eq!(shown["takedown"], json!({"applied": false}), "{shown}");
    assert_eq!(shown["keptShown"], true, "{shown}");

    // The labeler says it again: the operator's word stands.
    labeler.add(&uri, "!takedown", true, false);
    labeler.add(&uri, "!takedown", false, false);
    labeler.add(&uri, "spam", false, false);
    let start = std::time::Instant::now();
    while !server.get_raw("/v1/bounties/open").2.contains("spam") {
        assert!(
            start.elapsed() < WITHIN,
            "the labeler's later labels arrived"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(listed(&server), 1, "kept shown against the labeler");
    let down = json!({"subject": subject, "takedown": {"applied": true, "ref": "case 3"}});
    admin(&server, "updateSubjectStatus", Some(down), "");
    assert_eq!(listed(&server), 0);
    let taken = status();
    assert_eq!(taken["takedown"], json!({"applied": true, "ref": "case 3"}));
    assert_eq!(taken["keptShown"], false, "{taken}");
}
