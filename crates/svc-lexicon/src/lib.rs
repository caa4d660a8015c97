//! Lexicon documents of the `dev.svc.*` family and a validator that checks a JSON record
//! against them. The documents are embedded at build time from the repository's `lexicons/`.
//!
//! Written in-house rather than taken from `atproto-lexicon`: that crate's dependency tree
//! costs minutes of build time on our machines, and we need only record validation with JSON
//! paths in the errors.

mod schema;
mod validate;

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use schema::Def;
pub use schema::LexiconError;

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

/// Why a record was refused, with the JSON path of the offending value
/// (`wants.source.uri: not an at-uri`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", if path.is_empty() { "record" } else { path.as_str() })]
pub struct ValidationError {
    /// Dotted path from the record root, with `[i]` for array elements; empty for the root.
    pub path: String,
    pub message: String,
}

/// A set of lexicon documents with every reference between them resolved.
#[derive(Debug)]
pub struct Lexicons {
    defs: HashMap<String, Def>,
    records: BTreeSet<String>,
}

impl Lexicons {
    /// The documents embedded in this build (`lexicons/` of the repository).
    pub fn embedded() -> &'static Lexicons {
        static EMBEDDED: OnceLock<Lexicons> = OnceLock::new();
        EMBEDDED.get_or_init(|| {
            Lexicons::from_documents(EMBEDDED_DOCUMENTS.iter().copied())
                .expect("the embedded lexicon documents are checked by the test suite")
        })
    }

    /// The text of every document embedded in this build, to load beside others.
    pub fn embedded_documents() -> &'static [&'static str] {
        EMBEDDED_DOCUMENTS
    }

    /// Loads lexicon documents from their JSON text and checks that every reference resolves.
    pub fn from_documents<'a>(
        documents: impl IntoIterator<Item = &'a str>,
    ) -> Result<Lexicons, LexiconError> {
        let mut defs = HashMap::new();
        let mut records = BTreeSet::new();
        for text in documents {
            schema::load_document(text, &mut defs, &mut records)?;
        }
        schema::check_references(&defs)?;
        Ok(Lexicons { defs, records })
    }

    /// The NSIDs of every record kind, in byte order.
    pub fn record_collections(&self) -> impl Iterator<Item = &str> {
        self.records.iter().map(String::as_str)
    }

    /// The namespaces the record kinds live in, as Jetstream's `wantedCollections` names them
    /// (`dev.svc.*`), in byte order.
    pub fn record_namespaces(&self) -> Vec<String> {
        let mut namespaces: Vec<String> = self
            .record_collections()
            .filter_map(|nsid| nsid.rsplit_once('.').map(|(space, _)| format!("{space}.*")))
            .collect();
        namespaces.dedup();
        namespaces
    }

    pub fn is_record_collection(&self, nsid: &str) -> bool {
        self.records.contains(nsid)
    }

    /// Checks a record against the record definition of `collection`: `$type` must equal the
    /// collection, then every rule of the lexicon applies. Returns the first violation.
    pub fn validate_record(
        &self,
        collection: &str,
        record: &serde_json::Value,
    ) -> Result<(), ValidationError> {
        self.validate_json(collection, &svc_json::Json::from_value(record))
    }

    /// [`Lexicons::validate_record`] for a record parsed as the ingest path parses it.
    pub fn validate_json(
        &self,
        collection: &str,
        record: &svc_json::Json<'_>,
    ) -> Result<(), ValidationError> {
        let Some(def) = self.defs.get(collection) else {
            return Err(ValidationError {
                path: String::new(),
                message: format!("unknown record kind {collection}"),
            });
        };
        validate::record(self, collection, def, record)
    }

    fn def(&self, id: &str) -> Option<&Def> {
        self.defs.get(id)
    }
}

#[cfg(test)]
mod tests;
