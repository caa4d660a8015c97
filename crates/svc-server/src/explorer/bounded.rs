//! A record's JSON read for a page within bounds. A stored record may hold millions of tiny
//! values (8 MB of zeros in a field no lexicon names): as a `serde_json::Value` it takes many
//! times its text, and laid out a line a value it makes a page of a hundred MB. Read here, a
//! record keeps at most so many values and so many bytes of text, long strings cut, and the
//! rest is walked past, counted but not kept. A page either reads the record from its start
//! ([`read`]: what a record's page lays out) or picks the fields it shows ([`pick`]: a table's
//! cells, a title), each field within bounds of its own, so that a huge field before them
//! leaves them whole.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// A JSON value, as much of it as was kept.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// As JSON writes it.
    Number(String),
    /// Cut, `…` appended, when longer than the bounds allow.
    String(String),
    /// The elements kept, and how many more the record holds.
    Array(Vec<Json>, u64),
    /// The members kept, in the record's order, and how many more the record holds.
    Object(Vec<(String, Json)>, u64),
}

/// What a reading keeps at most.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Values: a container counts as one, and so does each value in it.
    pub values: u64,
    /// Bytes of keys, strings and numbers; the value that reaches it is kept whole.
    pub text_bytes: usize,
    /// Bytes of one string or key: a longer one is cut at a character's boundary.
    pub string_bytes: usize,
}

/// What a reading found and kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Values the record holds.
    pub values: u64,
    /// Values kept.
    pub kept: u64,
    /// Strings and keys cut.
    pub cut: u64,
}

impl Json {
    /// The member `key` of an object; where a key appears twice the last one stands, as in
    /// `serde_json::Value`.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members, _) => members.iter().rev().find(|(k, _)| k == key).map(|m| &m.1),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(text) => Some(text),
            _ => None,
        }
    }
}

/// Compact JSON, `…` where values were left out.
impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let more = |f: &mut fmt::Formatter<'_>, written: bool, omitted: u64| match omitted {
            0 => Ok(()),
            _ if written => f.write_str(",…"),
            _ => f.write_str("…"),
        };
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(value) => write!(f, "{value}"),
            Json::Number(text) => f.write_str(text),
            Json::String(text) => f.write_str(&quoted(text)),
            Json::Array(items, omitted) => {
                f.write_str("[")?;
                for (at, item) in items.iter().enumerate() {
                    write!(f, "{}{item}", if at > 0 { "," } else { "" })?;
                }
                more(f, !items.is_empty(), *omitted)?;
                f.write_str("]")
            }
            Json::Object(members, omitted) => {
                f.write_str("{")?;
                for (at, (key, value)) in members.iter().enumerate() {
                    let comma = if at > 0 { "," } else { "" };
                    write!(f, "{comma}{}:{value}", quoted(key))?;
                }
                more(f, !members.is_empty(), *omitted)?;
                f.write_str("}")
            }
        }
    }
}

/// A string as JSON writes it, quotes and escapes included.
pub(crate) fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}

/// The record from its start, within `bounds`, and what it holds.
pub(crate) fn read(json: &str, bounds: Bounds) -> Result<(Json, Tally), serde_json::Error> {
    let mut reading = Reading::new(bounds);
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let value = Keep(&mut reading).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok((value, reading.tally))
}

/// The fields of the record at `wanted`'s paths, each within `bounds`; nothing else.
pub(crate) fn pick(json: &str, wanted: &Wanted, bounds: Bounds) -> Result<Json, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let value = Pick { wanted, bounds }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Paths into a record, as a tree of member names: a table's columns, a page's facts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wanted {
    /// The value here is wanted whole (within bounds).
    whole: bool,
    members: Vec<(String, Wanted)>,
}

/// The member names of a dotted path, each without its `[...]` selector.
pub(crate) fn steps(path: &str) -> impl Iterator<Item = &str> {
    path.split('.')
        .map(|step| step.split('[').next().unwrap_or(step))
}

impl Wanted {
    /// The fields at these dotted paths, read as a table cell reads them: a step through an
    /// array goes through its first element.
    pub fn of<'p>(paths: impl IntoIterator<Item = &'p str>) -> Wanted {
        let mut wanted = Wanted::default();
        for path in paths {
            let mut here = &mut wanted;
            for step in steps(path) {
                let at = match here.members.iter().position(|(name, _)| name == step) {
                    Some(at) => at,
                    None => {
                        here.members.push((step.to_string(), Wanted::default()));
                        here.members.len() - 1
                    }
                };
                here = &mut here.members[at].1;
            }
            here.whole = true;
        }
        wanted
    }

    fn member(&self, name: &str) -> Option<(&str, &Wanted)> {
        self.members
            .iter()
            .find(|(wanted, _)| wanted == name)
            .map(|(name, wanted)| (name.as_str(), wanted))
    }
}

