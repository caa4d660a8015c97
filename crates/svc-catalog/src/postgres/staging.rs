//! What a PostgreSQL bulk load holds while it runs: the staged records' uris and their index
//! entries, sorted once the load settles, and the size of the sorts that build its indexes.

use super::binary_rows::BinaryRows;
use crate::{CatalogError, CatalogResult};
use rustc_hash::FxHashMap;
use std::collections::HashSet;

/// What a bulk load under way has staged: its index entries, unsorted while records arrive,
/// sorted once the load settles.
pub(super) enum Staging {
    Arriving(Entries),
    Sorted(KeyOrder),
}

impl Default for Staging {
    fn default() -> Staging {
        Staging::Arriving(Entries::default())
    }
}

impl Staging {
    pub(super) fn arriving(&mut self) -> CatalogResult<&mut Entries> {
        match self {
            Staging::Arriving(entries) => Ok(entries),
            Staging::Sorted(_) => Err(CatalogError::Storage(
                "records staged after the bulk load began settling".into(),
            )),
        }
    }

    /// The sort memory the uri index needs, in KiB.
    pub(super) fn uri_build_kib(&self) -> i64 {
        let uris = match self {
            Staging::Arriving(entries) => &entries.uris,
            Staging::Sorted(sorted) => &sorted.uris,
        };
        build_kib(uris.iter().map(|uri| uri.len()).sum(), uris.len())
    }

    pub(super) fn is_sorted(&self) -> bool {
        matches!(self, Staging::Sorted(_))
    }

    /// Forgets the entries of records that do not stand.
    pub(super) fn remove(&mut self, superseded: &[i64]) {
        let gone: HashSet<usize> = superseded
            .iter()
            .filter_map(|id| usize::try_from(id - 1).ok())
            .collect();
        let mut sorted = std::mem::take(self).sorted();
        let uri_by_rank = &sorted.uri_by_rank;
        sorted
            .order
            .retain(|entry| !gone.contains(&record_of(uri_by_rank, *entry)));
        *self = Staging::Sorted(sorted);
    }

    pub(super) fn sorted(self) -> KeyOrder {
        match self {
            Staging::Arriving(entries) => entries.in_key_order(),
            Staging::Sorted(sorted) => sorted,
        }
    }
}

/// The staged records' uris (a record's id is its position plus one) and their index
/// entries, each a numbered (query, key) pair and a record position.
#[derive(Default)]
pub(super) struct Entries {
    pub(super) uris: Vec<Box<str>>,
    pub(super) keys: Vec<(i64, Box<str>)>,
    pub(super) key_numbers: FxHashMap<i64, FxHashMap<Box<str>, u32>>,
    /// (key number, record position), in staging order.
    pub(super) entries: Vec<(u32, u32)>,
}

impl Entries {
    pub(super) fn stage_entry(&mut self, qid: i64, key: &str, record: u32) {
        let numbers = self.key_numbers.entry(qid).or_default();
        let number = match numbers.get(key) {
            Some(number) => *number,
            None => {
                let number = self.keys.len() as u32;
                self.keys.push((qid, key.into()));
                numbers.insert(key.into(), number);
                number
            }
        };
        self.entries.push((number, record));
    }

    /// Forgets the records from `position` on (and their entries): their batch was not staged.
    pub(super) fn forget_from(&mut self, position: usize) {
        self.uris.truncate(position);
        let kept = self
            .entries
            .partition_point(|(_, record)| (*record as usize) < position);
        self.entries.truncate(kept);
    }

    /// The entries in primary-key order: by query id, key, then uri, byte-wise.
    pub(super) fn in_key_order(self) -> KeyOrder {
        /// Each item's rank, from the items in rank order.
        fn ranks_of(by_rank: &[u32]) -> Vec<u32> {
            let mut rank = vec![0; by_rank.len()];
            for (r, item) in by_rank.iter().enumerate() {
                rank[*item as usize] = r as u32;
            }
            rank
        }
        let mut key_by_rank: Vec<u32> = (0..self.keys.len() as u32).collect();
        key_by_rank.sort_unstable_by_key(|key| &self.keys[*key as usize]);
        let key_rank = ranks_of(&key_by_rank);
        let uri_by_rank = uris_in_order(&self.uris);
        let uri_rank = ranks_of(&uri_by_rank);
        let mut order: Vec<u64> = self
            .entries
            .iter()
            .map(|(key, record)| {
                (u64::from(key_rank[*key as usize]) << 32) | u64::from(uri_rank[*record as usize])
            })
            .collect();
        order.sort_unstable();
        let uris_unique = uri_by_rank
            .windows(2)
            .all(|pair| self.uris[pair[0] as usize] != self.uris[pair[1] as usize]);
        KeyOrder {
            keys: self.keys,
            uris: self.uris,
            key_by_rank,
            uri_by_rank,
            order,
            uris_unique,
        }
    }
}

