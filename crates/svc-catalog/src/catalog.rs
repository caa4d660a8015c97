//! The storage interface every backend implements. Async so that a networked backend
//! (PostgreSQL) fits behind it; the embedded SQLite backend runs its work on blocking threads.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

#[derive(Debug, Clone, thiserror::Error)]
pub enum CatalogError {
    #[error("storage: {0}")]
    Storage(String),
    #[error("unknown query {0}")]
    UnknownQuery(String),
    #[error("the catalog has shut down")]
    Closed,
    /// The storage cannot be reached (a database server down or restarting); worth retrying.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The store refused a value for what it holds (a data exception, a constraint, a
    /// program limit): that change's failure, never worth retrying as it is.
    #[error("storage refused the value ({}): {message}", reason.label())]
    Refused { reason: Refusal, message: String },
    /// This process does not write the catalog (a query replica, or an indexer standing by).
    #[error("this process does not write the catalog")]
    NotWriter,
}

pub type CatalogResult<T> = Result<T, CatalogError>;
pub type CatalogFuture<'a, T> = Pin<Box<dyn Future<Output = CatalogResult<T>> + Send + 'a>>;

/// A record version to store, already validated against its lexicon.
#[derive(Debug, Clone)]
pub struct Upsert {
    pub uri: String,
    pub collection: String,
    /// The repository DID: the at-uri's authority.
    pub author: String,
    /// The repository revision (TID) of the commit that wrote this version.
    pub rev: String,
    pub cid: Option<String>,
    /// The keys under which the record matches each query, from
    /// [`crate::QuerySet::index_keys`] of the catalog's own query set; computed by the
    /// producer, off the writer's thread. (A PostgreSQL bulk load files the record under them
    /// but does not store them: the rules take them from the record again with that set.)
    pub keys: IndexKeys,
    /// The record's JSON text as it will be served.
    pub record_json: String,
}

pub use svc_spec::{IndexKeys, QueryId};

#[derive(Debug, Clone)]
pub enum Change {
    Upsert(Upsert),
    Delete {
        uri: String,
        collection: String,
        rev: String,
    },
}

impl Change {
    pub fn uri(&self) -> &str {
        match self {
            Change::Upsert(u) => &u.uri,
            Change::Delete { uri, .. } => uri,
        }
    }
}

/// Where a source stood after the changes of a batch; stored in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorPosition {
    /// The source's role (`firehose`, `import:<file>`...).
    pub source: String,
    /// The endpoint the cursor belongs to; a cursor is never reused against another.
    pub endpoint: String,
    pub cursor: String,
    /// Time of the last event covered, microseconds since the epoch, when the source says.
    pub event_time_us: Option<i64>,
}

/// Why the store refused a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A value the store cannot hold (text with a NUL, a malformed value).
    Value,
    /// One of the store's constraints.
    Constraint,
    /// One of the store's limits (an index entry or a string too large).
    Limit,
}

impl Refusal {
    pub const ALL: [Refusal; 3] = [Refusal::Value, Refusal::Constraint, Refusal::Limit];

    /// Its name in metrics and logs.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Value => "value",
            Refusal::Constraint => "constraint",
            Refusal::Limit => "limit",
        }
    }
}

/// What one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplyReport {
    pub applied: u64,
    /// Events older than the stored revision of their uri, ignored.
    pub stale: u64,
    /// Changes the store refused for their content, skipped, by [`Refusal`] (in the order of
    /// `Refusal::ALL`).
    pub refused: [u64; 3],
}

impl ApplyReport {
    pub fn refused(&self, reason: Refusal) -> u64 {
        self.refused[reason as usize]
    }

    pub fn refused_total(&self) -> u64 {
        self.refused.iter().sum()
    }

    pub(crate) fn add(&mut self, other: &ApplyReport) {
        self.applied += other.applied;
        self.stale += other.stale;
        for (mine, theirs) in self.refused.iter_mut().zip(other.refused) {
            *mine += theirs;
        }
    }
}

