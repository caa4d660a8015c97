//! The lexicon documents parsed into a typed tree, references made absolute.

use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap};

/// A lexicon document that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LexiconError {
    #[error("lexicon document is not JSON: {0}")]
    Json(String),
    #[error("lexicon {doc}: {message}")]
    Invalid { doc: String, message: String },
    #[error("lexicon {from}: reference to unknown definition {to}")]
    UnresolvedRef { from: String, to: String },
}

#[derive(Debug)]
pub(crate) struct ObjectDef {
    pub properties: Vec<(String, Def)>,
    pub required: Vec<String>,
    pub nullable: Vec<String>,
}

#[derive(Debug, Default)]
pub(crate) struct StringDef {
    pub format: Option<String>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub min_graphemes: Option<u64>,
    pub max_graphemes: Option<u64>,
    pub closed_values: Option<Vec<String>>,
    pub constant: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct IntegerDef {
    pub minimum: Option<i64>,
    pub maximum: Option<i64>,
    pub closed_values: Option<Vec<i64>>,
    pub constant: Option<i64>,
}

#[derive(Debug)]
pub(crate) enum Def {
    Record(ObjectDef),
    Object(ObjectDef),
    String(StringDef),
    Integer(IntegerDef),
    Boolean {
        constant: Option<bool>,
    },
    Array {
        items: Box<Def>,
        min_length: Option<u64>,
        max_length: Option<u64>,
    },
    Ref(String),
    Union {
        refs: Vec<String>,
        closed: bool,
    },
    Unknown,
    CidLink,
    Bytes {
        min_length: Option<u64>,
        max_length: Option<u64>,
    },
    Blob,
    Token,
    Null,
}

struct Context<'a> {
    doc: &'a str,
}

impl Context<'_> {
    fn invalid(&self, message: impl Into<String>) -> LexiconError {
        LexiconError::Invalid {
            doc: self.doc.to_string(),
            message: message.into(),
        }
    }

    /// `#name` is local to the document; `nsid#main` and `nsid` name the same definition.
    fn absolute_ref(&self, reference: &str) -> String {
        let full = match reference.strip_prefix('#') {
            Some(local) => format!("{}#{local}", self.doc),
            None => reference.to_string(),
        };
        match full.strip_suffix("#main") {
            Some(main) => main.to_string(),
            None => full,
        }
    }

    fn parse(&self, value: &Value) -> Result<Def, LexiconError> {
        let obj = value
            .as_object()
            .ok_or_else(|| self.invalid("a definition must be an object"))?;
        let kind = obj
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| self.invalid("a definition needs a type"))?;
        Ok(match kind {
            "record" => self.record(obj)?,
            "object" => Def::Object(self.object(obj)?),
            "string" => Def::String(string_def(obj)),
            "integer" => Def::Integer(integer_def(obj)),
            "boolean" => Def::Boolean {
                constant: obj.get("const").and_then(Value::as_bool),
            },
            "array" => self.array(obj)?,
            "ref" => Def::Ref(
                self.absolute_ref(
                    obj.get("ref")
                        .and_then(Value::as_str)
                        .ok_or_else(|| self.invalid("ref without ref"))?,
                ),
            ),
            "union" => self.union(obj),
            "unknown" => Def::Unknown,
            "cid-link" => Def::CidLink,
            "bytes" => Def::Bytes {
                min_length: obj.get("minLength").and_then(Value::as_u64),
                max_length: obj.get("maxLength").and_then(Value::as_u64),
            },
            "blob" => Def::Blob,
            "token" => Def::Token,
            "null" => Def::Null,
            // The service's own methods are described for clients; no record is checked
            // against them.
            "query" | "procedure" | "subscription" => Def::Unknown,
            other => return Err(self.invalid(format!("unsupported definition type {other}"))),
        })
    }

    fn record(&self, obj: &Map<String, Value>) -> Result<Def, LexiconError> {
        let record = obj
            .get("record")
            .ok_or_else(|| self.invalid("record without record"))?;
        match self.parse(record)? {
            Def::Object(object) => Ok(Def::Record(object)),
            _ => Err(self.invalid("a record's record must be an object")),
        }
    }

    fn array(&self, obj: &Map<String, Value>) -> Result<Def, LexiconError> {
        Ok(Def::Array {
            items: Box::new(
                self.parse(
                    obj.get("items")
                        .ok_or_else(|| self.invalid("array without items"))?,
                )?,
            ),
            min_length: obj.get("minLength").and_then(Value::as_u64),
            max_length: obj.get("maxLength").and_then(Value::as_u64),
        })
    }

    fn union(&self, obj: &Map<String, Value>) -> Def {
        Def::Union {
            refs: obj
                .get("refs")
                .map(strings)
                .unwrap_or_default()
                .iter()
                .map(|r| self.absolute_ref(r))
                .collect(),
            closed: obj.get("closed").and_then(Value::as_bool).unwrap_or(false),
        }
    }

    fn object(&self, obj: &Map<String, Value>) -> Result<ObjectDef, LexiconError> {
        let mut properties = Vec::new();
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            for (name, def) in props {
                properties.push((name.clone(), self.parse(def)?));
            }
        }
        Ok(ObjectDef {
            properties,
            required: obj.get("required").map(strings).unwrap_or_default(),
            nullable: obj.get("nullable").map(strings).unwrap_or_default(),
        })
    }
}

