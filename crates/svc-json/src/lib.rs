//! A record's JSON as the ingest path reads it: a tree whose strings borrow from the text they
//! were parsed from and whose objects are sorted vectors. Parsing one costs about half of a
//! `serde_json::Value` (no allocation per key or string, no map nodes), and the record is
//! parsed once per event on the import's busiest thread.
//!
//! It reads as `serde_json::Value` does, so that validation and index keys give the same
//! answers from either: object members iterate in byte-wise key order, and where a key appears
//! twice the last one stands.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// A JSON value; see the crate's description.
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Object<'a>),
}

/// A JSON number, held as serde_json holds one: non-negative integers unsigned, negative ones
/// signed, anything else a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Unsigned(u64),
    Signed(i64),
    Float(f64),
}

impl Number {
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Number::Unsigned(n) => i64::try_from(n).ok(),
            Number::Signed(n) => Some(n),
            Number::Float(_) => None,
        }
    }

    /// An integer, of whatever size (the data model has no floats).
    pub fn is_integer(self) -> bool {
        !matches!(self, Number::Float(_))
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Number::Unsigned(n) => n as f64,
            Number::Signed(n) => n as f64,
            Number::Float(f) => f,
        }
    }
}

/// Up to this many members, a lookup scans them in order rather than searching.
const LINEAR_LOOKUP_MEMBERS: usize = 12;

/// An object's members, sorted by key byte-wise, keys distinct.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Object<'a> {
    members: Vec<(Cow<'a, str>, Json<'a>)>,
}

impl<'a> Object<'a> {
    /// Sorts the members and keeps, of each key, the last one given.
    fn from_members(mut members: Vec<(Cow<'a, str>, Json<'a>)>) -> Object<'a> {
        if !members.is_sorted_by(|a, b| a.0 < b.0) {
            // Stable: equal keys stay in arrival order, and the merge below keeps the last.
            members.sort_by(|a, b| a.0.cmp(&b.0));
            members.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(&mut later.1, &mut kept.1);
                }
                same
            });
        }
        Object { members }
    }

    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        // A record's objects have a handful of members: comparing lengths first skips the
        // byte comparison for nearly every one, where a binary search compares bytes at each step.
        if self.members.len() <= LINEAR_LOOKUP_MEMBERS {
            return self
                .members
                .iter()
                .find(|(k, _)| k.as_ref() == key)
                .map(|(_, value)| value);
        }
        self.members
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|at| &self.members[at].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The members in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json<'a>)> {
        self.members.iter().map(|(k, v)| (k.as_ref(), v))
    }
}

impl<'a> Json<'a> {
    /// Parses JSON text; the tree borrows every string that holds no escape.
    pub fn parse(text: &'a str) -> Result<Json<'a>, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The same tree as a `serde_json::Value`, borrowing its strings.
    pub fn from_value(value: &'a serde_json::Value) -> Json<'a> {
        use serde_json::Value;
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => Json::Number(match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => Number::Unsigned(u),
                (None, Some(i)) => Number::Signed(i),
                (None, None) => Number::Float(n.as_f64().unwrap_or(f64::NAN)),
            }),
            Value::String(s) => Json::String(Cow::Borrowed(s)),
            Value::Array(elements) => Json::Array(elements.iter().map(Json::from_value).collect()),
            Value::Object(map) => Json::Object(Object::from_members(
                map.iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), Json::from_value(v)))
                    .collect(),
            )),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Object<'a>> {
        match self {
            Json::Object(object) => Some(object),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json<'a>]> {
        match self {
            Json::Array(elements) => Some(elements),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    /// A member of an object (`None` for anything else).
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.as_object().and_then(|object| object.get(key))
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(b))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(Number::Unsigned(n)))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Json<'de>, E> {
        // serde_json hands non-negative integers to `visit_u64`; this keeps the same shape for
        // any deserializer that does not.
        Ok(Json::Number(match u64::try_from(n) {
            Ok(u) => Number::Unsigned(u),
            Err(_) => Number::Signed(n),
        }))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Json<'de>, E> {
        Ok(Json::Number(Number::Float(f)))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(s)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut elements = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(element) = seq.next_element()? {
            elements.push(element);
        }
        Ok(Json::Array(elements))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
        while let Some(Key(key)) = map.next_key()? {
            members.push((key, map.next_value()?));
        }
        Ok(Json::Object(Object::from_members(members)))
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json<'de>, D::Error> {
        deserializer.deserialize_any(TreeVisitor)
    }
}

/// An object's key, borrowed where it holds no escape.
struct Key<'a>(Cow<'a, str>);

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(s)))
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_serde_json_value_does() {
        let texts = [
            r#"{"b":1,"a":[true,null,-2,3.5,"x\"y"],"c":{"z":"","y":18446744073709551615}}"#,
            r#"{"k":1,"k":2}"#,
            r#"{"\u0041":"esc\u00e9","A":"plain"}"#,
            r#"[]"#,
            r#""just a string""#,
            r#"{"n":-9223372036854775808,"f":1e400}"#,
        ];
        for text in texts {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
                assert!(Json::parse(text).is_err(), "{text}");
                continue;
            };
            let tree = Json::parse(text).unwrap();
            assert_eq!(tree, Json::from_value(&value), "{text}");
        }
    }

    #[test]
    fn members_iterate_in_key_order_and_the_last_duplicate_stands() {
        let tree = Json::parse(r#"{"b":1,"a":2,"b":3,"ab":4}"#).unwrap();
        let object = tree.as_object().unwrap();
        let keys: Vec<&str> = object.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["a", "ab", "b"]);
        assert_eq!(object.get("b").and_then(Json::as_i64), Some(3));
        assert_eq!(object.get("c"), None);
    }

    #[test]
    fn every_member_is_found_in_small_and_large_objects() {
        for size in 0..=3 * LINEAR_LOOKUP_MEMBERS {
            // Keys of several lengths, given out of order, so that lengths and bytes both decide.
            let keys: Vec<String> = (0..size)
                .rev()
                .map(|i| "k".repeat(i % 4 + 1) + &i.to_string())
                .collect();
            let members: Vec<String> = keys
                .iter()
                .enumerate()
                .map(|(n, k)| format!("\"{k}\":{n}"))
                .collect();
            let text = format!("{{{}}}", members.join(","));
            let tree = Json::parse(&text).unwrap();
            let object = tree.as_object().unwrap();
            assert_eq!(object.len(), size, "{text}");
            for (n, key) in keys.iter().enumerate() {
                assert_eq!(
                    object.get(key).and_then(Json::as_i64),
                    Some(n as i64),
                    "{key} in {text}"
                );
                assert_eq!(object.get(&format!("{key}x")), None, "{text}");
                assert_eq!(object.get(&format!("x{key}")), None, "{text}");
            }
        }
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let tree = Json::parse(r#"{"plain":"text","escaped":"a\nb"}"#).unwrap();
        assert!(matches!(
            tree.get("plain"),
            Some(Json::String(Cow::Borrowed("text")))
        ));
        assert!(matches!(tree.get("escaped"), Some(Json::String(Cow::Owned(s))) if s == "a\nb"));
    }

    #[test]
    fn malformed_text_is_refused() {
        for text in ["", "{", r#"{"a":}"#, "[1,]", "nul", r#"{"a":1}x"#] {
            assert!(Json::parse(text).is_err(), "{text}");
        }
    }
}
