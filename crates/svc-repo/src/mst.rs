//! The Merkle Search Tree of a repository: record paths (keys) mapped to record CIDs, in a
//! tree whose shape depends only on its keys, so that equal contents have one root CID.
//! A key's height is the number of leading zero bits of its SHA-256 counted in pairs
//! (fanout 4); each key sits in a node at its height, and a node at height `h` links only
//! to nodes at `h - 1`.
//!
//! A tree can be partial: subtrees known only by CID. That is what a Sync 1.1 commit
//! carries, and [`invert_commit`] checks such a commit by undoing its ops on the partial
//! tree and comparing the result with the commit's `prevData`.

mod keys;
mod proof;
mod walk;

use crate::dagcbor::{self, BlockError, Cbor, CborError};
use keys::{cid_text, key_text};
use std::collections::BTreeSet;

pub use keys::{common_prefix_len, key_height};
pub use proof::{Inversion, Op, check_commit_proof, invert_commit};
pub use walk::walk;

/// A binary CID, without a multibase prefix.
pub use crate::dagcbor::{Blocks, CidBytes};

/// No honest key is this high: reaching it takes a SHA-256 with 128 leading zero bits. It
/// bounds the depth of every walk, and so the recursion, whatever a hostile tree claims.
pub const MAX_HEIGHT: u32 = 64;

/// Honest nodes hold a handful of entries (fanout 4); thousands would be an attack on memory.
pub const MAX_ENTRIES: usize = 4096;

