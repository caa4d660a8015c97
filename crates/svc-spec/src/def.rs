//! The specification file's declarations, as written (`spec/queries.json`): each query's
//! index definition and how it is presented (REST path, CLI command, descriptions).

use serde::{Deserialize, Serialize};

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
    /// A list of values the service keeps, in place of `values`.
    #[serde(default, skip_serializing)]
    pub values_of: Option<ValueList>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub description: String,
}

/// A list of values kept in one place in the service, which a parameter may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueList {
    /// The kinds of [`crate::VERIFICATION_KINDS`].
    VerificationKinds,
}

impl ValueList {
    pub fn values(self) -> Vec<String> {
        match self {
            ValueList::VerificationKinds => crate::VERIFICATION_KINDS
                .iter()
                .map(|(kind, _)| kind.to_string())
                .collect(),
        }
    }
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

/// One parameter as an index sees it: what its keys are made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexParam {
    pub name: String,
    #[serde(rename = "type")]
    pub param_type: ParamType,
    /// A record without a value there is filed under no value too.
    #[serde(default)]
    pub required: bool,
    /// An optional parameter whose keys say what the record holds: its value, or no value
    /// when it has none, never both (a lookup without it finds only records without one).
    /// Only the service's own indexes use it, to read a value back from the keys.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exact: bool,
}

/// What defines an index: the kind of record it files, its parameters and its filter. Only
/// this is fingerprinted: a query's keys are rebuilt when, and only when, it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexDef {
    pub name: String,
    pub kind: String,
    #[serde(default)]
    pub params: Vec<IndexParam>,
    pub filter: Vec<ConditionDef>,
}

impl QueryDef {
    /// The index this query answers from.
    pub fn index(&self) -> IndexDef {
        IndexDef {
            name: self.name.clone(),
            kind: self.kind.clone(),
            params: self
                .params
                .iter()
                .map(|p| IndexParam {
                    name: p.name.clone(),
                    param_type: p.param_type,
                    required: p.required,
                    exact: false,
                })
                .collect(),
            filter: self.filter.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpecFile {
    pub version: u32,
    pub queries: Vec<QueryDef>,
}
