//! A repository as its author keeps it: a signing key, the tree, the records and the last
//! commit. Each commit is signed and comes out as the `#commit` event a PDS would send, with
//! the blocks that prove it and nothing more, so tests and benchmarks feed svc real signed
//! data instead of hand-made frames. svc itself only reads repositories: this is behind the
//! `author` feature.

use crate::car;
use crate::crypto::{Curve, PublicKey};
use crate::dagcbor::{self, Blocks, Cbor, CborError, CidBytes};
use crate::mst::{self, MstError, NodeData, Op, Tree};
use crate::sync::CommitProof;

mod key;
pub use key::SigningKey;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use svc_syntax::{Did, Tid, UnixMicros};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthorError {
    #[error("not a {0} secret key: zero, or not below the curve order")]
    Secret(Curve),
    #[error("{path:?}: {reason}")]
    Path { path: String, reason: &'static str },
    #[error("{path:?} is already in the repository")]
    Exists { path: String },
    #[error("{path:?} is not in the repository")]
    Absent { path: String },
    #[error("{path:?} is written twice in one commit")]
    Twice { path: String },
    #[error("the record of {path:?}: {source}")]
    Record { path: String, source: CborError },
    #[error(transparent)]
    Mst(#[from] MstError),
}

/// One write of a commit, to the record at `collection/rkey`.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    Create {
        collection: String,
        rkey: String,
        record: Cbor,
    },
    Update {
        collection: String,
        rkey: String,
        record: Cbor,
    },
    Delete {
        collection: String,
        rkey: String,
    },
}

impl Write {
    pub fn create(collection: &str, rkey: &str, record: Cbor) -> Write {
        Write::Create {
            collection: collection.into(),
            rkey: rkey.into(),
            record,
        }
    }

    pub fn update(collection: &str, rkey: &str, record: Cbor) -> Write {
        Write::Update {
            collection: collection.into(),
            rkey: rkey.into(),
            record,
        }
    }

    pub fn delete(collection: &str, rkey: &str) -> Write {
        Write::Delete {
            collection: collection.into(),
            rkey: rkey.into(),
        }
    }

    /// The record's key in the tree.
    pub fn path(&self) -> String {
        let (Write::Create {
            collection, rkey, ..
        }
        | Write::Update {
            collection, rkey, ..
        }
        | Write::Delete { collection, rkey }) = self;
        format!("{collection}/{rkey}")
    }

    fn record(&self) -> Option<&Cbor> {
        match self {
            Write::Create { record, .. } | Write::Update { record, .. } => Some(record),
            Write::Delete { .. } => None,
        }
    }
}

/// The newest commit of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub cid: CidBytes,
    /// The signed commit block.
    pub block: Vec<u8>,
    pub rev: Tid,
    /// The root of the tree it commits to.
    pub data: CidBytes,
}

/// A commit as the firehose announces it: what a `#commit` frame carries.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitEvent {
    pub repo: Did,
    pub rev: Tid,
    /// The revision before it; none for a repository's first commit.
    pub since: Option<Tid>,
    pub commit: CidBytes,
    /// The tree's root after the commit.
    pub data: CidBytes,
    /// The tree's root before it.
    pub prev_data: CidBytes,
    pub ops: Vec<Op>,
    /// The slice's blocks, the commit's first: the new records and tree nodes, and the
    /// unchanged nodes that undoing the ops reads.
    pub blocks: Vec<(CidBytes, Vec<u8>)>,
}

/// Values made here from checked parts, which always have a canonical encoding: no floats,
/// integers of 64 bits, keys written once.
fn encoded(value: &Cbor) -> Vec<u8> {
    dagcbor::encode(value).expect("frame and commit fields always encode")
}

fn text(value: &str) -> Cbor {
    Cbor::Text(value.into())
}

/// A firehose frame: the header `{op: 1, t}`, then the body.
fn frame(kind: &str, body: Vec<(&str, Cbor)>) -> Vec<u8> {
    let header = Cbor::Map(vec![
        ("op".into(), Cbor::Integer(1)),
        ("t".into(), text(kind)),
    ]);
    let body = Cbor::Map(body.into_iter().map(|(k, v)| (k.into(), v)).collect());
    let mut out = encoded(&header);
    out.extend(encoded(&body));
    out
}

fn time_text(time: UnixMicros) -> Cbor {
    Cbor::Text(svc_syntax::format_unix_micros(time.0))
}

