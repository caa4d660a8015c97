//! The Merkle Search Tree against the atproto interop vectors in `tests/interop`.

use serde_json::Value;
use std::collections::BTreeSet;
use svc_repo::dagcbor::CidBytes;
use svc_repo::mst::{self, Blocks, Op, Tree};

fn vectors(path: &str) -> Value {
    let path = format!("{}/tests/interop/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {value}"))
}

fn texts<'a>(value: &'a Value, field: &str) -> Vec<&'a str> {
    value[field]
        .as_array()
        .unwrap_or_else(|| panic!("{field} in {value}"))
        .iter()
        .map(|item| item.as_str().expect("a string"))
        .collect()
}

/// The binary form of a base32 (`b...`) CID string.
fn cid(text: &str) -> CidBytes {
    let body = text.strip_prefix('b').expect("a base32 CID");
    let (mut out, mut buffer, mut bits) = (Vec::new(), 0u32, 0u32);
    for c in body.bytes() {
        let digit = match c {
            b'a'..=b'z' => c - b'a',
            b'2'..=b'7' => c - b'2' + 26,
            _ => panic!("{text}: not base32"),
        };
        buffer = (buffer << 5) | u32::from(digit);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    assert_eq!(svc_syntax::cid_to_string(&out), text);
    out.into()
}

#[test]
fn key_heights() {
    let cases = vectors("mst/key_heights.json");
    for case in cases.as_array().expect("an array") {
        let key = text(case, "key");
        assert_eq!(
            u64::from(mst::key_height(key.as_bytes())),
            case["height"].as_u64().expect("a height"),
            "{key:?}"
        );
    }
}

#[test]
fn example_keys_have_the_height_they_are_named_for() {
    let path = format!(
        "{}/tests/interop/mst/example_keys.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let keys = std::fs::read_to_string(path).expect("example keys");
    for key in keys.lines() {
        let named = key[1..2].parse::<u32>().expect("a height digit");
        assert_eq!(mst::key_height(key.as_bytes()), named, "{key}");
    }
}

#[test]
fn common_prefixes() {
    let cases = vectors("mst/common_prefix.json");
    for case in cases.as_array().expect("an array") {
        let (left, right) = (text(case, "left"), text(case, "right"));
        assert_eq!(
            mst::common_prefix_len(left.as_bytes(), right.as_bytes()) as u64,
            case["len"].as_u64().expect("a length"),
            "{left:?} {right:?}"
        );
    }
}

fn tree_of(keys: &[&str], value: &CidBytes) -> Tree {
    let mut sorted: Vec<&str> = keys.to_vec();
    sorted.sort_unstable();
    Tree::from_sorted(
        sorted
            .iter()
            .map(|k| (k.as_bytes().to_vec(), value.clone())),
    )
    .expect("a tree of the fixture's keys")
}

fn to_strings(cids: &BTreeSet<CidBytes>) -> BTreeSet<String> {
    cids.iter().map(|c| svc_syntax::cid_to_string(c)).collect()
}

#[test]
fn commit_proofs() {
    let fixtures = vectors("firehose/commit-proof-fixtures.json");
    for fixture in fixtures.as_array().expect("an array") {
        let name = text(fixture, "comment");
        let leaf = cid(text(fixture, "leafValue"));
        let keys = texts(fixture, "keys");
        let (adds, dels) = (texts(fixture, "adds"), texts(fixture, "dels"));

        let mut tree = tree_of(&keys, &leaf);
        let before = tree.root_cid().expect("a root");
        assert_eq!(
            svc_syntax::cid_to_string(&before),
            text(fixture, "rootBeforeCommit"),
            "{name}: root before"
        );
        for key in &adds {
            assert_eq!(
                tree.insert(key.as_bytes(), &leaf),
                Ok(None),
                "{name}: {key}"
            );
        }
        for key in &dels {
            assert_eq!(
                tree.delete(key.as_bytes()),
                Ok(leaf.clone()),
                "{name}: {key}"
            );
        }
        let after = tree.root_cid().expect("a root");
        assert_eq!(
            svc_syntax::cid_to_string(&after),
            text(fixture, "rootAfterCommit"),
            "{name}: root after"
        );

        // The same tree built afresh: the shape depends on the keys alone.
        let mut now: Vec<&str> = keys.iter().chain(&adds).copied().collect();
        now.retain(|k| !dels.contains(k));
        assert_eq!(tree_of(&now, &leaf).root_cid(), Ok(after.clone()), "{name}");

        let ops: Vec<Op> = adds
            .iter()
            .map(|key| Op::Create {
                key: key.as_bytes().to_vec(),
                cid: leaf.clone(),
            })
            .chain(dels.iter().map(|key| Op::Delete {
                key: key.as_bytes().to_vec(),
                prev: leaf.clone(),
            }))
            .collect();
        let all = tree.blocks().expect("blocks");
        let inversion = mst::invert_commit(&all, &after, &ops).expect(name);
        assert_eq!(inversion.prev_data, before, "{name}: inverted root");
        // The fixtures list a covering proof: each changed key's path and its neighbours'.
        // Undoing the ops reads no more than that, and sometimes less (a key added beside an
        // empty subtree comes out without its neighbour being read).
        let listed: Vec<CidBytes> = texts(fixture, "blocksInProof")
            .into_iter()
            .map(cid)
            .collect();
        let read: BTreeSet<String> = to_strings(&inversion.blocks_read);
        let listed_strings: BTreeSet<String> = to_strings(&listed.iter().cloned().collect());
        assert!(
            read.is_subset(&listed_strings),
            "{name}: read {read:?}, listed {listed_strings:?}"
        );
        // Only there does the listed proof hold a block that undoing does not read.
        if name != "add on edge with neighbor two layers down" {
            assert_eq!(read, listed_strings, "{name}: blocks in proof");
        }
        let covering: Blocks = listed
            .iter()
            .map(|cid| (cid.clone(), all[cid].clone()))
            .collect();
        assert_eq!(
            mst::check_commit_proof(&covering, &after, &before, &ops),
            Ok(()),
            "{name}: the listed proof"
        );

        // The blocks read alone are a proof: enough, and each one needed.
        let proof: Blocks = all
            .iter()
            .filter(|(cid, _)| inversion.blocks_read.contains(*cid))
            .map(|(cid, block)| (cid.clone(), block.clone()))
            .collect();
        assert_eq!(
            mst::check_commit_proof(&proof, &after, &before, &ops),
            Ok(()),
            "{name}"
        );
        for missing in proof.keys() {
            let mut short = proof.clone();
            short.remove(missing);
            let error = mst::check_commit_proof(&short, &after, &before, &ops).unwrap_err();
            assert_eq!(
                error,
                mst::MstError::MissingBlock {
                    cid: svc_syntax::cid_to_string(missing)
                },
                "{name}"
            );
        }
    }
}
