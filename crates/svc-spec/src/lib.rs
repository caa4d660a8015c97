//! The query specification (`spec/queries.json`): every list query, its parameters and its
//! declarative filter. Each query is an index (its kind, parameters and filter: what storage
//! sees, and all that is fingerprinted) and how it is presented (REST path, XRPC name, CLI
//! command, descriptions: what the server and the command line see).

mod def;
mod index;
mod keys;
mod kinds;
mod kinds_table;
mod lexicon;
mod path;
mod query;
mod record_view;
pub mod roads;
pub mod schema_name;
pub mod search;

pub use def::{
    CliDef, ConditionDef, IndexDef, IndexParam, ParamDef, ParamType, QueryDef, ValueList,
};
pub use index::{Index, IndexSet};
pub use keys::{decode_key, encode_key, key_prefix, prefix_end};
pub use kinds::{BenchShare, EMBEDDED_KINDS, Fact, KindDef, Kinds, People, Related, SearchDef};
pub use kinds_table::kinds_added as search_kinds_added;
pub use lexicon::{query_lexicon, query_nsid, routes_lexicon, search_lexicon};
pub use path::JsonPath;
pub use query::{Query, QuerySet};
pub use record_view::RecordView;

use std::collections::BTreeSet;
pub use svc_json::Json;

/// The specification shipped with this build.
pub const EMBEDDED_SPEC: &str = include_str!("../../../spec/queries.json");

/// The name of the index of verifications by lens, property variant and result, for the
/// service's own sufficiency endpoint.
pub const SUFFICIENCY_INDEX: &str = "verificationsSufficiency";

/// Indexes the service needs for its own endpoints (sufficiency, the map's roads from their
/// sources; those into their targets are made from these, see [`roads`]), not routed as list
/// queries.
const INTERNAL_INDEXES_SPEC: &str = r#"[{
  "name": "verificationsSufficiency",
  "kind": "dev.svc.verification",
  "params": [
    {"name": "lens_uri", "type": "at-uri", "required": true},
    {"name": "property", "type": "string", "required": true},
    {"name": "result", "type": "string", "required": false}
  ],
  "filter": [
    {"op": "ref_uri", "path": "lens", "param": "lens_uri"},
    {"op": "eq", "path": "property.$type", "param": "property"},
    {"op": "eq", "path": "result", "param": "result"}
  ]
}, {
  "name": "lensRoadsFrom",
  "kind": "dev.svc.encounter",
  "params": [
    {"name": "source", "type": "at-uri", "required": true},
    {"name": "target", "type": "at-uri", "required": true},
    {"name": "lens", "type": "at-uri", "required": true}
  ],
  "filter": [
    {"op": "ref_uri", "path": "sourceSchema", "param": "source"},
    {"op": "ref_uri", "path": "targetSchema", "param": "target"},
    {"op": "ref_uri", "path": "lens", "param": "lens"}
  ]
}, {
  "name": "wantedRoadsFrom",
  "kind": "dev.svc.bounty",
  "params": [
    {"name": "source", "type": "at-uri", "required": true},
    {"name": "target", "type": "at-uri", "required": true}
  ],
  "filter": [
    {"op": "eq", "path": "wants.$type", "value": "dev.svc.bounty#wantLens"},
    {"op": "in", "path": "status", "values": ["open", "claimed"], "or_absent": true},
    {"op": "ref_uri", "path": "wants.source", "param": "source"},
    {"op": "ref_uri", "path": "wants.target", "param": "target"}
  ]
}, {
  "name": "publishedRoadsFrom",
  "kind": "dev.panproto.schema.lens",
  "params": [
    {"name": "source", "type": "at-uri", "required": true},
    {"name": "target", "type": "at-uri", "required": true},
    {"name": "lens", "type": "at-uri", "required": true},
    {"name": "class", "type": "string", "exact": true}
  ],
  "filter": [
    {"op": "eq", "path": "sourceSchema", "param": "source"},
    {"op": "eq", "path": "targetSchema", "param": "target"},
    {"op": "eq", "path": "@uri", "param": "lens"},
    {"op": "eq", "path": "roundTripClass", "param": "class"}
  ]
}, {
  "name": "schemaNames",
  "kind": "dev.panproto.schema.schema",
  "params": [
    {"name": "schema", "type": "at-uri", "required": true},
    {"name": "name", "type": "string", "required": true}
  ],
  "filter": [
    {"op": "eq", "path": "@uri", "param": "schema"},
    {"op": "eq", "path": "@name", "param": "name"}
  ]
}]"#;

