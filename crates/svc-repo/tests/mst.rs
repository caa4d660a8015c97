//! The Merkle Search Tree: edits in memory, walks over blocks, commit proofs, and what a
//! hostile block map is refused for.

use svc_repo::dagcbor::{self, Cbor, CidBytes};
use svc_repo::mst::{
    self, Blocks, EntryData, MAX_ENTRIES, MstError, NodeData, Op, Tree, key_height,
};

const EMPTY_TREE: &str = "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm";

fn key(n: u64) -> Vec<u8> {
    format!("app.bsky.feed.post/{n:013}").into_bytes()
}

fn record(n: u64) -> CidBytes {
    dagcbor::cid_of(format!("record {n}").as_bytes())
}

/// A fixed pseudo-random order, so that failures repeat.
fn shuffled(n: u64) -> Vec<u64> {
    let mut items: Vec<u64> = (0..n).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..items.len()).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        items.swap(i, (state >> 33) as usize % (i + 1));
    }
    items
}

fn text(cid: &[u8]) -> String {
    svc_syntax::cid_to_string(cid)
}

fn tree_of(keys: impl IntoIterator<Item = u64>) -> Tree {
    let mut keys: Vec<u64> = keys.into_iter().collect();
    keys.sort_unstable();
    Tree::from_sorted(keys.into_iter().map(|n| (key(n), record(n)))).expect("a tree")
}

#[test]
fn the_empty_tree_is_one_empty_node() {
    let tree = Tree::new();
    let root = tree.root_cid().unwrap();
    assert_eq!(text(&root), EMPTY_TREE);
    let mut blocks = Blocks::new();
    let block = NodeData {
        left: None,
        entries: vec![],
    }
    .encode()
    .unwrap();
    blocks.insert(root.clone(), block);
    assert_eq!(mst::walk(&root, &blocks), Ok(vec![]));
}

#[test]
fn the_shape_depends_on_the_keys_alone() {
    let sorted = tree_of(0..500);
    let mut tree = Tree::new();
    for n in shuffled(500) {
        assert_eq!(tree.insert(&key(n), &record(n)), Ok(None));
    }
    assert_eq!(tree.root_cid(), sorted.root_cid());

    // Deleting half, in another order, meets the tree built of the other half.
    let order = shuffled(500);
    for &n in order.iter().filter(|&&n| n % 2 == 0) {
        assert_eq!(tree.delete(&key(n)), Ok(record(n)));
    }
    assert_eq!(
        tree.root_cid(),
        tree_of((0..500).filter(|n| n % 2 == 1)).root_cid()
    );
    for &n in order.iter().filter(|&&n| n % 2 == 1) {
        assert_eq!(tree.delete(&key(n)), Ok(record(n)));
    }
    assert_eq!(tree.root_cid().map(|c| text(&c)), Ok(EMPTY_TREE.into()));
    assert!(matches!(
        tree.delete(&key(1)),
        Err(MstError::NotFound { .. })
    ));
}

#[test]
fn an_update_replaces_the_value_and_can_be_undone() {
    let mut tree = tree_of(0..50);
    let before = tree.root_cid().unwrap();
    assert_eq!(tree.insert(&key(7), &record(1000)), Ok(Some(record(7))));
    assert_ne!(tree.root_cid().unwrap(), before);
    assert_eq!(tree.insert(&key(7), &record(7)), Ok(Some(record(1000))));
    assert_eq!(tree.root_cid().unwrap(), before);
}

#[test]
fn building_refuses_unsorted_and_unfit_keys() {
    let entries = vec![(key(2), record(2)), (key(1), record(1))];
    assert!(matches!(
        Tree::from_sorted(entries),
        Err(MstError::Unsorted { .. })
    ));
    let twice = vec![(key(1), record(1)), (key(1), record(1))];
    assert!(matches!(
        Tree::from_sorted(twice),
        Err(MstError::Unsorted { .. })
    ));
    let mut tree = Tree::new();
    assert!(matches!(
        tree.insert(b"", &record(0)),
        Err(MstError::BadKey { .. })
    ));
    assert!(matches!(
        tree.insert(&[b'a'; 2000], &record(0)),
        Err(MstError::BadKey { .. })
    ));
}

#[test]
fn a_walk_lists_every_entry_in_order() {
    let tree = tree_of(0..300);
    let blocks = tree.blocks().unwrap();
    let root = tree.root_cid().unwrap();
    let expected: Vec<_> = (0..300).map(|n| (key(n), record(n))).collect();
    assert_eq!(mst::walk(&root, &blocks).unwrap(), expected);
    assert!(blocks.len() > 50, "a tree of several layers");
}

