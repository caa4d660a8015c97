//! `#commit` events built here as a PDS builds them (a tree, a signed commit, the blocks of
//! the change), then checked whole and with each part forged.

use k256::ecdsa::SigningKey;
use k256::ecdsa::signature::Signer;
use svc_repo::commit::Commit;
use svc_repo::crypto::PublicKey;
use svc_repo::dagcbor::{Cbor, CidBytes, cid_of, encode};
use svc_repo::mst::{Op, Tree};
use svc_repo::sync::{CommitProof, SyncError};
use svc_syntax::{Did, Tid};

const DID: &str = "did:plc:z72i7hdynmk6r22z27h6tvur";
const REV: &str = "3lqlhxw5rslq4";

fn record(name: &str) -> (CidBytes, Vec<u8>) {
    let block = encode(&Cbor::Map(vec![
        ("name".into(), Cbor::Text(name.into())),
        ("$type".into(), Cbor::Text("dev.svc.vocab".into())),
    ]))
    .unwrap();
    (cid_of(&block), block)
}

fn signer() -> SigningKey {
    SigningKey::from_bytes(&[7u8; 32].into()).unwrap()
}

/// A commit of `data` for DID at REV, signed.
fn signed_commit(data: &[u8]) -> (CidBytes, Vec<u8>) {
    let unsigned = vec![
        ("did".to_string(), Cbor::Text(DID.into())),
        ("rev".to_string(), Cbor::Text(REV.into())),
        ("data".to_string(), Cbor::Link(data.into())),
        ("prev".to_string(), Cbor::Null),
        ("version".to_string(), Cbor::Integer(3)),
    ];
    let signature: k256::ecdsa::Signature =
        signer().sign(&encode(&Cbor::Map(unsigned.clone())).unwrap());
    let signature = signature.normalize_s().unwrap_or(signature);
    let mut signed = unsigned;
    signed.push(("sig".into(), Cbor::Bytes(signature.to_bytes().to_vec())));
    let block = encode(&Cbor::Map(signed)).unwrap();
    (cid_of(&block), block)
}

/// A repository of two records, then a commit creating a third: the event's proof.
struct Event(CommitProof);

impl Event {
    fn new() -> Event {
        let mut tree = Tree::new();
        for name in ["a", "b"] {
            let (cid, _) = record(name);
            tree.insert(format!("dev.svc.vocab/{name}").as_bytes(), &cid)
                .unwrap();
        }
        let prev_data = tree.root_cid().unwrap();
        let (created, block) = record("c");
        tree.insert(b"dev.svc.vocab/c", &created).unwrap();
        let mut blocks = tree.blocks().unwrap();
        blocks.insert(created.clone(), block);
        let (commit, commit_block) = signed_commit(&tree.root_cid().unwrap());
        blocks.insert(commit.clone(), commit_block);
        Event(CommitProof {
            repo: Did::new(DID).unwrap(),
            rev: Tid::new(REV).unwrap(),
            since: None,
            roots: vec![commit.clone()],
            commit,
            blocks,
            ops: vec![Op::Create {
                key: b"dev.svc.vocab/c".to_vec(),
                cid: created,
            }],
            prev_data: Some(prev_data),
        })
    }

    fn check(&self) -> Result<Commit, SyncError> {
        self.0.check()
    }
}

#[test]
fn an_honest_commit_event_passes_and_its_signature_verifies() {
    let commit = Event::new().check().expect("an honest event");
    commit
        .verify(&PublicKey::K256(*signer().verifying_key()))
        .expect("signed by the author");
    let stranger = SigningKey::from_bytes(&[9u8; 32].into()).unwrap();
    assert!(
        commit
            .verify(&PublicKey::K256(*stranger.verifying_key()))
            .is_err()
    );
}

#[test]
fn each_forgery_is_refused_with_its_reason() {
    let reason = |event: Event| event.check().map(|_| ()).map_err(|e| e.label());

    let mut changed_record = Event::new();
    let (created, _) = record("c");
    changed_record.0.blocks.insert(created, record("d").1);
    assert_eq!(reason(changed_record), Err("cid"));

    let mut swapped_op = Event::new();
    swapped_op.0.ops = vec![Op::Create {
        key: b"dev.svc.vocab/c".to_vec(),
        cid: record("d").0,
    }];
    assert_eq!(reason(swapped_op), Err("proof"));

    let mut wrong_prev_data = Event::new();
    wrong_prev_data.0.prev_data = Some(record("x").0);
    assert_eq!(reason(wrong_prev_data), Err("proof"));

    let mut no_prev_data = Event::new();
    no_prev_data.0.prev_data = None;
    assert_eq!(reason(no_prev_data), Err("proof"));

    let mut other_repo = Event::new();
    other_repo.0.repo = Did::new("did:plc:ewvi7nxzyoun6zhxrhs64oiz").unwrap();
    assert_eq!(reason(other_repo), Err("commit"));

    let mut other_rev = Event::new();
    other_rev.0.rev = Tid::new("3lqlhxw5rslq5").unwrap();
    assert_eq!(reason(other_rev), Err("commit"));

    let mut other_root = Event::new();
    other_root.0.roots = vec![record("a").0];
    assert_eq!(reason(other_root), Err("commit"));

    // An op the commit did not make: undoing it from the new tree finds nothing to undo.
    let mut extra_op = Event::new();
    extra_op.0.ops.push(Op::Delete {
        key: b"dev.svc.vocab/z".to_vec(),
        prev: record("z").0,
    });
    assert_eq!(reason(extra_op), Err("proof"));
}