/// A repository path (`collection/rkey`) fits in this many bytes.
pub const MAX_KEY_LEN: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MstError {
    #[error("block {cid} is missing")]
    MissingBlock { cid: String },
    #[error(transparent)]
    Block(#[from] BlockError),
    #[error("node {cid}: {source}")]
    Cbor { cid: String, source: CborError },
    #[error("node {cid}: {reason}")]
    BadNode { cid: String, reason: String },
    #[error("encoding a node: {0}")]
    Encode(CborError),
    #[error("key {key:?} is {reason}")]
    BadKey { key: String, reason: &'static str },
    #[error("the tree is deeper than {MAX_HEIGHT} levels")]
    TooDeep,
    #[error("keys out of order: {key:?} after {before:?}")]
    Unsorted { key: String, before: String },
    #[error("key {key:?} is not in the tree")]
    NotFound { key: String },
    #[error("key {key:?} is already in the tree")]
    AlreadyPresent { key: String },
    #[error("key {key:?} holds {found}, not {expected}")]
    ValueMismatch {
        key: String,
        expected: String,
        found: String,
    },
    #[error("key {key:?} has more than one op")]
    DuplicateOp { key: String },
    #[error("inverting the ops gives root {found}, not prevData {expected}")]
    RootMismatch { expected: String, found: String },
}

/// One node as its block encodes it, with keys uncompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeData {
    /// The subtree of keys before the first entry.
    pub left: Option<CidBytes>,
    pub entries: Vec<EntryData>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryData {
    pub key: Vec<u8>,
    pub value: CidBytes,
    /// The subtree of keys between this entry and the next.
    pub right: Option<CidBytes>,
}

fn link_or_null(link: &Option<CidBytes>) -> Cbor {
    link.as_ref()
        .map_or(Cbor::Null, |cid| Cbor::Link(cid.clone()))
}

impl NodeData {
    /// The node's block: `{l, e: [{p, k, v, t}]}`, each key stored as the length of the
    /// prefix it shares with the key before it (`p`) and the rest (`k`).
    pub fn encode(&self) -> Result<Vec<u8>, MstError> {
        let mut previous: &[u8] = &[];
        let mut entries = Vec::with_capacity(self.entries.len());
        for entry in &self.entries {
            let shared = common_prefix_len(previous, &entry.key);
            entries.push(Cbor::Map(vec![
                ("p".into(), Cbor::Integer(shared as i128)),
                ("k".into(), Cbor::Bytes(entry.key[shared..].to_vec())),
                ("v".into(), Cbor::Link(entry.value.clone())),
                ("t".into(), link_or_null(&entry.right)),
            ]));
            previous = &entry.key;
        }
        let node = Cbor::Map(vec![
            ("l".into(), link_or_null(&self.left)),
            ("e".into(), Cbor::Array(entries)),
        ]);
        dagcbor::encode(&node).map_err(MstError::Encode)
    }

    /// Reads a node block, refusing anything but the one canonical encoding of a node with
    /// keys in strictly ascending order: two encodings of one node would be two CIDs.
    pub fn decode(cid: &[u8], block: &[u8]) -> Result<NodeData, MstError> {
        let value = dagcbor::decode_block(block).map_err(|source| MstError::Cbor {
            cid: cid_text(cid),
            source,
        })?;
        expect_fields(cid, &value, &["l", "e"], "the node")?;
        let left = read_link(cid, value.get("l"), "l")?;
        let Some(items) = value.get("e").and_then(Cbor::as_array) else {
            return Err(bad_node(cid, "e is not an array".into()));
        };
        if items.len() > MAX_ENTRIES {
            let reason = format!("{} entries, over {MAX_ENTRIES}", items.len());
            return Err(bad_node(cid, reason));
        }
        let mut entries: Vec<EntryData> = Vec::with_capacity(items.len());
        for item in items {
            let entry = decode_entry(cid, item, entries.last())?;
            entries.push(entry);
        }
        let node = NodeData { left, entries };
        if node.encode()? != block {
            return Err(bad_node(cid, "not in canonical form".into()));
        }
        Ok(node)
    }
}

fn bad_node(cid: &[u8], reason: String) -> MstError {
    MstError::BadNode {
        cid: cid_text(cid),
        reason,
    }
}

/// `value` is a map of exactly these fields.
fn expect_fields(cid: &[u8], value: &Cbor, names: &[&str], what: &str) -> Result<(), MstError> {
    match value {
        Cbor::Map(entries)
            if entries.len() == names.len()
                && names.iter().all(|name| value.get(name).is_some()) =>
        {
            Ok(())
        }
        _ => Err(bad_node(cid, format!("{what} is not a map of {names:?}"))),
    }
}

fn read_link(cid: &[u8], value: Option<&Cbor>, what: &str) -> Result<Option<CidBytes>, MstError> {
    match value {
        Some(Cbor::Null) => Ok(None),
        Some(Cbor::Link(link)) => Ok(Some(link.clone())),
        _ => Err(bad_node(cid, format!("{what} is neither a link nor null"))),
    }
}

/// One entry of a node, its key completed from the one `before` it, in ascending order.
fn decode_entry(
    cid: &[u8],
    item: &Cbor,
    before: Option<&EntryData>,
) -> Result<EntryData, MstError> {
    expect_fields(cid, item, &["p", "k", "v", "t"], "an entry")?;
    let previous = before.map_or(&[][..], |e| &e.key[..]);
    let shared = item
        .get("p")
        .and_then(Cbor::as_i64)
        .and_then(|p| usize::try_from(p).ok())
        .filter(|&p| p <= previous.len())
        .ok_or_else(|| bad_node(cid, "p is not a prefix length of the key before".into()))?;
    let Some(suffix) = item.get("k").and_then(Cbor::as_bytes) else {
        return Err(bad_node(cid, "k is not bytes".into()));
    };
    let mut key = previous[..shared].to_vec();
    key.extend_from_slice(suffix);
    check_key(&key)?;
    if key.as_slice() <= previous && before.is_some() {
        return Err(MstError::Unsorted {
            key: key_text(&key),
            before: key_text(previous),
        });
    }
    let Some(value) = item.get("v").and_then(Cbor::as_link) else {
        return Err(bad_node(cid, "v is not a link".into()));
    };
    Ok(EntryData {
        value: CidBytes::from(value),
        right: read_link(cid, item.get("t"), "t")?,
        key,
    })
}

fn check_key(key: &[u8]) -> Result<(), MstError> {
    let reason = if key.is_empty() {
        "empty"
    } else if key.len() > MAX_KEY_LEN {
        "too long"
    } else {
        return Ok(());
    };
    Err(MstError::BadKey {
        key: key_text(&key[..key.len().min(64)]),
        reason,
    })
}

/// Where a subtree is: nowhere, known only by CID, or in memory.
#[derive(Debug, Clone, Default)]
enum Link {
    #[default]
    Empty,
    Stub(CidBytes),
    Node(Box<Node>),
}

#[derive(Debug, Clone, Default)]
struct Node {
    left: Link,
    entries: Vec<Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    key: Vec<u8>,
    value: CidBytes,
    right: Link,
}

impl Node {
    /// The link between `entries[i - 1]` and `entries[i]`.
    fn gap(&mut self, i: usize) -> &mut Link {
        match i.checked_sub(1) {
            None => &mut self.left,
            Some(before) => &mut self.entries[before].right,
        }
    }

    fn last_gap(&mut self) -> &mut Link {
        let last = self.entries.len();
        self.gap(last)
    }

    fn into_link(self) -> Link {
        if self.entries.is_empty() && matches!(self.left, Link::Empty) {
            Link::Empty
        } else {
            Link::Node(Box::new(self))
        }
    }
}

/// Where nodes come from: a block map (or none, for a tree wholly in memory), and the CIDs
/// of the blocks read, which are the blocks a proof needs.
struct Store<'a> {
    blocks: Option<&'a Blocks>,
    read: BTreeSet<CidBytes>,
}

impl Store<'_> {
    fn data(&mut self, cid: &[u8]) -> Result<NodeData, MstError> {
        let block = self
            .blocks
            .and_then(|blocks| blocks.get(cid))
            .ok_or_else(|| MstError::MissingBlock { cid: cid_text(cid) })?;
        dagcbor::check_block(cid, block)?;
        let node = NodeData::decode(cid, block)?;
        self.read.insert(CidBytes::from(cid));
        Ok(node)
    }

    /// A node below the root, at `height`: every key of that height, no links below
    /// height 0, and not empty, since an empty subtree is written as no link at all.
    fn node(&mut self, cid: &[u8], height: u32) -> Result<NodeData, MstError> {
        let data = self.data(cid)?;
        check_node(cid, &data, height)?;
        if data.entries.is_empty() && data.left.is_none() {
            return Err(MstError::BadNode {
                cid: cid_text(cid),
                reason: "an empty node below the root".into(),
            });
        }
        Ok(data)
    }

    fn load(&mut self, cid: &[u8], height: u32) -> Result<Node, MstError> {
        Ok(into_node(self.node(cid, height)?))
    }
}