/// What the source says of an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountStatus {
    Active,
    /// Deactivated, suspended, taken down...: its records leave every answer and count.
    Inactive(String),
    /// Its records are removed.
    Deleted,
}

impl AccountStatus {
    /// From an account event of either firehose: `active`, and the `status` it gives when not
    /// active (`deleted`, `deactivated`, `suspended`, `takendown`...).
    pub fn from_event(active: bool, status: Option<&str>) -> AccountStatus {
        match (active, status) {
            (true, _) => AccountStatus::Active,
            (false, Some("deleted")) => AccountStatus::Deleted,
            (false, other) => AccountStatus::Inactive(other.unwrap_or("inactive").to_string()),
        }
    }
}

/// One page request of a list query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PageRequest {
    pub limit: u32,
    pub offset: u64,
    /// Keyset paging: only items whose uri sorts after this one.
    pub after: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub uri: String,
    pub author: String,
    pub rev: String,
    /// The stored JSON text of the record.
    pub record_json: String,
}

impl Item {
    pub fn as_ref(&self) -> ItemRef<'_> {
        ItemRef::new(
            &self.uri,
            &self.author,
            &self.rev,
            self.record_json.as_bytes(),
        )
    }
}

/// One item of a page, borrowed from the engine's row while it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemRef<'a> {
    pub uri: &'a str,
    pub author: &'a str,
    pub rev: &'a str,
    /// The stored JSON text of the record, as the engine holds it: written from valid UTF-8
    /// and copied out as it is, not checked again on every read.
    pub record_json: &'a [u8],
    /// Whether `uri`, `author` and `rev` are printable ASCII without `"` or `\`.
    plain: bool,
}

impl<'a> ItemRef<'a> {
    pub fn new(uri: &'a str, author: &'a str, rev: &'a str, record_json: &'a [u8]) -> Self {
        let plain = [uri, author, rev]
            .iter()
            .all(|text| all_plain(text.as_bytes()));
        ItemRef {
            uri,
            author,
            rev,
            record_json,
            plain,
        }
    }

    /// An item from the stored text of its uri, revision and record, as an engine reads them
    /// back (bytes, unchecked). The author is the uri's authority, as every record is stored.
    pub fn from_stored(
        uri: &'a [u8],
        rev: &'a [u8],
        record_json: &'a [u8],
    ) -> CatalogResult<ItemRef<'a>> {
        let not_text = |what: &str| CatalogError::Storage(format!("a stored {what} is not text"));
        // Uris and revisions are always plain ASCII: one check stands for both the UTF-8
        // check and the JSON escaping check of each.
        let (uri, rev, plain) = match (plain_ascii(uri), plain_ascii(rev)) {
            (Some(uri), Some(rev)) => (uri, rev, true),
            _ => (
                std::str::from_utf8(uri).map_err(|_| not_text("uri"))?,
                std::str::from_utf8(rev).map_err(|_| not_text("revision"))?,
                false,
            ),
        };
        let author = svc_syntax::at_uri_authority(uri).ok_or_else(|| {
            CatalogError::Storage(format!("a stored uri is not an at-uri: {uri}"))
        })?;
        Ok(ItemRef {
            uri,
            author,
            rev,
            record_json,
            plain,
        })
    }

    /// Whether JSON carries `uri`, `author` and `rev` between quotes as they are.
    pub fn needs_no_escaping(&self) -> bool {
        self.plain
    }
}

