//! A record as indexes and search read it: its fields, and the facts svc derives of it, which
//! a path names with `@`: `@uri` (the record's own at-uri, so that an index can file a record
//! under itself) and `@name` (a schema's readable name, [`readable_name`], derived only when a
//! path asks for it).

use crate::schema_name::readable_name;
use std::borrow::Cow;
use std::cell::OnceCell;
use svc_json::Json;

/// A fact a path can start from instead of the record's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Derived {
    Uri,
    Name,
}

impl Derived {
    /// The fact a path's first step names (`@uri`, `@name`); an unknown `@` name is an error.
    pub(crate) fn named(step: &str) -> Result<Option<Derived>, String> {
        match step {
            "@uri" => Ok(Some(Derived::Uri)),
            "@name" => Ok(Some(Derived::Name)),
            other if other.starts_with('@') => Err(format!("unknown fact {other}")),
            _ => Ok(None),
        }
    }
}

/// One record being filed: its parsed fields and its at-uri.
pub struct RecordView<'v> {
    json: &'v Json<'v>,
    uri: Json<'v>,
    /// Owned, so that the view stays covariant in `'v` (a cell of a borrowed tree would not).
    name: OnceCell<Json<'static>>,
}

impl<'v> RecordView<'v> {
    pub fn new(uri: &'v str, json: &'v Json<'v>) -> RecordView<'v> {
        RecordView {
            json,
            uri: Json::String(Cow::Borrowed(uri)),
            name: OnceCell::new(),
        }
    }

    pub fn json(&self) -> &'v Json<'v> {
        self.json
    }

    pub(crate) fn fact(&self, fact: Derived) -> &Json<'v> {
        match fact {
            Derived::Uri => &self.uri,
            Derived::Name => self.name.get_or_init(|| {
                let uri = self.uri.as_str().unwrap_or_default();
                Json::String(Cow::Owned(readable_name(uri, self.json)))
            }),
        }
    }
}
