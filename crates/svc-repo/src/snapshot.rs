//! A repository read whole (`com.atproto.sync.getRepo`, a `.car` export): the CAR's single
//! root is a commit, every block hashes to its CID, and the tree walks whole from the
//! commit's root, so each record it holds is one the commit proves once its signature
//! verifies (with the key from the author's DID document, through the network).

use crate::car;
use crate::commit::Commit;
use crate::dagcbor::{Blocks, CidBytes, check_block};
use crate::mst::walk;
use crate::sync::SyncError;

/// A whole repository whose blocks and tree hold together; its signature is not yet checked.
#[derive(Debug)]
pub struct Snapshot {
    pub commit: Commit,
    /// Every key of the tree (`collection/rkey`) with its record's CID, in key order.
    pub entries: Vec<(Vec<u8>, CidBytes)>,
    pub blocks: Blocks,
}

/// One record of a snapshot.
pub struct SnapshotRecord<'a> {
    pub collection: &'a str,
    pub rkey: &'a str,
    pub cid: &'a [u8],
    pub block: &'a [u8],
}

impl Snapshot {
    /// Reads a CAR repository export and checks everything but the signature.
    pub fn read(car_bytes: &[u8]) -> Result<Snapshot, SyncError> {
        Snapshot::read_at_most(car_bytes, usize::MAX)
    }

    /// [`Snapshot::read`], refusing an export of more than `max_blocks` blocks.
    pub fn read_at_most(car_bytes: &[u8], max_blocks: usize) -> Result<Snapshot, SyncError> {
        let (roots, blocks) =
            car::read_at_most(car_bytes, max_blocks).map_err(|e| SyncError::Commit(e.0))?;
        let [root] = roots.as_slice() else {
            return Err(SyncError::Commit(format!(
                "a repository has one root, not {}",
                roots.len()
            )));
        };
        for (cid, block) in &blocks {
            check_block(cid, block).map_err(|e| SyncError::Cid(e.to_string()))?;
        }
        let block = blocks
            .get(root)
            .ok_or_else(|| SyncError::Commit("its block is not in the CAR".into()))?;
        let commit = Commit::decode(block)?;
        let entries = walk(&commit.data, &blocks)?;
        Ok(Snapshot {
            commit,
            entries,
            blocks,
        })
    }

    /// The records of the collections `wanted` says yes to. A key that is not
    /// `collection/rkey`, or whose record block is missing, fails the whole snapshot: the
    /// tree would then prove something that cannot be read.
    pub fn records(
        &self,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Vec<SnapshotRecord<'_>>, SyncError> {
        let wanted = self.wanted_entries(wanted)?;
        Ok(wanted.iter().filter_map(|at| self.record(*at)).collect())
    }

    /// Where the records of the collections `wanted` says yes to are among the entries,
    /// checked as [`Snapshot::records`] checks them, to be read one by one with
    /// [`Snapshot::record`] (a caller that turns records into something larger need not
    /// hold them all).
    pub fn wanted_entries(&self, wanted: impl Fn(&str) -> bool) -> Result<Vec<usize>, SyncError> {
        let mut found = Vec::new();
        for (at, (key, cid)) in self.entries.iter().enumerate() {
            let (collection, rkey) = std::str::from_utf8(key)
                .ok()
                .and_then(|key| key.split_once('/'))
                .ok_or_else(|| {
                    SyncError::Proof(format!(
                        "key {:?} is not collection/rkey",
                        String::from_utf8_lossy(key)
                    ))
                })?;
            if !wanted(collection) {
                continue;
            }
            if !self.blocks.contains_key(cid) {
                return Err(SyncError::Proof(format!(
                    "the record of {collection}/{rkey} is not in the CAR"
                )));
            }
            found.push(at);
        }
        Ok(found)
    }

    /// The record at `at` among the entries; `None` unless [`Snapshot::wanted_entries`] gave
    /// it.
    pub fn record(&self, at: usize) -> Option<SnapshotRecord<'_>> {
        let (key, cid) = self.entries.get(at)?;
        let (collection, rkey) = std::str::from_utf8(key).ok()?.split_once('/')?;
        let block = self.blocks.get(cid)?;
        Some(SnapshotRecord {
            collection,
            rkey,
            cid,
            block,
        })
    }
}
