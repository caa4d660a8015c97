//! The test-peers harness itself (svc-testkit's peers.rs) against the reference PDS and PLC:
//! account, record write and read back, deactivation and reactivation. Passes without running
//! when the peers cannot start outside CI.

use svc_testkit as common;

use common::peers::peers;
use serde_json::json;

#[test]
fn account_record_deactivate_activate() {
    let Some(peers) = peers() else { return };

    let alice = peers.create_account("smoke");
    assert!(alice.did.starts_with("did:plc:"), "{alice:?}");
    assert!(alice.handle.ends_with(".test"), "{alice:?}");
    let doc = peers.did_doc(&alice.did);
    assert_eq!(
        doc["alsoKnownAs"][0],
        format!("at://{}", alice.handle),
        "{doc}"
    );

    let record = json!({"$type": "dev.svc.vocab", "name": "x", "world": "open",
                        "occurredAt": "2026-01-01T00:00:00Z"});
    let (uri, cid) = peers.create_record(&alice, "dev.svc.vocab", record.clone(), None);
    let rkey = uri
        .strip_prefix(&format!("at://{}/dev.svc.vocab/", alice.did))
        .unwrap_or_else(|| panic!("uri {uri}"))
        .to_string();
    assert!(cid.starts_with("bafyrei"), "{cid}");
    assert_eq!(
        peers.get_record_with_cid(&alice.did, "dev.svc.vocab", &rkey),
        Some((cid.clone(), record.clone()))
    );

    // A chosen rkey, replaced, then deleted.
    let (put_uri, put_cid) = peers.put_record(
        &alice,
        "dev.svc.vocab",
        "chosen",
        json!({"$type": "dev.svc.vocab", "name": "y"}),
    );
    assert_eq!(put_uri, format!("at://{}/dev.svc.vocab/chosen", alice.did));
    let (_, put_cid2) = peers.put_record(
        &alice,
        "dev.svc.vocab",
        "chosen",
        json!({"$type": "dev.svc.vocab", "name": "z"}),
    );
    assert_ne!(put_cid, put_cid2);
    assert_eq!(
        peers
            .get_record(&alice.did, "dev.svc.vocab", "chosen")
            .unwrap()["name"],
        "z"
    );
    peers.delete_record(&alice, "dev.svc.vocab", "chosen");
    assert_eq!(
        peers.get_record(&alice.did, "dev.svc.vocab", "chosen"),
        None
    );

    // Deactivated: the repo is hidden; reactivated: it is back.
    peers.deactivate(&alice);
    let (status, repo) = peers.xrpc_get("com.atproto.sync.getRepoStatus", &[("did", &alice.did)]);
    assert_eq!((status, &repo["active"]), (200, &json!(false)), "{repo}");
    assert_eq!(peers.get_record(&alice.did, "dev.svc.vocab", &rkey), None);
    peers.activate(&alice);
    let (status, repo) = peers.xrpc_get("com.atproto.sync.getRepoStatus", &[("did", &alice.did)]);
    assert_eq!((status, &repo["active"]), (200, &json!(true)), "{repo}");
    assert_eq!(
        peers.get_record(&alice.did, "dev.svc.vocab", &rkey),
        Some(record)
    );

    // Handles stay unique and within the PDS's limits, whatever the prefix.
    let bob = peers.create_account("A very long prefix, with spaces!");
    assert_ne!(bob.did, alice.did);
    let name = bob.handle.strip_suffix(".test").unwrap();
    assert!((3..=18).contains(&name.len()), "{}", bob.handle);
}
