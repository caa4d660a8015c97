//! Repositories written here as their authors keep them, through random histories of
//! creates, updates and deletes: every commit event proves itself as Sync 1.1 asks and is
//! signed by its author's key alone, each slice carries no unchanged node it could do
//! without, the whole repository reads back to the records written, and the frames decode to
//! what was put in them.

use std::collections::{BTreeMap, HashSet};
use svc_repo::author::{
    AuthorError, CommitEvent, Repository, SigningKey, Write, account_frame, identity_frame,
    sync_frame,
};
use svc_repo::car;
use svc_repo::commit::Commit;
use svc_repo::crypto::Curve;
use svc_repo::dagcbor::{self, Cbor, CidBytes, check_block};
use svc_repo::mst::{self, Op};
use svc_syntax::{Did, Tid, UnixMicros};

const START: i64 = 1_767_225_600_000_000; // 2026-01-01

/// splitmix64: a fixed pseudo-random sequence, so that failures repeat.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn did(n: usize) -> Did {
    Did::new(format!("did:plc:author{n:019}")).unwrap()
}

fn vocab(name: &str) -> Cbor {
    Cbor::Map(vec![
        ("$type".into(), Cbor::Text("dev.svc.vocab".into())),
        ("name".into(), Cbor::Text(name.into())),
        ("world".into(), Cbor::Text("open".into())),
        (
            "occurredAt".into(),
            Cbor::Text("2026-01-01T00:00:00Z".into()),
        ),
    ])
}

fn cid_of(record: &Cbor) -> CidBytes {
    dagcbor::cid_of(&dagcbor::encode(record).unwrap())
}

/// Every block of a repository's CAR.
fn all_blocks(repo: &Repository) -> svc_repo::dagcbor::Blocks {
    repo.car()
        .map(|car| car::blocks(&car).unwrap())
        .unwrap_or_default()
}

/// A random commit of one to four writes on what `model` holds.
fn random_writes(random: &mut Random, model: &BTreeMap<String, Cbor>, n: &mut u64) -> Vec<Write> {
    let mut writes = Vec::new();
    let mut touched = HashSet::new();
    for _ in 0..1 + random.below(4) {
        let existing: Vec<&String> = model.keys().filter(|p| !touched.contains(*p)).collect();
        let choice = random.below(10);
        *n += 1;
        let name = format!("name {n}");
        let collection = ["dev.svc.vocab", "app.bsky.feed.post"][random.below(2)];
        let write = if existing.is_empty() || choice < 5 {
            let rkey = Tid::from_time(UnixMicros(START + *n as i64), 0);
            Write::create(collection, &rkey, vocab(&name))
        } else {
            let path = existing[random.below(existing.len())];
            let (collection, rkey) = path.split_once('/').unwrap();
            if choice < 8 {
                Write::update(collection, rkey, vocab(&name))
            } else {
                Write::delete(collection, rkey)
            }
        };
        touched.insert(write.path());
        writes.push(write);
    }
    writes
}

fn apply(model: &mut BTreeMap<String, Cbor>, writes: &[Write]) {
    for write in writes {
        match write {
            Write::Create { record, .. } | Write::Update { record, .. } => {
                model.insert(write.path(), record.clone());
            }
            Write::Delete { .. } => {
                model.remove(&write.path());
            }
        }
    }
}

/// The event proves itself, is its author's, and chains on from what came before.
fn check_event(repo: &Repository, event: &CommitEvent, before: Option<(&Tid, &CidBytes)>) {
    let commit = event.proof().check().expect("the event proves itself");
    commit.verify(&repo.public()).expect("signed by the author");
    assert_eq!(dagcbor::cid_of(&event.blocks[0].1), event.commit);
    assert_eq!(commit.data, event.data);
    assert_eq!(commit.rev, event.rev);
    assert_eq!(event.since.as_ref(), before.map(|(rev, _)| rev));
    if let Some((rev, data)) = before {
        assert!(event.rev > *rev, "{} after {rev}", event.rev);
        assert_eq!(event.prev_data, *data);
    }
    // Read back from the CAR the frame carries, the proof is the same.
    let (roots, blocks) = car::read(&event.car()).unwrap();
    assert_eq!(roots, std::slice::from_ref(&event.commit));
    assert_eq!(blocks, event.proof().blocks);
    assert_eq!(blocks.len(), event.blocks.len(), "no block twice");
}

