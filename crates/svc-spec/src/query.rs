//! The specification's queries: each an index and how it is presented (its REST path, XRPC
//! name, CLI command and descriptions), and the request parameters it takes.

use crate::def::{ParamDef, ParamType, QueryDef, SpecFile};
use crate::index::{Index, IndexSet};
use crate::{
    EMBEDDED_SPEC, IndexKeys, Json, MAX_TEXT_CHARS, ParamError, QueryId, SpecError,
    check_at_uri_parameter, internal_indexes,
};

/// One routed query of the specification.
#[derive(Debug, Clone)]
pub struct Query {
    index: Index,
    def: QueryDef,
}

impl Query {
    pub fn def(&self) -> &QueryDef {
        &self.def
    }
    pub fn index(&self) -> &Index {
        &self.index
    }
    pub fn id(&self) -> &QueryId {
        self.index.id()
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

    /// The index key for bound parameter values.
    pub fn lookup_key(&self, values: &[Option<&str>]) -> String {
        self.index.lookup_key(values)
    }

    /// The keys under which `record` (of this query's kind) matches, sorted and distinct.
    pub fn index_keys(&self, uri: &str, record: &Json) -> Vec<String> {
        self.index.index_keys(&crate::RecordView::new(uri, record))
    }

    /// Evaluates the filter on one record directly, with bound parameter values.
    pub fn matches(&self, uri: &str, record: &Json, args: &[Option<&str>]) -> bool {
        self.index.matches(uri, record, args)
    }
}

/// Every query of a specification, and the indexes they and the service's own endpoints
/// answer from.
#[derive(Debug, Clone)]
pub struct QuerySet {
    queries: Vec<Query>,
    indexes: IndexSet,
}

impl QuerySet {
    /// The specification shipped with this build.
    pub fn embedded() -> QuerySet {
        QuerySet::load(EMBEDDED_SPEC)
            .expect("the embedded specification is checked by the test suite")
    }

    /// Loads and checks a specification; the internal indexes are added to its own.
    pub fn load(text: &str) -> Result<QuerySet, SpecError> {
        let file: SpecFile = serde_json::from_str(text).map_err(|e| SpecError(e.to_string()))?;
        if file.version != 1 {
            return Err(SpecError(format!("unsupported version {}", file.version)));
        }
        let mut queries: Vec<Query> = Vec::new();
        for mut def in file.queries {
            name_values(&mut def)
                .map_err(|message| SpecError(format!("query {}: {message}", def.name)))?;
            if queries.iter().any(|q| q.def.name == def.name) {
                return Err(SpecError(format!("query {} is declared twice", def.name)));
            }
            if queries.iter().any(|q| q.def.path == def.path) {
                return Err(SpecError(format!("path {} is declared twice", def.path)));
            }
            check_presentation(&def)
                .map_err(|message| SpecError(format!("query {}: {message}", def.name)))?;
            let index = Index::compile(def.index())?;
            queries.push(Query { index, def });
        }
        let mut indexes: Vec<Index> = queries.iter().map(|q| q.index.clone()).collect();
        for internal in internal_indexes() {
            if indexes.iter().any(|i| i.name() == internal.name()) {
                return Err(SpecError(format!(
                    "query {} is the name of an index of the service's own",
                    internal.name()
                )));
            }
            indexes.push(internal);
        }
        Ok(QuerySet {
            queries,
            indexes: IndexSet::new(indexes),
        })
    }

    /// The keys under which a record of `collection` is filed by every index.
    pub fn index_keys(&self, collection: &str, uri: &str, record: &Json<'_>) -> IndexKeys {
        self.indexes.index_keys(collection, uri, record)
    }

    /// Every index: the queries' and the service's own. All storage needs.
    pub fn indexes(&self) -> &IndexSet {
        &self.indexes
    }

    /// The routed queries, in specification order; positions are stable for the set's
    /// lifetime.
    pub fn all(&self) -> &[Query] {
        &self.queries
    }

    /// The routed queries with their positions.
    pub fn public(&self) -> impl Iterator<Item = (usize, &Query)> {
        self.queries.iter().enumerate()
    }

    pub fn position(&self, name: &str) -> Option<usize> {
        self.queries.iter().position(|q| q.def.name == name)
    }
}

/// Fills in the values a parameter names with `values_of`.
fn name_values(def: &mut QueryDef) -> Result<(), String> {
    for param in &mut def.params {
        if let Some(list) = param.values_of {
            if param.values.is_some() {
                return Err(format!(
                    "parameter {} takes values or values_of, not both",
                    param.name
                ));
            }
            param.values = Some(list.values());
        }
    }
    Ok(())
}

/// The query's path and parameter values, each checked on its own.
fn check_presentation(def: &QueryDef) -> Result<(), String> {
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
    for param in &def.params {
        if param.param_type == ParamType::Enum && param.values.as_ref().is_none_or(Vec::is_empty) {
            return Err(format!("enum parameter {} needs values", param.name));
        }
    }
    Ok(())
}