#[test]
fn a_walk_names_the_block_it_misses() {
    let tree = tree_of(0..300);
    let root = tree.root_cid().unwrap();
    let mut blocks = tree.blocks().unwrap();
    let missing = blocks.keys().find(|cid| **cid != root).unwrap().clone();
    blocks.remove(&missing);
    assert_eq!(
        mst::walk(&root, &blocks),
        Err(MstError::MissingBlock {
            cid: text(&missing)
        })
    );
    assert_eq!(
        mst::walk(&record(1), &blocks),
        Err(MstError::MissingBlock {
            cid: text(&record(1))
        })
    );
}

#[test]
fn a_block_must_hash_to_its_cid() {
    let tree = tree_of(0..100);
    let root = tree.root_cid().unwrap();
    let mut blocks = tree.blocks().unwrap();
    let other = tree_of(0..3).blocks().unwrap();
    let stranger = other.values().next().unwrap().clone();
    blocks.insert(root.clone(), stranger);
    assert!(matches!(mst::walk(&root, &blocks), Err(MstError::Block(_))));
}

/// A block map of one root node, keyed by the node's real CID.
fn lone(block: Vec<u8>) -> (CidBytes, Blocks) {
    let cid = dagcbor::cid_of(&block);
    (cid.clone(), Blocks::from([(cid, block)]))
}

fn keys_of_height(height: u32, count: usize) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..)
        .map(key)
        .filter(|k| key_height(k) == height)
        .take(count)
        .collect();
    keys.sort();
    keys
}

fn entry(key: Vec<u8>) -> EntryData {
    EntryData {
        key,
        value: record(0),
        right: None,
    }
}

#[test]
fn nodes_out_of_shape_are_refused() {
    let bad_node = |root: CidBytes, blocks: Blocks, what: &str| {
        let result = mst::walk(&root, &blocks);
        assert!(
            matches!(result, Err(MstError::BadNode { .. })),
            "{what}: {result:?}"
        );
    };

    let crowded = NodeData {
        left: None,
        entries: keys_of_height(0, MAX_ENTRIES + 1)
            .into_iter()
            .map(entry)
            .collect(),
    };
    let (root, blocks) = lone(crowded.encode().unwrap());
    bad_node(root, blocks, "too many entries");

    let mixed = NodeData {
        left: None,
        entries: vec![
            entry(keys_of_height(0, 1).remove(0)),
            entry(keys_of_height(1, 1).remove(0)),
        ],
    };
    let mut mixed_sorted = mixed.clone();
    mixed_sorted.entries.sort_by(|a, b| a.key.cmp(&b.key));
    let (root, blocks) = lone(mixed_sorted.encode().unwrap());
    bad_node(root, blocks, "keys of two heights");

    let leaf = NodeData {
        left: Some(record(1)),
        entries: vec![entry(keys_of_height(0, 1).remove(0))],
    };
    let (root, blocks) = lone(leaf.encode().unwrap());
    bad_node(root, blocks, "a subtree below height 0");

    let headless = NodeData {
        left: Some(record(1)),
        entries: vec![],
    };
    let (root, blocks) = lone(headless.encode().unwrap());
    bad_node(root, blocks, "a root of no keys above a subtree");

    // The second key written whole, not as a prefix of the first: valid CBOR, not canonical.
    let [first, second] = [key(1), key(2)];
    let entry_map = |p: i128, k: &[u8]| {
        Cbor::Map(vec![
            ("p".into(), Cbor::Integer(p)),
            ("k".into(), Cbor::Bytes(k.to_vec())),
            ("v".into(), Cbor::Link(record(0))),
            ("t".into(), Cbor::Null),
        ])
    };
    let uncompressed = Cbor::Map(vec![
        ("l".into(), Cbor::Null),
        (
            "e".into(),
            Cbor::Array(vec![entry_map(0, &first), entry_map(0, &second)]),
        ),
    ]);
    let (root, blocks) = lone(dagcbor::encode(&uncompressed).unwrap());
    bad_node(root, blocks, "no prefix compression");

    let beyond = Cbor::Map(vec![
        ("l".into(), Cbor::Null),
        ("e".into(), Cbor::Array(vec![entry_map(3, b"x")])),
    ]);
    let (root, blocks) = lone(dagcbor::encode(&beyond).unwrap());
    bad_node(root, blocks, "a prefix longer than the key before");

    let (root, blocks) = lone(dagcbor::encode(&Cbor::Array(vec![])).unwrap());
    bad_node(root, blocks, "not a map");
}