fn check_node(cid: &[u8], data: &NodeData, height: u32) -> Result<(), MstError> {
    let bad = |reason: String| MstError::BadNode {
        cid: cid_text(cid),
        reason,
    };
    if let Some(entry) = data.entries.iter().find(|e| key_height(&e.key) != height) {
        return Err(bad(format!(
            "key {:?} of height {} in a node of height {height}",
            key_text(&entry.key),
            key_height(&entry.key)
        )));
    }
    let links_below = data.left.is_some() || data.entries.iter().any(|e| e.right.is_some());
    if height == 0 && links_below {
        return Err(bad("a node of height 0 links to a subtree".into()));
    }
    Ok(())
}

fn into_node(data: NodeData) -> Node {
    let link = |cid: Option<CidBytes>| cid.map_or(Link::Empty, Link::Stub);
    Node {
        left: link(data.left),
        entries: data
            .entries
            .into_iter()
            .map(|e| Entry {
                key: e.key,
                value: e.value,
                right: link(e.right),
            })
            .collect(),
    }
}

/// The node a link below a node of `parent` height leads to, loaded if it was a stub;
/// `None` for no subtree.
fn resolve<'l>(
    link: &'l mut Link,
    parent: u32,
    store: &mut Store,
) -> Result<Option<&'l mut Node>, MstError> {
    if let Link::Stub(cid) = link {
        let height = parent.checked_sub(1).ok_or(MstError::TooDeep)?;
        *link = Link::Node(Box::new(store.load(cid, height)?));
    }
    Ok(match link {
        Link::Node(node) => Some(node),
        _ => None,
    })
}

