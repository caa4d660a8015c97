//! A record's row of the search index, as both the writer and a bulk load file it.

use crate::CatalogResult;
use rusqlite::{Connection, params};
use svc_spec::search::SearchText;

/// Files one record's words, and its kind, under `rowid`.
pub(super) fn insert(
    conn: &Connection,
    rowid: i64,
    text: &SearchText,
    collection: &str,
) -> CatalogResult<()> {
    conn.prepare_cached("INSERT INTO search (rowid, name, text, kind) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![rowid, text.name, text.text, kind_word(collection)])?;
    Ok(())
}

/// A kind as one word of the index (its NSID's letters and digits): a term, not a phrase,
/// so that filtering on it skips through the index rather than comparing positions.
pub(super) fn kind_word(collection: &str) -> String {
    collection
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase()
}