fn string_def(obj: &Map<String, Value>) -> StringDef {
    StringDef {
        format: str_field(obj, "format"),
        min_length: obj.get("minLength").and_then(Value::as_u64),
        max_length: obj.get("maxLength").and_then(Value::as_u64),
        min_graphemes: obj.get("minGraphemes").and_then(Value::as_u64),
        max_graphemes: obj.get("maxGraphemes").and_then(Value::as_u64),
        closed_values: obj.get("enum").map(strings),
        constant: str_field(obj, "const"),
    }
}

fn integer_def(obj: &Map<String, Value>) -> IntegerDef {
    IntegerDef {
        minimum: obj.get("minimum").and_then(Value::as_i64),
        maximum: obj.get("maximum").and_then(Value::as_i64),
        closed_values: obj
            .get("enum")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_i64).collect()),
        constant: obj.get("const").and_then(Value::as_i64),
    }
}

fn str_field(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_string)
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn load_document(
    text: &str,
    defs: &mut HashMap<String, Def>,
    records: &mut BTreeSet<String>,
) -> Result<(), LexiconError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| LexiconError::Json(e.to_string()))?;
    let id = doc
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| LexiconError::Json("lexicon document without id".into()))?;
    let context = Context { doc: id };
    if doc.get("lexicon").and_then(Value::as_u64) != Some(1) {
        return Err(context.invalid("lexicon version must be 1"));
    }
    let entries = doc
        .get("defs")
        .and_then(Value::as_object)
        .ok_or_else(|| context.invalid("no defs"))?;
    for (name, value) in entries {
        let def = context.parse(value)?;
        let key = if name == "main" {
            id.to_string()
        } else {
            format!("{id}#{name}")
        };
        if matches!(def, Def::Record(_)) {
            if name != "main" {
                return Err(context.invalid("a record definition must be main"));
            }
            records.insert(id.to_string());
        }
        defs.insert(key, def);
    }
    Ok(())
}

pub(crate) fn check_references(defs: &HashMap<String, Def>) -> Result<(), LexiconError> {
    fn walk(from: &str, def: &Def, defs: &HashMap<String, Def>) -> Result<(), LexiconError> {
        let missing = |to: &str| LexiconError::UnresolvedRef {
            from: from.to_string(),
            to: to.to_string(),
        };
        match def {
            Def::Record(object) | Def::Object(object) => {
                for (_, property) in &object.properties {
                    walk(from, property, defs)?;
                }
            }
            Def::Array { items, .. } => walk(from, items, defs)?,
            Def::Ref(to) if !defs.contains_key(to) => return Err(missing(to)),
            Def::Union { refs, .. } => {
                if let Some(to) = refs.iter().find(|r| !defs.contains_key(*r)) {
                    return Err(missing(to));
                }
            }
            _ => {}
        }
        Ok(())
    }
    for (id, def) in defs {
        walk(id, def, defs)?;
    }
    Ok(())
}
