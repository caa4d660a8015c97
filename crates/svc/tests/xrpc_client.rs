//! The query lexicons under `lexicons/dev/svc/query/` are what a real atproto client needs:
//! the network's own `@atproto/xrpc` loads them, calls every list query of the specification
//! at its `/xrpc/` path over the example catalog, and accepts every answer against the query's
//! output schema (it checks both the parameters it sends and what comes back).

use svc_testkit as common;

use common::peers::peers;
use common::*;
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use svc_spec::{Query, QuerySet};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Parameters under which the query finds at least one example record.
fn finding_parameters(server: &Server, query: &Query, records: &[(String, Value)]) -> Value {
    let of_kind = records.iter().filter(|(kind, _)| kind == query.kind());
    for (_, record) in of_kind {
        let Some(pairs) = examples::arguments(query, record) else {
            continue;
        };
        let path = format!("{}?{}", query.def().path, examples::query_string(&pairs));
        let (status, answer) = server.get(&path);
        if status == 200 && answer["total"].as_u64() > Some(0) {
            return pairs.into_iter().map(|(k, v)| (k, json!(v))).collect();
        }
    }
    panic!("no example record is found by {}", query.name());
}

#[test]
fn the_network_s_xrpc_client_calls_every_query_and_accepts_every_answer() {
    // The peers' installation brings Node and the npm packages the client comes from.
    let Some(_) = peers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let example_file = examples::path();
    let server = Server::start(
        dir.path().join("catalog.db"),
        &["--import", example_file.to_str().unwrap()],
    );
    let records = examples::records();
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
