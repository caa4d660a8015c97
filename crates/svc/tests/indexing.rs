//! Live indexing from the reference PDS's firehose, and backfill from it: records appear,
//! change and vanish in the API, accounts come and go, a crash loses nothing.

use svc_testkit as common;

use common::peers::{Account, Peers, peers};
use common::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const WITHIN: Duration = Duration::from_secs(2);

fn vocab_record(name: &str) -> Value {
    json!({"$type": "dev.svc.vocab", "name": name, "world": "open", "occurredAt": NOW})
}

fn live_server(dir: &tempfile::TempDir, peers: &Peers, extra: &[&str]) -> Server {
    let mut args = vec![
        "--firehose",
        peers.pds_ws.as_str(),
        "--ready-lag",
        "5s",
        "--liveness",
        "5s",
    ];
    args.extend_from_slice(extra);
    Server::launch(dir.path().join("catalog.db"), &args)
}

fn by_name(name: &str) -> String {
    format!("/v1/vocabularies/by-name?name={name}")
}

#[test]
fn records_appear_change_and_vanish_within_two_seconds() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = live_server(&dir, peers, &[]);
    let alice = peers.create_account("live");
    let (uri, _) = peers.create_record(
        &alice,
        "dev.svc.vocab",
        vocab_record("Appears"),
        Some("3kaaaaaaaaaa2"),
    );
    let took = server.wait_for(&by_name("Appears"), WITHIN, |b| b["total"] == 1);
    eprintln!("create visible after {took:?}");
    let (_, page) = server.get(&by_name("Appears"));
    assert_eq!(page["items"][0]["uri"], uri);
    assert_eq!(page["items"][0]["author"], alice.did);
    peers.put_record(
        &alice,
        "dev.svc.vocab",
        "3kaaaaaaaaaa2",
        vocab_record("Changed"),
    );
    server.wait_for(&by_name("Changed"), WITHIN, |b| b["total"] == 1);
    assert_eq!(server.get(&by_name("Appears")).1["total"], 0);
    peers.delete_record(&alice, "dev.svc.vocab", "3kaaaaaaaaaa2");
    server.wait_for(&by_name("Changed"), WITHIN, |b| b["total"] == 0);
    // Records outside the family are ignored, and an invalid family record is skipped.
    peers.create_record(
        &alice,
        "dev.svc.vocab",
        json!({"$type": "dev.svc.vocab", "name": "Bad", "world": "closed", "occurredAt": NOW}),
        None,
    );
    peers.create_record(&alice, "dev.svc.vocab", vocab_record("AfterBad"), None);
    server.wait_for(&by_name("AfterBad"), WITHIN, |b| b["total"] == 1);
    assert_eq!(server.get(&by_name("Bad")).1["total"], 0);
    let metrics = server.get_raw("/metrics").2;
    // Every commit was checked (its signature by the key the PLC directory names, its blocks
    // and its Sync 1.1 proof) before it was applied, and none was refused.
    let verified = metric(&metrics, "svc_ingest_verified_total");
    assert!(verified >= 5.0, "{verified} commits verified: {metrics}");
    assert!(
        !metrics.contains("svc_ingest_unverified_total{"),
        "{metrics}"
    );
    assert!(
        metrics.contains("svc_ingest_events_total{source=\"firehose\",outcome=\"invalid\"} 1"),
        "{metrics}"
    );
    assert_eq!(server.get_raw("/readyz").2, "ready\n");
}

#[test]
fn deactivated_accounts_leave_answers_and_come_back() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = live_server(&dir, peers, &[]);
    let bob = peers.create_account("deact");
    // Only this test writes dialects on this PDS, so the dialect count is this test's alone.
    let community = format!("at://{}/dev.svc.community/3kaaaaaaaaaa2", bob.did);
    let dialect = json!({"$type": "dev.svc.dialect", "owningCommunity": community, "name": "bobs", "createdAt": NOW});
    peers.create_record(&bob, "dev.svc.dialect", dialect, None);
    let path = format!("/v1/dialects/for-community?community_uri={community}");
    server.wait_for(&path, WITHIN, |b| b["total"] == 1);
    assert_eq!(server.get("/v1/stats").1["dialects"], 1);
    peers.deactivate(&bob);
    server.wait_for(&path, WITHIN, |b| b["total"] == 0);
    assert_eq!(server.get("/v1/stats").1["dialects"], 0);
    peers.activate(&bob);
    server.wait_for(&path, WITHIN, |b| b["total"] == 1);
    assert_eq!(server.get("/v1/stats").1["dialects"], 1);
    // Reactivated, the repository is read whole again, for what changed meanwhile.
    server.wait_for("/v1/stats", WITHIN, |_| {
        let metrics = server.get_raw("/metrics").2;
        metrics.contains("svc_ingest_resync_queued_total{reason=\"reactivated\"} 1")
    });
}