/// Each unchanged node the slice carries is needed: without it, the proof fails.
fn check_no_spare_nodes(event: &CommitEvent, before: &svc_repo::dagcbor::Blocks) {
    for (cid, _) in event.blocks.iter().skip(1) {
        if !before.contains_key(cid) || event.ops.iter().any(|op| op_cid(op) == Some(cid)) {
            continue;
        }
        let mut without = event.proof();
        without.blocks.remove(cid);
        assert!(
            without.check().is_err(),
            "{} was not needed",
            svc_syntax::cid_to_string(cid)
        );
    }
}

fn op_cid(op: &Op) -> Option<&CidBytes> {
    match op {
        Op::Create { cid, .. } | Op::Update { cid, .. } => Some(cid),
        Op::Delete { .. } => None,
    }
}

/// The whole repository reads back: its commit verifies, its tree walks to the records.
fn check_whole(repo: &Repository, model: &BTreeMap<String, Cbor>) {
    let (roots, blocks) = car::read(&repo.car().expect("a commit")).unwrap();
    let [root] = roots.as_slice() else {
        panic!("one root, not {}", roots.len())
    };
    for (cid, block) in &blocks {
        check_block(cid, block).expect("every block is its CID");
    }
    let commit = Commit::decode(&blocks[root]).unwrap();
    commit.verify(&repo.public()).unwrap();
    assert_eq!(commit.did, *repo.did());
    let walked = mst::walk(&commit.data, &blocks).expect("the whole tree");
    let expected: Vec<(Vec<u8>, CidBytes)> = model
        .iter()
        .map(|(path, record)| (path.clone().into_bytes(), cid_of(record)))
        .collect();
    assert_eq!(walked, expected);
    for (path, record) in model {
        let block = &blocks[&cid_of(record)];
        assert_eq!(block, &dagcbor::encode(record).unwrap(), "{path}");
    }
    let records: BTreeMap<String, CidBytes> = model
        .iter()
        .map(|(path, record)| (path.clone(), cid_of(record)))
        .collect();
    assert_eq!(repo.records(), &records);
}

#[test]
fn random_histories_prove_and_verify_every_commit() {
    let mut random = Random(7);
    let mut n = 0;
    for r in 0..6 {
        let curve = [Curve::K256, Curve::P256][r % 2];
        let key = SigningKey::from_seed(curve, format!("author {r}").as_bytes());
        let mut repo = Repository::new(did(r), key);
        let mut model = BTreeMap::new();
        let mut time = START;
        for step in 0..300 {
            let writes = random_writes(&mut random, &model, &mut n);
            let before_blocks = all_blocks(&repo);
            let before = repo
                .head()
                .map(|head| (head.rev.clone(), head.data.clone()));
            // Now and then the clock stands still or steps back: revisions still increase.
            time += [1_000_000, 0, -5_000_000][random.below(3)];
            let event = repo.commit_at(UnixMicros(time), &writes).unwrap();
            check_event(
                &repo,
                &event,
                before.as_ref().map(|(rev, data)| (rev, data)),
            );
            if before.is_none() {
                assert_eq!(event.prev_data, mst::Tree::new().root_cid().unwrap());
            }
            check_no_spare_nodes(&event, &before_blocks);
            apply(&mut model, &writes);
            if step % 20 == 19 {
                check_whole(&repo, &model);
            }
        }
        check_whole(&repo, &model);
    }
}

#[test]
fn a_repository_emptied_still_proves_and_reads_back() {
    let mut repo = Repository::new(did(9), SigningKey::from_seed(Curve::K256, b"empty"));
    let mut model = BTreeMap::new();
    let paths: Vec<Write> = (0..40)
        .map(|i| {
            let rkey = Tid::from_time(UnixMicros(START + i), 1);
            Write::create("dev.svc.vocab", &rkey, vocab(&format!("v{i}")))
        })
        .collect();
    for chunk in paths.chunks(7) {
        let before = repo.head().map(|h| (h.rev.clone(), h.data.clone()));
        let event = repo.commit(chunk).unwrap();
        check_event(&repo, &event, before.as_ref().map(|(r, d)| (r, d)));
        apply(&mut model, chunk);
    }
    check_whole(&repo, &model);
    let deletes: Vec<Write> = paths
        .iter()
        .map(|w| {
            let path = w.path();
            let (collection, rkey) = path.split_once('/').unwrap();
            Write::delete(collection, rkey)
        })
        .collect();
    let before = repo.head().map(|h| (h.rev.clone(), h.data.clone()));
    let event = repo.commit(&deletes).unwrap();
    check_event(&repo, &event, before.as_ref().map(|(r, d)| (r, d)));
    assert_eq!(event.data, mst::Tree::new().root_cid().unwrap());
    apply(&mut model, &deletes);
    assert!(model.is_empty());
    check_whole(&repo, &model);
    // An empty commit proves itself too: nothing undone, the same root.
    let event = repo.commit(&[]).unwrap();
    assert_eq!(event.prev_data, event.data);
    event.proof().check().unwrap();
}