fn take_node(link: Link, parent: u32, store: &mut Store) -> Result<Option<Node>, MstError> {
    Ok(match link {
        Link::Empty => None,
        Link::Node(node) => Some(*node),
        Link::Stub(cid) => {
            let height = parent.checked_sub(1).ok_or(MstError::TooDeep)?;
            Some(store.load(&cid, height)?)
        }
    })
}

/// Splits the subtree under a node of `parent` height around `key` (which is not in it):
/// the part before the key and the part after.
fn split(link: Link, key: &[u8], parent: u32, store: &mut Store) -> Result<(Link, Link), MstError> {
    let Some(mut node) = take_node(link, parent, store)? else {
        return Ok((Link::Empty, Link::Empty));
    };
    let height = parent.checked_sub(1).ok_or(MstError::TooDeep)?;
    let i = node.entries.partition_point(|e| e.key.as_slice() < key);
    let after = node.entries.split_off(i);
    let gap = std::mem::take(node.gap(i));
    let (low, high) = split(gap, key, height, store)?;
    *node.gap(i) = low;
    let right = Node {
        left: high,
        entries: after,
    };
    Ok((node.into_link(), right.into_link()))
}

/// Joins two adjacent subtrees under a node of `parent` height, `before` holding the lower
/// keys: the seam between them merges all the way down.
fn merge(before: Link, after: Link, parent: u32, store: &mut Store) -> Result<Link, MstError> {
    let (before, after) = match (before, after) {
        (Link::Empty, link) | (link, Link::Empty) => return Ok(link),
        pair => pair,
    };
    let mut low = take_node(before, parent, store)?.unwrap_or_default();
    let mut high = take_node(after, parent, store)?.unwrap_or_default();
    let seam = merge(
        std::mem::take(low.last_gap()),
        std::mem::take(&mut high.left),
        parent.checked_sub(1).ok_or(MstError::TooDeep)?,
        store,
    )?;
    *low.last_gap() = seam;
    low.entries.append(&mut high.entries);
    Ok(low.into_link())
}

/// Puts `key` in the subtree rooted at `node` (at `height`, at least the key's), returning
/// the value it replaced.
fn insert_at(
    node: &mut Node,
    height: u32,
    key: &[u8],
    key_height: u32,
    value: &[u8],
    store: &mut Store,
) -> Result<Option<CidBytes>, MstError> {
    let i = node.entries.partition_point(|e| e.key.as_slice() < key);
    if key_height == height {
        if let Some(entry) = node.entries.get_mut(i).filter(|e| e.key == key) {
            return Ok(Some(std::mem::replace(&mut entry.value, value.into())));
        }
        let gap = std::mem::take(node.gap(i));
        let (low, high) = split(gap, key, height, store)?;
        *node.gap(i) = low;
        node.entries.insert(
            i,
            Entry {
                key: key.to_vec(),
                value: value.into(),
                right: high,
            },
        );
        return Ok(None);
    }
    let gap = node.gap(i);
    if matches!(gap, Link::Empty) {
        // A layer with no keys yet between this node and the key's.
        *gap = Link::Node(Box::default());
    }
    let child = resolve(gap, height, store)?.ok_or(MstError::TooDeep)?;
    insert_at(child, height - 1, key, key_height, value, store)
}

