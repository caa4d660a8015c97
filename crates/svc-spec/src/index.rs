//! A compiled index: the conditions of its filter, the parameter each binds, and the keys it
//! files records under; and the set of indexes a catalog keeps.

use crate::def::{ConditionDef, IndexDef, IndexParam};
use crate::keys::{self, KEY_FORMAT, encode_key, fold, keys_of_tuples};
use crate::search::SearchText;
use crate::{IndexKeys, Json, JsonPath, QueryId, RecordView, SpecError};
use std::borrow::Cow;
use svc_syntax::Nsid;

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

/// One compiled index.
#[derive(Debug, Clone)]
pub struct Index {
    id: QueryId,
    def: IndexDef,
    /// The collection it files, checked.
    kind: Nsid,
    pub(crate) conditions: Vec<Condition>,
    /// For each parameter, the condition that binds it.
    pub(crate) param_conditions: Vec<usize>,
}

impl Index {
    /// Compiles a definition, checking it.
    pub fn compile(def: IndexDef) -> Result<Index, SpecError> {
        let compiled = check_index(&def).and_then(|kind| Ok((kind, compile_filter(&def)?)));
        let (kind, (conditions, param_conditions)) =
            compiled.map_err(|message| SpecError(format!("query {}: {message}", def.name)))?;
        Ok(Index {
            id: QueryId::new(&def.name),
            kind,
            def,
            conditions,
            param_conditions,
        })
    }

