//! A list page as a page of the explorer reads it: each record picked for the fields the page
//! shows ([`bounded::pick`]) as the catalog reads its row, never held whole. Read as the API's
//! answer, twenty records of a million values each were 156 MB of text, built, compressed and
//! expanded again, then parsed into hundreds of MB of `serde_json::Value`; read here, a page
//! holds one record's text at a time and a few fields of each.

use super::bounded::{self, Bounds, Json, Wanted};
use crate::ApiError;
use crate::params::encode_cursor;
use std::future::Future;
use svc_catalog::{CatalogResult, ItemRef, PageWriter};
use tokio::sync::oneshot;

/// A page read by `read`, which hands the catalog a [`Picker`] of the fields `wanted`, each
/// within a table cell's bounds.
pub(crate) async fn picked<R>(
    wanted: Wanted,
    read: impl FnOnce(Box<dyn PageWriter>) -> R,
) -> Result<Envelope, ApiError>
where
    R: Future<Output = CatalogResult<Vec<u8>>>,
{
    let (picker, page) = Picker::new(wanted, super::fields::ROW_FIELD);
    read(Box::new(picker)).await?;
    page.await
        .map_err(|_| ApiError::Internal("a page was read but not handed back".into()))
}

/// A page of a list, as the API's envelope says it.
pub(crate) struct Envelope {
    pub items: Vec<EnvelopeItem>,
    pub total: u64,
    /// Present when more items follow, as the API writes it.
    pub cursor: Option<String>,
}

pub(crate) struct EnvelopeItem {
    pub uri: String,
    pub author: String,
    /// The fields wanted, each within the bounds given; null for a record that does not read.
    pub record: Json,
    /// The values of the labels in force on it, at most [`LABELS_SHOWN`].
    pub labels: Vec<String>,
}

/// Labels a row shows at most; a record a labeler floods with values stays a row.
pub(crate) const LABELS_SHOWN: usize = 12;

/// The values of an item's labels (a JSON array of `{src, val, cts}`), as a row shows them.
fn label_values(labels: Option<&[u8]>) -> Vec<String> {
    let Some(labels) = labels else {
        return Vec::new();
    };
    let read: Vec<serde_json::Value> = serde_json::from_slice(labels).unwrap_or_default();
    read.iter()
        .filter_map(|label| label["val"].as_str())
        .take(LABELS_SHOWN)
        .map(str::to_string)
        .collect()
}

/// Picks each record's fields as the catalog hands it over; the page goes to the receiver
/// [`Picker::new`] gives, the writer's bytes are nothing.
pub(crate) struct Picker {
    wanted: Wanted,
    bounds: Bounds,
    items: Vec<EnvelopeItem>,
    page: Option<oneshot::Sender<Envelope>>,
}

impl Picker {
    pub fn new(wanted: Wanted, bounds: Bounds) -> (Picker, oneshot::Receiver<Envelope>) {
        let (sender, receiver) = oneshot::channel();
        let picker = Picker {
            wanted,
            bounds,
            items: Vec::new(),
            page: Some(sender),
        };
        (picker, receiver)
    }
}

impl PageWriter for Picker {
    fn item(&mut self, item: ItemRef<'_>) {
        // Stored from valid UTF-8, as the list endpoint reads it: only a damaged row is read
        // with replacement characters, or (its record) as null.
        let uri = String::from_utf8_lossy(item.uri).into_owned();
        let author = svc_syntax::at_uri_authority(&uri)
            .unwrap_or_default()
            .to_string();
        let record = std::str::from_utf8(item.record_json)
            .ok()
            .and_then(|json| bounded::pick(json, &self.wanted, self.bounds).ok())
            .unwrap_or(Json::Null);
        self.items.push(EnvelopeItem {
            uri,
            author,
            record,
            labels: label_values(item.labels()),
        });
    }

    fn finish(mut self: Box<Self>, total: u64, more: bool) -> Vec<u8> {
        let last = self.items.last().filter(|_| more);
        let envelope = Envelope {
            cursor: last.map(|item| encode_cursor(&item.uri)),
            items: std::mem::take(&mut self.items),
            total,
        };
        if let Some(page) = self.page.take() {
            // A receiver gone is a request gone: nobody is left to show the page to.
            let _ = page.send(envelope);
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_keeps_only_the_fields_wanted_and_says_where_it_ends() {
        let zeros = vec!["0"; 10_000].join(",");
        let huge = format!("{{\"aaa\":[{zeros}],\"name\":\"Huge\"}}");
        let (picker, mut page) = Picker::new(Wanted::of(["name"]), super::super::fields::ROW_FIELD);
        let mut writer: Box<dyn PageWriter> = Box::new(picker);
        for (uri, json) in [
            ("at://did:plc:a/dev.svc.vocab/1", huge.as_bytes()),
            ("at://did:plc:a/dev.svc.vocab/2", b"not JSON".as_slice()),
        ] {
            let rev = b"3l".as_slice();
            writer.item(ItemRef {
                uri: uri.as_bytes(),
                rev,
                record_json: json,
                labels: &[],
            });
        }
        assert!(writer.finish(7, true).is_empty());
        let envelope = page.try_recv().expect("the page");
        assert_eq!(envelope.total, 7);
        assert_eq!(
            envelope.cursor,
            Some(encode_cursor("at://did:plc:a/dev.svc.vocab/2"))
        );
        let first = &envelope.items[0];
        assert_eq!(first.author, "did:plc:a");
        assert_eq!(first.record.to_string(), "{\"name\":\"Huge\",…}");
        assert_eq!(envelope.items[1].record, Json::Null);
    }
}