/// A reading's budget and count.
struct Reading {
    bounds: Bounds,
    text: usize,
    tally: Tally,
}

impl Reading {
    fn new(bounds: Bounds) -> Reading {
        Reading {
            bounds,
            text: 0,
            tally: Tally::default(),
        }
    }

    /// Whether another value is kept.
    fn room(&self) -> bool {
        self.tally.kept < self.bounds.values && self.text < self.bounds.text_bytes
    }

    /// A string or key as kept: cut to the bounds, and charged to them.
    fn text(&mut self, text: &str) -> String {
        let mut end = text.len().min(self.bounds.string_bytes);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.text += end;
        match end < text.len() {
            true => {
                self.tally.cut += 1;
                format!("{}…", &text[..end])
            }
            false => text.to_string(),
        }
    }

    fn number(&mut self, text: String) -> Json {
        self.text += text.len();
        Json::Number(text)
    }
}

/// Reads a value, keeping what the reading has room for.
struct Keep<'r>(&'r mut Reading);

impl<'de> DeserializeSeed<'de> for Keep<'_> {
    type Value = Json;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        self.0.tally.values += 1;
        self.0.tally.kept += 1;
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Keep<'_> {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Json, E> {
        Ok(Json::Bool(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Json, E> {
        Ok(self.0.number(value.to_string()))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Json, E> {
        Ok(self.0.number(value.to_string()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Json, E> {
        let text =
            serde_json::Number::from_f64(value).map_or_else(|| "null".into(), |n| n.to_string());
        Ok(self.0.number(text))
    }

    fn visit_str<E>(self, value: &str) -> Result<Json, E> {
        Ok(Json::String(self.0.text(value)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let (mut items, mut omitted) = (Vec::new(), 0);
        loop {
            if self.0.room() {
                match seq.next_element_seed(Keep(&mut *self.0))? {
                    Some(item) => items.push(item),
                    None => break,
                }
            } else {
                match seq.next_element_seed(Count(&mut self.0.tally))? {
                    Some(()) => omitted += 1,
                    None => break,
                }
            }
        }
        Ok(Json::Array(items, omitted))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let (mut members, mut omitted) = (Vec::new(), 0);
        loop {
            if self.0.room() {
                let Some(key) = map.next_key_seed(Key(&mut *self.0))? else {
                    break;
                };
                members.push((key, map.next_value_seed(Keep(&mut *self.0))?));
            } else {
                if map.next_key::<IgnoredAny>()?.is_none() {
                    break;
                }
                map.next_value_seed(Count(&mut self.0.tally))?;
                omitted += 1;
            }
        }
        Ok(Json::Object(members, omitted))
    }
}

/// A member's name, as kept.
struct Key<'r>(&'r mut Reading);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member's name")
    }

    fn visit_str<E>(self, value: &str) -> Result<String, E> {
        Ok(self.0.text(value))
    }
}

/// Walks past a value, counting the values in it: nothing is kept.
struct Count<'t>(&'t mut Tally);

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.0.values += 1;
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Count(&mut *self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Count(&mut *self.0))?;
        }
        Ok(())
    }
}

/// Reads the wanted members of a value, each wanted whole within a reading of its own; a
/// step through an array reads its first element. Anything else reads as null.
pub(crate) struct Pick<'w> {
    pub wanted: &'w Wanted,
    pub bounds: Bounds,
}

impl<'de> DeserializeSeed<'de> for Pick<'_> {
    type Value = Json;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        match self.wanted.whole {
            true => Keep(&mut Reading::new(self.bounds)).deserialize(deserializer),
            false => deserializer.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for Pick<'_> {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_str<E>(self, _: &str) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let first = seq.next_element_seed(Pick {
            wanted: self.wanted,
            bounds: self.bounds,
        })?;
        let mut omitted = 0;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            omitted += 1;
        }
        Ok(Json::Array(first.into_iter().collect(), omitted))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let (mut members, mut omitted) = (Vec::new(), 0);
        while let Some(member) = map.next_key_seed(Member(self.wanted))? {
            match member {
                Some((name, wanted)) => {
                    let value = map.next_value_seed(Pick {
                        wanted,
                        bounds: self.bounds,
                    })?;
                    members.push((name.to_string(), value));
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                    omitted += 1;
                }
            }
        }
        Ok(Json::Object(members, omitted))
    }
}

