//! What storage reads of the kinds table (`spec/kinds.json`): each kind's searchable fields,
//! compiled once. The rest of the table is read by [`crate::Kinds`].

use crate::kinds::{EMBEDDED_KINDS, SearchDef, search_defs};
use crate::search::{FOLDING_VERSION, SearchFields};
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

/// Each kind's searchable fields and the definition's fingerprint (a catalog whose search
/// index was built under another is built again).
pub(crate) type SearchTable = Arc<(BTreeMap<String, SearchFields>, String)>;

/// The embedded table's, read once however many index sets are made.
static EMBEDDED_SEARCH: LazyLock<SearchTable> = LazyLock::new(|| {
    let defs = search_defs(EMBEDDED_KINDS).expect("the embedded kinds table is checked");
    Arc::new(compiled(&defs))
});

/// Each kind's searchable fields, as the table shipped with this build says them, and the
/// definition's fingerprint.
pub(crate) fn embedded_search() -> SearchTable {
    Arc::clone(&EMBEDDED_SEARCH)
}

fn compiled(defs: &BTreeMap<String, SearchDef>) -> (BTreeMap<String, SearchFields>, String) {
    let fingerprint = format!(
        "{} {}",
        FOLDING_VERSION,
        serde_json::to_string(defs).unwrap_or_default()
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