/// A commit's CAR slice: the commit first, then each record it wrote (once), then the tree
/// nodes that prove it.
fn slice(
    commit: &CidBytes,
    block: &[u8],
    planned: &[Planned],
    proof: Vec<(CidBytes, Vec<u8>)>,
) -> Vec<(CidBytes, Vec<u8>)> {
    let mut blocks = vec![(commit.clone(), block.to_vec())];
    let mut seen = HashSet::new();
    for plan in planned {
        if let Some((cid, record)) = &plan.record
            && seen.insert(cid)
        {
            blocks.push((cid.clone(), record.clone()));
        }
    }
    blocks.extend(proof);
    blocks
}

/// A signed commit block of `data` at `rev`, and its CID.
fn signed_commit(repo: &Did, data: &[u8], rev: &Tid, key: &SigningKey) -> (CidBytes, Vec<u8>) {
    let mut fields = vec![
        ("did".to_string(), text(repo)),
        ("version".to_string(), Cbor::Integer(crate::commit::VERSION)),
        ("data".to_string(), Cbor::Link(data.into())),
        ("rev".to_string(), text(rev)),
        ("prev".to_string(), Cbor::Null),
    ];
    let signature = key.sign(&encoded(&Cbor::Map(fields.clone())));
    fields.push(("sig".to_string(), Cbor::Bytes(signature.to_vec())));
    let block = encoded(&Cbor::Map(fields));
    (dagcbor::cid_of(&block), block)
}

/// A CAR of blocks, the first one its root.
fn car_of<'a>(blocks: impl IntoIterator<Item = (&'a CidBytes, &'a Vec<u8>)>) -> Vec<u8> {
    let mut blocks = blocks.into_iter().peekable();
    let roots: Vec<CidBytes> = blocks
        .peek()
        .map(|(cid, _)| (*cid).clone())
        .into_iter()
        .collect();
    car::write(
        &roots,
        blocks.map(|(cid, data)| (cid.as_bytes(), data.as_slice())),
    )
    .expect("a CAR header of links always encodes")
}

impl CommitEvent {
    /// The slice as the frame's `blocks` carries it: a CAR whose one root is the commit.
    pub fn car(&self) -> Vec<u8> {
        car_of(self.blocks.iter().map(|(cid, data)| (cid, data)))
    }

    /// What svc reads from the frame to check the commit.
    pub fn proof(&self) -> CommitProof {
        CommitProof {
            repo: self.repo.clone(),
            rev: self.rev.clone(),
            since: self.since.clone(),
            commit: self.commit.clone(),
            roots: vec![self.commit.clone()],
            blocks: self.blocks.iter().cloned().collect(),
            ops: self.ops.clone(),
            prev_data: Some(self.prev_data.clone()),
        }
    }

    /// The same commit signed by another key: a forgery in all but its bytes.
    pub fn signed_by(&self, key: &SigningKey) -> CommitEvent {
        let (commit, block) = signed_commit(&self.repo, &self.data, &self.rev, key);
        let mut blocks = self.blocks.clone();
        match blocks.first_mut() {
            Some(first) if first.0 == self.commit => *first = (commit.clone(), block),
            _ => blocks.insert(0, (commit.clone(), block)),
        }
        CommitEvent {
            commit,
            blocks,
            ..self.clone()
        }
    }

    /// The whole `#commit` frame, as `com.atproto.sync.subscribeRepos` sends it.
    pub fn frame(&self, seq: i64, time: UnixMicros) -> Vec<u8> {
        let ops = self.ops.iter().map(op_value).collect();
        frame(
            "#commit",
            vec![
                ("seq", Cbor::Integer(seq.into())),
                ("rebase", Cbor::Bool(false)),
                ("tooBig", Cbor::Bool(false)),
                ("repo", text(&self.repo)),
                ("commit", Cbor::Link(self.commit.clone())),
                ("rev", text(&self.rev)),
                ("since", self.since.as_deref().map_or(Cbor::Null, text)),
                ("blocks", Cbor::Bytes(self.car())),
                ("ops", Cbor::Array(ops)),
                ("blobs", Cbor::Array(Vec::new())),
                ("prevData", Cbor::Link(self.prev_data.clone())),
                ("time", time_text(time)),
            ],
        )
    }
}

