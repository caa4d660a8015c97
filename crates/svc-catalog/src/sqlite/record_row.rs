//! A `records` row as SQLite binds it.

use crate::engine::RecordRow;
use crate::keys_column::QueryIds;

/// The values of a `records` row, in column order (uri, collection, author, rev, cid, record,
/// keys, indexed_at).
pub(super) type RowValues<'a> = (
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    String,
    i64,
);

pub(super) fn row_values<'a>(row: &RecordRow<'a>, ids: &QueryIds, now: i64) -> RowValues<'a> {
    (
        row.uri,
        row.collection,
        row.author,
        row.rev,
        row.cid,
        row.record,
        ids.encode(row.keys),
        now,
    )
}