#[test]
fn a_node_linked_twice_is_caught_by_key_order() {
    let low = keys_of_height(0, 2);
    let child = NodeData {
        left: None,
        entries: low.iter().cloned().map(entry).collect(),
    }
    .encode()
    .unwrap();
    let child_cid = dagcbor::cid_of(&child);
    let tops = keys_of_height(1, 40);
    // A key of height 1 below both of the child's keys, so the first link is in order.
    let top = tops.iter().find(|k| **k > low[1]).unwrap().clone();
    let root = NodeData {
        left: Some(child_cid.clone()),
        entries: vec![EntryData {
            key: top,
            value: record(0),
            right: Some(child_cid.clone()),
        }],
    }
    .encode()
    .unwrap();
    let root_cid = dagcbor::cid_of(&root);
    let blocks = Blocks::from([(root_cid.clone(), root), (child_cid, child)]);
    assert!(matches!(
        mst::walk(&root_cid, &blocks),
        Err(MstError::Unsorted { .. })
    ));
}

fn create(n: u64) -> Op {
    Op::Create {
        key: key(n),
        cid: record(n),
    }
}

fn delete(n: u64) -> Op {
    Op::Delete {
        key: key(n),
        prev: record(n),
    }
}

fn update(n: u64) -> Op {
    Op::Update {
        key: key(n),
        cid: record(n + 1000),
        prev: record(n),
    }
}

/// The tree after `ops`, applied to `before`.
fn apply(before: &Tree, ops: &[Op]) -> Tree {
    let mut tree = before.clone();
    for op in ops {
        match op {
            Op::Create { key, cid } => assert_eq!(tree.insert(key, cid), Ok(None)),
            Op::Update { key, cid, prev } => {
                assert_eq!(tree.insert(key, cid), Ok(Some(prev.clone())));
            }
            Op::Delete { key, prev } => assert_eq!(tree.delete(key).as_ref(), Ok(prev)),
        }
    }
    tree
}

#[test]
fn commits_undo_to_their_previous_root_from_their_proof_alone() {
    let before = tree_of(0..400);
    let prev_data = before.root_cid().unwrap();
    let order = shuffled(400);
    for round in 0..20 {
        let picked = &order[round * 12..round * 12 + 12];
        let mut ops: Vec<Op> = Vec::new();
        for (i, &n) in picked.iter().enumerate() {
            ops.push(match i % 3 {
                0 => create(n + 400),
                1 => update(n),
                _ => delete(n),
            });
        }
        let after = apply(&before, &ops);
        let root = after.root_cid().unwrap();
        let all = after.blocks().unwrap();
        let inversion = mst::invert_commit(&all, &root, &ops).unwrap();
        assert_eq!(inversion.prev_data, prev_data, "round {round}");
        let proof: Blocks = inversion
            .blocks_read
            .iter()
            .map(|cid| (cid.clone(), all[cid].clone()))
            .collect();
        assert!(proof.len() < all.len() / 2, "a proof is a small part");
        assert_eq!(
            mst::check_commit_proof(&proof, &root, &prev_data, &ops),
            Ok(())
        );
    }
}

#[test]
fn commits_that_do_not_add_up_are_refused() {
    let before = tree_of(0..100);
    let prev_data = before.root_cid().unwrap();
    let ops = vec![create(500), update(3), delete(4)];
    let after = apply(&before, &ops);
    let root = after.root_cid().unwrap();
    let blocks = after.blocks().unwrap();
    assert_eq!(
        mst::check_commit_proof(&blocks, &root, &prev_data, &ops),
        Ok(())
    );

    let check = |ops: &[Op]| mst::check_commit_proof(&blocks, &root, &prev_data, ops);
    assert!(
        matches!(check(&ops[..2]), Err(MstError::RootMismatch { .. })),
        "an op left out"
    );
    let wrong_cid = [Op::Create {
        key: key(500),
        cid: record(1),
    }];
    assert!(matches!(
        check(&wrong_cid),
        Err(MstError::ValueMismatch { .. })
    ));
    let wrong_prev = [Op::Update {
        key: key(3),
        cid: record(3),
        prev: record(3),
    }];
    assert!(matches!(
        check(&wrong_prev),
        Err(MstError::ValueMismatch { .. })
    ));
    assert!(matches!(
        check(&[delete(5)]),
        Err(MstError::AlreadyPresent { .. })
    ));
    assert!(matches!(
        check(&[create(501)]),
        Err(MstError::NotFound { .. })
    ));
    assert!(matches!(
        check(&[update(3), update(3)]),
        Err(MstError::DuplicateOp { .. })
    ));

    let only_root = Blocks::from([(root.clone(), blocks[&root].clone())]);
    assert!(matches!(
        mst::check_commit_proof(&only_root, &root, &prev_data, &ops),
        Err(MstError::MissingBlock { .. })
    ));
}
