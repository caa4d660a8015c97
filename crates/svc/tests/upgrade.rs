//! A catalog written before the queries of the interface's version 0.13 (change proposals,
//! releases, migration runs, federations) and before the lens and schema queries opens with
//! them, files the records it already holds under them, and answers every query exactly as a
//! catalog filled afresh does, on both engines.

use svc_testkit as common;

use common::*;
use serde_json::Value;
use svc_spec::QuerySet;

/// The queries of version 0.13 and the lens and schema queries, which a catalog written before
/// them never filed records under.
const NEW_QUERIES: &[&str] = &[
    "openChangeProposals",
    "changeProposalsForCommunity",
    "communityReleasesForCommunity",
    "activeMigrationRuns",
    "migrationRunsForChange",
    "federationsForCommunity",
    "federationsForPeer",
    "lensesFromSchema",
    "lensesToSchema",
    "lensesBetweenSchemas",
    "schemasByProtocol",
    "schemasByName",
];

/// The built-in specification without the queries of version 0.13.
fn specification_before(dir: &std::path::Path) -> std::path::PathBuf {
    let mut spec: Value = serde_json::from_str(svc_spec::EMBEDDED_SPEC).unwrap();
    let queries = spec["queries"].as_array_mut().unwrap();
    queries.retain(|query| !NEW_QUERIES.contains(&query["name"].as_str().unwrap_or_default()));
    assert_eq!(queries.len(), 16);
    let path = dir.join("queries-0.12.json");
    std::fs::write(&path, spec.to_string()).unwrap();
    path
}

/// Every request worth comparing: each query with the parameters of each example record it
/// could find (and the parameter-free queries once), two records a page.
fn requests() -> Vec<String> {
    let queries = QuerySet::embedded();
    let records = examples::records();
    let mut requests = Vec::new();
    for (_, query) in queries.public() {
        for (_, record) in records.iter().filter(|(kind, _)| kind == query.kind()) {
            if let Some(pairs) = examples::arguments(query, record) {
                let query_string = examples::query_string(&pairs);
                requests.push(format!("{}?{query_string}&limit=2", query.def().path));
            }
        }
    }
    requests.sort();
    requests.dedup();
    requests
}

fn an_upgraded_catalog_answers_the_new_queries_as_a_fresh_one(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (Some(upgraded_db), Some(fresh_db)) = (
        backend.fresh_db(&dir.path().join("upgraded")),
        backend.fresh_db(&dir.path().join("fresh")),
    ) else {
        return;
    };
    std::fs::create_dir_all(dir.path().join("upgraded")).unwrap();
    std::fs::create_dir_all(dir.path().join("fresh")).unwrap();
    let example_file = examples::path();
    let import = ["--import", example_file.to_str().unwrap()];
    let before = specification_before(dir.path());
    // Written by a server whose specification lacks the new queries: the new kinds' records
    // are stored, filed under none.
    let old = Server::start(
        &upgraded_db,
        &[&["--spec", before.to_str().unwrap()], &import[..]].concat(),
    );
    assert_eq!(old.get("/v1/changes/open").0, 404);
    drop(old);
    let upgraded = Server::start(&upgraded_db, &[]);
    let fresh = Server::start(&fresh_db, &import);
    let requests = requests();
    let mut found = 0;
    for request in &requests {
        let (status, answer) = upgraded.get(request);
        assert_eq!((status, &answer), (200, &fresh.get(request).1), "{request}");
        found += usize::from(answer["total"].as_u64() > Some(0));
    }
    assert_eq!(
        found,
        requests.len(),
        "every request finds its example record"
    );
    for query in NEW_QUERIES {
        assert!(
            requests
                .iter()
                .any(|r| r.contains(&format!("{}?", path_of(query)))),
            "{query}"
        );
    }
}

fn path_of(name: &str) -> String {
    let queries = QuerySet::embedded();
    let position = queries
        .position(name)
        .expect("a query of the specification");
    queries.all()[position].def().path.clone()
}

each_backend!(an_upgraded_catalog_answers_the_new_queries_as_a_fresh_one);
