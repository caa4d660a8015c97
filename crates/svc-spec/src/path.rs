//! Dotted JSON paths over records, with a `$type` selector for union members:
//! `conditions[$type=dev.svc.recommendation#conditionSourceIs].schema.uri`.
//!
//! Arrays fan out: a path step on an array applies to each element, and a path that ends on an
//! array yields its elements. So `members` yields every member DID and `lensPath` yields nothing
//! when the array is empty.
//!
//! A path may start from a fact svc derives of the record instead of its fields (`@uri`,
//! `@name`: [`crate::RecordView`]).

use crate::record_view::{Derived, RecordView};
use svc_json::Json;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    field: String,
    type_selector: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    derived: Option<Derived>,
    steps: Vec<Step>,
}

impl JsonPath {
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let first = text.split(['.', '[']).next().unwrap_or_default();
        let fact = Derived::named(first).map_err(|error| format!("path {text}: {error}"))?;
        let mut rest = match fact {
            Some(_) => text[first.len()..]
                .strip_prefix('.')
                .unwrap_or(&text[first.len()..]),
            None => text,
        };
        if fact.is_some() && text[first.len()..].starts_with('[') {
            return Err(format!("path {text}: a fact takes no selector"));
        }
        let mut steps = Vec::new();
        while !rest.is_empty() {
            let bracket = rest.find('[');
            let dot = rest.find('.');
            let (field, selector, remainder) = match (bracket, dot) {
                (Some(b), d) if d.is_none_or(|d| b < d) => {
                    let close = rest[b..]
                        .find(']')
                        .map(|c| b + c)
                        .ok_or_else(|| format!("unclosed [ in path {text}"))?;
                    let inner = &rest[b + 1..close];
                    let selector = inner.strip_prefix("$type=").ok_or_else(|| {
                        format!("path {text}: only [$type=...] selectors are supported")
                    })?;
                    let after = &rest[close + 1..];
                    let after = match after.strip_prefix('.') {
                        Some(a) => a,
                        None if after.is_empty() => after,
                        None => return Err(format!("path {text}: expected . after ]")),
                    };
                    (&rest[..b], Some(selector.to_string()), after)
                }
                (_, Some(d)) => (&rest[..d], None, &rest[d + 1..]),
                (_, None) => (rest, None, ""),
            };
            if field.is_empty() {
                return Err(format!("path {text} has an empty step"));
            }
            steps.push(Step {
                field: field.to_string(),
                type_selector: selector,
            });
            rest = remainder;
        }
        if steps.is_empty() && fact.is_none() {
            return Err("empty path".to_string());
        }
        Ok(JsonPath {
            derived: fact,
            steps,
        })
    }

    /// Appends a field step (`lens` + `uri` for a reference's uri).
    pub fn child(&self, field: &str) -> JsonPath {
        let mut steps = self.steps.clone();
        steps.push(Step {
            field: field.to_string(),
            type_selector: None,
        });
        JsonPath {
            derived: self.derived,
            steps,
        }
    }

    /// Every value the path reaches in a record, facts included, arrays at the end expanded
    /// into their elements.
    pub fn values_in<'r>(&self, record: &'r RecordView<'r>) -> Vec<&'r Json<'r>> {
        let mut out = Vec::new();
        let start = match self.derived {
            Some(fact) => record.fact(fact),
            None => record.json(),
        };
        reach(start, &self.steps, &mut out);
        out
    }
}

/// Follows `steps` from `value` depth first, so that what it reaches comes out in document
/// order without a list per step.
fn reach<'v>(value: &'v Json<'v>, steps: &[Step], out: &mut Vec<&'v Json<'v>>) {
    let Some((step, rest)) = steps.split_first() else {
        match value {
            Json::Array(elements) => out.extend(elements.iter()),
            other => out.push(other),
        }
        return;
    };
    match value {
        Json::Array(elements) => {
            for element in elements {
                reach(element, steps, out);
            }
        }
        Json::Object(map) => {
            let Some(found) = map.get(&step.field) else {
                return;
            };
            match (&step.type_selector, found) {
                (None, v) => reach(v, rest, out),
                (Some(wanted), Json::Array(elements)) => {
                    for element in elements.iter().filter(|e| has_type(e, wanted)) {
                        reach(element, rest, out);
                    }
                }
                (Some(wanted), v) if has_type(v, wanted) => reach(v, rest, out),
                _ => {}
            }
        }
        _ => {}
    }
}

fn has_type(value: &Json, wanted: &str) -> bool {
    value.get("$type").and_then(Json::as_str) == Some(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tree(value: &serde_json::Value) -> Json<'_> {
        Json::from_value(value)
    }

    #[test]
    fn fans_out_over_arrays_and_selects_union_members() {
        let value = json!({
            "conditions": [
                {"$type": "a#sourceIs", "schema": {"uri": "at://x/a.b.c/1"}},
                {"$type": "a#targetIs", "schema": {"uri": "at://x/a.b.c/2"}},
                {"$type": "a#sourceIs", "schema": {"uri": "at://x/a.b.c/3"}}
            ],
            "members": ["did:a", "did:b"],
            "lensPath": []
        });
        let record = tree(&value);
        let view = RecordView::new("at://did:plc:a/a.b.c/k", &record);
        let path = JsonPath::parse("conditions[$type=a#sourceIs].schema.uri").unwrap();
        assert_eq!(
            path.values_in(&view),
            vec![
                &tree(&json!("at://x/a.b.c/1")),
                &tree(&json!("at://x/a.b.c/3"))
            ]
        );
        assert_eq!(
            JsonPath::parse("members").unwrap().values_in(&view).len(),
            2
        );
        assert!(
            JsonPath::parse("lensPath")
                .unwrap()
                .values_in(&view)
                .is_empty()
        );
        assert!(
            JsonPath::parse("missing.deeper")
                .unwrap()
                .values_in(&view)
                .is_empty()
        );
        assert_eq!(
            JsonPath::parse("conditions.$type")
                .unwrap()
                .values_in(&view)
                .len(),
            3
        );
    }

    #[test]
    fn a_path_from_a_fact_reads_the_view_and_a_field_of_that_name_is_a_field() {
        let value = json!({"@uri": "spoofed", "blob": {"entries": ["post:body"]}});
        let record = tree(&value);
        let view = RecordView::new("at://did:plc:a/dev.panproto.schema.schema/k", &record);
        let uri = JsonPath::parse("@uri").unwrap();
        assert_eq!(
            uri.values_in(&view),
            vec![&tree(&json!("at://did:plc:a/dev.panproto.schema.schema/k"))]
        );
        let name = JsonPath::parse("@name").unwrap();
        assert_eq!(name.values_in(&view), vec![&tree(&json!("post:body"))]);
        let field = JsonPath::parse("blob.entries").unwrap();
        assert_eq!(field.values_in(&view).len(), 1);
    }

    #[test]
    fn refuses_malformed_paths() {
        for bad in [
            "",
            "a..b",
            "a[$type=x",
            "a[0]",
            "a[$type=x]b",
            "@nope",
            "@uri[$type=x]",
        ] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }
}