/// The positions of `uris` in byte-wise order of their uris.
///
/// Comparing the uris themselves in a sort reads two strings from the heap at each step, and
/// an author's uris share their first fifty bytes or so; instead the positions are sorted by
/// the 8 bytes that follow the prefix every uri shares, held beside them, and each run of
/// positions whose 8 bytes are equal by the 8 bytes after those, and so on.
fn uris_in_order(uris: &[Box<str>]) -> Vec<u32> {
    let mut order: Vec<(u64, u32)> = (0..uris.len() as u32).map(|at| (0, at)).collect();
    sort_from(&mut order, uris, common_prefix(uris));
    order.into_iter().map(|(_, position)| position).collect()
}

/// Sorts `run`, positions of uris that share their first `start` bytes, by the rest.
fn sort_from(run: &mut [(u64, u32)], uris: &[Box<str>], start: usize) {
    let rest = |position: u32| {
        uris[position as usize]
            .as_bytes()
            .get(start..)
            .unwrap_or_default()
    };
    for entry in run.iter_mut() {
        entry.0 = first_eight_bytes(rest(entry.1));
    }
    run.sort_unstable();
    for ties in run.chunk_by_mut(|a, b| a.0 == b.0) {
        if ties.len() < 2 {
            continue;
        }
        // Where a uri ends within the 8 bytes, the zeros after its end could equal NUL bytes
        // of another: those ties are put in order by their bytes.
        if ties.iter().any(|entry| rest(entry.1).len() <= 8) {
            ties.sort_unstable_by(|a, b| rest(a.1).cmp(rest(b.1)));
        } else {
            sort_from(ties, uris, start + 8);
        }
    }
}

/// How many leading bytes all of `items` share.
fn common_prefix(items: &[Box<str>]) -> usize {
    let Some(first) = items.first() else {
        return 0;
    };
    let first = first.as_bytes();
    items.iter().fold(first.len(), |shared, item| {
        let item = item.as_bytes();
        (0..shared.min(item.len()))
            .position(|at| item[at] != first[at])
            .unwrap_or(shared.min(item.len()))
    })
}

/// The first 8 bytes of `text` as a big-endian number (zeros past its end), so that numbers
/// order as the bytes do, ties aside.
fn first_eight_bytes(text: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let length = text.len().min(8);
    bytes[..length].copy_from_slice(&text[..length]);
    u64::from_be_bytes(bytes)
}

/// Staged entries sorted for writing.
pub(super) struct KeyOrder {
    pub(super) keys: Vec<(i64, Box<str>)>,
    pub(super) uris: Vec<Box<str>>,
    pub(super) key_by_rank: Vec<u32>,
    pub(super) uri_by_rank: Vec<u32>,
    /// Each entry's key rank (high half) and uri rank (low half), ascending.
    pub(super) order: Vec<u64>,
    /// No uri was staged twice.
    pub(super) uris_unique: bool,
}

/// The record position of a sorted entry: its uri rank (the low half) read back.
fn record_of(uri_by_rank: &[u32], entry: u64) -> usize {
    uri_by_rank[(entry & u64::from(u32::MAX)) as usize] as usize
}

impl KeyOrder {
    pub(super) fn key(&self, entry: u64) -> &(i64, Box<str>) {
        &self.keys[self.key_by_rank[(entry >> 32) as usize] as usize]
    }

    /// The sort memory the entries' primary key needs, in KiB: an index tuple holds the
    /// key's number and the uri.
    pub(super) fn key_build_kib(&self) -> i64 {
        let text: usize = self
            .order
            .iter()
            .map(|entry| self.uris[record_of(&self.uri_by_rank, *entry)].len())
            .sum();
        build_kib(text, self.order.len())
    }