/// A frame's op: `{action, path, cid, prev}`, `prev` only where there was a record before.
fn op_value(op: &Op) -> Cbor {
    let path = text(&String::from_utf8_lossy(op.key()));
    let (action, cid, prev) = match op {
        Op::Create { cid, .. } => ("create", Cbor::Link(cid.clone()), None),
        Op::Update { cid, prev, .. } => ("update", Cbor::Link(cid.clone()), Some(prev)),
        Op::Delete { prev, .. } => ("delete", Cbor::Null, Some(prev)),
    };
    let mut fields = vec![
        ("action".to_string(), text(action)),
        ("path".to_string(), path),
        ("cid".to_string(), cid),
    ];
    if let Some(prev) = prev {
        fields.push(("prev".to_string(), Cbor::Link(prev.clone())));
    }
    Cbor::Map(fields)
}

/// An `#identity` frame: the account's handle or DID document may have changed.
pub fn identity_frame(seq: i64, did: &Did, time: UnixMicros) -> Vec<u8> {
    frame(
        "#identity",
        vec![
            ("seq", Cbor::Integer(seq.into())),
            ("did", text(did)),
            ("time", time_text(time)),
        ],
    )
}

/// An `#account` frame; `status` says why an account is not active (`takendown`, ...).
pub fn account_frame(
    seq: i64,
    did: &Did,
    time: UnixMicros,
    active: bool,
    status: Option<&str>,
) -> Vec<u8> {
    let mut body = vec![
        ("seq", Cbor::Integer(seq.into())),
        ("did", text(did)),
        ("time", time_text(time)),
        ("active", Cbor::Bool(active)),
    ];
    if let Some(status) = status {
        body.push(("status", text(status)));
    }
    frame("#account", body)
}

/// A `#sync` frame: the repository is now at `head`, whatever came before; its `blocks` is a
/// CAR of the signed commit alone.
pub fn sync_frame(seq: i64, did: &Did, head: &Head, time: UnixMicros) -> Vec<u8> {
    frame(
        "#sync",
        vec![
            ("seq", Cbor::Integer(seq.into())),
            ("did", text(did)),
            ("blocks", Cbor::Bytes(car_of([(&head.cid, &head.block)]))),
            ("rev", text(&head.rev)),
            ("time", time_text(time)),
        ],
    )
}

/// The tree nodes a commit's slice carries: the `fresh` ones (new in the commit), as a PDS sends
/// them, and the unchanged ones that undoing the ops on the slice asks for. Undoing them on
/// the whole tree names the candidates, but reads a few only because they are there (a root
/// layer of no keys, dropped by a reader that has it and kept as a stub, rightly, by one that
/// has not): so each is added only when the slice is found to lack it.
fn proof_nodes(
    nodes: &Blocks,
    fresh: Blocks,
    data: &[u8],
    prev_data: &[u8],
    ops: &[Op],
) -> Result<Blocks, AuthorError> {
    let read = mst::invert_commit(nodes, data, ops)?.blocks_read;
    let candidates: HashMap<String, &CidBytes> = read
        .iter()
        .filter(|cid| !fresh.contains_key(*cid))
        .map(|cid| (svc_syntax::cid_to_string(cid), cid))
        .collect();
    let mut slice = fresh;
    loop {
        let missing = match mst::check_commit_proof(&slice, data, prev_data, ops) {
            Ok(()) => return Ok(slice),
            Err(MstError::MissingBlock { cid }) => candidates.get(&cid).copied(),
            Err(_) => None,
        };
        let Some(cid) = missing.filter(|cid| !slice.contains_key(*cid)) else {
            break;
        };
        if let Some(block) = nodes.get(cid) {
            slice.insert(cid.clone(), block.clone());
        }
    }
    // Not expected: a stub a reader keeps that stands for the wrong tree. Every candidate
    // makes the proof whole, since the whole tree gave them.
    for cid in candidates.values() {
        if let Some(block) = nodes.get(*cid) {
            slice.insert((*cid).clone(), block.clone());
        }
    }
    mst::check_commit_proof(&slice, data, prev_data, ops)?;
    Ok(slice)
}

/// A repository held whole in memory by its author.
#[derive(Debug, Clone)]
pub struct Repository {
    did: Did,
    key: SigningKey,
    /// The clock id of this repository's revisions.
    clock_id: u16,
    tree: Tree,
    /// Every node of the tree, by CID, as of the last commit.
    nodes: Blocks,
    /// Record CIDs by path.
    records: BTreeMap<String, CidBytes>,
    /// Record blocks, with how many paths hold each: two equal records are one block.
    record_blocks: HashMap<CidBytes, (Vec<u8>, usize)>,
    head: Option<Head>,
}

