//! Each list query as an XRPC lexicon document (`dev.svc.query.<name>`, type `query`): its
//! parameters as the API accepts them (the paging ones, then its own) and the list envelope
//! as its output. Made from the specification, never written by hand: the documents under
//! `lexicons/dev/svc/query/` are checked against these.

use crate::{DEFAULT_LIMIT, MAX_AT_URI_PARAM_BYTES, MAX_LIMIT, ParamDef, ParamType, Query};
use serde_json::{Map, Value, json};

/// The NSID of a query's XRPC method.
pub fn query_nsid(name: &str) -> String {
    format!("dev.svc.query.{name}")
}

/// The lexicon document of one list query.
pub fn query_lexicon(query: &Query) -> Value {
    let own = query
        .params()
        .iter()
        .map(|param| (param, own_parameter(param)));
    let mut properties = paging_properties();
    let mut required = Vec::new();
    for (param, schema) in own {
        properties.insert(param.name.clone(), schema);
        if param.required {
            required.push(param.name.clone());
        }
    }
    let mut parameters = json!({"type": "params", "properties": properties});
    if !required.is_empty() {
        parameters["required"] = json!(required);
    }
    json!({
        "lexicon": 1,
        "id": query_nsid(query.name()),
        "defs": {
            "main": {
                "type": "query",
                "description": format!(
                    "{} Also served at {}.",
                    query.def().description,
                    query.def().path
                ),
                "parameters": parameters,
                "output": {"encoding": "application/json", "schema": envelope()}
            },
            "item": item(query.kind()),
            "label": label()
        }
    })
}

/// The lexicon document of search (`dev.svc.query.search`, `/v1/search`).
pub fn search_lexicon() -> Value {
    let mut output = envelope();
    output["properties"]["items"]["description"] =
        json!("The records of the page, the best match first (ties newest first).");
    output["properties"]["total"] = json!({"type": "integer", "minimum": 0,
        "maximum": crate::search::COUNT_LIMIT,
        "description": "How many records match, exactly up to 10,000; past that, 10,000 and `total_is_lower_bound`."});
    output["properties"]["total_is_lower_bound"] = json!({"type": "boolean",
        "description": "Present (true) when more records match than `total` says."});
    json!({
        "lexicon": 1,
        "id": query_nsid("search"),
        "defs": {
            "main": {
                "type": "query",
                "description": "Records whose words match a query, in any order, any case, accents or not; \"a phrase\" in double quotes; the last word (3 characters or more, nothing after it) also as the start of a word. Names count above other text. Also served at /v1/search.",
                "parameters": {
                    "type": "params",
                    "required": ["q"],
                    "properties": {
                        "q": {"type": "string", "minLength": 1,
                            "maxGraphemes": crate::search::MAX_QUERY_CHARS,
                            "description": "The words to find; words or phrases past the 16th are not searched, and a query of no letter or digit finds nothing."},
                        "kind": {"type": "string",
                            "description": "Only records of this kind: its NSID, or its name on the command line."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                            "default": DEFAULT_LIMIT},
                        "cursor": {"type": "string",
                            "description": "From a previous answer: the page after it."}
                    }
                },
                "output": {"encoding": "application/json", "schema": output}
            },
            "item": item("matching"),
            "label": label()
        }
    })
}

/// The lexicon document of routes (`dev.svc.query.routes`, `/v1/routes`).
pub fn routes_lexicon() -> Value {
    json!({
        "lexicon": 1,
        "id": query_nsid("routes"),
        "defs": {
            "main": {
                "type": "query",
                "description": "The best chains of lenses from one schema to another: chains whose every lens suffices first, then fewer hops, then the weakest hop's round-trip class. A question whose search passes its bounds is refused, naming the bound. Also served at /v1/routes.",
                "parameters": {
                    "type": "params",
                    "required": ["from", "to"],
                    "properties": {
                        "from": {"type": "string", "format": "at-uri", "description": "The schema the records are in."},
                        "to": {"type": "string", "format": "at-uri", "description": "The schema they should reach."},
                        "max_hops": {"type": "integer", "minimum": 1, "maximum": 6, "default": 4},
                        "kinds": {"type": "string", "description": "Comma-separated verification kinds each lens must have a holding verification of; absent, a lens suffices when some verification holds and none is falsified."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}
                    }
                },
                "output": {"encoding": "application/json", "schema": {
                    "type": "object",
                    "required": ["routes", "limit", "names"],
                    "properties": {
                        "routes": {"type": "array", "items": {"type": "ref", "ref": "#route"}},
                        "limit": {"type": "integer"},
                        "names": {"type": "unknown", "description": "The readable name of each schema the routes pass, by its at-uri."}
                    }
                }}
            },
            "route": {"type": "object", "required": ["hops", "sufficient"], "properties": {
                "hops": {"type": "array", "items": {"type": "ref", "ref": "#hop"}},
                "sufficient": {"type": "boolean"}}},
            "hop": {"type": "object",
                "required": ["lens", "from", "to", "known_by", "verifications", "sufficient"],
                "properties": {
                    "lens": {"type": "string", "format": "at-uri"},
                    "from": {"type": "string", "format": "at-uri"},
                    "to": {"type": "string", "format": "at-uri"},
                    "class": {"type": "string", "description": "The lens record's roundTripClass; null when none is known."},
                    "known_by": {"type": "string", "knownValues": ["record", "encounters"]},
                    "verifications": {"type": "unknown", "description": "By verification kind: how many hold and how many are falsified."},
                    "sufficient": {"type": "boolean"}}}
        }
    })
}