    pub fn id(&self) -> &QueryId {
        &self.id
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    pub fn kind(&self) -> &Nsid {
        &self.kind
    }

    pub fn params(&self) -> &[IndexParam] {
        &self.def.params
    }

    /// Changes whenever the definition changes (kind, parameters, filter), and only then, so
    /// that stored keys are rebuilt for an index whose definition moved. A change to how keys
    /// are drawn from a record (`keys.rs`) changes it too: the entries stored, and the keys a
    /// catalog takes again from a record whose keys it did not store, would otherwise disagree.
    pub fn fingerprint(&self) -> String {
        serde_json::json!([KEY_FORMAT, self.def.kind, self.def.params, self.def.filter]).to_string()
    }

    /// The index key for bound parameter values (see [`Index::index_keys`]).
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

/// Every index a catalog keeps, found by the kind of record it files.
#[derive(Debug, Clone)]
pub struct IndexSet {
    indexes: Vec<Index>,
    /// Positions of the indexes over each collection.
    by_kind: std::collections::HashMap<String, Vec<usize>>,
    /// Each kind's searchable fields, and their fingerprint.
    search: crate::kinds_table::SearchTable,
}

impl IndexSet {
    pub(crate) fn new(indexes: Vec<Index>) -> IndexSet {
        let mut by_kind: std::collections::HashMap<String, Vec<usize>> = Default::default();
        for (position, index) in indexes.iter().enumerate() {
            by_kind
                .entry(index.kind().to_string())
                .or_default()
                .push(position);
        }
        IndexSet {
            indexes,
            by_kind,
            search: crate::kinds_table::embedded_search(),
        }
    }

    /// A record's searchable words, folded; `None` when its kind has none or it holds none.
    pub fn search_text(
        &self,
        collection: &str,
        uri: &str,
        record: &Json<'_>,
    ) -> Option<SearchText> {
        self.search
            .0
            .get(collection)?
            .text_of(&RecordView::new(uri, record))
    }

    /// A record's keys and its searchable words, from one view of it (a schema's name is
    /// derived once for both).
    pub fn keys_and_words(
        &self,
        collection: &str,
        uri: &str,
        record: &Json<'_>,
    ) -> (IndexKeys, Option<SearchText>) {
        let view = RecordView::new(uri, record);
        let words = self
            .search
            .0
            .get(collection)
            .and_then(|fields| fields.text_of(&view));
        (self.keys_of(collection, &view), words)
    }

    /// The kinds search reads.
    pub fn searched_kinds(&self) -> impl Iterator<Item = &str> {
        self.search.0.keys().map(String::as_str)
    }

    /// What the search index is built under: the fields of each kind and the folding.
    pub fn search_fingerprint(&self) -> &str {
        &self.search.1
    }

    /// The keys under which the record of `collection` at `uri` is filed by each index over
    /// that collection.
    pub fn index_keys(&self, collection: &str, uri: &str, record: &Json<'_>) -> IndexKeys {
        self.keys_of(collection, &RecordView::new(uri, record))
    }

    fn keys_of(&self, collection: &str, view: &RecordView) -> IndexKeys {
        let mut keys = IndexKeys::new();
        for &position in self.by_kind.get(collection).into_iter().flatten() {
            let index = &self.indexes[position];
            for key in index.index_keys(view) {
                keys.insert((index.id.clone(), key));
            }
        }
        keys
    }

    pub fn all(&self) -> &[Index] {
        &self.indexes
    }

    /// The index of this identity, if the set has it.
    pub fn get(&self, id: &QueryId) -> Option<&Index> {
        self.indexes.iter().find(|index| index.id == *id)
    }
}

/// The index's name, kind and parameter names, each checked on its own; the kind.
fn check_index(def: &IndexDef) -> Result<Nsid, String> {
    if def.name.is_empty() || !def.name.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err("name must be letters and digits (it becomes an XRPC method name)".into());
    }
    let kind =
        Nsid::new(def.kind.as_str()).map_err(|_| format!("kind {} is not an NSID", def.kind))?;
    for (i, param) in def.params.iter().enumerate() {
        if crate::paging_parameters()
            .iter()
            .any(|(name, _)| *name == param.name)
        {
            return Err(format!(
                "parameter name {} is reserved for paging",
                param.name
            ));
        }
        if def.params[..i].iter().any(|p| p.name == param.name) {
            return Err(format!("parameter {} is declared twice", param.name));
        }
    }
    Ok(kind)
}

/// The filter's conditions, and for each parameter the position of the one condition that
/// binds it.
fn compile_filter(def: &IndexDef) -> Result<(Vec<Condition>, Vec<usize>), String> {
    let mut conditions = Vec::new();
    let mut param_conditions = vec![usize::MAX; def.params.len()];
    for condition in &def.filter {
        let (path, test) = match compile_condition(condition)? {
            Compiled::Unbound(condition) => {
                conditions.push(condition);
                continue;
            }
            Compiled::Compares {
                path,
                param,
                value,
                fold_case,
            } => {
                let bound = match (param, value) {
                    (Some(name), None) => {
                        let index = bind_param(def, name, &mut param_conditions, conditions.len())?;
                        Bound::Param(index)
                    }
                    (None, Some(constant)) if fold_case => {
                        Bound::Const(constant.to_ascii_lowercase())
                    }
                    (None, Some(constant)) => Bound::Const(constant.clone()),
                    _ => return Err("a condition takes exactly one of param and value".into()),
                };
                (path, Test::Equals { bound, fold_case })
            }
        };
        conditions.push(Condition { path, test });
    }
    if let Some(unused) = param_conditions.iter().position(|c| *c == usize::MAX) {
        return Err(format!(
            "parameter {} is not used by the filter",
            def.params[unused].name
        ));
    }
    Ok((conditions, param_conditions))
}

/// A condition as declared: one that compares with a parameter or a constant, or one that
/// binds nothing.
enum Compiled<'d> {
    Compares {
        path: JsonPath,
        param: &'d Option<String>,
        value: &'d Option<String>,
        fold_case: bool,
    },
    Unbound(Condition),
}

fn compile_condition(condition: &ConditionDef) -> Result<Compiled<'_>, String> {
    let compares = |path: JsonPath, param, value, fold_case| Compiled::Compares {
        path,
        param,
        value,
        fold_case,
    };
    Ok(match condition {
        ConditionDef::Eq { path, param, value } | ConditionDef::Contains { path, param, value } => {
            compares(JsonPath::parse(path)?, param, value, false)
        }
        ConditionDef::EqAsciiCi { path, param, value } => {
            compares(JsonPath::parse(path)?, param, value, true)
        }
        ConditionDef::RefUri { path, param, value } => {
            compares(JsonPath::parse(path)?.child("uri"), param, value, false)
        }
        ConditionDef::In {
            path,
            values,
            or_absent,
        } => Compiled::Unbound(Condition {
            path: JsonPath::parse(path)?,
            test: Test::OneOf {
                values: values.clone(),
                or_absent: *or_absent,
            },
        }),
        ConditionDef::Present { path } => Compiled::Unbound(Condition {
            path: JsonPath::parse(path)?,
            test: Test::Present,
        }),
    })
}

