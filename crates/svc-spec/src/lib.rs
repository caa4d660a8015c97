//! The query specification (`spec/queries.json`): every list query, its parameters and its
//! declarative filter. The HTTP routes, the CLI's orchestrator commands, the OpenAPI document
//! and the catalog's index keys all come from it.

mod keys;
mod path;

pub use keys::encode_key;
pub use path::JsonPath;

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
pub use svc_json::Json;

/// The specification shipped with this build.
pub const EMBEDDED_SPEC: &str = include_str!("../../../spec/queries.json");

/// Indexes the service needs for its own endpoints (sufficiency), not routed as list queries.
const INTERNAL_SPEC: &str = r#"{"version":1,"queries":[{
  "name": "verificationsSufficiency",
  "kind": "dev.svc.verification",
  "path": "/internal/verifications-sufficiency",
  "description": "Verifications by lens, property variant and result.",
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
}]}"#;

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

/// The longest value a text parameter takes, in characters.
pub const MAX_TEXT_CHARS: usize = 1024;
/// The longest at-uri a parameter takes: the at-uri grammar's own limit, so that every at-uri a
/// record may hold can be looked up. Two of them, percent-encoded, stay within the server's URI
/// limit.
pub const MAX_AT_URI_PARAM_BYTES: usize = 8192;

/// The name of the internal sufficiency index.
pub const SUFFICIENCY_QUERY: &str = "verificationsSufficiency";

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

