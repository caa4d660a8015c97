//! Repositories of the reference PDS, read whole (`com.atproto.sync.getRepo`) and checked as
//! svc checks what it indexes: every block is its CID, the commit is the CAR's root, its tree
//! walks whole to the records, and its signature verifies with the key the author's DID
//! document names; a changed byte does not.
//! Passes without running when the peers cannot start outside CI.

use svc_testkit as common;

use common::peers::peers;
use serde_json::json;
use svc_repo::car;
use svc_repo::commit::Commit;
use svc_repo::crypto::PublicKey;
use svc_repo::dagcbor::check_block;
use svc_repo::mst;

fn repository(did: &str) -> Vec<u8> {
    let peers = peers().expect("peers");
    let response = peers
        .http()
        .get(format!(
            "{}/xrpc/com.atproto.sync.getRepo?did={did}",
            peers.pds
        ))
        .send()
        .expect("getRepo");
    assert_eq!(response.status(), 200);
    response.bytes().expect("a CAR").to_vec()
}

fn signing_key(did: &str) -> PublicKey {
    let document = peers().expect("peers").did_doc(did);
    let method = document["verificationMethod"]
        .as_array()
        .and_then(|methods| {
            methods
                .iter()
                .find(|m| m["id"].as_str().is_some_and(|id| id.ends_with("#atproto")))
        })
        .unwrap_or_else(|| panic!("no #atproto method in {document}"));
    PublicKey::from_verification_method(
        method["type"].as_str().unwrap_or_default(),
        method["publicKeyMultibase"].as_str().unwrap_or_default(),
    )
    .expect("a signing key")
}

#[test]
fn a_repository_read_whole_is_signed_by_its_author() {
    let Some(peers) = peers() else { return };
    let alice = peers.create_account("signed");
    for name in ["one", "two"] {
        let record = json!({"$type": "dev.svc.vocab", "name": name, "world": "open",
                            "occurredAt": "2026-01-01T00:00:00Z"});
        peers.create_record(&alice, "dev.svc.vocab", record, None);
    }
    let (roots, blocks) = car::read(&repository(&alice.did)).expect("a CAR");
    let [root] = roots.as_slice() else {
        panic!("one root, not {}", roots.len())
    };
    for (cid, block) in &blocks {
        check_block(cid, block).expect("every block is its CID");
    }
    let commit = Commit::decode(&blocks[root]).expect("a commit");
    assert_eq!(commit.did.as_str(), alice.did);
    // The whole tree walks from the commit's root, and each record it names is there.
    let entries = mst::walk(&commit.data, &blocks).expect("the whole tree");
    let records: Vec<&[u8]> = entries
        .iter()
        .filter(|(key, _)| key.starts_with(b"dev.svc.vocab/"))
        .map(|(_, cid)| blocks[cid].as_slice())
        .collect();
    assert_eq!(records.len(), 2);
    let key = signing_key(&alice.did);
    commit.verify(&key).expect("signed by the author's key");

    // The same commit with one byte of its signature changed, or checked against another
    // account's key, does not verify.
    let mut forged = commit.clone();
    forged.sig[10] ^= 0x01;
    assert!(forged.verify(&key).is_err());
    let bob = peers.create_account("other");
    assert!(commit.verify(&signing_key(&bob.did)).is_err());
}

/// The commit at the head of `did`'s repository.
fn head_commit(did: &str) -> Commit {
    let (roots, blocks) = car::read(&repository(did)).expect("a CAR");
    Commit::decode(&blocks[&roots[0]]).expect("a commit")
}

#[test]
fn signing_keys_are_read_once_and_read_again_when_a_signature_fails() {
    let Some(peers) = peers() else { return };
    let (alice, bob) = (peers.create_account("keys"), peers.create_account("keys"));
    let theirs = head_commit(&alice.did);
    // Bob's commit, claimed as Alice's.
    let mut forged = head_commit(&bob.did);
    forged.did = theirs.did.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = svc_atproto::http_client(std::time::Duration::from_secs(10)).unwrap();
    let keys = svc_ingest::SigningKeys::new(svc_atproto::Resolver::new(http, &peers.plc));
    let alices_key = signing_key(&alice.did);
    runtime.block_on(async {
        keys.verify(&theirs).await.expect("alice's own commit");
        assert_eq!(keys.key(&theirs.did).await.unwrap(), alices_key);
        let refused = keys.verify(&forged).await.unwrap_err();
        assert!(
            matches!(refused, svc_ingest::KeyCheckError::Signature(_)),
            "{refused}"
        );
        // Forgotten (an #identity event), the key is read again and still verifies.
        keys.forget(&theirs.did);
        keys.verify(&theirs).await.expect("read again");
        let nobody = svc_syntax::Did::new("did:plc:aaaaaaaaaaaaaaaaaaaaaaaa").unwrap();
        assert!(matches!(
            keys.key(&nobody).await,
            Err(svc_ingest::KeyCheckError::Key { .. })
        ));
    });
}