/// `bytes` as text, when it is printable ASCII other than `"` and `\`: text JSON carries
/// between quotes as it is (checking the UTF-8 and the escaping apart was a fifth of an
/// uncached page's instructions).
fn plain_ascii(bytes: &[u8]) -> Option<&str> {
    if !all_plain(bytes) {
        return None;
    }
    // SAFETY: every byte is below 0x80, and ASCII is valid UTF-8.
    Some(unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// Sixteen bytes at a time, the last sixteen overlapping the ones before, so that no byte is
/// checked alone: uris are 60-70 bytes, revisions 13 (a byte loop, even vectorized by the
/// compiler, spent most of its time on the tails).
#[cfg(target_arch = "x86_64")]
fn all_plain(bytes: &[u8]) -> bool {
    // SAFETY: SSE2 is part of every x86_64 processor.
    unsafe { all_plain_sse2(bytes) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn all_plain_sse2(bytes: &[u8]) -> bool {
    use std::arch::x86_64::{_mm_movemask_epi8, _mm_or_si128, _mm_setzero_si128};
    let mut found = _mm_setzero_si128();
    match bytes.last_chunk::<16>() {
        Some(last) => {
            let (chunks, _) = bytes.as_chunks::<16>();
            for chunk in chunks {
                found = _mm_or_si128(found, outside_plain(chunk));
            }
            found = _mm_or_si128(found, outside_plain(last));
        }
        None => {
            // Under sixteen bytes (a revision is 13): the first eight and the last eight,
            // overlapping; under eight, padded with a plain byte.
            let mut sixteen = [b'a'; 16];
            match (bytes.first_chunk::<8>(), bytes.last_chunk::<8>()) {
                (Some(first), Some(last)) => {
                    sixteen[..8].copy_from_slice(first);
                    sixteen[8..].copy_from_slice(last);
                }
                _ => sixteen[..bytes.len()].copy_from_slice(bytes),
            }
            found = outside_plain(&sixteen);
        }
    }
    _mm_movemask_epi8(found) == 0
}

/// The bytes of `chunk` that are not printable ASCII, or are `"` or `\\`, as all ones.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn outside_plain(chunk: &[u8; 16]) -> std::arch::x86_64::__m128i {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_or_si128, _mm_set1_epi8,
    };
    // SAFETY: an unaligned load of exactly the sixteen bytes of `chunk`.
    let v = unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) };
    // Compared as signed bytes, 0x80 and above are below 0x20 too.
    let control_or_high = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
    let delete = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
    let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
    let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
    _mm_or_si128(
        _mm_or_si128(control_or_high, delete),
        _mm_or_si128(quote, backslash),
    )
}

#[cfg(not(target_arch = "x86_64"))]
fn all_plain(bytes: &[u8]) -> bool {
    // No early exit: the compiler turns the loop into vector instructions.
    let mut outside = 0u8;
    for &byte in bytes {
        outside |= u8::from(!(0x20..0x7f).contains(&byte) | (byte == b'"') | (byte == b'\\'));
    }
    outside == 0
}

impl From<ItemRef<'_>> for Item {
    fn from(item: ItemRef<'_>) -> Item {
        Item {
            uri: item.uri.to_string(),
            author: item.author.to_string(),
            rev: item.rev.to_string(),
            record_json: String::from_utf8_lossy(item.record_json).into_owned(),
        }
    }
}

/// Writes a page's items out as an engine reads them, on the thread that reads them: a caller
/// that only writes the items out needs no owned copy of each row, made on one thread and freed
/// on another.
pub trait PageWriter: Send + 'static {
    /// The next item, in uri order.
    fn item(&mut self, item: ItemRef<'_>);
    /// The page is complete: `total` records match, and `more` says whether items follow the
    /// last one written. Returns what was written.
    fn finish(self: Box<Self>, total: u64, more: bool) -> Vec<u8>;
}

/// Hands a page already read to `writer`.
pub fn write_page(page: &Page, mut writer: Box<dyn PageWriter>) -> Vec<u8> {
    for item in &page.items {
        writer.item(item.as_ref());
    }
    writer.finish(page.total, page.more)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub items: Vec<Item>,
    /// Matches before paging.
    pub total: u64,
    /// Whether more items follow the last one of this page.
    pub more: bool,
}

/// Record counts per collection NSID (every kind of the family, zero included).
pub type KindCounts = BTreeMap<String, u64>;