#[test]
fn a_commit_signed_by_another_key_does_not_verify() {
    let author = SigningKey::from_seed(Curve::K256, b"author");
    let stranger = SigningKey::from_seed(Curve::K256, b"stranger");
    let mut repo = Repository::new(did(1), author.clone());
    let event = repo
        .commit(&[Write::create("dev.svc.vocab", "3lqlhxw5rslq4", vocab("a"))])
        .unwrap();
    let forged = event.signed_by(&stranger);
    assert_ne!(forged.commit, event.commit);
    assert_eq!(forged.blocks.len(), event.blocks.len());
    // Everything but the signature holds: only the key tells the forgery.
    let commit = forged.proof().check().expect("a well-formed forgery");
    assert!(commit.verify(&author.public()).is_err());
    commit.verify(&stranger.public()).unwrap();
    assert!(
        Commit::decode(&event.blocks[0].1)
            .unwrap()
            .verify(&stranger.public())
            .is_err()
    );

    // After a rotation, commits are the new key's.
    repo.set_key(stranger.clone());
    let event = repo
        .commit(&[Write::create("dev.svc.vocab", "3lqlhxw5rslq5", vocab("b"))])
        .unwrap();
    let commit = event.proof().check().unwrap();
    commit.verify(&stranger.public()).unwrap();
    assert!(commit.verify(&author.public()).is_err());
}

#[test]
fn keys_come_from_seeds_and_secrets_and_sign_low_s() {
    for curve in [Curve::K256, Curve::P256] {
        let one = SigningKey::from_seed(curve, b"one");
        assert_eq!(one.public(), SigningKey::from_seed(curve, b"one").public());
        assert_ne!(one.public(), SigningKey::from_seed(curve, b"two").public());
        assert_eq!(one.curve(), curve);
        // PublicKey::verify refuses high S: every signature verifying means every one is low.
        for i in 0..64u32 {
            let message = i.to_be_bytes();
            let signature = one.sign(&message);
            one.public().verify(&message, &signature).unwrap();
            assert_eq!(signature, one.sign(&message), "deterministic");
        }
        assert_eq!(
            SigningKey::from_secret(curve, &[0; 32]).unwrap_err(),
            AuthorError::Secret(curve)
        );
        assert!(SigningKey::from_secret(curve, &[0xff; 32]).is_err());
        let key = SigningKey::from_secret(curve, &[7; 32]).unwrap();
        assert!(format!("{key:?}").contains(&key.public().did_key()));
    }
}