/// A write checked against the repository, its record encoded.
struct Planned {
    path: String,
    record: Option<(CidBytes, Vec<u8>)>,
}

impl Repository {
    /// An empty repository, with no commit yet.
    pub fn new(did: Did, key: SigningKey) -> Repository {
        let hash = Sha256::digest(did.as_bytes());
        Repository {
            clock_id: u16::from_be_bytes([hash[0], hash[1]]) & 0x3ff,
            did,
            key,
            tree: Tree::new(),
            nodes: Blocks::new(),
            records: BTreeMap::new(),
            record_blocks: HashMap::new(),
            head: None,
        }
    }

    pub fn did(&self) -> &Did {
        &self.did
    }

    pub fn key(&self) -> &SigningKey {
        &self.key
    }

    /// The key the DID document names for this repository.
    pub fn public(&self) -> PublicKey {
        self.key.public()
    }

    /// Signs the commits from now on with `key`, as after a key rotation.
    pub fn set_key(&mut self, key: SigningKey) {
        self.key = key;
    }

    pub fn head(&self) -> Option<&Head> {
        self.head.as_ref()
    }

    /// Record CIDs by path.
    pub fn records(&self) -> &BTreeMap<String, CidBytes> {
        &self.records
    }

    /// A record's block.
    pub fn record_block(&self, cid: &[u8]) -> Option<&[u8]> {
        self.record_blocks
            .get(cid)
            .map(|(block, _)| block.as_slice())
    }

    /// The root of the tree: the last commit's `data`.
    pub fn data(&self) -> Result<CidBytes, AuthorError> {
        Ok(self.tree.root_cid()?)
    }

    /// Commits `writes` now (the system clock): see [`Repository::commit_at`].
    pub fn commit(&mut self, writes: &[Write]) -> Result<CommitEvent, AuthorError> {
        self.commit_at(UnixMicros::now(), writes)
    }

    /// Commits `writes` at `time`: the revision is the TID of `time`, or of a microsecond after
    /// the last revision when `time` is not after it, so revisions strictly increase whatever
    /// clock the caller keeps. A write that cannot apply (a create of a path that exists, an
    /// update or delete of one that does not, a path written twice) fails the commit, and the
    /// repository is as it was.
    pub fn commit_at(
        &mut self,
        time: UnixMicros,
        writes: &[Write],
    ) -> Result<CommitEvent, AuthorError> {
        let planned = self.plan(writes)?;
        let prev_data = self.data()?;
        let ops = self.apply(writes, &planned)?;
        let data = self.data()?;
        let nodes = self.tree_nodes(&data)?;
        let fresh: Blocks = nodes
            .iter()
            .filter(|(cid, _)| !self.nodes.contains_key(*cid))
            .map(|(cid, block)| (cid.clone(), block.clone()))
            .collect();
        let mut proof: Vec<(CidBytes, Vec<u8>)> =
            proof_nodes(&nodes, fresh, &data, &prev_data, &ops)?
                .into_iter()
                .collect();
        proof.sort();
        let since = self.head.as_ref().map(|head| head.rev.clone());
        let rev = self.next_rev(time);
        let (commit, block) = signed_commit(&self.did, &data, &rev, &self.key);
        let blocks = slice(&commit, &block, &planned, proof);
        self.remember(planned, &ops);
        self.nodes = nodes;
        self.head = Some(Head {
            cid: commit.clone(),
            block,
            rev: rev.clone(),
            data: data.clone(),
        });
        Ok(CommitEvent {
            repo: self.did.clone(),
            rev,
            since,
            commit,
            data,
            prev_data,
            ops,
            blocks,
        })
    }

    /// Applies the planned writes to the tree; the ops they are.
    fn apply(&mut self, writes: &[Write], planned: &[Planned]) -> Result<Vec<Op>, AuthorError> {
        let mut ops = Vec::with_capacity(writes.len());
        for (write, plan) in writes.iter().zip(planned) {
            let key = plan.path.as_bytes();
            let op = match (write, &plan.record) {
                (Write::Create { .. }, Some((cid, _))) => {
                    self.tree.insert(key, cid)?;
                    Op::Create {
                        key: key.to_vec(),
                        cid: cid.clone(),
                    }
                }
                (_, Some((cid, _))) => {
                    let prev = self
                        .tree
                        .insert(key, cid)?
                        .ok_or_else(|| AuthorError::Absent {
                            path: plan.path.clone(),
                        })?;
                    Op::Update {
                        key: key.to_vec(),
                        cid: cid.clone(),
                        prev,
                    }
                }
                (_, None) => Op::Delete {
                    key: key.to_vec(),
                    prev: self.tree.delete(key)?,
                },
            };
            ops.push(op);
        }
        Ok(ops)
    }

