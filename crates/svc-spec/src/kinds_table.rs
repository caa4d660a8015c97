//! The kinds table as this build embeds it (`spec/kinds.json`), and what storage reads of it:
//! each kind's searchable fields. The rest of the table is read by [`crate::Kinds`].

use crate::search::{FOLDING_VERSION, SearchFields};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The table shipped with this build.
pub const EMBEDDED_KINDS: &str = include_str!("../../../spec/kinds.json");

/// A kind's searchable fields, as paths: its names (weighted above the rest) and its text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SearchDef {
    #[serde(default)]
    pub name: Vec<String>,
    #[serde(default)]
    pub text: Vec<String>,
}

/// Each kind's searchable fields, as the table shipped with this build says them, and the
/// definition's fingerprint (a catalog whose search index was built under another is built
/// again).
pub fn embedded_search() -> (BTreeMap<String, SearchFields>, String) {
    let file: SearchTable =
        serde_json::from_str(EMBEDDED_KINDS).expect("the embedded kinds table is checked");
    let defs: BTreeMap<String, SearchDef> = file
        .kinds
        .into_iter()
        .filter_map(|(kind, entry)| entry.search.map(|search| (kind, search)))
        .collect();
    let fingerprint = format!(
        "{} {}",
        FOLDING_VERSION,
        serde_json::to_string(&defs).unwrap_or_default()
    );
    let compile = |paths: &[String]| {
        paths
            .iter()
            .map(|path| crate::JsonPath::parse(path).expect("the embedded kinds table is checked"))
            .collect()
    };
    let fields = defs
        .iter()
        .map(|(kind, def)| {
            let fields = SearchFields {
                name: compile(&def.name),
                text: compile(&def.text),
            };
            (kind.clone(), fields)
        })
        .collect();
    (fields, fingerprint)
}

/// The table as search reads it: each kind's `search`, the rest left to [`crate::Kinds`].
#[derive(Deserialize)]
struct SearchTable {
    kinds: BTreeMap<String, SearchEntry>,
}

#[derive(Deserialize)]
struct SearchEntry {
    search: Option<SearchDef>,
}
