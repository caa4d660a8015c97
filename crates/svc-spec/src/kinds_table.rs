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
    // The folding, a space, then each kind's fields as JSON: read back by `kinds_added`.
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

/// The kinds the search definition `wanted` reads that `stored` did not, when nothing else
/// differs (the same folding, every kind of `stored` read the same way): an index built under
/// `stored` needs only those kinds' records filed. `None` when it must be built whole.
pub fn kinds_added(stored: &str, wanted: &str) -> Option<Vec<String>> {
    type Defs = serde_json::Map<String, serde_json::Value>;
    let read = |fingerprint: &str| -> Option<(String, Defs)> {
        let (folding, defs) = fingerprint.split_once(' ')?;
        Some((folding.to_string(), serde_json::from_str(defs).ok()?))
    };
    let ((stored_folding, stored), (wanted_folding, wanted)) = (read(stored)?, read(wanted)?);
    let kept = stored_folding == wanted_folding
        && stored
            .iter()
            .all(|(kind, def)| wanted.get(kind) == Some(def));
    kept.then(|| {
        wanted
            .keys()
            .filter(|kind| !stored.contains_key(*kind))
            .cloned()
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kinds_added_to_an_unchanged_definition_are_filed_alone() {
        let wanted = embedded_search().1.clone();
        let (folding, defs) = wanted.split_once(' ').expect("folding, then the fields");
        let mut fewer: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(defs).expect("JSON");
        fewer.remove("dev.panproto.schema.schema");
        let stored = format!("{folding} {}", serde_json::Value::Object(fewer.clone()));
        assert_eq!(
            kinds_added(&stored, &wanted),
            Some(vec!["dev.panproto.schema.schema".to_string()])
        );
        assert_eq!(kinds_added(&wanted, &wanted), Some(Vec::new()));
        let refolded = format!("fold-0 {}", serde_json::Value::Object(fewer.clone()));
        assert_eq!(kinds_added(&refolded, &wanted), None, "another folding");
        fewer.insert(
            "dev.svc.vocab".into(),
            serde_json::json!({"name": ["other"]}),
        );
        let changed = format!("{folding} {}", serde_json::Value::Object(fewer));
        assert_eq!(
            kinds_added(&changed, &wanted),
            None,
            "a kind read otherwise"
        );
        assert_eq!(kinds_added("not a fingerprint", &wanted), None);
    }
}
