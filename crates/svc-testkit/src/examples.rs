//! The example catalog (`examples/catalog.jsonl`) as tests read it: its records, and the
//! parameters under which a query finds one of them.

use serde_json::Value;
use std::path::{Path, PathBuf};
use svc_spec::{ConditionDef, Json, JsonPath, Query};

pub fn path() -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/catalog.jsonl"
    ))
    .to_path_buf()
}

/// The records the example catalog's events write, with their collections, in file order.
pub fn records() -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(path()).expect("examples/catalog.jsonl");
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|event| {
            let commit = event.get("commit")?;
            let collection = commit["collection"].as_str()?.to_string();
            Some((collection, commit.get("record")?.clone()))
        })
        .collect()
}

/// The query's required parameters as `record` holds them where the filter reads them, as a
/// query string; `None` when the record lacks one.
pub fn arguments(query: &Query, record: &Value) -> Option<Vec<(String, String)>> {
    query
        .params()
        .iter()
        .filter(|param| param.required)
        .map(|param| Some((param.name.clone(), argument(query, &param.name, record)?)))
        .collect()
}

fn argument(query: &Query, param: &str, record: &Value) -> Option<String> {
    let (path, is_ref) = query
        .def()
        .filter
        .iter()
        .find_map(|condition| match condition {
            ConditionDef::Eq { path, param: p, .. }
            | ConditionDef::EqAsciiCi { path, param: p, .. }
            | ConditionDef::Contains { path, param: p, .. } => {
                (p.as_deref() == Some(param)).then_some((path, false))
            }
            ConditionDef::RefUri { path, param: p, .. } => {
                (p.as_deref() == Some(param)).then_some((path, true))
            }
            _ => None,
        })?;
    let path = JsonPath::parse(path).ok()?;
    let json = Json::from_value(record);
    // The examples' records are read without their uris: a schema is named by its blob.
    let view = svc_spec::RecordView::new("", &json);
    path.values_in(&view).into_iter().find_map(|value| {
        let value = if is_ref { value.get("uri")? } else { value };
        match value.as_array() {
            Some(items) => items.first()?.as_str().map(str::to_string),
            None => value.as_str().map(str::to_string),
        }
    })
}

/// `name=value&...`, each value percent-encoded.
pub fn query_string(pairs: &[(String, String)]) -> String {
    let encoded: Vec<String> = pairs
        .iter()
        .map(|(name, value)| format!("{name}={}", super::encode(value)))
        .collect();
    encoded.join("&")
}