/// A member's name, matched against what is wanted without being copied.
struct Member<'w>(&'w Wanted);

impl<'de, 'w> DeserializeSeed<'de> for Member<'w> {
    type Value = Option<(&'w str, &'w Wanted)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, 'w> Visitor<'de> for Member<'w> {
    type Value = Option<(&'w str, &'w Wanted)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member's name")
    }

    fn visit_str<E>(self, name: &str) -> Result<Self::Value, E> {
        Ok(self.0.member(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOMY: Bounds = Bounds {
        values: 1000,
        text_bytes: 1 << 20,
        string_bytes: 1 << 20,
    };

    fn read_str(json: &str, bounds: Bounds) -> (Json, Tally) {
        read(json, bounds).expect("JSON")
    }

    #[test]
    fn within_bounds_a_record_reads_whole_in_its_order() {
        let json = r#"{"b":[1,-2,2.5,true,null,"é\"x"],"a":{},"c":[],"a":{"k":"v"}}"#;
        let (value, tally) = read_str(json, ROOMY);
        assert_eq!(
            value.to_string(),
            r#"{"b":[1,-2,2.5,true,null,"é\"x"],"a":{},"c":[],"a":{"k":"v"}}"#
        );
        assert_eq!(
            value.get("a").and_then(|a| a.get("k")),
            Some(&Json::String("v".into()))
        );
        assert_eq!(
            tally,
            Tally {
                values: 12,
                kept: 12,
                cut: 0
            }
        );
    }

    #[test]
    fn beyond_its_bounds_a_record_is_counted_not_kept() {
        let json = format!(
            "{{\"a\":[{}],\"b\":\"{}\"}}",
            vec!["0"; 100_000].join(","),
            "x".repeat(50)
        );
        let bounds = Bounds {
            values: 10,
            text_bytes: 1 << 20,
            string_bytes: 8,
        };
        let (value, tally) = read_str(&json, bounds);
        // The object, the array and 8 zeros; the rest of the array, and "b", counted.
        let Json::Object(members, 1) = &value else {
            panic!("{value}")
        };
        assert_eq!(
            members[0].1,
            Json::Array(vec![Json::Number("0".into()); 8], 99_992)
        );
        assert_eq!(
            tally,
            Tally {
                values: 100_003,
                kept: 10,
                cut: 0
            }
        );
        // A string longer than the bound is cut at a character's boundary.
        let (value, tally) = read_str("[\"aaaaaaaé\",\"ok\"]", bounds);
        assert_eq!(value.to_string(), "[\"aaaaaaa…\",\"ok\"]");
        assert_eq!(tally.cut, 1);
        // Text counts too: past the bytes allowed, nothing more is kept.
        let text = Bounds {
            values: 1000,
            text_bytes: 5,
            string_bytes: 100,
        };
        let (value, _) = read_str("[\"abc\",\"def\",\"ghi\"]", text);
        assert_eq!(value.to_string(), "[\"abc\",\"def\",…]");
    }

    #[test]
    fn picked_fields_each_have_bounds_of_their_own() {
        let json = format!(
            "{{\"aaa\":[{}],\"lensPath\":[{{\"uri\":\"at://x\",\"n\":1}},{{\"uri\":\"at://y\"}}],\
             \"members\":[{}],\"name\":\"Huge\",\"wants\":\"text\"}}",
            vec!["0"; 10_000].join(","),
            vec!["\"did:plc:a\""; 30].join(",")
        );
        let wanted = Wanted::of(["name", "lensPath.uri", "members", "wants.source.uri"]);
        let bounds = Bounds {
            values: 5,
            text_bytes: 1 << 20,
            string_bytes: 100,
        };
        let value = pick(&json, &wanted, bounds).expect("JSON");
        assert_eq!(
            value.to_string(),
            "{\"lensPath\":[{\"uri\":\"at://x\",…},…],\
             \"members\":[\"did:plc:a\",\"did:plc:a\",\"did:plc:a\",\"did:plc:a\",…],\
             \"name\":\"Huge\",\"wants\":null,…}"
        );
        let Some(Json::Array(_, more)) = value.get("members") else {
            panic!("{value}")
        };
        assert_eq!(*more, 26);
    }

    #[test]
    fn what_is_not_json_is_an_error() {
        assert!(read("{\"a\":", ROOMY).is_err());
        assert!(read("[1] [2]", ROOMY).is_err());
        assert!(pick("{\"a\":1}x", &Wanted::of(["a"]), ROOMY).is_err());
    }
}
