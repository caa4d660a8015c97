//! Which fields of a record a table shows, and how a field's value reads in one cell.

use super::bounded::{Bounds, Json, Wanted, steps};
use super::{Linked, Links};
use svc_spec::{ConditionDef, Kinds, Query};

/// Fields that say when a record was made, in order of preference.
const TIMES: &[&str] = &["occurredAt", "createdAt", "detectedAt", "computedAt"];
/// Fields that name a record, in order of preference.
pub(crate) const TITLES: &[&str] = &["name", "title"];

/// What a row reads of each field it shows: a cell shows 160 characters, an array's length
/// and a link, so a little of each field is enough. Strings are kept up to the longest at-uri
/// (and DID), so that every one that can be linked is whole.
pub(crate) const ROW_FIELD: Bounds = Bounds {
    values: 100,
    text_bytes: 16 * 1024,
    string_bytes: svc_spec::MAX_AT_URI_PARAM_BYTES,
};

/// How long a cell's text may be; a record's field can be far longer.
const CELL_CHARS: usize = 160;

/// One column of a table: the heading people read, and the path of its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    pub label: String,
    pub path: String,
}

/// The columns of a query's table: its kind's fields, else the paths its filter reads, each
/// headed by words.
pub(crate) fn columns(kinds: &Kinds, query: &Query) -> Vec<Column> {
    let shown = &kinds.def(query.kind()).columns;
    if !shown.is_empty() {
        return shown
            .iter()
            .map(|field| Column {
                label: field.label.clone(),
                path: field.path.clone(),
            })
            .collect();
    }
    let mut columns: Vec<Column> = Vec::new();
    for condition in &query.def().filter {
        let path = condition_path(condition);
        if !columns.iter().any(|column| column.path == path) {
            columns.push(Column {
                label: heading(path),
                path: path.to_string(),
            });
        }
    }
    columns
}

/// Words for a path the kinds table gives no label: its last step that names something
/// (`subject.uri` is the subject), its camel case spelt out, `downstreamResult` →
/// `Downstream result`.
fn heading(path: &str) -> String {
    let step = path
        .rsplit('.')
        .find(|step| !matches!(*step, "uri" | "$type" | "cid"))
        .unwrap_or(path);
    let mut words = String::with_capacity(step.len() + 4);
    for (i, c) in step.chars().filter(|c| c.is_alphanumeric()).enumerate() {
        match (i, c.is_uppercase()) {
            (0, _) => words.extend(c.to_uppercase()),
            (_, true) => {
                words.push(' ');
                words.extend(c.to_lowercase());
            }
            _ => words.push(c),
        }
    }
    match words.is_empty() {
        true => path.to_string(),
        false => words,
    }
}

/// The fields a row of records shows: these columns, its title and its time.
pub(crate) fn row_fields(columns: &[Column]) -> Wanted {
    let named = TITLES.iter().chain(TIMES).copied();
    Wanted::of(
        columns
            .iter()
            .map(|column| column.path.as_str())
            .chain(named),
    )
}

/// The fields a record's title is read from.
pub(crate) fn title_fields() -> Wanted {
    Wanted::of(TITLES.iter().copied())
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
pub(crate) fn at_path<'v>(record: &'v Json, path: &str) -> Option<&'v Json> {
    let mut here = record;
    for step in steps(path) {
        if let Json::Array(items, _) = here {
            here = items.first()?;
        }
        here = here.get(step)?;
    }
    Some(here)
}

/// A value as one cell: a string as it is (linked when it is a DID or an at-uri), a number
/// or literal as JSON, an array by its length, an object as compact JSON; cut to a length.
pub(crate) fn cell(value: Option<&Json>, links: &Links) -> Linked {
    let Some(value) = value else {
        return Linked::plain("");
    };
    let text = match value {
        Json::String(text) => {
            let href = links.link(text);
            let shown = links.name(text).unwrap_or(text);
            return Linked {
                text: cut(shown, CELL_CHARS),
                href,
            };
        }
        Json::Array(items, more) if items.len() as u64 + more != 1 => {
            format!("{} items", items.len() as u64 + more)
        }
        Json::Array(items, _) => return cell(items.first(), links),
        other => other.to_string(),
    };
    Linked::plain(cut(&text, CELL_CHARS))
}

/// A value as a record page's fact shows it: a list of objects with a `name` (a lens's
/// steps) as those names in order; anything else as one cell.
pub(crate) fn listed(value: &Json, links: &Links) -> Linked {
    let named = |item: &Json| match item {
        Json::Object(..) => item.get("name").and_then(Json::as_str).map(str::to_string),
        _ => None,
    };
    let Json::Array(items, more) = value else {
        return cell(Some(value), links);
    };
    let names: Option<Vec<String>> = items.iter().map(named).collect();
    match names {
        Some(names) if !names.is_empty() => {
            let rest = match more {
                0 => String::new(),
                n => format!(" → … ({n} more)"),
            };
            Linked::plain(cut(&format!("{}{rest}", names.join(" → ")), CELL_CHARS))
        }
        _ => cell(Some(value), links),
    }
}

/// The record's time, as it says it.
pub(crate) fn time(record: &Json) -> String {
    TIMES
        .iter()
        .find_map(|field| record.get(field)?.as_str())
        .map(|time| cut(time, CELL_CHARS))
        .unwrap_or_default()
}

/// The record's name or title, or failing that its key: what its link reads.
pub(crate) fn title(uri: &str, record: &Json) -> String {
    let named = TITLES
        .iter()
        .filter_map(|field| record.get(field)?.as_str())
        .find(|name| !name.trim().is_empty());
    match named {
        Some(name) => cut(name, CELL_CHARS),
        None => uri.rsplit('/').next().unwrap_or(uri).to_string(),
    }
}

/// At most `most` characters of a stranger's text, marked when cut.
pub(crate) fn cut(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_path_without_a_label_is_headed_by_words() {
        assert_eq!(heading("subject.uri"), "Subject");
        assert_eq!(heading("wants.$type"), "Wants");
        assert_eq!(heading("downstreamResult"), "Downstream result");
        assert_eq!(heading("tool.name"), "Name");
        assert_eq!(heading("uri"), "Uri");
    }

    #[test]
    fn cells_read_paths_through_arrays_and_cut_long_text() {
        let record = json!({"lensPath": [{"uri": "at://did:plc:a/dev.panproto.schema.lens/1"}],
            "members": ["did:plc:a", "did:plc:b"], "name": "x".repeat(500),
            "zeros": vec![0; 1000]});
        let wanted = Wanted::of(["lensPath.uri", "members", "name", "zeros"]);
        let record =
            super::super::bounded::pick(&record.to_string(), &wanted, ROW_FIELD).expect("JSON");
        let links = Links::default();
        let cell = |value| cell(value, &links);
        let lens = cell(at_path(&record, "lensPath.uri"));
        assert_eq!(
            lens.href.as_deref(),
            Some("/at/did:plc:a/dev.panproto.schema.lens/1")
        );
        assert_eq!(cell(at_path(&record, "members")).text, "2 items");
        // An array counts what it holds, kept or not.
        assert_eq!(cell(at_path(&record, "zeros")).text, "1000 items");
        assert_eq!(
            cell(at_path(&record, "name")).text.chars().count(),
            CELL_CHARS + 1
        );
        assert_eq!(cell(at_path(&record, "nothing")).text, "");
        let script = Json::String("javascript:alert(1)".into());
        assert!(cell(Some(&script)).href.is_none());
    }
}
