//! Takedowns against the reference PDS's firehose, through plain HTTP as an operator's tool
//! sends them: a record taken down stays down when its author publishes a new revision of
//! it; an account's stays down for the records it publishes afterwards; both hold through a
//! backfill that reads every repository whole again, and lift to the newest revisions.

use svc_testkit as common;

use common::peers::{Account, Peers, peers};
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

const PASSWORD: &str = "correct horse battery staple";
const WITHIN: Duration = Duration::from_secs(15);

fn vocab(name: &str) -> Value {
    json!({"$type": "dev.svc.vocab", "name": name, "world": "open", "occurredAt": NOW})
}

fn named(server: &Server, name: &str) -> u64 {
    let (_, body) = server.get(&format!("/v1/vocabularies/by-name?name={name}"));
    body["total"].as_u64().unwrap_or(0)
}

fn wait_named(server: &Server, name: &str, total: u64) {
    let path = format!("/v1/vocabularies/by-name?name={name}");
    server.wait_for(&path, WITHIN, |body| body["total"] == total);
}

fn update(server: &Server, subject: Value, applied: bool) {
    assert_eq!(server.set_takedown(PASSWORD, subject, applied), 200);
}

fn record(uri: &str) -> Value {
    json!({"$type": "com.atproto.repo.strongRef", "uri": uri, "cid": CID})
}

fn account(who: &Account) -> Value {
    json!({"$type": "com.atproto.admin.defs#repoRef", "did": who.did})
}

fn serve(db: &str, peers: &Peers, password: &str, backfill: bool) -> Server {
    let mut args = vec![
        "--firehose",
        peers.pds_ws.as_str(),
        "--plc-url",
        peers.plc.as_str(),
        "--admin-password-file",
        password,
        "--ready-lag",
        "5s",
        "--liveness",
        "5s",
    ];
    if backfill {
        args.extend(["--backfill", peers.pds.as_str()]);
    }
    Server::launch(db, &args)
}

each_backend!(takedowns_hold_through_new_revisions_new_records_and_a_backfill);

fn takedowns_hold_through_new_revisions_new_records_and_a_backfill(backend: Backend) {
    let Some(peers) = peers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let password_file = dir.path().join("admin-password");
    svc_testkit::write_private(&password_file, PASSWORD);
    let password = password_file.to_str().unwrap();
    let server = serve(&db, peers, password, false);
    let (alice, bob) = (peers.create_account("down"), peers.create_account("down"));
    // Names unique to this run: the peers are shared by the tests of this binary.
    let name = |what: &str, who: &Account| format!("{what}-{}", who.did.replace(':', "-"));
    let (a1, _) = peers.create_record(&alice, "dev.svc.vocab", vocab(&name("a1", &alice)), None);
    peers.create_record(&bob, "dev.svc.vocab", vocab(&name("b1", &bob)), None);
    wait_named(&server, &name("a1", &alice), 1);
    wait_named(&server, &name("b1", &bob), 1);

    // A record taken down stays down through its author's new revision.
    update(&server, record(&a1), true);
    wait_named(&server, &name("a1", &alice), 0);
    let rkey = a1.rsplit('/').next().expect("an rkey");
    let renamed = name("a1-renamed", &alice);
    peers.put_record(&alice, "dev.svc.vocab", rkey, vocab(&renamed));
    // An account taken down stays down for what it publishes afterwards.
    update(&server, account(&bob), true);
    wait_named(&server, &name("b1", &bob), 0);
    peers.create_record(&bob, "dev.svc.vocab", vocab(&name("b2", &bob)), None);
    // A later record of another author marks where the firehose has reached.
    peers.create_record(&alice, "dev.svc.vocab", vocab(&name("a2", &alice)), None);
    wait_named(&server, &name("a2", &alice), 1);
    assert_eq!(named(&server, &renamed), 0, "the new revision stays down");
    assert_eq!(
        named(&server, &name("b2", &bob)),
        0,
        "the new record stays down"
    );
    server.stop();

    // A backfill reads every repository whole again: nothing taken down comes back.
    let server = serve(&db, peers, password, true);
    assert_eq!(named(&server, &name("a2", &alice)), 1);
    for hidden in [renamed.clone(), name("b1", &bob), name("b2", &bob)] {
        assert_eq!(named(&server, &hidden), 0, "{hidden} after the backfill");
    }

    // Lifted, each comes back at its newest revision.
    update(&server, record(&a1), false);
    update(&server, account(&bob), false);
    wait_named(&server, &renamed, 1);
    assert_eq!(
        named(&server, &name("a1", &alice)),
        0,
        "the old revision is gone"
    );
    wait_named(&server, &name("b1", &bob), 1);
    wait_named(&server, &name("b2", &bob), 1);
    server.stop();
}
