//! The query lexicons under `lexicons/dev/svc/query/` are what a real atproto client needs:
//! the network's own `@atproto/xrpc` loads them, calls every list query of the specification
//! at its `/xrpc/` path over the example catalog, and accepts every answer against the query's
//! output schema (it checks both the parameters it sends and what comes back).

mod common;

use common::peers::peers;
use common::*;
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use svc_spec::{ConditionDef, Json, JsonPath, Query, QuerySet};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The records of the example catalog, as its events create them.
fn example_records() -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(root().join("examples/catalog.jsonl")).unwrap();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|event| {
            let commit = event.get("commit")?;
            let collection = commit["collection"].as_str()?.to_string();
            Some((collection, commit.get("record")?.clone()))
        })
        .collect()
}

/// The value of `param` a record holds where the query's filter reads it.
fn argument(query: &Query, param: &str, record: &Value) -> Option<String> {
    let (path, is_ref) = query
        .def()
        .filter
        .iter()
        .find_map(|condition| match condition {
            ConditionDef::Eq { path, param: p, .. }
            | ConditionDef::EqAsciiCi { path, param: p, .. }
            | ConditionDef::Contains { path, param: p, .. } => {
                (p.as_deref() == Some(param)).then_some((path, false))
            }
            ConditionDef::RefUri { path, param: p, .. } => {
                (p.as_deref() == Some(param)).then_some((path, true))
            }
            _ => None,
        })?;
    let path = JsonPath::parse(path).ok()?;
    let json = Json::from_value(record);
    path.values(&json).into_iter().find_map(|value| {
        let value = if is_ref { value.get("uri")? } else { value };
        match value.as_array() {
            Some(items) => items.first()?.as_str().map(str::to_string),
            None => value.as_str().map(str::to_string),
        }
    })
}

/// Parameters under which the query finds at least one example record.
fn finding_parameters(server: &Server, query: &Query, records: &[(String, Value)]) -> Value {
    let of_kind = records.iter().filter(|(kind, _)| kind == query.kind());
    for (_, record) in of_kind {
        let mut params = serde_json::Map::new();
        for param in query.params().iter().filter(|p| p.required) {
            let Some(value) = argument(query, &param.name, record) else {
                break;
            };
            params.insert(param.name.clone(), json!(value));
        }
        if params.len() < query.params().iter().filter(|p| p.required).count() {
            continue;
        }
        let pairs: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v.as_str().unwrap_or_default())))
            .collect();
        let (status, answer) = server.get(&format!("{}?{}", query.def().path, pairs.join("&")));
        if status == 200 && answer["total"].as_u64() > Some(0) {
            return Value::Object(params);
        }
    }
    panic!("no example record is found by {}", query.name());
}

#[test]
fn the_network_s_xrpc_client_calls_every_query_and_accepts_every_answer() {
    // The peers' installation brings Node and the npm packages the client comes from.
    let Some(_) = peers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let examples = root().join("examples/catalog.jsonl");
    let server = Server::start(
        dir.path().join("catalog.db"),
        &["--import", examples.to_str().unwrap()],
    );
    let records = example_records();
    let queries = QuerySet::embedded();
    let mut calls = String::new();
    for (_, query) in queries.public() {
        let mut params = finding_parameters(&server, query, &records);
        params["limit"] = json!(2);
        let call = json!({"nsid": svc_spec::query_nsid(query.name()), "params": params});
        calls.push_str(&format!("{call}\n"));
    }
    let mut node = Command::new(root().join("scripts/peers"))
        .arg("node")
        .arg(root().join("crates/svc/tests/xrpc/call_every_query.mjs"))
        .arg(&server.url)
        .arg(root().join("lexicons/dev/svc/query"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("scripts/peers node");
    let mut stdin = node.stdin.take().expect("node's stdin");
    stdin.write_all(calls.as_bytes()).expect("the calls");
    drop(stdin);
    let output = node.wait_with_output().expect("node's answers");
    let answers = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{answers}");
    let lines: Vec<&str> = answers.lines().collect();
    assert_eq!(lines.len(), queries.public().count(), "{answers}");
    for line in lines {
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields[0], "ok", "{line}");
        assert!(fields[2] != "0", "an empty answer checks no item: {line}");
    }
}
