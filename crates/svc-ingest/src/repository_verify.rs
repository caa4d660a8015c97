//! A whole repository (`getRepo`, a `.car` export) checked down to each record it holds:
//! blocks, tree, and the signature of its author's current key, within caps on what one copy
//! may hold.

use crate::event::{Action, CommitEvent, record_json};
use crate::signing_keys::SigningKeys;
use crate::unverified::{Reason, Unverified};
use svc_repo::dagcbor::{self, CidBytes};
use svc_repo::snapshot::Snapshot;
use svc_syntax::{Did, Tid};

/// The most blocks, records of the catalog's collections, and bytes of those records one
/// repository copy may hold: past them it is refused whole (reason `oversized`). They bound
/// what reading one costs whatever its shape; a repository export is at most 256 MiB besides.
pub const MAX_REPOSITORY_BLOCKS: usize = 2_000_000;
pub const MAX_REPOSITORY_RECORDS: usize = 100_000;
pub const MAX_REPOSITORY_RECORD_BYTES: usize = 64 << 20;
/// Records applied in one transaction at most, and their bytes.
const BATCH_RECORDS: usize = 1_000;
const BATCH_BYTES: usize = 4 << 20;

/// A repository read whole and verified: its signed head and the family records it proves,
/// turned into creates a batch at a time.
#[derive(Debug)]
pub struct VerifiedRepository {
    pub did: Did,
    pub rev: Tid,
    /// The root of its tree.
    pub data: CidBytes,
    snapshot: Snapshot,
    /// Where its records of wanted collections are among the snapshot's entries.
    wanted: Vec<usize>,
}

impl VerifiedRepository {
    /// Its records of wanted collections.
    pub fn len(&self) -> usize {
        self.wanted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.wanted.is_empty()
    }

    /// Its records as creates at the repository's revision, in batches of at most
    /// 1,000 records and 4 MiB, in key order.
    pub fn batches(&self) -> impl Iterator<Item = Vec<CommitEvent>> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            let mut batch = Vec::new();
            let mut bytes = 0;
            while let Some(record) = self.wanted.get(at).and_then(|i| self.snapshot.record(*i)) {
                if batch.len() == BATCH_RECORDS
                    || (bytes > 0 && bytes + record.block.len() > BATCH_BYTES)
                {
                    break;
                }
                bytes += record.block.len();
                batch.push(self.create(&record));
                at += 1;
            }
            (!batch.is_empty()).then_some(batch)
        })
    }

    fn create(&self, record: &svc_repo::snapshot::SnapshotRecord<'_>) -> CommitEvent {
        CommitEvent {
            did: self.did.to_string(),
            collection: record.collection.to_string(),
            rkey: record.rkey.to_string(),
            action: Action::Create,
            rev: self.rev.to_string(),
            cid: Some(svc_syntax::cid_to_string(record.cid)),
            // A record that is not DAG-CBOR, or over the block limit, reaches validation as
            // invalid, not unseen.
            record_json: Some(record.block)
                .filter(|block| crate::event::block_within_limit(block))
                .and_then(|block| dagcbor::decode_block(block).ok())
                .map(|value| record_json(&value).to_string()),
            time_us: None,
        }
    }
}

/// Checks a whole repository's CAR: one root, each block its CID, the tree whole, the commit
/// signed by the key its author's document names (unless `keys` is `None`: verification is
/// off). When `did` is given, the repository must be its. The records of the collections
/// `wanted` says yes to come out as creates. The CAR is let go once its blocks are read.
pub async fn verify_repository(
    keys: Option<&SigningKeys>,
    car: Vec<u8>,
    did: Option<&Did>,
    wanted: impl Fn(&str) -> bool,
) -> Result<VerifiedRepository, Unverified> {
    let snapshot =
        Snapshot::read_at_most(&car, MAX_REPOSITORY_BLOCKS).map_err(|error| {
            match error.to_string().contains("blocks, the most read") {
                true => Unverified::new(Reason::Oversized, error.to_string()),
                false => Unverified::from(error),
            }
        })?;
    drop(car);
    let commit = &snapshot.commit;
    if let Some(did) = did.filter(|did| **did != commit.did) {
        return Err(Unverified::new(
            Reason::Commit,
            format!("the repository of {did} holds a commit of {}", commit.did),
        ));
    }
    if let Some(keys) = keys {
        keys.verify(commit).await?;
    }
    let wanted = snapshot.wanted_entries(wanted)?;
    within_caps(&snapshot, &wanted)?;
    Ok(VerifiedRepository {
        did: commit.did.clone(),
        rev: commit.rev.clone(),
        data: commit.data.clone(),
        snapshot,
        wanted,
    })
}

/// Refuses a copy with more records of wanted collections, or more bytes of them (a block
/// named by many keys counted each time), than one repository may hold.
fn within_caps(snapshot: &Snapshot, wanted: &[usize]) -> Result<(), Unverified> {
    if wanted.len() > MAX_REPOSITORY_RECORDS {
        return Err(Unverified::new(
            Reason::Oversized,
            format!(
                "{} records of the catalog's collections, more than the {MAX_REPOSITORY_RECORDS} one repository may hold",
                wanted.len()
            ),
        ));
    }
    let bytes: usize = wanted
        .iter()
        .filter_map(|at| snapshot.record(*at))
        .map(|record| record.block.len())
        .sum();
    if bytes > MAX_REPOSITORY_RECORD_BYTES {
        return Err(Unverified::new(
            Reason::Oversized,
            format!(
                "{bytes} bytes of records of the catalog's collections, more than the {} MiB one repository may hold",
                MAX_REPOSITORY_RECORD_BYTES >> 20
            ),
        ));
    }
    Ok(())
}