#[test]
fn writes_that_cannot_apply_leave_the_repository_as_it_was() {
    let mut repo = Repository::new(did(2), SigningKey::from_seed(Curve::P256, b"errors"));
    repo.commit(&[Write::create("dev.svc.vocab", "a", vocab("a"))])
        .unwrap();
    let head = repo.head().cloned();
    let records = repo.records().clone();
    let refused = [
        (
            vec![
                Write::create("dev.svc.vocab", "b", vocab("b")),
                Write::create("dev.svc.vocab", "a", vocab("x")),
            ],
            "exists",
        ),
        (
            vec![Write::update("dev.svc.vocab", "z", vocab("z"))],
            "absent",
        ),
        (vec![Write::delete("dev.svc.vocab", "z")], "absent"),
        (
            vec![
                Write::create("dev.svc.vocab", "c", vocab("c")),
                Write::delete("dev.svc.vocab", "c"),
            ],
            "twice",
        ),
        (
            vec![Write::create(
                "dev.svc.vocab",
                "f",
                Cbor::Map(vec![("f".into(), Cbor::Float(f64::NAN))]),
            )],
            "record",
        ),
        (
            vec![Write::create(
                "dev.svc.vocab",
                &"k".repeat(2000),
                vocab("k"),
            )],
            "path",
        ),
    ];
    for (writes, reason) in refused {
        let error = repo.commit(&writes).unwrap_err();
        let matches = match reason {
            "exists" => matches!(error, AuthorError::Exists { .. }),
            "absent" => matches!(error, AuthorError::Absent { .. }),
            "twice" => matches!(error, AuthorError::Twice { .. }),
            "record" => matches!(error, AuthorError::Record { .. }),
            _ => matches!(error, AuthorError::Path { .. }),
        };
        assert!(matches, "{reason}: {error}");
        assert_eq!(repo.head().cloned(), head);
        assert_eq!(repo.records(), &records);
    }
    // The same record at two paths is one block, kept while either holds it.
    repo.commit(&[Write::create("dev.svc.vocab", "b", vocab("a"))])
        .unwrap();
    repo.commit(&[Write::delete("dev.svc.vocab", "a")]).unwrap();
    assert!(repo.record_block(&cid_of(&vocab("a"))).is_some());
    repo.commit(&[Write::update("dev.svc.vocab", "b", vocab("b"))])
        .unwrap();
    assert!(repo.record_block(&cid_of(&vocab("a"))).is_none());
    assert!(repo.record_block(&cid_of(&vocab("b"))).is_some());
}

#[test]
fn revisions_follow_the_callers_clock_and_always_increase() {
    let mut repo = Repository::new(did(3), SigningKey::from_seed(Curve::K256, b"clock"));
    let write = |i: i64| [Write::create("dev.svc.vocab", &format!("r{i}"), vocab("r"))];
    let first = repo.commit_at(UnixMicros(START), &write(0)).unwrap();
    assert_eq!(first.rev.time(), UnixMicros(START));
    assert_eq!(first.since, None);
    let later = repo.commit_at(UnixMicros(START + 10), &write(1)).unwrap();
    assert_eq!(later.rev.time(), UnixMicros(START + 10));
    let earlier = repo.commit_at(UnixMicros(START - 99), &write(2)).unwrap();
    assert_eq!(earlier.rev.time(), UnixMicros(START + 11));
    assert_eq!(earlier.since, Some(later.rev.clone()));
    assert!(earlier.rev > later.rev && later.rev > first.rev);
    let now = repo.commit(&write(3)).unwrap();
    assert!(now.rev > earlier.rev);
}

fn decode_frame(frame: &[u8]) -> (Cbor, Cbor) {
    let (header, rest) = dagcbor::decode(frame).unwrap();
    let body = dagcbor::decode_block(rest).unwrap();
    (header, body)
}

fn field<'a>(body: &'a Cbor, name: &str) -> &'a Cbor {
    body.get(name).unwrap_or_else(|| panic!("no {name}"))
}

fn kind(header: &Cbor) -> &str {
    assert_eq!(field(header, "op"), &Cbor::Integer(1));
    field(header, "t").as_str().unwrap()
}

