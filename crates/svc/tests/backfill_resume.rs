//! A backfill killed once its listing is stored goes on from the queue it left: the restart
//! lists nothing again and reads what was listed. Passes without running when the peers
//! cannot start outside CI.

use svc_testkit as common;

use common::peers::peers;
use common::*;
use std::time::Duration;

#[test]
fn a_backfill_killed_after_its_listing_reads_what_it_listed_without_listing_again() {
    let Some(peers) = peers() else { return };
    let mut written = std::collections::BTreeSet::new();
    for n in 0..20 {
        let account = peers.create_account("resume");
        let record = vocab(&format!("resume-{n}"), "open");
        written.insert(
            peers
                .create_record(&account, "dev.svc.vocab", record, None)
                .0,
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let args = [
        "--firehose",
        "none",
        "--backfill",
        peers.pds.as_str(),
        "--plc-url",
        peers.plc.as_str(),
    ];
    // Killed once the listing is stored: the queue holds what is left to read.
    let mut first = Server::listening(&db, &args);
    first.wait_log("backfill: the listing ended", Duration::from_secs(60));
    first.kill9();
    let mut second = Server::listening(&db, &args);
    let resumed = second.wait_log("was listed before", Duration::from_secs(30));
    eprintln!("{resumed}");
    second.wait_ready();
    let found: std::collections::BTreeSet<String> = second
        .uris("/v1/vocabularies/by-world?world=open&limit=1000")
        .into_iter()
        .filter(|uri| written.contains(uri))
        .collect();
    assert_eq!(found, written);
}
