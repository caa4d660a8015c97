//! What svc knows of each record kind beyond its lexicon (`spec/kinds.json`): its plural in
//! `/v1/stats`, the names the command line takes for it, the fields its explorer tables and
//! record page show (each a label for people beside its path), and the lists around its
//! records. Adding a kind is its lexicon and, when it has any of these, one entry here.

use crate::{QuerySet, SpecError};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The table shipped with this build.
pub const EMBEDDED_KINDS: &str = include_str!("../../../spec/kinds.json");

/// A kind's searchable fields, as paths: its names (weighted above the rest) and its text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SearchDef {
    #[serde(default)]
    pub name: Vec<String>,
    #[serde(default)]
    pub text: Vec<String>,
}

/// A labelled field: a label and the dotted path of its value. A record page heads with its
/// kind's facts; a table heads each column with its label, the path in the page's data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    pub label: String,
    pub path: String,
}

/// A list of DIDs a record holds (a community's members), shown as links to their authors.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct People {
    pub title: String,
    pub path: String,
}

/// The records a query finds when its parameter `param` is given the record's at-uri.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Related {
    pub query: String,
    pub title: String,
    pub param: String,
}

/// One kind's entry; every part may be absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindDef {
    /// Its name in `/v1/stats`, when the NSID's last segment made plural is not it.
    pub plural: Option<String>,
    /// Names the command line takes for it besides the NSID and its last segment.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The fields its explorer tables show, each headed by its label.
    #[serde(default)]
    pub columns: Vec<Fact>,
    #[serde(default)]
    pub facts: Vec<Fact>,
    #[serde(default)]
    pub people: Vec<People>,
    #[serde(default)]
    pub related: Vec<Related>,
    /// Its share of the records the benchmark generator writes (`bench/gen_events.py`).
    pub bench: Option<BenchShare>,
    /// Where search finds its words.
    pub search: Option<SearchDef>,
}