/// The catalog: records, their index keys and counts, and source cursors.
pub trait Catalog: Send + Sync {
    /// Applies a batch of changes in one transaction, with the cursor that covers them.
    /// An event older than the stored revision of its uri is counted stale and ignored.
    fn apply(
        &self,
        changes: Vec<Change>,
        cursor: Option<CursorPosition>,
    ) -> CatalogFuture<'_, ApplyReport>;

    /// A page of the records under one key of a query, in uri order.
    fn list(&self, query: QueryId, key: String, page: PageRequest) -> CatalogFuture<'_, Page>;

    /// The same page as [`Catalog::list`], handed to `writer` as it is read; returns what the
    /// writer wrote.
    fn write_list(
        &self,
        query: QueryId,
        key: String,
        page: PageRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>>;

    /// How many records are under each key of a query.
    fn count_keys(&self, query: QueryId, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>>;

    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts>;

    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>>;

    /// The record stored at a uri, if any (tests and tools).
    fn get(&self, uri: String) -> CatalogFuture<'_, Option<Item>>;

    /// Records an account's status change, hiding, restoring or removing its records.
    fn set_account(&self, did: String, status: AccountStatus) -> CatalogFuture<'_, ()>;

    /// Starts a bulk load if the catalog is empty (`false` otherwise, and nothing changes).
    /// Until [`Catalog::finish_bulk`], `apply` stages changes: they are not visible, and their
    /// reports are empty.
    fn begin_bulk(&self) -> CatalogFuture<'_, bool>;

    /// Merges everything staged since [`Catalog::begin_bulk`] in one transaction, with the
    /// cursor, under the same rules as `apply`; the report covers all staged changes.
    fn finish_bulk(&self, cursor: Option<CursorPosition>) -> CatalogFuture<'_, ApplyReport>;

    /// Bumped after every commit for what it touched (by this process's writer, or read
    /// from the change log); answers may be cached against it.
    fn clock(&self) -> &crate::ChangeClock;

    /// Resolves once this process is the catalog's writer: at once for an indexer that got
    /// the writer lock, on takeover for one standing by, never for a query replica.
    fn writer_started(&self) -> CatalogFuture<'_, ()>;

    /// Whether this process writes the catalog now.
    fn is_writer(&self) -> bool;

    /// Stores the indexer's heartbeat (the catalog is current as of now) and trims the
    /// change log.
    fn heartbeat(&self) -> CatalogFuture<'_, ()>;

    /// The indexer's last heartbeat, milliseconds since the epoch.
    fn indexer_heartbeat(&self) -> CatalogFuture<'_, Option<i64>>;

    /// For a process following the change log: how long after the writer logged the last
    /// entry this process applied it to its change clock.
    fn change_log_delay(&self) -> Option<std::time::Duration>;
}

/// What a process does with a catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Writes it: takes the writer lock, or stands by until it is free.
    Indexer,
    /// Only reads it, following the change log.
    Reader,
}

#[cfg(test)]
mod tests {
    use super::plain_ascii;

    #[test]
    fn only_printable_ascii_without_quotes_or_backslashes_is_plain() {
        let uri = "at://did:plc:z72i7hdynmk6r22z27h6tvur/dev.svc.bounty/3lqlhxw5rslq4";
        for plain in [
            "",
            "a",
            "3lqlhxw5rwuq4",
            uri,
            &uri[..16],
            &uri[..17],
            &uri[..32],
            " ~",
        ] {
            assert_eq!(plain_ascii(plain.as_bytes()), Some(plain), "{plain:?}");
        }
        for length in [1, 13, 15, 16, 17, 31, 32, 33, 66] {
            for position in [0, length / 2, length - 1] {
                for bad in [b'"', b'\\', 0x00, 0x1f, 0x7f, 0x80, 0xc3, 0xff] {
                    let mut text = uri.as_bytes()[..length].to_vec();
                    text[position] = bad;
                    assert_eq!(
                        plain_ascii(&text),
                        None,
                        "{bad:#x} at {position} of {length}"
                    );
                }
            }
        }
    }
}