/// Takes `key` out of the subtree rooted at `node` (at `height`), returning its value.
fn delete_at(
    node: &mut Node,
    height: u32,
    key: &[u8],
    key_height: u32,
    store: &mut Store,
) -> Result<CidBytes, MstError> {
    let not_found = || MstError::NotFound { key: key_text(key) };
    let i = node.entries.partition_point(|e| e.key.as_slice() < key);
    if key_height >= height {
        if node.entries.get(i).is_none_or(|e| e.key != key) {
            return Err(not_found());
        }
        let entry = node.entries.remove(i);
        let gap = std::mem::take(node.gap(i));
        *node.gap(i) = merge(gap, entry.right, height, store)?;
        return Ok(entry.value);
    }
    let gap = node.gap(i);
    let child = resolve(gap, height, store)?.ok_or_else(not_found)?;
    let value = delete_at(child, height - 1, key, key_height, store)?;
    if child.entries.is_empty() && matches!(child.left, Link::Empty) {
        *gap = Link::Empty;
    }
    Ok(value)
}

/// The CID of a subtree, computing those of nodes in memory; their blocks go to `out`.
fn link_cid(link: &Link, mut out: Option<&mut Blocks>) -> Result<Option<CidBytes>, MstError> {
    let node = match link {
        Link::Empty => return Ok(None),
        Link::Stub(cid) => return Ok(Some(cid.clone())),
        Link::Node(node) => node,
    };
    let mut entries = Vec::with_capacity(node.entries.len());
    for entry in &node.entries {
        entries.push(EntryData {
            key: entry.key.clone(),
            value: entry.value.clone(),
            right: link_cid(&entry.right, out.as_deref_mut())?,
        });
    }
    let data = NodeData {
        left: link_cid(&node.left, out.as_deref_mut())?,
        entries,
    };
    let block = data.encode()?;
    let cid = dagcbor::cid_of(&block);
    if let Some(out) = out {
        out.insert(cid.clone(), block);
    }
    Ok(Some(cid))
}

/// A tree in memory, whole or partial.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    root: Link,
    height: u32,
}

impl Tree {
    /// The empty tree.
    pub fn new() -> Tree {
        Tree::default()
    }

    /// The tree of `entries`, which must be in strictly ascending key order.
    pub fn from_sorted(
        entries: impl IntoIterator<Item = (Vec<u8>, CidBytes)>,
    ) -> Result<Tree, MstError> {
        let mut tree = Tree::new();
        let mut last: Option<Vec<u8>> = None;
        for (key, value) in entries {
            if let Some(before) = last.as_ref().filter(|before| key <= **before) {
                return Err(MstError::Unsorted {
                    key: key_text(&key),
                    before: key_text(before),
                });
            }
            tree.insert(&key, &value)?;
            last = Some(key);
        }
        Ok(tree)
    }

    /// The tree rooted at `root`, reading only the root node: the rest stays known by CID
    /// until an operation needs it.
    pub fn load(root: &[u8], blocks: &Blocks) -> Result<Tree, MstError> {
        Self::load_from(
            root,
            &mut Store {
                blocks: Some(blocks),
                read: BTreeSet::new(),
            },
        )
    }

    fn load_from(root: &[u8], store: &mut Store) -> Result<Tree, MstError> {
        let data = store.data(root)?;
        let Some(first) = data.entries.first() else {
            if data.left.is_some() {
                return Err(MstError::BadNode {
                    cid: cid_text(root),
                    reason: "a root of no keys above a subtree".into(),
                });
            }
            return Ok(Tree::new());
        };
        let height = key_height(&first.key);
        if height > MAX_HEIGHT {
            return Err(MstError::TooDeep);
        }
        check_node(root, &data, height)?;
        Ok(Tree {
            root: Link::Node(Box::new(into_node(data))),
            height,
        })
    }

    pub fn root_cid(&self) -> Result<CidBytes, MstError> {
        self.root_and_blocks(None)
    }