/// A kind's share of one mix of records the benchmark generator writes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchShare {
    /// `catalog` (the records first written) or `governance` (those after them).
    pub mix: String,
    pub share: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Every {
    #[serde(default)]
    related: Vec<Related>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KindsFile {
    #[serde(rename = "about")]
    _about: Option<String>,
    #[serde(default)]
    every: Every,
    kinds: BTreeMap<String, KindDef>,
}

/// The record kinds svc serves, in NSID order, with what the table says of each.
#[derive(Debug)]
pub struct Kinds {
    kinds: BTreeMap<String, KindDef>,
    every: Every,
    /// What a kind the table does not hold has: nothing.
    none: KindDef,
}

/// Each kind's searchable fields, as the table `text` says them (storage reads only these).
pub(crate) fn search_defs(text: &str) -> Result<BTreeMap<String, SearchDef>, SpecError> {
    let file: KindsFile =
        serde_json::from_str(text).map_err(|e| SpecError(format!("the kinds table: {e}")))?;
    Ok(file
        .kinds
        .into_iter()
        .filter_map(|(kind, def)| def.search.map(|search| (kind, search)))
        .collect())
}

impl Kinds {
    /// The kinds `collections` as the table shipped with this build describes them.
    pub fn embedded(collections: &[String]) -> Kinds {
        Kinds::load(EMBEDDED_KINDS, collections)
            .expect("the embedded kinds table is checked by the test suite")
    }

    /// The kinds `collections` (the record collections the lexicons define), described by
    /// the table `text`. An entry for a kind no lexicon defines is refused.
    pub fn load(text: &str, collections: &[String]) -> Result<Kinds, SpecError> {
        let file: KindsFile =
            serde_json::from_str(text).map_err(|e| SpecError(format!("the kinds table: {e}")))?;
        if let Some(stray) = file.kinds.keys().find(|kind| !collections.contains(kind)) {
            return Err(SpecError(format!(
                "the kinds table describes {stray}, which no lexicon defines"
            )));
        }
        let mut kinds: BTreeMap<String, KindDef> = collections
            .iter()
            .map(|kind| (kind.clone(), KindDef::default()))
            .collect();
        kinds.extend(file.kinds);
        let loaded = Kinds {
            kinds,
            every: file.every,
            none: KindDef::default(),
        };
        loaded.check_names()?;
        Ok(loaded)
    }

    /// Every kind's NSID, in order.
    pub fn nsids(&self) -> impl Iterator<Item = &str> {
        self.kinds.keys().map(String::as_str)
    }

    /// What the table says of `nsid`; nothing for a kind it does not hold.
    pub fn def(&self, nsid: &str) -> &KindDef {
        self.kinds.get(nsid).unwrap_or(&self.none)
    }

    /// The kind's name in `/v1/stats`: `dev.svc.deliberationVote` → `deliberationVotes`,
    /// `dev.svc.bounty` → `bounties`, or the table's `plural`.
    pub fn plural(&self, nsid: &str) -> String {
        if let Some(plural) = &self.def(nsid).plural {
            return plural.clone();
        }
        let tail = tail(nsid);
        match tail.strip_suffix('y') {
            Some(stem) => format!("{stem}ies"),
            None => format!("{tail}s"),
        }
    }

    /// Every name [`Kinds::named`] knows: each kind's NSID, its last segment and its aliases.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for (nsid, def) in &self.kinds {
            for name in [nsid.as_str(), tail(nsid)]
                .into_iter()
                .chain(def.aliases.iter().map(String::as_str))
            {
                if !names.iter().any(|known| known == name) {
                    names.push(name.to_string());
                }
            }
        }
        names
    }

    /// The kind a name given on the command line means: its NSID, its last segment or an
    /// alias.
    pub fn named(&self, name: &str) -> Option<&str> {
        self.kinds
            .iter()
            .find(|(nsid, def)| {
                *nsid == name || tail(nsid) == name || def.aliases.iter().any(|a| a == name)
            })
            .map(|(nsid, _)| nsid.as_str())
    }

    /// The lists a record page of the kind shows after its people: its own, then every
    /// kind's.
    pub fn related(&self, nsid: &str) -> impl Iterator<Item = &Related> {
        self.def(nsid).related.iter().chain(&self.every.related)
    }

    /// Checks that each related list names a query of `queries` taking its parameter.
    pub fn check_queries(&self, queries: &QuerySet) -> Result<(), SpecError> {
        let lists = self.kinds.values().flat_map(|def| &def.related);
        for list in lists.chain(&self.every.related) {
            let query = queries
                .position(&list.query)
                .map(|position| &queries.all()[position]);
            let takes = query.is_some_and(|q| q.def().params.iter().any(|p| p.name == list.param));
            if !takes {
                return Err(SpecError(format!(
                    "the kinds table lists {} by {}({}), which no query takes",
                    list.title, list.query, list.param
                )));
            }
        }
        Ok(())
    }

    /// No two kinds answer to one command-line name or share a plural.
    fn check_names(&self) -> Result<(), SpecError> {
        let mut names: BTreeMap<String, &str> = BTreeMap::new();
        for (nsid, def) in &self.kinds {
            let own = [
                tail(nsid).to_string(),
                format!("plural {}", self.plural(nsid)),
            ];
            for name in own.into_iter().chain(def.aliases.iter().cloned()) {
                if let Some(other) = names.insert(name.clone(), nsid) {
                    return Err(SpecError(format!(
                        "the kinds table gives {other} and {nsid} the same name {name:?}"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// An NSID's last segment: `vocab` of `dev.svc.vocab`.
fn tail(nsid: &str) -> &str {
    nsid.rsplit('.').next().unwrap_or(nsid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collections(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| format!("dev.svc.{name}")).collect()
    }

    #[test]
    fn plurals_and_names_follow_the_table_else_the_nsid() {
        let table = r#"{"kinds": {"dev.svc.vocab": {"plural": "vocabularies",
            "aliases": ["vocabulary"]}}}"#;
        let kinds = Kinds::load(
            table,
            &collections(&["bounty", "vocab", "deliberationVote"]),
        )
        .expect("a table");
        assert_eq!(kinds.plural("dev.svc.bounty"), "bounties");
        assert_eq!(kinds.plural("dev.svc.vocab"), "vocabularies");
        assert_eq!(
            kinds.plural("dev.svc.deliberationVote"),
            "deliberationVotes"
        );
        assert_eq!(kinds.named("vocabulary"), Some("dev.svc.vocab"));
        assert_eq!(kinds.named("dev.svc.bounty"), Some("dev.svc.bounty"));
        assert_eq!(
            kinds.named("deliberationVote"),
            Some("dev.svc.deliberationVote")
        );
        assert_eq!(kinds.named("vocabularies"), None);
    }

    #[test]
    fn a_table_that_cannot_be_right_is_refused_by_what_is_wrong() {
        let two = collections(&["bounty", "vocab"]);
        let refused = |table: &str| Kinds::load(table, &two).expect_err(table).0;
        assert!(refused(r#"{"kinds": {"dev.svc.nope": {}}}"#).contains("dev.svc.nope"));
        assert!(refused(r#"{"kinds": {"dev.svc.vocab": {"colour": []}}}"#).contains("colour"));
        let clash = r#"{"kinds": {"dev.svc.vocab": {"aliases": ["bounty"]}}}"#;
        assert!(refused(clash).contains("\"bounty\""));
        let queries = QuerySet::embedded();
        let unknown = r#"{"kinds": {"dev.svc.vocab": {"related":
            [{"query": "bountiesByNobody", "title": "T", "param": "x"}]}}}"#;
        let kinds = Kinds::load(unknown, &two).expect("a table");
        let error = kinds.check_queries(&queries).expect_err("an unknown query");
        assert!(error.0.contains("bountiesByNobody"), "{error:?}");
    }

    #[test]
    fn every_kind_lists_what_every_kind_lists_after_its_own() {
        let table = r#"{"every": {"related": [{"query": "q2", "title": "B", "param": "p"}]},
            "kinds": {"dev.svc.vocab": {"related": [{"query": "q1", "title": "A", "param": "p"}]}}}"#;
        let kinds = Kinds::load(table, &collections(&["bounty", "vocab"])).expect("a table");
        let titles = |nsid| {
            kinds
                .related(nsid)
                .map(|r| r.title.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(titles("dev.svc.vocab"), ["A", "B"]);
        assert_eq!(titles("dev.svc.bounty"), ["B"]);
    }
}