/// `limit`, `offset` and `cursor`, as every list query takes them.
fn paging_properties() -> Map<String, Value> {
    let described = crate::paging_parameters();
    let description = |name: &str| {
        described
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| format!("{d}."))
            .unwrap_or_default()
    };
    let mut properties = Map::new();
    properties.insert(
        "limit".into(),
        json!({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
            "default": DEFAULT_LIMIT, "description": description("limit")}),
    );
    properties.insert(
        "offset".into(),
        json!({"type": "integer", "minimum": 0, "default": 0, "description": description("offset")}),
    );
    properties.insert(
        "cursor".into(),
        json!({"type": "string", "description": description("cursor")}),
    );
    properties
}

fn own_parameter(param: &ParamDef) -> Value {
    let mut schema = match param.param_type {
        ParamType::AtUri => {
            json!({"type": "string", "format": "at-uri", "maxLength": MAX_AT_URI_PARAM_BYTES})
        }
        ParamType::Did => json!({"type": "string", "format": "did"}),
        ParamType::Enum => {
            let values = match (&param.values, param.values_of) {
                (Some(values), _) => values.clone(),
                (None, Some(list)) => list.values(),
                (None, None) => Vec::new(),
            };
            json!({"type": "string", "enum": values})
        }
        ParamType::String => json!({"type": "string"}),
    };
    if !param.description.is_empty() {
        schema["description"] = json!(param.description);
    }
    schema
}

/// `{items, total, limit, offset, cursor?}`.
fn envelope() -> Value {
    json!({
        "type": "object",
        "required": ["items", "total", "limit", "offset"],
        "properties": {
            "items": {"type": "array", "items": {"type": "ref", "ref": "#item"},
                "description": "The records of the page, in uri order."},
            "total": {"type": "integer", "minimum": 0,
                "description": "How many records the query finds in all."},
            "limit": {"type": "integer", "minimum": 1},
            "offset": {"type": "integer", "minimum": 0},
            "cursor": {"type": "string",
                "description": "Given when more records follow: the next page's cursor."}
        }
    })
}

/// One record of the answer. Its body is `unknown` rather than a ref to its kind: the family's
/// lexicons name unions in `dev.svc.defs`, which the network's reference validator cannot
/// follow behind a ref, and the catalog holds only records its own lexicon accepted.
fn item(kind: &str) -> Value {
    json!({
        "type": "object",
        "required": ["uri", "author", "rev", "record"],
        "properties": {
            "uri": {"type": "string", "format": "at-uri"},
            "author": {"type": "string", "format": "did"},
            "rev": {"type": "string", "description": "The revision of the commit that wrote the record."},
            "record": {"type": "unknown", "description": format!("The {kind} record.")},
            "labels": {
                "type": "array",
                "description": "The labels in force on the record or its author, from the labelers the service follows; absent when none.",
                "items": {"type": "ref", "ref": "#label"}
            }
        }
    })
}

/// A label as an item carries it: who stated it, its value and when.
fn label() -> Value {
    json!({
        "type": "object",
        "description": "A label a labeler applied to the record (its uri) or to its author (the DID).",
        "required": ["src", "val", "cts"],
        "properties": {
            "src": {"type": "string", "format": "did", "description": "The labeler's DID."},
            "val": {"type": "string", "maxLength": 128},
            "cts": {"type": "string", "format": "datetime", "description": "When the labeler created it."}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::QuerySet;
    use std::path::PathBuf;

    fn directory() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../lexicons/dev/svc/query")
    }

    /// `SVC_BLESS=1` writes the documents anew (after the specification changed on purpose).
    #[test]
    fn the_query_lexicons_in_the_repository_are_made_from_the_specification() {
        let queries = QuerySet::embedded();
        let dir = directory();
        let bless = std::env::var_os("SVC_BLESS").is_some();
        if bless {
            std::fs::create_dir_all(&dir).expect("the query lexicon directory");
        }
        let mut expected = Vec::new();
        for (_, query) in queries.public() {
            let file = format!("{}.json", query.name());
            let text = format!("{:#}\n", query_lexicon(query));
            if bless {
                std::fs::write(dir.join(&file), &text).expect("a query lexicon written");
            }
            let found = std::fs::read_to_string(dir.join(&file)).unwrap_or_default();
            assert!(
                found == text,
                "lexicons/dev/svc/query/{file} differs from the specification; \
                 SVC_BLESS=1 cargo test -p svc-spec writes it"
            );
            expected.push(file);
        }
        for (file, document) in [
            ("search.json", search_lexicon()),
            ("routes.json", routes_lexicon()),
        ] {
            let text = format!("{document:#}\n");
            if bless {
                std::fs::write(dir.join(file), &text).expect("a route's lexicon written");
            }
            let found = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
            assert!(
                found == text,
                "lexicons/dev/svc/query/{file} differs; SVC_BLESS=1 writes it"
            );
            expected.push(file.to_string());
        }
        let mut present: Vec<String> = std::fs::read_dir(&dir)
            .expect("lexicons/dev/svc/query")
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        present.sort();
        expected.sort();
        assert_eq!(
            present, expected,
            "a query lexicon of no query in the specification"
        );
    }
}
