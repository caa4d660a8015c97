//! Walks a JSON value along a lexicon definition. The path to the current value is kept as a
//! stack of segments and rendered only when an error is reported, so valid records cost no
//! string building.

use crate::schema::{Def, IntegerDef, ObjectDef, StringDef};
use crate::{Lexicons, ValidationError};
use svc_json::{Json, Object};
use unicode_segmentation::UnicodeSegmentation;

enum Segment<'v> {
    Field(&'v str),
    Index(usize),
}

struct Walker<'l, 'v> {
    lexicons: &'l Lexicons,
    path: Vec<Segment<'v>>,
}

type Outcome = Result<(), ValidationError>;

pub(crate) fn record<'v>(
    lexicons: &Lexicons,
    collection: &str,
    def: &Def,
    value: &'v Json<'v>,
) -> Outcome {
    let mut walker = Walker {
        lexicons,
        path: Vec::new(),
    };
    let Def::Record(object) = def else {
        return Err(walker.fail(format!("{collection} is not a record kind")));
    };
    let Some(map) = value.as_object() else {
        return Err(walker.fail("must be an object"));
    };
    match map.get("$type") {
        Some(Json::String(t)) if t == collection => {}
        Some(Json::String(t)) => {
            walker.path.push(Segment::Field("$type"));
            return Err(walker.fail(format!("must be {collection}, not {t}")));
        }
        _ => {
            walker.path.push(Segment::Field("$type"));
            return Err(walker.fail(format!("missing; must be {collection}")));
        }
    }
    walker.object(object, map)
}

