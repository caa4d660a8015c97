//! A record's JSON laid out for reading: one line per value, indented, with every at-uri and
//! DID in it a link. The lines hold text only; the template escapes it.

use super::{Linked, Links};
use serde_json::Value;

/// One line of the layout.
pub(crate) struct Line {
    /// Two spaces a level.
    pub indent: String,
    /// The member's name, quoted, for a value inside an object.
    pub key: Option<String>,
    pub value: Linked,
    /// `string`, `number`, `literal` or `punct`: how the value is coloured.
    pub class: &'static str,
    /// What closes the line: `,`, or nothing.
    pub tail: &'static str,
}

/// Every at-uri among the record's strings: what [`Links`] must know of.
pub(crate) fn at_uris(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) if text.starts_with("at://") => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| at_uris(item, out)),
        Value::Object(members) => members.values().for_each(|item| at_uris(item, out)),
        _ => {}
    }
}

/// The lines of `value`.
pub(crate) fn lines(value: &Value, links: &Links) -> Vec<Line> {
    let mut out = Vec::new();
    lay_out(value, None, 0, "", links, &mut out);
    out
}

fn lay_out(
    value: &Value,
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
    let (open, close, children): (&str, &str, Vec<(Option<&str>, &Value)>) = match value {
        Value::Object(members) if !members.is_empty() => (
            "{",
            "}",
            members.iter().map(|(k, v)| (Some(k.as_str()), v)).collect(),
        ),
        Value::Array(items) if !items.is_empty() => {
            ("[", "]", items.iter().map(|v| (None, v)).collect())
        }
        Value::String(text) => {
            out.push(line(quoted(text), links.link(text), "string", tail));
            return;
        }
        Value::Number(_) => return out.push(line(value.to_string(), None, "number", tail)),
        other => return out.push(line(other.to_string(), None, "literal", tail)),
    };
    out.push(line(open.into(), None, "punct", ""));
    let last = children.len() - 1;
    for (at, (child_key, child)) in children.into_iter().enumerate() {
        let comma = if at < last { "," } else { "" };
        lay_out(child, child_key, depth + 1, comma, links, out);
    }
    out.push(Line {
        indent: "  ".repeat(depth),
        key: None,
        value: Linked::plain(close),
        class: "punct",
        tail,
    });
}

/// A string as JSON writes it, quotes and escapes included.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(value: &Value, held: &[&str]) -> Vec<String> {
        let links = Links {
            held: held.iter().map(|uri| uri.to_string()).collect(),
        };
        lines(value, &links)
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
}