    /// Every node of the tree rooted at `data`, the empty tree's one included.
    fn tree_nodes(&self, data: &CidBytes) -> Result<Blocks, AuthorError> {
        let mut nodes = self.tree.blocks()?;
        if !nodes.contains_key(data) {
            // The empty tree is one node that `blocks` leaves out, yet a reader must find it.
            let empty = NodeData {
                left: None,
                entries: Vec::new(),
            };
            nodes.insert(data.clone(), empty.encode()?);
        }
        Ok(nodes)
    }

    /// Keeps the records the commit wrote, and lets go of those it replaced or deleted.
    fn remember(&mut self, planned: Vec<Planned>, ops: &[Op]) {
        for (plan, op) in planned.into_iter().zip(ops) {
            if let Op::Update { prev, .. } | Op::Delete { prev, .. } = op {
                self.release(prev);
            }
            match plan.record {
                Some((cid, record)) => {
                    self.record_blocks
                        .entry(cid.clone())
                        .or_insert((record, 0))
                        .1 += 1;
                    self.records.insert(plan.path, cid);
                }
                None => {
                    self.records.remove(&plan.path);
                }
            }
        }
    }

    /// Checks every write before any applies, and encodes the records.
    fn plan(&self, writes: &[Write]) -> Result<Vec<Planned>, AuthorError> {
        let mut paths = HashSet::new();
        let mut planned = Vec::with_capacity(writes.len());
        for write in writes {
            let path = write.path();
            let reason = if path.len() > mst::MAX_KEY_LEN {
                Some("longer than a tree key may be")
            } else if mst::key_height(path.as_bytes()) > mst::MAX_HEIGHT {
                Some("a key no tree can hold")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(AuthorError::Path { path, reason });
            }
            if !paths.insert(path.clone()) {
                return Err(AuthorError::Twice { path });
            }
            let present = self.records.contains_key(&path);
            match write {
                Write::Create { .. } if present => return Err(AuthorError::Exists { path }),
                Write::Update { .. } | Write::Delete { .. } if !present => {
                    return Err(AuthorError::Absent { path });
                }
                _ => {}
            }
            let record = match write.record() {
                Some(record) => {
                    let block = dagcbor::encode(record).map_err(|source| AuthorError::Record {
                        path: path.clone(),
                        source,
                    })?;
                    Some((dagcbor::cid_of(&block), block))
                }
                None => None,
            };
            planned.push(Planned { path, record });
        }
        Ok(planned)
    }

    /// One path fewer holds the record `cid`; its block goes when none does.
    fn release(&mut self, cid: &[u8]) {
        if let Some((_, holders)) = self.record_blocks.get_mut(cid) {
            *holders -= 1;
            if *holders == 0 {
                self.record_blocks.remove(cid);
            }
        }
    }

    fn next_rev(&self, time: UnixMicros) -> Tid {
        let after = self
            .head
            .as_ref()
            .map_or(i64::MIN, |head| head.rev.time().0.saturating_add(1));
        Tid::from_time(UnixMicros(time.0.max(after)), self.clock_id)
    }

    /// The whole repository as `com.atproto.sync.getRepo` answers: a CAR whose root is the
    /// newest commit, then every node of the tree and every record. None before the first
    /// commit.
    pub fn car(&self) -> Option<Vec<u8>> {
        let head = self.head.as_ref()?;
        let mut nodes: Vec<(&CidBytes, &Vec<u8>)> = self.nodes.iter().collect();
        nodes.sort();
        let mut records: Vec<(&CidBytes, &Vec<u8>)> = self
            .record_blocks
            .iter()
            .map(|(cid, (block, _))| (cid, block))
            .collect();
        records.sort();
        Some(car_of(
            std::iter::once((&head.cid, &head.block))
                .chain(nodes)
                .chain(records),
        ))
    }

    /// A `#sync` frame of the newest commit; none before the first.
    pub fn sync_frame(&self, seq: i64, time: UnixMicros) -> Option<Vec<u8>> {
        Some(sync_frame(seq, &self.did, self.head.as_ref()?, time))
    }
}