/// Each verification kind and the `lensProperty` variant that evidences it: what a
/// verification of that kind carries as `property`, and what sufficiency looks for.
pub const VERIFICATION_KINDS: &[(&str, &str)] = &[
    ("roundtrip-test", "dev.svc.defs#lpRoundtrip"),
    ("property-test", "dev.svc.defs#lpGenerator"),
    ("formal-proof", "dev.svc.defs#lpTheorem"),
    ("conformance-test", "dev.svc.defs#lpConformance"),
    ("static-check", "dev.svc.defs#lpChecker"),
    ("convergence-preserving", "dev.svc.defs#lpConvergence"),
    ("coercion-law", "dev.svc.defs#lpCoercionLaw"),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ParamType {
    String,
    Did,
    AtUri,
    Enum,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamDef {
    pub name: String,
    #[serde(rename = "type")]
    pub param_type: ParamType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CliDef {
    /// The `svc orchestrator` subcommand; several queries may share one, told apart by flags.
    pub command: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ConditionDef {
    /// A string at the path equals the parameter or constant.
    Eq {
        path: String,
        #[serde(default)]
        param: Option<String>,
        #[serde(default)]
        value: Option<String>,
    },
    /// Same, comparing ASCII letters without case.
    EqAsciiCi {
        path: String,
        #[serde(default)]
        param: Option<String>,
        #[serde(default)]
        value: Option<String>,
    },
    /// An element of the array at the path equals the parameter or constant.
    Contains {
        path: String,
        #[serde(default)]
        param: Option<String>,
        #[serde(default)]
        value: Option<String>,
    },
    /// The schemaRef or lensRef at the path has this `uri`.
    RefUri {
        path: String,
        #[serde(default)]
        param: Option<String>,
        #[serde(default)]
        value: Option<String>,
    },
    /// The string at the path is one of `values`, or (with `or_absent`) the path holds nothing.
    In {
        path: String,
        values: Vec<String>,
        #[serde(default)]
        or_absent: bool,
    },
    /// The path holds a non-empty value.
    Present { path: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryDef {
    pub name: String,
    pub kind: String,
    pub path: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli: Option<CliDef>,
    #[serde(default)]
    pub params: Vec<ParamDef>,
    pub filter: Vec<ConditionDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    version: u32,
    queries: Vec<QueryDef>,
}

#[derive(Debug, Clone)]
pub(crate) enum Bound {
    Param(usize),
    Const(String),
}

#[derive(Debug, Clone)]
pub(crate) enum Test {
    /// Some string at the path equals the bound value (after ASCII case folding if asked).
    Equals {
        bound: Bound,
        fold_case: bool,
    },
    OneOf {
        values: Vec<String>,
        or_absent: bool,
    },
    Present,
}

#[derive(Debug, Clone)]
pub(crate) struct Condition {
    pub path: JsonPath,
    pub test: Test,
}

/// One compiled query of the specification.
#[derive(Debug, Clone)]
pub struct Query {
    id: QueryId,
    def: QueryDef,
    internal: bool,
    conditions: Vec<Condition>,
    /// For each parameter, the condition that binds it.
    param_conditions: Vec<usize>,
}

impl Query {
    pub fn def(&self) -> &QueryDef {
        &self.def
    }
    pub fn id(&self) -> &QueryId {
        &self.id
    }
    pub fn name(&self) -> &str {
        &self.def.name
    }
    pub fn kind(&self) -> &str {
        &self.def.kind
    }
    pub fn params(&self) -> &[ParamDef] {
        &self.def.params
    }
    /// Internal queries are indexes for the service's own endpoints; they have no route.
    pub fn is_internal(&self) -> bool {
        self.internal
    }
    /// Changes whenever the filter, parameters or kind change, so stored index keys can be
    /// rebuilt for a query whose definition moved. A change to how keys are drawn from a
    /// record (`keys.rs`) must change it too: the entries stored, and the keys a catalog takes
    /// again from a record whose keys it did not store, would otherwise disagree.
    pub fn fingerprint(&self) -> String {
        serde_json::json!([
            keys::KEY_FORMAT,
            self.def.kind,
            self.def.params,
            self.def.filter
        ])
        .to_string()
    }

    /// Checks request parameters against their declarations and returns the values in
    /// declaration order (absent optional parameters as `None`).
    pub fn bind<'a>(
        &self,
        lookup: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Vec<Option<&'a str>>, ParamError> {
        let mut values = Vec::with_capacity(self.def.params.len());
        for param in &self.def.params {
            let error = |message: String| ParamError {
                param: param.name.clone(),
                message,
            };
            let Some(value) = lookup(&param.name) else {
                if param.required {
                    return Err(error("required parameter missing".into()));
                }
                values.push(None);
                continue;
            };
            match param.param_type {
                ParamType::String => {
                    if value.chars().count() > MAX_TEXT_CHARS {
                        return Err(error(format!("at most {MAX_TEXT_CHARS} characters")));
                    }
                }
                ParamType::Did => svc_syntax::check_did(value).map_err(|e| error(e.to_string()))?,
                ParamType::AtUri => {
                    check_at_uri_parameter(value).map_err(error)?;
                }
                ParamType::Enum => {
                    let allowed = param.values.as_deref().unwrap_or_default();
                    if !allowed.iter().any(|v| v == value) {
                        return Err(error(format!("must be one of {}", allowed.join(", "))));
                    }
                }
            }
            values.push(Some(value));
        }
        Ok(values)
    }

    /// The index key for bound parameter values (see [`Query::index_keys`]).
    pub fn lookup_key(&self, values: &[Option<&str>]) -> String {
        let folded: Vec<Option<std::borrow::Cow<str>>> = values
            .iter()
            .enumerate()
            .map(|(i, v)| v.map(|v| keys::fold(v, self.folds_case(i))))
            .collect();
        encode_key(&folded.iter().map(Option::as_deref).collect::<Vec<_>>())
    }

    /// Whether the parameter's condition compares without regard to ASCII case.
    pub(crate) fn folds_case(&self, param: usize) -> bool {
        matches!(
            self.conditions[self.param_conditions[param]].test,
            Test::Equals {
                fold_case: true,
                ..
            }
        )
    }
}

/// Every query of a specification, plus the internal indexes.
#[derive(Debug, Clone)]
pub struct QuerySet {
    queries: Vec<Query>,
    /// Positions of the queries over each collection.
    by_kind: std::collections::HashMap<String, Vec<usize>>,
}

impl QuerySet {
    /// The specification shipped with this build.
    pub fn embedded() -> QuerySet {
        QuerySet::load(EMBEDDED_SPEC)
            .expect("the embedded specification is checked by the test suite")
    }

    /// Loads and checks a specification; the internal indexes are added to it.
    pub fn load(text: &str) -> Result<QuerySet, SpecError> {
        let file: SpecFile = serde_json::from_str(text).map_err(|e| SpecError(e.to_string()))?;
        if file.version != 1 {
            return Err(SpecError(format!("unsupported version {}", file.version)));
        }
        let internal: SpecFile =
            serde_json::from_str(INTERNAL_SPEC).map_err(|e| SpecError(e.to_string()))?;
        let mut queries = Vec::new();
        for (def, is_internal) in file
            .queries
            .into_iter()
            .map(|d| (d, false))
            .chain(internal.queries.into_iter().map(|d| (d, true)))
        {
            if queries.iter().any(|q: &Query| q.def.name == def.name) {
                return Err(SpecError(format!("query {} is declared twice", def.name)));
            }
            if queries.iter().any(|q: &Query| q.def.path == def.path) {
                return Err(SpecError(format!("path {} is declared twice", def.path)));
            }
            queries.push(compile(def, is_internal)?);
        }
        let mut by_kind: std::collections::HashMap<String, Vec<usize>> = Default::default();
        for (position, query) in queries.iter().enumerate() {
            by_kind
                .entry(query.def.kind.clone())
                .or_default()
                .push(position);
        }
        Ok(QuerySet { queries, by_kind })
    }

    /// The keys under which a record of `collection` matches each query over that collection.
    pub fn index_keys(&self, collection: &str, record: &Json<'_>) -> IndexKeys {
        let mut keys = IndexKeys::new();
        for &position in self.by_kind.get(collection).into_iter().flatten() {
            let query = &self.queries[position];
            for key in query.index_keys(record) {
                keys.insert((query.id.clone(), key));
            }
        }
        keys
    }

    /// Every query, internal ones included; positions are stable for the set's lifetime.
    pub fn all(&self) -> &[Query] {
        &self.queries
    }

    /// The routed list queries, in specification order.
    pub fn public(&self) -> impl Iterator<Item = (usize, &Query)> {
        self.queries.iter().enumerate().filter(|(_, q)| !q.internal)
    }

    pub fn position(&self, name: &str) -> Option<usize> {
        self.queries.iter().position(|q| q.def.name == name)
    }

    /// The query of this identity, if the set has it.
    pub fn get(&self, id: &QueryId) -> Option<&Query> {
        self.queries.iter().find(|q| q.id == *id)
    }
}

fn compile(def: QueryDef, internal: bool) -> Result<Query, SpecError> {
    let compiled = check_declaration(&def).and_then(|()| compile_filter(&def));
    let (conditions, param_conditions) =
        compiled.map_err(|message| SpecError(format!("query {}: {message}", def.name)))?;
    Ok(Query {
        id: QueryId::new(&def.name),
        def,
        internal,
        conditions,
        param_conditions,
    })
}

/// The query's name, kind, path and parameters, each checked on its own.
fn check_declaration(def: &QueryDef) -> Result<(), String> {
    if def.name.is_empty() || !def.name.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err("name must be letters and digits (it becomes an XRPC method name)".into());
    }
    if svc_syntax::check_nsid(&def.kind).is_err() {
        return Err(format!("kind {} is not an NSID", def.kind));
    }
    let path_ok = def.path.starts_with('/')
        && def.path.len() > 1
        && def
            .path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.'));
    if !path_ok {
        return Err(format!(
            "path {} must be an absolute path of plain segments",
            def.path
        ));
    }
    for (i, param) in def.params.iter().enumerate() {
        if ["limit", "offset", "cursor"].contains(&param.name.as_str()) {
            return Err(format!(
                "parameter name {} is reserved for paging",
                param.name
            ));
        }
        if def.params[..i].iter().any(|p| p.name == param.name) {
            return Err(format!("parameter {} is declared twice", param.name));
        }
        if param.param_type == ParamType::Enum && param.values.as_ref().is_none_or(Vec::is_empty) {
            return Err(format!("enum parameter {} needs values", param.name));
        }
    }
    Ok(())
}

/// The filter's conditions, and for each parameter the position of the one condition that
/// binds it.
fn compile_filter(def: &QueryDef) -> Result<(Vec<Condition>, Vec<usize>), String> {
    let mut conditions = Vec::new();
    let mut param_conditions = vec![usize::MAX; def.params.len()];
    for condition in &def.filter {
        let (path, param, value, fold_case) = match condition {
            ConditionDef::Eq { path, param, value }
            | ConditionDef::Contains { path, param, value } => {
                (JsonPath::parse(path)?, param, value, false)
            }
            ConditionDef::EqAsciiCi { path, param, value } => {
                (JsonPath::parse(path)?, param, value, true)
            }
            ConditionDef::RefUri { path, param, value } => {
                (JsonPath::parse(path)?.child("uri"), param, value, false)
            }
            ConditionDef::In {
                path,
                values,
                or_absent,
            } => {
                let test = Test::OneOf {
                    values: values.clone(),
                    or_absent: *or_absent,
                };
                conditions.push(Condition {
                    path: JsonPath::parse(path)?,
                    test,
                });
                continue;
            }
            ConditionDef::Present { path } => {
                conditions.push(Condition {
                    path: JsonPath::parse(path)?,
                    test: Test::Present,
                });
                continue;
            }
        };
        let bound = match (param, value) {
            (Some(name), None) => {
                let Some(index) = def.params.iter().position(|p| &p.name == name) else {
                    return Err(format!("filter uses undeclared parameter {name}"));
                };
                if param_conditions[index] != usize::MAX {
                    return Err(format!("parameter {name} is used by two conditions"));
                }
                param_conditions[index] = conditions.len();
                Bound::Param(index)
            }
            (None, Some(constant)) if fold_case => Bound::Const(constant.to_ascii_lowercase()),
            (None, Some(constant)) => Bound::Const(constant.clone()),
            _ => return Err("a condition takes exactly one of param and value".into()),
        };
        conditions.push(Condition {
            path,
            test: Test::Equals { bound, fold_case },
        });
    }
    if let Some(unused) = param_conditions.iter().position(|c| *c == usize::MAX) {
        return Err(format!(
            "parameter {} is not used by the filter",
            def.params[unused].name
        ));
    }
    Ok((conditions, param_conditions))
}

/// Strings at a path, for key extraction and evaluation.
pub(crate) fn strings_at<'v>(
    path: &JsonPath,
    record: &'v Json<'v>,
) -> impl Iterator<Item = &'v str> {
    path.values(record).into_iter().filter_map(Json::as_str)
}

#[cfg(test)]
mod tests;
