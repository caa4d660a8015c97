//! Labels from a real labeler (`@skyware/labeler` on loopback, its DID on the reference PLC
//! directory with its label service and key) on records the reference PDS's firehose brings:
//! shown with the items they apply to, a record's own and its account's; `!takedown` hides;
//! negations and expiry honoured; a label whose signature does not verify refused and
//! counted; the labeler's cursor resumed after a restart, on SQLite and PostgreSQL.

use svc_testkit as common;

use common::peers::{Peers, peers};
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const WITHIN: Duration = Duration::from_secs(15);

fn vocab_record(name: &str) -> Value {
    json!({"$type": "dev.svc.vocab", "name": name, "world": "open", "occurredAt": NOW})
}

fn by_name(name: &str) -> String {
    format!("/v1/vocabularies/by-name?name={name}")
}

fn labelled_server(db: &str, peers: &Peers) -> Server {
    Server::launch(
        db,
        &[
            "--firehose",
            peers.pds_ws.as_str(),
            "--plc-url",
            peers.plc.as_str(),
            "--labeler",
            peers.labeler_did.as_str(),
            "--ready-lag",
            "5s",
            "--liveness",
            "5s",
        ],
    )
}

/// The values of the labels on the one item named `name`, once `check` holds of them.
fn wait_labels(server: &Server, name: &str, check: impl Fn(&[String]) -> bool) -> Vec<String> {
    let values = |body: &Value| -> Vec<String> {
        let labels = body["items"][0]["labels"].as_array().cloned();
        let mut values: Vec<String> = labels
            .unwrap_or_default()
            .iter()
            .map(|label| label["val"].as_str().unwrap_or_default().to_string())
            .collect();
        values.sort();
        values
    };
    server.wait_for(&by_name(name), WITHIN, |body| {
        body["total"] == 1 && check(&values(body))
    });
    values(&server.get(&by_name(name)).1)
}

/// `svc_labels_total` of the labeler for `outcome`.
fn labels_counted(server: &Server, labeler: &str, outcome: &str) -> u64 {
    let series = format!("svc_labels_total{{labeler=\"{labeler}\",outcome=\"{outcome}\"}} ");
    let text = server.get_raw("/metrics").2;
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

fn wait_until(what: &str, check: impl Fn() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < WITHIN, "{what} within {WITHIN:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One test for both engines, one after the other: the labeler drops a label created while a
/// subscriber's replay is under way, so each step waits until svc's subscription is the only
/// one, which tests running side by side would make unknowable.
#[test]
fn labels_from_a_real_labeler_show_hide_and_resume() {
    for (run, backend) in [Backend::Sqlite, Backend::Postgres].into_iter().enumerate() {
        labels_on(backend, run as u64);
    }
}

/// Waits until `n` subscribers follow the labeler.
fn subscribers(peers: &Peers, n: u64) {
    wait_until(&format!("{n} subscribers of the labeler"), || {
        peers.labeler_subscribers() == n
    });
}

/// `earlier`: how many runs used the labeler before, each leaving one forged label.
fn labels_on(backend: Backend, earlier: u64) {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let labeler = peers.labeler_did.as_str();
    let alice = peers.create_account("labelled");
    let name = |n: &str| format!("{n}-{}", alice.handle.split('.').next().unwrap_or("x"));
    let (spammy, gone) = (name("Spammy"), name("Gone"));
    let spammy_uri = format!("at://{}/dev.svc.vocab/3kaaaaaaaaaa2", alice.did);
    let gone_uri = format!("at://{}/dev.svc.vocab/3kaaaaaaaaaa3", alice.did);
    // Made before svc connects, and before the records exist: they come by the labeler's
    // replay from cursor 0, and are kept until the records come.
    peers.label(&spammy_uri, "spam", false, None);
    peers.forged_label(&gone_uri, "forged");

    subscribers(peers, 0);
    let server = labelled_server(&db, peers);
    for (record, rkey) in [(&spammy, "3kaaaaaaaaaa2"), (&gone, "3kaaaaaaaaaa3")] {
        peers.create_record(&alice, "dev.svc.vocab", vocab_record(record), Some(rkey));
    }
    assert_eq!(wait_labels(&server, &spammy, |v| !v.is_empty()), ["spam"]);
    let (_, page) = server.get(&by_name(&spammy));
    let label = &page["items"][0]["labels"][0];
    assert_eq!(label["src"], labeler, "{label}");
    assert!(
        label["cts"].as_str().is_some_and(|cts| cts.ends_with('Z')),
        "{label}"
    );
    wait_until("each forged label counted", || {
        labels_counted(&server, labeler, "signature") == earlier + 1
    });
    assert_eq!(wait_labels(&server, &gone, |_| true), Vec::<String>::new());

    // Live: an account's label reaches its records; `!takedown` hides.
    subscribers(peers, 1);
    peers.label(&alice.did, "new-account", false, None);
    peers.label(&gone_uri, "!takedown", false, None);
    let both = wait_labels(&server, &spammy, |v| v.len() == 2);
    assert_eq!(both, ["new-account", "spam"]);
    server.wait_for(&by_name(&gone), WITHIN, |body| body["total"] == 0);

    // Negations take them back off; an expiring label goes at its expiry.
    peers.label(&spammy_uri, "spam", true, None);
    peers.label(&gone_uri, "!takedown", true, None);
    assert_eq!(
        wait_labels(&server, &spammy, |v| v.len() == 1),
        ["new-account"]
    );
    server.wait_for(&by_name(&gone), WITHIN, |body| body["total"] == 1);
    let expiry = svc_syntax::format_unix_micros(now_us() + 3_000_000);
    peers.label(&spammy_uri, "hot", false, Some(&expiry));
    assert_eq!(
        wait_labels(&server, &spammy, |v| v.len() == 2),
        ["hot", "new-account"]
    );
    assert_eq!(
        wait_labels(&server, &spammy, |v| v.len() == 1),
        ["new-account"]
    );
    server.stop();
    subscribers(peers, 0);

    // Restarted, svc resumes from the labeler's cursor: nothing is read twice.
    let server = labelled_server(&db, peers);
    assert_eq!(wait_labels(&server, &spammy, |_| true), ["new-account"]);
    subscribers(peers, 1);
    peers.label(&gone_uri, "late", false, None);
    let late = wait_labels(&server, &gone, |v| v.len() == 2);
    assert_eq!(late, ["late", "new-account"], "its own and its account's");
    assert_eq!(labels_counted(&server, labeler, "applied"), 1);
    assert_eq!(labels_counted(&server, labeler, "signature"), 0);
    server.stop();
}
