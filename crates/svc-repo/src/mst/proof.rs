//! A Sync 1.1 commit checked by its proof: its ops undone on the partial tree it carries,
//! and the result compared with its `prevData`.

use super::keys::{cid_text, key_text};
use super::{Blocks, CidBytes, MstError, Store, Tree};
use std::collections::BTreeSet;

/// One write of a commit, as the firehose reports it: the key (`collection/rkey`), the
/// record CID after it and the one before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Create {
        key: Vec<u8>,
        cid: CidBytes,
    },
    Update {
        key: Vec<u8>,
        cid: CidBytes,
        prev: CidBytes,
    },
    Delete {
        key: Vec<u8>,
        prev: CidBytes,
    },
}

impl Op {
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Create { key, .. } | Op::Update { key, .. } | Op::Delete { key, .. } => key,
        }
    }
}

/// What undoing a commit's ops found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inversion {
    /// The root of the tree before the commit.
    pub prev_data: CidBytes,
    /// The blocks read to get there: the proof the commit had to carry.
    pub blocks_read: BTreeSet<CidBytes>,
}

/// Undoes `ops` on the partial tree of `blocks` rooted at `root` (a commit's `data`). Each
/// op is checked against the tree as it stands (a created key holds the created CID, and so
/// on); an op whose part of the tree is not in `blocks` fails with the missing block.
pub fn invert_commit(blocks: &Blocks, root: &[u8], ops: &[Op]) -> Result<Inversion, MstError> {
    let mut seen = BTreeSet::new();
    if let Some(op) = ops.iter().find(|op| !seen.insert(op.key())) {
        return Err(MstError::DuplicateOp {
            key: key_text(op.key()),
        });
    }
    let mut store = Store {
        blocks: Some(blocks),
        read: BTreeSet::new(),
    };
    let mut tree = Tree::load_from(root, &mut store)?;
    let mismatch = |key: &[u8], expected: Option<&[u8]>, found: Option<&[u8]>| {
        let text = |cid: Option<&[u8]>| cid.map_or_else(|| "nothing".into(), cid_text);
        MstError::ValueMismatch {
            key: key_text(key),
            expected: text(expected),
            found: text(found),
        }
    };
    for op in ops.iter().rev() {
        match op {
            Op::Create { key, cid } => {
                let found = tree.delete_with(key, &mut store)?;
                if found != *cid {
                    return Err(mismatch(key, Some(cid), Some(&found)));
                }
            }
            Op::Update { key, cid, prev } => {
                let found = tree.insert_with(key, prev, &mut store)?;
                if found.as_deref() != Some(cid) {
                    return Err(mismatch(key, Some(cid), found.as_deref()));
                }
            }
            Op::Delete { key, prev } => {
                if tree.insert_with(key, prev, &mut store)?.is_some() {
                    return Err(MstError::AlreadyPresent { key: key_text(key) });
                }
            }
        }
    }
    Ok(Inversion {
        prev_data: tree.root_cid()?,
        blocks_read: store.read,
    })
}

/// Checks a Sync 1.1 commit: its ops, undone on the tree its blocks show under `root`, give
/// `prev_data`.
pub fn check_commit_proof(
    blocks: &Blocks,
    root: &[u8],
    prev_data: &[u8],
    ops: &[Op],
) -> Result<(), MstError> {
    let found = invert_commit(blocks, root, ops)?.prev_data;
    if found.as_bytes() != prev_data {
        return Err(MstError::RootMismatch {
            expected: cid_text(prev_data),
            found: cid_text(&found),
        });
    }
    Ok(())
}
