//! What a read hands back: pages of records, written out as the engine reads them.

use crate::{CatalogError, CatalogResult};
use std::collections::BTreeMap;

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
    /// The labels in force on the record or its author, as a JSON array of `{src, val, cts}`;
    /// empty when none (or when the read does not say).
    pub labels: String,
}

impl Item {
    pub fn as_ref(&self) -> ItemRef<'_> {
        ItemRef {
            uri: self.uri.as_bytes(),
            rev: self.rev.as_bytes(),
            record_json: self.record_json.as_bytes(),
            labels: self.labels.as_bytes(),
        }
    }
}

/// One item of a page as the engine holds it, borrowed from its row while it is read: the
/// bytes written from valid UTF-8, not checked again on every read (whoever writes the item
/// out checks what it needs, once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemRef<'a> {
    pub uri: &'a [u8],
    pub rev: &'a [u8],
    /// The stored JSON text of the record.
    pub record_json: &'a [u8],
    /// As [`Item::labels`].
    pub labels: &'a [u8],
}

impl ItemRef<'_> {
    /// The labels' JSON array, when any label is in force.
    pub fn labels(&self) -> Option<&[u8]> {
        Some(self.labels).filter(|labels| !labels.is_empty() && *labels != b"[]")
    }
}

impl TryFrom<ItemRef<'_>> for Item {
    type Error = CatalogError;

    fn try_from(item: ItemRef<'_>) -> CatalogResult<Item> {
        let text = |bytes: &[u8], what: &str| {
            String::from_utf8(bytes.to_vec())
                .map_err(|_| CatalogError::Storage(format!("a stored {what} is not text")))
        };
        let uri = text(item.uri, "uri")?;
        let author = svc_syntax::at_uri_authority(&uri)
            .ok_or_else(|| CatalogError::Storage(format!("a stored uri is not an at-uri: {uri}")))?
            .to_string();
        Ok(Item {
            author,
            rev: text(item.rev, "revision")?,
            record_json: text(item.record_json, "record")?,
            labels: text(item.labels, "labels")?,
            uri,
        })
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

/// Which records of one repository a page reads: all of them, or one collection's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositorySlice {
    pub did: String,
    pub collection: Option<String>,
}

impl RepositorySlice {
    /// Where a page starts (exclusive) and ends (exclusive): within `at://<did>/` up to
    /// `at://<did>0` (or `at://<did>/<collection>/` up to `.../<collection>0`), after `after`.
    pub(crate) fn range(&self, after: Option<&str>) -> (String, String) {
        let prefix = match &self.collection {
            Some(collection) => format!("at://{}/{collection}", self.did),
            None => format!("at://{}", self.did),
        };
        let start = format!("{prefix}/");
        let end = format!("{prefix}0");
        let from = after
            .filter(|uri| **uri > *start)
            .map_or(start, str::to_string);
        (from, end)
    }
}