/// Records that the parameter `name` is bound by condition `at`; its position.
fn bind_param(
    def: &IndexDef,
    name: &str,
    param_conditions: &mut [usize],
    at: usize,
) -> Result<usize, String> {
    let Some(index) = def.params.iter().position(|p| p.name == name) else {
        return Err(format!("filter uses undeclared parameter {name}"));
    };
    if param_conditions[index] != usize::MAX {
        return Err(format!("parameter {name} is used by two conditions"));
    }
    param_conditions[index] = at;
    Ok(index)
}

/// Strings at a path, for key extraction and evaluation.
pub(crate) fn strings_at<'v>(
    path: &JsonPath,
    record: &'v RecordView<'v>,
) -> impl Iterator<Item = &'v str> {
    path.values_in(record).into_iter().filter_map(Json::as_str)
}

fn guard_holds(condition: &Condition, record: &RecordView) -> bool {
    match &condition.test {
        Test::Equals {
            bound: Bound::Const(constant),
            fold_case,
        } => strings_at(&condition.path, record).any(|s| fold(s, *fold_case) == *constant),
        Test::Equals {
            bound: Bound::Param(_),
            ..
        } => true,
        Test::OneOf { values, or_absent } => {
            let found = condition.path.values_in(record);
            if found.is_empty() {
                *or_absent
            } else {
                found
                    .iter()
                    .filter_map(|v| v.as_str())
                    .any(|s| values.iter().any(|v| v == s))
            }
        }
        Test::Present => condition.path.values_in(record).iter().any(|v| match v {
            Json::Null => false,
            Json::String(s) => !s.is_empty(),
            Json::Object(map) => !map.is_empty(),
            Json::Array(elements) => !elements.is_empty(),
            _ => true,
        }),
    }
}

impl Index {
    /// The keys under which `record` (of this query's kind) matches, sorted and distinct.
    pub fn index_keys(&self, record: &RecordView) -> Vec<String> {
        if !self.conditions.iter().all(|c| guard_holds(c, record)) {
            return Vec::new();
        }
        let mut choices: Vec<Vec<Option<Cow<str>>>> = Vec::with_capacity(self.params().len());
        for (index, (param, &condition)) in
            self.params().iter().zip(&self.param_conditions).enumerate()
        {
            let condition = &self.conditions[condition];
            let fold_case = self.folds_case(index);
            let mut values: Vec<Option<Cow<str>>> = strings_at(&condition.path, record)
                .map(|s| Some(fold(s, fold_case)))
                .collect();
            values.sort();
            values.dedup();
            match (param.required, param.exact) {
                (true, _) => {}
                (false, true) if values.is_empty() => values.push(None),
                (false, true) => {}
                (false, false) => values.insert(0, None),
            }
            if values.is_empty() {
                return Vec::new();
            }
            choices.push(values);
        }
        let mut keys = keys_of_tuples(&choices);
        keys.sort();
        keys.dedup();
        keys
    }

    /// Evaluates the filter on one record directly, with bound parameter values.
    pub fn matches(&self, uri: &str, record: &Json, args: &[Option<&str>]) -> bool {
        let record = &RecordView::new(uri, record);
        self.conditions
            .iter()
            .all(|condition| match &condition.test {
                Test::Equals {
                    bound: Bound::Param(i),
                    fold_case,
                } => match args.get(*i).copied().flatten() {
                    None => true,
                    Some(wanted) => {
                        let wanted = fold(wanted, *fold_case);
                        strings_at(&condition.path, record).any(|s| fold(s, *fold_case) == wanted)
                    }
                },
                _ => guard_holds(condition, record),
            })
    }
}