#[test]
fn commit_frames_decode_to_the_event() {
    let mut repo = Repository::new(did(4), SigningKey::from_seed(Curve::K256, b"frames"));
    let mut events = Vec::new();
    events.push(
        repo.commit(&[
            Write::create("dev.svc.vocab", "a", vocab("a")),
            Write::create("dev.svc.vocab", "b", vocab("b")),
        ])
        .unwrap(),
    );
    events.push(
        repo.commit(&[
            Write::update("dev.svc.vocab", "a", vocab("a2")),
            Write::delete("dev.svc.vocab", "b"),
        ])
        .unwrap(),
    );
    for (seq, event) in events.iter().enumerate() {
        let frame = event.frame(seq as i64 + 100, UnixMicros(START));
        let (header, body) = decode_frame(&frame);
        assert_eq!(kind(&header), "#commit");
        assert_eq!(field(&body, "seq").as_i64(), Some(seq as i64 + 100));
        assert_eq!(field(&body, "rebase"), &Cbor::Bool(false));
        assert_eq!(field(&body, "tooBig"), &Cbor::Bool(false));
        assert_eq!(field(&body, "repo").as_str(), Some(repo.did().as_str()));
        assert_eq!(field(&body, "commit").as_link(), Some(&event.commit[..]));
        assert_eq!(field(&body, "rev").as_str(), Some(event.rev.as_str()));
        match &event.since {
            Some(since) => assert_eq!(field(&body, "since").as_str(), Some(since.as_str())),
            None => assert_eq!(field(&body, "since"), &Cbor::Null),
        }
        assert_eq!(field(&body, "blocks").as_bytes(), Some(&event.car()[..]));
        assert_eq!(field(&body, "blobs"), &Cbor::Array(vec![]));
        assert_eq!(
            field(&body, "prevData").as_link(),
            Some(&event.prev_data[..])
        );
        assert_eq!(
            field(&body, "time").as_str(),
            Some("2026-01-01T00:00:00.000Z")
        );
        let ops = field(&body, "ops").as_array().unwrap();
        assert_eq!(ops.len(), event.ops.len());
        for (value, op) in ops.iter().zip(&event.ops) {
            let path = field(value, "path").as_str().unwrap();
            assert_eq!(path.as_bytes(), op.key());
            let action = field(value, "action").as_str().unwrap();
            let cid = field(value, "cid");
            match op {
                Op::Create { cid: created, .. } => {
                    assert_eq!(action, "create");
                    assert_eq!(cid.as_link(), Some(&created[..]));
                    assert!(value.get("prev").is_none());
                }
                Op::Update {
                    cid: updated, prev, ..
                } => {
                    assert_eq!(action, "update");
                    assert_eq!(cid.as_link(), Some(&updated[..]));
                    assert_eq!(field(value, "prev").as_link(), Some(&prev[..]));
                }
                Op::Delete { prev, .. } => {
                    assert_eq!(action, "delete");
                    assert_eq!(cid, &Cbor::Null);
                    assert_eq!(field(value, "prev").as_link(), Some(&prev[..]));
                }
            }
        }
        // The record a create or update names is in the slice, as written.
        let blocks = car::blocks(field(&body, "blocks").as_bytes().unwrap()).unwrap();
        for op in &event.ops {
            if let Some(cid) = op_cid(op) {
                dagcbor::decode_block(&blocks[cid]).unwrap();
            }
        }
    }
}

#[test]
fn identity_account_and_sync_frames_decode() {
    let mut repo = Repository::new(did(5), SigningKey::from_seed(Curve::P256, b"sync"));
    assert!(repo.sync_frame(1, UnixMicros(START)).is_none());
    repo.commit(&[Write::create("dev.svc.vocab", "a", vocab("a"))])
        .unwrap();
    let time = UnixMicros(START + 1_500);

    let (header, body) = decode_frame(&identity_frame(7, repo.did(), time));
    assert_eq!(kind(&header), "#identity");
    assert_eq!(field(&body, "seq").as_i64(), Some(7));
    assert_eq!(field(&body, "did").as_str(), Some(repo.did().as_str()));
    assert_eq!(
        field(&body, "time").as_str(),
        Some("2026-01-01T00:00:00.001Z")
    );

    let (header, body) = decode_frame(&account_frame(
        8,
        repo.did(),
        time,
        false,
        Some("takendown"),
    ));
    assert_eq!(kind(&header), "#account");
    assert_eq!(field(&body, "active"), &Cbor::Bool(false));
    assert_eq!(field(&body, "status").as_str(), Some("takendown"));
    let (_, body) = decode_frame(&account_frame(9, repo.did(), time, true, None));
    assert_eq!(field(&body, "active"), &Cbor::Bool(true));
    assert!(body.get("status").is_none());

    let head = repo.head().unwrap().clone();
    let frame = repo.sync_frame(10, time).unwrap();
    assert_eq!(frame, sync_frame(10, repo.did(), &head, time));
    let (header, body) = decode_frame(&frame);
    assert_eq!(kind(&header), "#sync");
    assert_eq!(field(&body, "seq").as_i64(), Some(10));
    assert_eq!(field(&body, "rev").as_str(), Some(head.rev.as_str()));
    let (roots, blocks) = car::read(field(&body, "blocks").as_bytes().unwrap()).unwrap();
    assert_eq!(roots, std::slice::from_ref(&head.cid));
    assert_eq!(blocks.len(), 1, "the signed commit alone");
    Commit::decode(&blocks[&head.cid])
        .unwrap()
        .verify(&repo.public())
        .unwrap();
}
