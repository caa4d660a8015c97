//! A record's JSON laid out for reading: one line per value, indented, with every at-uri and
//! DID in it a link. The lines hold text only; the template escapes it. A record is laid out
//! as far as [`PAGE`] reaches: a line says how many values follow where the rest was left.

use super::bounded::{Bounds, Json, quoted};
use super::{Linked, Links};

/// What a record's page lays out at most: 5,000 values (lines) and 256 KiB of their text,
/// each string cut at the longest at-uri, so that every one that can be linked is whole. A
/// page of 5,000 lines a person can still read; beyond, they take the record's JSON.
pub(crate) const PAGE: Bounds = Bounds {
    values: 5_000,
    text_bytes: 256 * 1024,
    string_bytes: svc_spec::MAX_AT_URI_PARAM_BYTES,
};

/// One line of the layout.
pub(crate) struct Line {
    /// Two spaces a level.
    pub indent: String,
    /// The member's name, quoted, for a value inside an object.
    pub key: Option<String>,
    pub value: Linked,
    /// `string`, `number`, `literal`, `punct`, or `note` (what was left out): how the value
    /// is coloured.
    pub class: &'static str,
    /// What closes the line: `,`, or nothing.
    pub tail: &'static str,
}

/// Every at-uri among the record's strings: what [`Links`] must know of.
pub(crate) fn at_uris(value: &Json, out: &mut Vec<String>) {
    match value {
        Json::String(text) if text.starts_with("at://") => out.push(text.clone()),
        Json::Array(items, _) => items.iter().for_each(|item| at_uris(item, out)),
        Json::Object(members, _) => members.iter().for_each(|(_, item)| at_uris(item, out)),
        _ => {}
    }
}

/// The lines of `value`.
pub(crate) fn lines(value: &Json, links: &Links) -> Vec<Line> {
    let mut out = Vec::new();
    lay_out(value, None, 0, "", links, &mut out);
    out
}

/// A container's values, each with its name in an object.
type Children<'v> = Vec<(Option<&'v str>, &'v Json)>;

fn lay_out(
    value: &Json,
    key: Option<&str>,
    depth: usize,
    tail: &'static str,
    links: &Links,
    out: &mut Vec<Line>,
) {
    let line = |text: String, href: Option<String>, class, tail| Line {
        indent: "  ".repeat(depth),
        key: key.map(quoted),
        value: Linked { text, href },
        class,
        tail,
    };
    let (open, close, children, more): (&str, &str, Children<'_>, u64) = match value {
        Json::Object(members, more) if !members.is_empty() || *more > 0 => (
            "{",
            "}",
            members.iter().map(|(k, v)| (Some(k.as_str()), v)).collect(),
            *more,
        ),
        Json::Array(items, more) if !items.is_empty() || *more > 0 => {
            ("[", "]", items.iter().map(|v| (None, v)).collect(), *more)
        }
        Json::Object(..) => return out.push(line("{}".into(), None, "literal", tail)),
        Json::Array(..) => return out.push(line("[]".into(), None, "literal", tail)),
        Json::String(text) => {
            out.push(line(quoted(text), links.link(text), "string", tail));
            return;
        }
        Json::Number(text) => return out.push(line(text.clone(), None, "number", tail)),
        other => return out.push(line(other.to_string(), None, "literal", tail)),
    };
    out.push(line(open.into(), None, "punct", ""));
    let last = children.len();
    for (at, (child_key, child)) in children.into_iter().enumerate() {
        let comma = if at + 1 < last || more > 0 { "," } else { "" };
        lay_out(child, child_key, depth + 1, comma, links, out);
    }
    if more > 0 {
        out.push(Line {
            indent: "  ".repeat(depth + 1),
            key: None,
            value: Linked::plain(format!("… {} more not shown", grouped(more))),
            class: "note",
            tail: "",
        });
    }
    out.push(Line {
        indent: "  ".repeat(depth),
        key: None,
        value: Linked::plain(close),
        class: "punct",
        tail,
    });
}

/// A count with its thousands apart: `3,900,001`.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() * 4 / 3);
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::bounded::read;
    use super::*;
    use serde_json::json;

    fn rendered(value: &serde_json::Value, held: &[&str]) -> Vec<String> {
        rendered_within(value, held, PAGE)
    }

    fn rendered_within(value: &serde_json::Value, held: &[&str], bounds: Bounds) -> Vec<String> {
        let links = Links {
            held: held.iter().map(|uri| uri.to_string()).collect(),
            ..Links::default()
        };
        let (value, _) = read(&value.to_string(), bounds).expect("JSON");
        lines(&value, &links)
            .into_iter()
            .map(|line| {
                let key = line.key.map(|k| format!("{k}: ")).unwrap_or_default();
                let href = line
                    .value
                    .href
                    .map(|h| format!(" -> {h}"))
                    .unwrap_or_default();
                format!("{}{key}{}{}{href}", line.indent, line.value.text, line.tail)
            })
            .collect()
    }

    #[test]
    fn held_records_lenses_and_dids_are_links_and_nothing_else_is() {
        let record = json!({
            "requester": "did:plc:abc",
            "wants": {"lens": {"uri": "at://did:plc:x/dev.panproto.schema.lens/1"}},
            "fulfillment": "at://did:plc:y/dev.svc.verification/2",
            "missing": "at://did:plc:y/dev.svc.verification/3",
            "site": "javascript:alert(1)",
            "repository": "at://did:plc:y",
            "collection": "at://did:plc:y/dev.svc.vocab",
            "by_handle": "at://alice.test/dev.svc.vocab",
            "n": [1, true, null, {}]
        });
        let lines = rendered(&record, &["at://did:plc:y/dev.svc.verification/2"]);
        // Members in name order, as the record is stored.
        let expected = [
            "{",
            "  \"by_handle\": \"at://alice.test/dev.svc.vocab\",",
            "  \"collection\": \"at://did:plc:y/dev.svc.vocab\", -> /at/did:plc:y/dev.svc.vocab",
            "  \"fulfillment\": \"at://did:plc:y/dev.svc.verification/2\", -> /at/did:plc:y/dev.svc.verification/2",
            "  \"missing\": \"at://did:plc:y/dev.svc.verification/3\",",
            "  \"n\": [",
            "    1,",
            "    true,",
            "    null,",
            "    {}",
            "  ],",
            "  \"repository\": \"at://did:plc:y\", -> /at/did:plc:y",
            "  \"requester\": \"did:plc:abc\", -> /at/did:plc:abc",
            "  \"site\": \"javascript:alert(1)\",",
            "  \"wants\": {",
            "    \"lens\": {",
            "      \"uri\": \"at://did:plc:x/dev.panproto.schema.lens/1\" -> /at/did:plc:x/dev.panproto.schema.lens/1",
            "    }",
            "  }",
            "}",
        ];
        assert_eq!(lines, expected);
    }

    #[test]
    fn what_is_left_out_is_counted_where_it_was() {
        let record = json!({"a": [1, 2, 3, 4, 5], "b": {"c": true}});
        let bounds = Bounds { values: 4, ..PAGE };
        let expected = [
            "{",
            "  \"a\": [",
            "    1,",
            "    2,",
            "    … 3 more not shown",
            "  ],",
            "  … 1 more not shown",
            "}",
        ];
        assert_eq!(rendered_within(&record, &[], bounds), expected);
        assert_eq!(grouped(3_900_001), "3,900,001");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(0), "0");
    }
}