    /// The blocks of the nodes in memory (all of them, for a whole tree), by CID.
    pub fn blocks(&self) -> Result<Blocks, MstError> {
        let mut out = Blocks::new();
        self.root_and_blocks(Some(&mut out))?;
        Ok(out)
    }

    fn root_and_blocks(&self, out: Option<&mut Blocks>) -> Result<CidBytes, MstError> {
        match link_cid(&self.root, out)? {
            Some(cid) => Ok(cid),
            None => {
                // The empty tree is one node of no entries, not no node.
                let block = NodeData {
                    left: None,
                    entries: Vec::new(),
                }
                .encode()?;
                Ok(dagcbor::cid_of(&block))
            }
        }
    }

    /// Sets `key` to `value`, returning the value it replaced. Fails on a stub in the way:
    /// a partial tree changes only through [`invert_commit`].
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<Option<CidBytes>, MstError> {
        self.insert_with(
            key,
            value,
            &mut Store {
                blocks: None,
                read: BTreeSet::new(),
            },
        )
    }

    /// Removes `key`, returning its value.
    pub fn delete(&mut self, key: &[u8]) -> Result<CidBytes, MstError> {
        self.delete_with(
            key,
            &mut Store {
                blocks: None,
                read: BTreeSet::new(),
            },
        )
    }

    fn insert_with(
        &mut self,
        key: &[u8],
        value: &[u8],
        store: &mut Store,
    ) -> Result<Option<CidBytes>, MstError> {
        check_key(key)?;
        let height = key_height(key);
        if height > MAX_HEIGHT {
            return Err(MstError::TooDeep);
        }
        if matches!(self.root, Link::Empty) {
            // A lone key needs no layers below it.
            self.height = height;
            self.root = Link::Node(Box::default());
        }
        while self.height < height {
            let below = std::mem::take(&mut self.root);
            self.root = Link::Node(Box::new(Node {
                left: below,
                entries: Vec::new(),
            }));
            self.height += 1;
        }
        let tree_height = self.height;
        let root = self.root_node(store)?;
        insert_at(root, tree_height, key, height, value, store)
    }

    fn delete_with(&mut self, key: &[u8], store: &mut Store) -> Result<CidBytes, MstError> {
        let height = key_height(key);
        if matches!(self.root, Link::Empty) {
            return Err(MstError::NotFound { key: key_text(key) });
        }
        let tree_height = self.height;
        let root = self.root_node(store)?;
        let value = delete_at(root, tree_height, key, height, store)?;
        self.trim(store)?;
        Ok(value)
    }

    fn root_node(&mut self, store: &mut Store) -> Result<&mut Node, MstError> {
        // The root is at the tree's height; `resolve` takes its parent's.
        resolve(&mut self.root, self.height + 1, store)?.ok_or(MstError::TooDeep)
    }

    /// Drops root layers of no keys, which a canonical tree does not have. A stub reached
    /// this way is loaded when its block is at hand; when it is not, its CID stands for the
    /// tree, which is right unless it too has no keys.
    fn trim(&mut self, store: &mut Store) -> Result<(), MstError> {
        loop {
            let Link::Node(node) = &mut self.root else {
                return Ok(());
            };
            if !node.entries.is_empty() {
                return Ok(());
            }
            let below = std::mem::take(&mut node.left);
            if matches!(below, Link::Empty) {
                self.root = Link::Empty;
                self.height = 0;
                return Ok(());
            }
            let height = self.height.checked_sub(1).ok_or(MstError::TooDeep)?;
            self.height = height;
            self.root = match below {
                Link::Stub(cid) => match store.load(&cid, height) {
                    Ok(node) => Link::Node(Box::new(node)),
                    Err(MstError::MissingBlock { .. }) => {
                        self.root = Link::Stub(cid);
                        return Ok(());
                    }
                    Err(error) => return Err(error),
                },
                link => link,
            };
        }
    }
}