/// Every uri under one key of a query, page by page.
fn all_uris(server: &Server, path: &str) -> Vec<String> {
    let mut uris = Vec::new();
    let mut next = format!("{path}&limit=1000");
    loop {
        let (_, page) = server.get(&next);
        uris.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["uri"].as_str().unwrap().to_string()),
        );
        match page.get("cursor").and_then(Value::as_str) {
            Some(cursor) => next = format!("{path}&limit=1000&cursor={cursor}"),
            None => break,
        }
    }
    uris
}

fn bounty_of(acct: &Account, i: usize) -> Value {
    json!({"$type": "dev.svc.bounty", "requester": acct.did, "occurredAt": NOW,
           "wants": {"$type": "dev.svc.bounty#wantAdapter", "framework": format!("burst-{i}")}})
}

#[test]
fn a_crash_in_a_burst_loses_and_duplicates_nothing() {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = live_server(&dir, peers, &[]);
    let carol = peers.create_account("burst");
    let path = format!("/v1/bounties/by-requester?requester_did={}", carol.did);
    let mut written = Vec::new();
    let mut server = Some(server);
    for i in 0..500 {
        written.push(
            peers
                .create_record(&carol, "dev.svc.bounty", bounty_of(&carol, i), None)
                .0,
        );
        if i == 250 {
            let running = server.take().expect("the server runs");
            // It has indexed some of the burst by now, and is indexing more.
            running.wait_for(&path, Duration::from_secs(10), |b| {
                b["total"].as_u64() > Some(0)
            });
            running.kill9();
        }
    }
    // More writes while it is down.
    for i in 500..550 {
        written.push(
            peers
                .create_record(&carol, "dev.svc.bounty", bounty_of(&carol, i), None)
                .0,
        );
    }
    let restarted = live_server(&dir, peers, &[]);
    restarted.wait_for(&path, Duration::from_secs(30), |b| b["total"] == 550);
    let found = all_uris(&restarted, &path);
    let unique: BTreeSet<&String> = found.iter().collect();
    assert_eq!(unique.len(), found.len(), "a record is listed twice");
    let mut expected = written.clone();
    expected.sort();
    assert_eq!(found, expected);
}

#[test]
fn backfill_finds_what_the_pds_already_holds() {
    let Some(peers) = peers() else { return };
    let dave = peers.create_account("backfill");
    let mut written = BTreeSet::new();
    for i in 0..30 {
        written.insert(
            peers
                .create_record(
                    &dave,
                    "dev.svc.vocab",
                    vocab_record(&format!("held-{i:02}")),
                    None,
                )
                .0,
        );
    }
    peers.create_record(&dave, "dev.svc.bounty", json!({"$type": "dev.svc.bounty", "requester": dave.did, "wants": {"$type": "dev.svc.bounty#wantAdapter", "framework": "serde"}, "occurredAt": NOW}), None);
    let dir = tempfile::tempdir().unwrap();
    let server = live_server(
        &dir,
        peers,
        &[
            "--backfill",
            peers.pds.as_str(),
            "--plc-url",
            peers.plc.as_str(),
        ],
    );
    let held = all_uris(&server, "/v1/vocabularies/by-world?world=open");
    let found: BTreeSet<String> = held.into_iter().filter(|u| u.contains(&dave.did)).collect();
    assert_eq!(found, written);
    assert_eq!(
        server
            .get(&format!(
                "/v1/bounties/by-requester?requester_did={}",
                dave.did
            ))
            .1["total"],
        1
    );
    let metrics = server.get_raw("/metrics").2;
    assert!(metrics.contains("svc_backfill_repos_done"), "{metrics}");
    // And it keeps following the live stream afterwards.
    peers.create_record(&dave, "dev.svc.vocab", vocab_record("held-live"), None);
    server.wait_for(&by_name("held-live"), WITHIN, |b| b["total"] == 1);
}

/// The value of an unlabelled metric in Prometheus text.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}
