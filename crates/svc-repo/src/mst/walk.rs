//! A whole tree read in key order, every block checked.

use super::keys::key_text;
use super::{Blocks, CidBytes, Link, MstError, Node, Store, Tree};
use std::collections::BTreeSet;

/// Every (key, value) of the tree rooted at `root`, in key order. Every block must be there
/// and hash to its CID; keys must ascend across the whole tree, which also keeps a block
/// linked from many places from being walked more than once.
pub fn walk(root: &[u8], blocks: &Blocks) -> Result<Vec<(Vec<u8>, CidBytes)>, MstError> {
    let mut store = Store {
        blocks: Some(blocks),
        read: BTreeSet::new(),
    };
    let tree = Tree::load_from(root, &mut store)?;
    let mut out = Vec::new();
    if let Link::Node(node) = &tree.root {
        walk_node(node, tree.height, &mut store, &mut out)?;
    }
    Ok(out)
}

fn walk_node(
    node: &Node,
    height: u32,
    store: &mut Store,
    out: &mut Vec<(Vec<u8>, CidBytes)>,
) -> Result<(), MstError> {
    walk_link(&node.left, height, store, out)?;
    for entry in &node.entries {
        if let Some((before, _)) = out.last().filter(|(before, _)| entry.key <= *before) {
            return Err(MstError::Unsorted {
                key: key_text(&entry.key),
                before: key_text(before),
            });
        }
        out.push((entry.key.clone(), entry.value.clone()));
        walk_link(&entry.right, height, store, out)?;
    }
    Ok(())
}

fn walk_link(
    link: &Link,
    parent: u32,
    store: &mut Store,
    out: &mut Vec<(Vec<u8>, CidBytes)>,
) -> Result<(), MstError> {
    let Link::Stub(cid) = link else {
        return Ok(());
    };
    let height = parent.checked_sub(1).ok_or(MstError::TooDeep)?;
    let node = store.load(cid, height)?;
    walk_node(&node, height, store, out)
}
