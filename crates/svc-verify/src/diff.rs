//! The first place two JSON values differ, for a falsification's message.

use serde_json::Value;

/// A JSON path (`$.text`, `$.tags[2]`) and what stands there on each side (`None`: absent).
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub path: String,
    pub expected: Option<Value>,
    pub actual: Option<Value>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |value: &Option<Value>| match value {
            Some(value) => value.to_string(),
            None => "(absent)".to_string(),
        };
        write!(
            f,
            "at {}: the record has {}, the round trip gave {}",
            self.path,
            show(&self.expected),
            show(&self.actual)
        )
    }
}

/// `None` when the values are equal (object key order does not count). Keys are visited in
/// sorted order, so the same pair always reports the same path.
pub fn first_difference(expected: &Value, actual: &Value) -> Option<Difference> {
    differ_at("$".to_string(), expected, actual)
}

fn differ_at(path: String, expected: &Value, actual: &Value) -> Option<Difference> {
    match (expected, actual) {
        (Value::Object(left), Value::Object(right)) => {
            let mut keys: Vec<&String> = left.keys().chain(right.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let here = format!("{path}.{key}");
                match (left.get(key), right.get(key)) {
                    (Some(l), Some(r)) => differ_at(here, l, r),
                    (l, r) => Some(Difference {
                        path: here,
                        expected: l.cloned(),
                        actual: r.cloned(),
                    }),
                }
            })
        }
        (Value::Array(left), Value::Array(right)) => {
            let longest = left.len().max(right.len());
            (0..longest).find_map(|i| {
                let here = format!("{path}[{i}]");
                match (left.get(i), right.get(i)) {
                    (Some(l), Some(r)) => differ_at(here, l, r),
                    (l, r) => Some(Difference {
                        path: here,
                        expected: l.cloned(),
                        actual: r.cloned(),
                    }),
                }
            })
        }
        (left, right) if left == right => None,
        (left, right) => Some(Difference {
            path,
            expected: Some(left.clone()),
            actual: Some(right.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_values_have_no_difference() {
        let value = json!({"a": [1, {"b": "c"}], "d": null});
        assert_eq!(first_difference(&value, &value.clone()), None);
    }

    #[test]
    fn names_the_path_and_both_sides() {
        let difference =
            first_difference(&json!({"text": ["a", "b"]}), &json!({"text": []})).unwrap();
        assert_eq!(difference.path, "$.text[0]");
        assert_eq!(difference.expected, Some(json!("a")));
        assert_eq!(difference.actual, None);
        let difference =
            first_difference(&json!({"x": 1, "y": 2}), &json!({"x": 1, "y": "2"})).unwrap();
        assert_eq!(
            difference.to_string(),
            "at $.y: the record has 2, the round trip gave \"2\""
        );
    }

    #[test]
    fn a_missing_key_is_absent() {
        let difference = first_difference(&json!({"createdAt": "t"}), &json!({})).unwrap();
        assert_eq!(difference.path, "$.createdAt");
        assert_eq!(difference.actual, None);
    }
}