/// The index of each schema's readable name, keyed by the schema's uri then the name.
pub const SCHEMA_NAMES_INDEX: &str = "schemaNames";

/// The service's own indexes, compiled.
pub(crate) fn internal_indexes() -> Vec<Index> {
    let defs: Vec<IndexDef> = serde_json::from_str(INTERNAL_INDEXES_SPEC)
        .expect("the internal indexes are checked by the test suite");
    let mirrors: Vec<IndexDef> = roads::ROAD_INDEXES
        .iter()
        .filter(|road| !road.keyed_by_source)
        .filter_map(|road| {
            let from = defs
                .iter()
                .find(|def| def.name == road.keyed_from_source_name())?;
            Some(roads::keyed_by_target(from, road.name))
        })
        .collect();
    defs.into_iter()
        .chain(mirrors)
        .map(|def| Index::compile(def).expect("the internal indexes are checked by the test suite"))
        .collect()
}

/// A query's identity for storage: its name, which stays when the specification around it is
/// edited (a position would not). Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueryId(std::sync::Arc<str>);

impl QueryId {
    pub fn new(name: &str) -> QueryId {
        QueryId(name.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for QueryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// (query, key) pairs: where a record is found.
pub type IndexKeys = BTreeSet<(QueryId, String)>;

/// Items per page when a request gives no `limit`, and the most it may ask for.
pub const DEFAULT_LIMIT: u32 = 100;
pub const MAX_LIMIT: u32 = 1000;

/// The paging parameters every list query takes, beside its own, and what each does.
pub fn paging_parameters() -> [(&'static str, String); 3] {
    [
        (
            "limit",
            format!("Items per page (1-{MAX_LIMIT}, default {DEFAULT_LIMIT})"),
        ),
        ("offset", "Items to skip".to_string()),
        (
            "cursor",
            "Cursor from a previous answer (the next page)".to_string(),
        ),
    ]
}

/// The longest value a text parameter takes, in characters.
pub const MAX_TEXT_CHARS: usize = 1024;
/// The longest at-uri a parameter takes: the at-uri grammar's own limit, so that every at-uri a
/// record may hold can be looked up. Two of them, percent-encoded, stay within the server's URI
/// limit.
pub const MAX_AT_URI_PARAM_BYTES: usize = 8192;

/// An at-uri query parameter: at most [`MAX_AT_URI_PARAM_BYTES`], in the at-uri grammar (the
/// API document's pattern). The message says what is wrong, for the parameter's name to lead.
pub fn check_at_uri_parameter(value: &str) -> Result<(), String> {
    if value.len() > MAX_AT_URI_PARAM_BYTES {
        return Err(format!("at most {MAX_AT_URI_PARAM_BYTES} characters"));
    }
    svc_syntax::check_at_uri_grammar(value)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The verification kinds `svc verify` runs.
pub const ROUNDTRIP_TEST: &str = "roundtrip-test";
pub const PROPERTY_TEST: &str = "property-test";
pub const STATIC_CHECK: &str = "static-check";
pub const COERCION_LAW: &str = "coercion-law";

/// Each verification kind and the `lensProperty` variant that evidences it: what a
/// verification of that kind carries as `property`, and what sufficiency looks for. The
/// specification's `"values_of": "verification-kinds"` lists these kinds.
pub const VERIFICATION_KINDS: &[(&str, &str)] = &[
    (ROUNDTRIP_TEST, "dev.svc.defs#lpRoundtrip"),
    (PROPERTY_TEST, "dev.svc.defs#lpGenerator"),
    ("formal-proof", "dev.svc.defs#lpTheorem"),
    ("conformance-test", "dev.svc.defs#lpConformance"),
    (STATIC_CHECK, "dev.svc.defs#lpChecker"),
    ("convergence-preserving", "dev.svc.defs#lpConvergence"),
    (COERCION_LAW, "dev.svc.defs#lpCoercionLaw"),
];

/// The `lensProperty` variant of a verification kind.
pub fn property_of_kind(kind: &str) -> Option<&'static str> {
    VERIFICATION_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, variant)| *variant)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("query specification: {0}")]
pub struct SpecError(pub String);

/// A request parameter that does not fit its declaration; the message names the parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{param}: {message}")]
pub struct ParamError {
    pub param: String,
    pub message: String,
}

#[cfg(test)]
mod tests;
