//! Labelers are inputs too: one that hangs is pinged, then left and connected to again; one
//! that sends garbage is left and connected to again; labels with a bad signature, a value
//! too long or a subject that is no DID or record are refused and counted by name; a flood is
//! stored in batches, the server's memory bounded; nothing is lost through any of it.

use svc_testkit as common;

use common::labeler::{Behaviour, HostileLabeler};
use common::*;
use std::time::{Duration, Instant};

const REQUESTER: &str = "did:plc:requester";
const WITHIN: Duration = Duration::from_secs(20);

fn start(dir: &tempfile::TempDir, labeler: &HostileLabeler) -> (Server, String) {
    let (file, uri) = one_bounty(dir.path(), REQUESTER);
    let server = Server::start(
        dir.path().join("catalog.db"),
        &[
            "--import",
            file.to_str().unwrap(),
            "--labeler",
            labeler.did.as_str(),
            "--liveness",
            "1s",
        ],
    );
    (server, uri)
}

fn counted(server: &Server, labeler: &str, series: &str, outcome: Option<&str>) -> u64 {
    let labels = match outcome {
        Some(outcome) => format!("{{labeler=\"{labeler}\",outcome=\"{outcome}\"}}"),
        None => format!("{{labeler=\"{labeler}\"}}"),
    };
    let text = server.get_raw("/metrics").2;
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{series}{labels} ")))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

fn wait_until(what: &str, check: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < WITHIN, "{what} within {WITHIN:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

fn label_values(server: &Server) -> Vec<String> {
    let (_, page) = server.get(&format!(
        "/v1/bounties/by-requester?requester_did={REQUESTER}"
    ));
    page["items"][0]["labels"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|label| label["val"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_hanging_or_garbled_labeler_is_left_and_followed_again_and_bad_labels_counted() {
    let labeler = HostileLabeler::start();
    labeler.behave(Behaviour::Hang);
    let dir = tempfile::tempdir().unwrap();
    let (server, uri) = start(&dir, &labeler);
    let did = labeler.did.as_str();

    // Hanging: pinged after 1 s of quiet, left after 2 s with the ping unanswered.
    let took = wait_until("a second connection", || labeler.cursors().len() >= 2);
    eprintln!("a hanging labeler left after {took:?}");
    assert!(counted(&server, did, "svc_labeler_reconnects_total", None) >= 1);

    // Garbage: counted and left at once.
    labeler.behave(Behaviour::GarbageFirst);
    let before = labeler.cursors().len();
    wait_until("a connection after the garbage", || {
        labeler.cursors().len() > before + 1
    });
    assert!(counted(&server, did, "svc_labels_total", Some("malformed")) >= 1);

    // Served at last: good labels shown, bad ones refused by name, none of them lost.
    labeler.behave(Behaviour::Serve);
    labeler.add(&uri, "first", false, false);
    labeler.add(&uri, "forged", false, true);
    labeler.add(&uri, &"x".repeat(129), false, false);
    labeler.add("https://example.com/not-a-subject", "spam", false, false);
    labeler.add("at://did:plc:alice", "no-record", false, false);
    labeler.add(&uri, "second", false, false);
    wait_until("both good labels shown", || {
        label_values(&server).len() == 2
    });
    assert_eq!(label_values(&server), ["first", "second"]);
    let outcome = |name| counted(&server, did, "svc_labels_total", Some(name));
    assert_eq!(
        (
            outcome("applied"),
            outcome("signature"),
            outcome("oversized")
        ),
        (2, 1, 1)
    );
    assert!(outcome("malformed") >= 3, "garbage, and two subjects");
    // Every connection after the first resumed from what was stored: nothing read twice.
    let cursors = labeler.cursors();
    assert_eq!(cursors.first(), Some(&Some(0)), "{cursors:?}");
}

/// The server's peak resident memory, in KiB.
fn peak_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
        .expect("the server's /proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().strip_suffix("kB"))
        .and_then(|value| value.trim().parse().ok())
        .expect("VmHWM in kB")
}

#[test]
fn a_flood_of_labels_is_stored_whole_in_bounded_memory() {
    const FLOOD: usize = 20_000;
    let labeler = HostileLabeler::start();
    labeler.flood(FLOOD);
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = start(&dir, &labeler);
    let did = labeler.did.as_str();
    let took = wait_until("the whole flood stored", || {
        counted(&server, did, "svc_labels_total", Some("applied")) == FLOOD as u64
    });
    let peak = peak_kib(&server) / 1024;
    eprintln!("{FLOOD} labels stored in {took:?}; peak resident memory {peak} MiB");
    // A batch holds at most 1,000 labels and a message at most 1 MiB: the flood passes
    // through, it is not held.
    assert!(peak < 160, "peak resident memory {peak} MiB");
    let (_, stats) = server.get("/v1/stats");
    assert_eq!(stats["bounties"], 1, "{stats}");
}

#[test]
fn a_labeler_that_lost_its_labels_is_read_again_from_the_first() {
    let labeler = HostileLabeler::start();
    let dir = tempfile::tempdir().unwrap();
    let (file, uri) = one_bounty(dir.path(), REQUESTER);
    labeler.add(&uri, "first", false, false);
    labeler.add(&uri, "second", false, false);
    let args = [
        "--import",
        file.to_str().unwrap(),
        "--labeler",
        labeler.did.as_str(),
    ];
    let server = Server::start(dir.path().join("catalog.db"), &args);
    wait_until("both labels shown", || label_values(&server).len() == 2);
    server.stop();

    // The labeler comes back with one label: svc's cursor, 2, is in its future.
    labeler.forget_all();
    labeler.add(&uri, "third", false, false);
    let server = Server::start(dir.path().join("catalog.db"), &args);
    wait_until("the new label shown", || label_values(&server).len() == 3);
    let cursors = labeler.cursors();
    assert_eq!(
        cursors[cursors.len() - 2..],
        [Some(2), Some(0)],
        "{cursors:?}"
    );
}
