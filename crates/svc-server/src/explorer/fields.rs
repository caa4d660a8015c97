//! Which fields of a record a table shows, and how a field's value reads in one cell.

use super::{Linked, Links};
use serde_json::Value;
use svc_spec::{ConditionDef, Query};

/// The fields that say most about a record of each kind, as paths into it. A kind not listed
/// shows the fields its query filters on.
const COLUMNS: &[(&str, &[&str])] = &[
    (
        "dev.svc.bounty",
        &[
            "wants.$type",
            "wants.source.uri",
            "wants.target.uri",
            "wants.lens.uri",
            "status",
        ],
    ),
    (
        "dev.svc.verification",
        &["lens.uri", "kind", "result", "tool.name"],
    ),
    (
        "dev.svc.adapter",
        &[
            "framework",
            "versionRange",
            "invocationProtocol.kind",
            "verification",
        ],
    ),
    ("dev.svc.recommendation", &["issuingCommunity", "lensPath"]),
    ("dev.svc.community", &["name", "members", "recordHosting"]),
    ("dev.svc.dialect", &["name", "owningCommunity", "version"]),
    ("dev.svc.belief", &["subject.uri", "holder"]),
    ("dev.svc.vocab", &["name", "world"]),
    (
        "dev.svc.encounter",
        &["lens.uri", "kind", "downstreamResult"],
    ),
];

/// Fields that say when a record was made, in order of preference.
const TIMES: &[&str] = &["occurredAt", "createdAt", "detectedAt", "computedAt"];

/// How long a cell's text may be; a record's field can be far longer.
const CELL_CHARS: usize = 160;

/// The columns of a query's table: its kind's fields, else the paths its filter reads.
pub(crate) fn columns(query: &Query) -> Vec<String> {
    if let Some((_, paths)) = COLUMNS.iter().find(|(kind, _)| *kind == query.kind()) {
        return paths.iter().map(|path| path.to_string()).collect();
    }
    let mut paths: Vec<String> = Vec::new();
    for condition in &query.def().filter {
        let path = condition_path(condition).to_string();
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

fn condition_path(condition: &ConditionDef) -> &str {
    match condition {
        ConditionDef::Eq { path, .. }
        | ConditionDef::EqAsciiCi { path, .. }
        | ConditionDef::Contains { path, .. }
        | ConditionDef::RefUri { path, .. }
        | ConditionDef::In { path, .. }
        | ConditionDef::Present { path } => path,
    }
}

/// The value at a dotted path; a step that finds an array reads its first element (a table
/// cell shows one value).
pub(crate) fn at_path<'v>(record: &'v Value, path: &str) -> Option<&'v Value> {
    let mut here = record;
    for step in path.split('.') {
        if let Value::Array(items) = here {
            here = items.first()?;
        }
        here = here.get(step.split('[').next().unwrap_or(step))?;
    }
    Some(here)
}

/// A value as one cell: a string as it is (linked when it is a DID or an at-uri), a number
/// or literal as JSON, an array by its length, an object as compact JSON; cut to a length.
pub(crate) fn cell(value: Option<&Value>, links: &Links) -> Linked {
    let Some(value) = value else {
        return Linked::plain("");
    };
    let text = match value {
        Value::String(text) => {
            let href = links.link(text);
            return Linked {
                text: cut(text),
                href,
            };
        }
        Value::Array(items) if items.len() != 1 => format!("{} items", items.len()),
        Value::Array(items) => return cell(items.first(), links),
        other => other.to_string(),
    };
    Linked::plain(cut(&text))
}

/// The record's time, as it says it.
pub(crate) fn time(record: &Value) -> String {
    TIMES
        .iter()
        .find_map(|field| record.get(field)?.as_str())
        .map(cut)
        .unwrap_or_default()
}

/// The record's name or title, or failing that its key: what its link reads.
pub(crate) fn title(uri: &str, record: &Value) -> String {
    let named = ["name", "title"]
        .iter()
        .filter_map(|field| record.get(field)?.as_str())
        .find(|name| !name.trim().is_empty());
    match named {
        Some(name) => cut(name),
        None => uri.rsplit('/').next().unwrap_or(uri).to_string(),
    }
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(CELL_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cells_read_paths_through_arrays_and_cut_long_text() {
        let record = json!({"lensPath": [{"uri": "at://did:plc:a/dev.panproto.schema.lens/1"}],
            "members": ["did:plc:a", "did:plc:b"], "name": "x".repeat(500)});
        let links = Links::default();
        let cell = |value| cell(value, &links);
        let lens = cell(at_path(&record, "lensPath.uri"));
        assert_eq!(
            lens.href.as_deref(),
            Some("/at/did:plc:a/dev.panproto.schema.lens/1")
        );
        assert_eq!(cell(at_path(&record, "members")).text, "2 items");
        assert_eq!(
            cell(at_path(&record, "name")).text.chars().count(),
            CELL_CHARS + 1
        );
        assert_eq!(cell(at_path(&record, "nothing")).text, "");
        assert!(cell(Some(&json!("javascript:alert(1)"))).href.is_none());
    }
}