#[test]
fn a_repository_export_imports_verified_and_a_forged_one_is_refused() {
    let Some(peers) = peers() else { return };
    let erin = peers.create_account("export");
    for name in ["Exported", "Exported-too"] {
        let record = json!({"$type": "dev.svc.vocab", "name": name, "world": "open",
                            "occurredAt": "2026-01-01T00:00:00Z"});
        peers.create_record(&erin, "dev.svc.vocab", record, None);
    }
    let export = repository(&erin.did);
    // The same repository with one record's text changed: its block is no longer its CID.
    let mut forged = export.clone();
    let at = forged
        .windows(b"Exported-too".len())
        .position(|w| w == b"Exported-too")
        .expect("the record's text");
    forged[at] = b'X';
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("erin.car"), dir.path().join("forged.car"));
    std::fs::write(&good, &export).unwrap();
    std::fs::write(&bad, &forged).unwrap();
    let server = common::Server::start(
        dir.path().join("catalog.db"),
        &[
            "--import",
            bad.to_str().unwrap(),
            "--import",
            good.to_str().unwrap(),
        ],
    );
    for name in ["Exported", "Exported-too"] {
        let (_, body) = server.get(&format!("/v1/vocabularies/by-name?name={name}"));
        assert_eq!(body["total"], 1, "{name}");
        assert_eq!(body["items"][0]["author"], erin.did.as_str());
    }
    let (_, body) = server.get("/v1/vocabularies/by-name?name=Xxported-too");
    assert_eq!(body["total"], 0);
    let metrics = server.get_raw("/metrics").2;
    assert!(
        metrics.contains("svc_ingest_unverified_total{reason=\"cid\"} 1"),
        "{metrics}"
    );
}

/// An export whose `n` paths all name one small vocabulary block.
fn one_block_many_paths(n: usize) -> Vec<u8> {
    use svc_repo::author::{Repository, SigningKey, Write};
    use svc_repo::crypto::Curve;
    use svc_repo::dagcbor::Cbor;
    let did = svc_syntax::Did::new(format!("did:plc:paths{n}")).unwrap();
    let key = SigningKey::from_seed(Curve::K256, b"a key for exports of many paths");
    let record = Cbor::Map(vec![
        ("name".into(), Cbor::Text("same".into())),
        ("$type".into(), Cbor::Text("dev.svc.vocab".into())),
        ("world".into(), Cbor::Text("open".into())),
        (
            "occurredAt".into(),
            Cbor::Text("2026-01-01T00:00:00Z".into()),
        ),
    ]);
    let writes: Vec<Write> = (0..n)
        .map(|i| Write::create("dev.svc.vocab", &format!("r{i:07}"), record.clone()))
        .collect();
    let mut repository = Repository::new(did, key);
    repository.commit(&writes).expect("a commit");
    repository.car().expect("an export")
}

/// Paths that all name one record block count once each: an export past the records one
/// repository may hold is refused whole, named in the log and counted (`oversized`); one
/// within it is applied in batches, every record served.
#[test]
fn an_export_past_the_records_one_repository_may_hold_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (oversized, within) = (dir.path().join("over.car"), dir.path().join("within.car"));
    std::fs::write(&oversized, one_block_many_paths(100_001)).unwrap();
    std::fs::write(&within, one_block_many_paths(2_500)).unwrap();
    let mut server = common::Server::listening(
        dir.path().join("catalog.db"),
        &[
            "--firehose",
            "none",
            "--verify",
            "none",
            "--import",
            oversized.to_str().unwrap(),
            "--import",
            within.to_str().unwrap(),
        ],
    );
    let refused = server.wait_log("import refused", std::time::Duration::from_secs(60));
    assert!(refused.contains("100001 records"), "{refused}");
    server.wait_ready();
    let (_, stats) = server.get("/v1/stats");
    assert_eq!(stats["vocabularies"], 2_500, "{stats}");
    let metrics = server.get_raw("/metrics").2;
    assert!(
        metrics.contains("svc_ingest_unverified_total{reason=\"oversized\"} 1"),
        "{metrics}"
    );
}