    /// The number an entry's (query, key) is stored under: its key's rank, counted from 1, so
    /// that the entries' order by (number, uri) is their order by (query, key, uri).
    pub(super) fn key_number(entry: u64) -> i64 {
        (entry >> 32) as i64 + 1
    }

    /// The largest key number the load stored (0 when none).
    pub(super) fn last_key_number(&self) -> i64 {
        self.order
            .last()
            .map_or(0, |entry| Self::key_number(*entry))
    }

    /// The entry at `at` as a row of `query_keys`.
    pub(super) fn write_entry(&self, at: usize, out: &mut BinaryRows) {
        let entry = self.order[at];
        let record = record_of(&self.uri_by_rank, entry);
        out.row(3);
        out.bigint(Self::key_number(entry));
        out.text(Some(&self.uris[record]));
        out.bigint(record as i64 + 1);
    }

    /// The count of the key whose entries start at `at`, as a row of `query_counts`; where its
    /// entries end.
    pub(super) fn write_count(&self, at: usize, out: &mut BinaryRows) -> usize {
        let rank = self.order[at] >> 32;
        let end = at + self.order[at..].partition_point(|entry| entry >> 32 == rank);
        let (qid, key) = self.key(self.order[at]);
        out.row(4);
        out.bigint(Self::key_number(self.order[at]));
        out.bigint(*qid);
        out.text(Some(key));
        out.bigint((end - at) as i64);
        end
    }
}

/// The most sort memory an index build asks for: a larger load spills part of its sort to
/// files rather than risk the database server's memory.
pub(super) const MAX_BUILD_KIB: i64 = 2 << 20;

/// The memory, in KiB, PostgreSQL's sort needs to build an index of `tuples` rows holding `text`
/// bytes of text: each tuple's header, fixed columns and the sort's bookkeeping take about 96
/// bytes beside its text (measured on PostgreSQL 15); an eighth to spare.
pub(super) fn build_kib(text: usize, tuples: usize) -> i64 {
    let bytes = text.saturating_add(tuples.saturating_mul(96)) / 8 * 9;
    i64::try_from(bytes >> 10)
        .unwrap_or(i64::MAX)
        .min(MAX_BUILD_KIB)
}
/// The uri index being built on a connection of its own.
pub(super) type UriIndexBuild = tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn byte_wise(uris: &[Box<str>]) -> Vec<&str> {
        let mut sorted: Vec<&str> = uris.iter().map(|uri| &**uri).collect();
        sorted.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        sorted
    }

    fn ordered(uris: &[Box<str>]) -> Vec<&str> {
        uris_in_order(uris)
            .iter()
            .map(|position| &*uris[*position as usize])
            .collect()
    }

    #[test]
    fn uris_sharing_everything_but_their_ends_come_in_byte_order() {
        let uris: Vec<Box<str>> = [
            "at://did:plc:b/x/2",
            "at://did:plc:a/x/10",
            "at://did:plc:a/x/1",
            "at://did:plc:a/x/1\0",
            "at://did:plc:a/x/",
            "at://did:plc:a/x/1",
            "at://did:plc:aé/x/1",
        ]
        .into_iter()
        .map(Box::from)
        .collect();
        assert_eq!(ordered(&uris), byte_wise(&uris));
        assert!(ordered(&[]).is_empty());
    }

    proptest! {
        #[test]
        fn uris_come_in_byte_order(
            uris in prop::collection::vec("at://did:plc:[ab]{0,3}[/\u{0}-\u{7f}é]{0,12}", 0..60)
        ) {
            let uris: Vec<Box<str>> = uris.into_iter().map(Box::from).collect();
            prop_assert_eq!(ordered(&uris), byte_wise(&uris));
        }

        #[test]
        fn uris_sharing_long_stretches_come_in_byte_order(
            uris in prop::collection::vec("at://did:plc:[ab]{0,2}(/dev.svc.[ab]{0,2}){0,4}[/\u{0}ab]{0,10}", 0..60)
        ) {
            let uris: Vec<Box<str>> = uris.into_iter().map(Box::from).collect();
            prop_assert_eq!(ordered(&uris), byte_wise(&uris));
        }
    }
}
