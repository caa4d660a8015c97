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

/// Starts of up to this many characters are read from FTS5's prefix indexes (`prefix = '3
/// 4'`); a longer start is looked up in `search_words` and searched as the words it begins.
pub(super) const PREFIX_INDEXED_CHARS: usize = 4;

/// The words of `text` a longer start may name: those past [`PREFIX_INDEXED_CHARS`].
pub(super) fn listed_words(text: &SearchText) -> impl Iterator<Item = &str> {
    [text.name.as_str(), text.text.as_str()]
        .into_iter()
        .flat_map(str::split_whitespace)
        .filter(|word| word.chars().nth(PREFIX_INDEXED_CHARS).is_some())
}

/// Adds `words` to the list of words the index holds.
pub(super) fn list_words<'w>(
    conn: &Connection,
    words: impl Iterator<Item = &'w str>,
) -> CatalogResult<()> {
    let mut list = conn.prepare_cached("INSERT OR IGNORE INTO search_words (word) VALUES (?1)")?;
    for word in words {
        list.execute([word])?;
    }
    Ok(())
}

/// Files one record's words under `rowid`, and lists its longer words.
pub(super) fn insert_listed(
    conn: &Connection,
    rowid: i64,
    text: &SearchText,
    collection: &str,
) -> CatalogResult<()> {
    insert(conn, rowid, text, collection)?;
    let mut words: Vec<&str> = listed_words(text).collect();
    words.sort_unstable();
    words.dedup();
    list_words(conn, words.into_iter())
}