impl<'v> Walker<'_, 'v> {
    fn fail(&self, message: impl Into<String>) -> ValidationError {
        let mut path = String::new();
        for segment in &self.path {
            match segment {
                Segment::Field(name) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(name);
                }
                Segment::Index(i) => {
                    path.push('[');
                    path.push_str(&i.to_string());
                    path.push(']');
                }
            }
        }
        ValidationError {
            path,
            message: message.into(),
        }
    }

    /// An error about a field that is not in the record (a missing required field).
    fn fail_at_child(&self, name: &str, message: &str) -> ValidationError {
        let mut error = self.fail(message);
        if !error.path.is_empty() {
            error.path.push('.');
        }
        error.path.push_str(name);
        error
    }

    fn nested(
        &mut self,
        segment: Segment<'v>,
        check: impl FnOnce(&mut Self) -> Outcome,
    ) -> Outcome {
        self.path.push(segment);
        let outcome = check(self);
        self.path.pop();
        outcome
    }

    fn value(&mut self, def: &Def, value: &'v Json<'v>) -> Outcome {
        match def {
            Def::Record(object) | Def::Object(object) => match value.as_object() {
                Some(map) => self.object(object, map),
                None => Err(self.fail("must be an object")),
            },
            Def::String(string) => match value.as_str() {
                Some(text) => self.string(string, text),
                None => Err(self.fail("must be a string")),
            },
            Def::Integer(integer) => self.integer(integer, value),
            Def::Boolean { constant } => self.boolean(*constant, value),
            Def::Array {
                items,
                min_length,
                max_length,
            } => self.array(items, *min_length, *max_length, value),
            Def::Ref(id) => {
                let lexicons = self.lexicons;
                match lexicons.def(id) {
                    Some(target) => self.value(target, value),
                    None => Err(self.fail(format!("unknown definition {id}"))),
                }
            }
            Def::Union { refs, closed } => self.union(refs, *closed, value),
            // The lexicon spec: an `unknown` value may hold anything, but must be an object.
            Def::Unknown => match value {
                Json::Object(_) => self.no_floats(value),
                _ => Err(self.fail("must be an object")),
            },
            Def::CidLink => self.cid_link(value),
            Def::Bytes {
                min_length,
                max_length,
            } => self.bytes(value, *min_length, *max_length),
            Def::Blob => self.blob(value),
            Def::Token => match value.as_str() {
                Some(_) => Ok(()),
                None => Err(self.fail("must be a string")),
            },
            Def::Null => match value {
                Json::Null => Ok(()),
                _ => Err(self.fail("must be null")),
            },
        }
    }

    fn boolean(&mut self, constant: Option<bool>, value: &'v Json<'v>) -> Outcome {
        match value.as_bool() {
            Some(b) if constant.is_some_and(|c| c != b) => {
                Err(self.fail(format!("must be {}", !b)))
            }
            Some(_) => Ok(()),
            None => Err(self.fail("must be a boolean")),
        }
    }

    fn array(
        &mut self,
        items: &Def,
        min_length: Option<u64>,
        max_length: Option<u64>,
        value: &'v Json<'v>,
    ) -> Outcome {
        let Some(elements) = value.as_array() else {
            return Err(self.fail("must be an array"));
        };
        let len = elements.len() as u64;
        if let Some(max) = max_length.filter(|m| len > *m) {
            return Err(self.fail(format!("must not have more than {max} elements")));
        }
        if let Some(min) = min_length.filter(|m| len < *m) {
            return Err(self.fail(format!("must have at least {min} elements")));
        }
        for (i, element) in elements.iter().enumerate() {
            self.nested(Segment::Index(i), |w| w.value(items, element))?;
        }
        Ok(())
    }

    fn object(&mut self, def: &ObjectDef, map: &'v Object<'v>) -> Outcome {
        for name in &def.required {
            if !map.contains_key(name) {
                return Err(self.fail_at_child(name, "required field missing"));
            }
        }
        for (name, value) in map.iter() {
            let declared = def.properties.iter().find(|(p, _)| p == name);
            self.nested(Segment::Field(name), |w| match (declared, value) {
                (Some(_), Json::Null) if def.nullable.iter().any(|n| n == name) => Ok(()),
                (Some(_), Json::Null) => Err(w.fail("must not be null")),
                (Some((_, property)), _) => w.value(property, value),
                (None, _) => w.no_floats(value),
            })?;
        }
        Ok(())
    }

    fn string(&self, def: &StringDef, text: &str) -> Outcome {
        if let Some(constant) = def.constant.as_ref().filter(|c| *c != text) {
            return Err(self.fail(format!("must be {constant}")));
        }
        if let Some(values) = def
            .closed_values
            .as_ref()
            .filter(|v| !v.iter().any(|v| v == text))
        {
            return Err(self.fail(format!("must be one of {}", values.join(", "))));
        }
        let bytes = text.len() as u64;
        if let Some(max) = def.max_length.filter(|m| bytes > *m) {
            return Err(self.fail(format!("longer than {max} bytes")));
        }
        if let Some(min) = def.min_length.filter(|m| bytes < *m) {
            return Err(self.fail(format!("shorter than {min} bytes")));
        }
        // A grapheme is at least one byte: count only when the byte length could break a bound.
        let max_may_break = def.max_graphemes.is_some_and(|m| bytes > m);
        let min_may_break = def.min_graphemes.is_some();
        if max_may_break || min_may_break {
            let graphemes = text.graphemes(true).count() as u64;
            if let Some(max) = def.max_graphemes.filter(|m| graphemes > *m) {
                return Err(self.fail(format!("longer than {max} graphemes")));
            }
            if let Some(min) = def.min_graphemes.filter(|m| graphemes < *m) {
                return Err(self.fail(format!("shorter than {min} graphemes")));
            }
        }
        if let Some(format) = &def.format {
            svc_syntax::check_format(format, text).map_err(|e| self.fail(e.to_string()))?;
        }
        Ok(())
    }

    fn integer(&self, def: &IntegerDef, value: &Json) -> Outcome {
        let Some(number) = value.as_i64() else {
            return Err(self.fail(match value {
                Json::Number(n) if n.is_integer() || n.as_f64().fract() == 0.0 => {
                    "must be an integer between -2^63 and 2^63-1"
                }
                Json::Number(_) => "must be an integer (the data model has no floats)",
                _ => "must be an integer",
            }));
        };
        if def.constant.is_some_and(|c| c != number) {
            return Err(self.fail(format!("must be {}", def.constant.unwrap_or_default())));
        }
        if def
            .closed_values
            .as_ref()
            .is_some_and(|v| !v.contains(&number))
        {
            return Err(self.fail("not one of the allowed values"));
        }
        if let Some(min) = def.minimum.filter(|m| number < *m) {
            return Err(self.fail(format!("must be at least {min}")));
        }
        if let Some(max) = def.maximum.filter(|m| number > *m) {
            return Err(self.fail(format!("must be at most {max}")));
        }
        Ok(())
    }

    fn union(&mut self, refs: &[String], closed: bool, value: &'v Json<'v>) -> Outcome {
        let Some(map) = value.as_object() else {
            return Err(self.fail("must be an object with a $type"));
        };
        let Some(declared) = map.get("$type").and_then(Json::as_str) else {
            return Err(self.fail_at_child("$type", "required field missing"));
        };
        // A union member's $type names a definition: an NSID, then maybe `#name`. Anything else
        // (`blob`, `#local`, two fragments) names none, even in an open union.
        let (nsid, fragment) = declared.split_once('#').unwrap_or((declared, "main"));
        let fragment_ok = !fragment.is_empty()
            && fragment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if svc_syntax::check_nsid(nsid).is_err() || !fragment_ok {
            return self.nested(Segment::Field("$type"), |w| {
                Err(w.fail("not a definition reference (nsid or nsid#name)"))
            });
        }
        let normalized = declared.strip_suffix("#main").unwrap_or(declared);
        match refs.iter().find(|r| *r == normalized) {
            Some(id) => {
                let lexicons = self.lexicons;
                match lexicons.def(id) {
                    Some(def) => self.value(def, value),
                    None => Err(self.fail(format!("unknown definition {id}"))),
                }
            }
            None if closed => self.nested(Segment::Field("$type"), |w| {
                Err(w.fail(format!("must be one of {}", refs.join(", "))))
            }),
            None => self.no_floats(value),
        }
    }

    /// Both forms of a cid-link: the standard `{"$link": cid}` and a plain CID string.
    fn cid_link(&self, value: &Json) -> Outcome {
        let text = match value {
            Json::String(s) => s.as_ref(),
            Json::Object(map) if map.len() == 1 => match map.get("$link") {
                Some(Json::String(s)) => s.as_ref(),
                _ => return Err(self.fail("must be a cid-link")),
            },
            _ => return Err(self.fail("must be a cid-link")),
        };
        if svc_syntax::is_cid(text) {
            Ok(())
        } else {
            Err(self.fail("not a cid"))
        }
    }

    fn bytes(&self, value: &Json, min: Option<u64>, max: Option<u64>) -> Outcome {
        let encoded = match value {
            Json::Object(map) if map.len() == 1 => map.get("$bytes").and_then(Json::as_str),
            _ => None,
        };
        let Some(encoded) = encoded else {
            return Err(self.fail("must be bytes ({\"$bytes\": base64})"));
        };
        let trimmed = encoded.trim_end_matches('=');
        let valid = trimmed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/');
        if !valid {
            return Err(self.fail("not base64"));
        }
        let len = (trimmed.len() * 3 / 4) as u64;
        if max.is_some_and(|m| len > m) || min.is_some_and(|m| len < m) {
            return Err(self.fail("byte length out of range"));
        }
        Ok(())
    }

    fn blob(&self, value: &Json) -> Outcome {
        let Some(map) = value.as_object() else {
            return Err(self.fail("must be a blob"));
        };
        let has_mime = map.get("mimeType").is_some_and(|m| m.as_str().is_some());
        let typed = map.get("$type").and_then(Json::as_str) == Some("blob")
            && map.get("ref").is_some_and(|r| self.cid_link(r).is_ok())
            && map.get("size").is_some_and(|s| s.as_i64().is_some());
        let legacy = map
            .get("cid")
            .and_then(Json::as_str)
            .is_some_and(|c| svc_syntax::check_cid(c).is_ok());
        if has_mime && (typed || legacy) {
            Ok(())
        } else {
            Err(self.fail("must be a blob"))
        }
    }

    /// The atproto data model has no floating-point numbers, anywhere in a record.
    fn no_floats(&mut self, value: &'v Json<'v>) -> Outcome {
        match value {
            Json::Number(n) if !n.is_integer() => {
                Err(self.fail("floating-point numbers are not allowed"))
            }
            Json::Array(elements) => {
                for (i, element) in elements.iter().enumerate() {
                    self.nested(Segment::Index(i), |w| w.no_floats(element))?;
                }
                Ok(())
            }
            Json::Object(map) => {
                for (name, element) in map.iter() {
                    self.nested(Segment::Field(name), |w| w.no_floats(element))?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}
