//! A record kind added as a maintainer adds one: its lexicon, one entry in the kinds table and a
//! query in the specification, and no code. A real server on an ephemeral port, over a real
//! SQLite catalog holding one record of the kind, counts it in `/v1/stats` under the plural the
//! table gives, shows its table's columns on the query's explorer page, and heads its record
//! page with the table's facts and the people it names.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;
use svc_catalog::sqlite::SqliteCatalog;
use svc_catalog::{CatalogRead, CatalogWrite, Change, Upsert};
use svc_lexicon::Lexicons;
use svc_server::{ClientPrefixes, ConnectionLimits, RequestLimits, ServerConfig};
use svc_spec::{EMBEDDED_KINDS, EMBEDDED_SPEC, Kinds, QuerySet};
use svc_syntax::{AtUri, Tid, UnixMicros};

const KIND: &str = "dev.svc.madeUp";
const RECORD: &str = "at://did:plc:maker/dev.svc.madeUp/3kaaaaaaaaa22";

/// The lexicon of the made-up kind: a name, a colour and the DIDs of its makers.
const LEXICON: &str = r#"{"lexicon": 1, "id": "dev.svc.madeUp", "defs": {"main": {
    "type": "record", "key": "tid", "record": {"type": "object",
    "required": ["name", "colour"], "properties": {
        "name": {"type": "string", "maxLength": 128},
        "colour": {"type": "string", "maxLength": 64},
        "makers": {"type": "array", "items": {"type": "string", "format": "did"}}}}}}}"#;

/// The lexicons this build embeds and the made-up one.
fn lexicons() -> Lexicons {
    let documents = Lexicons::embedded_documents().iter().copied();
    Lexicons::from_documents(documents.chain([LEXICON])).expect("the lexicons")
}

/// The kinds table shipped, with the made-up kind's entry.
fn kinds_table() -> String {
    let mut table: Value = serde_json::from_str(EMBEDDED_KINDS).expect("the kinds table");
    table["kinds"][KIND] = json!({
        "plural": "madeUpThings",
        "aliases": ["thing"],
        "columns": [{"label": "Name", "path": "name"}, {"label": "Colour", "path": "colour"}],
        "facts": [{"label": "Colour", "path": "colour"}],
        "people": [{"title": "Makers", "path": "makers"}]
    });
    table.to_string()
}

/// The specification shipped, with a query of the made-up kind.
fn specification() -> String {
    let mut spec: Value = serde_json::from_str(EMBEDDED_SPEC).expect("the specification");
    let queries = spec["queries"].as_array_mut().expect("queries");
    queries.push(json!({
        "name": "madeUpsByColour", "kind": KIND, "path": "/v1/made-ups/by-colour",
        "description": "Made-up things of one colour.",
        "cli": {"command": "made-ups-by-colour"},
        "params": [{"name": "colour", "type": "string", "required": true,
            "description": "The colour."}],
        "filter": [{"op": "eq", "path": "colour", "param": "colour"}]
    }));
    spec.to_string()
}

fn the_record(queries: &QuerySet) -> Change {
    let record = json!({"$type": KIND, "name": "Teal widget", "colour": "teal",
        "makers": ["did:plc:alice", "did:plc:bob"]});
    let uri = AtUri::new(RECORD).expect("a record's uri");
    let (author, collection, _) = uri.record_parts().expect("a record's uri");
    Change::Upsert(Upsert {
        keys: queries.index_keys(
            &collection,
            uri.as_str(),
            &svc_spec::Json::from_value(&record),
        ),
        search: None,
        uri,
        collection,
        author,
        rev: Tid::from_time(UnixMicros(1_700_000_000_000_000), 0),
        cid: None,
        record_json: record.to_string(),
    })
}

fn config(catalog: Arc<dyn CatalogRead>, queries: QuerySet, kinds: Kinds) -> ServerConfig {
    ServerConfig {
        catalog,
        queries,
        kinds: Arc::new(kinds),
        not_ready: Arc::new(|| None),
        ready_notes: Arc::new(Vec::new),
        request_timeout: Duration::from_secs(10),
        limits: RequestLimits {
            max_uri_bytes: 8192,
            max_header_bytes: 16384,
            max_in_flight: 64,
            rate_per_client: None,
            client_prefixes: ClientPrefixes::default(),
            costly_builds: 2,
            costly_builds_per_client: 1,
        },
        trusted_proxies: Vec::new(),
        admin_apart: false,
        cache_bytes: 1 << 20,
        version: "test".into(),
        api: true,
        max_subscribers: 10,
        max_subscribers_per_client: 10,
        replay_bytes_per_second: 0,
        admin: None,
    }
}

/// One GET over HTTP/1.0 (the answer ends with the connection): its status and body.
fn get(address: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: test\r\n\r\n").expect("ask");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("the answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
    (status.expect("a status"), body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_added_by_its_lexicon_and_one_table_entry_shows_everywhere() {
    let lexicons = lexicons();
    let collections: Vec<String> = lexicons.record_collections().map(str::to_string).collect();
    let kinds = Kinds::load(&kinds_table(), &collections).expect("the kinds");
    let queries = QuerySet::load(&specification()).expect("the specification");
    kinds
        .check_queries(&queries)
        .expect("the lists name queries");

    let dir = tempfile::tempdir().expect("a directory");
    let catalog = Arc::new(
        SqliteCatalog::open(&dir.path().join("catalog.db"), queries.indexes().clone(), 2)
            .expect("a catalog"),
    );
    catalog
        .apply(vec![the_record(&queries)], None)
        .await
        .expect("the record stored");
    let router = svc_server::router(
        config(catalog, queries, kinds),
        prometheus_client::registry::Registry::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("an address");
    let limits = ConnectionLimits {
        head_timeout: Duration::from_secs(10),
        max_connections: 64,
        write_timeout: Duration::from_secs(10),
        max_head_bytes: 16384,
    };
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let server = svc_server::serve(listener, router, limits, stopped, Duration::from_secs(1))
        .expect("the server");
    tokio::spawn(server);

    let answers = tokio::task::spawn_blocking(move || {
        [
            "/v1/stats",
            "/v1/made-ups/by-colour?colour=teal",
            "/explore/madeUpsByColour?colour=teal",
            "/at/did:plc:maker/dev.svc.madeUp/3kaaaaaaaaa22",
            "/",
        ]
        .map(|path| get(address, path))
    })
    .await
    .expect("the answers");
    let [stats, list, table, page, front] = answers;

    let stats: Value = serde_json::from_str(&stats.1).expect("stats JSON");
    assert_eq!(
        (stats["madeUpThings"].as_u64(), stats["total"].as_u64()),
        (Some(1), Some(1))
    );
    let list: Value = serde_json::from_str(&list.1).expect("list JSON");
    assert_eq!(list["items"][0]["uri"], RECORD, "{list}");

    assert_eq!(table.0, 200, "{}", table.1);
    for header in ["data-path=\"name\">Name<", "data-path=\"colour\">Colour<"] {
        assert!(table.1.contains(header), "the column {header}: {}", table.1);
    }
    assert!(table.1.contains("Teal widget"), "{}", table.1);

    assert_eq!(page.0, 200, "{}", page.1);
    assert!(page.1.contains("Teal widget"), "{}", page.1);
    assert!(page.1.contains("Colour"), "the fact: {}", page.1);
    assert!(page.1.contains("Makers"), "the people: {}", page.1);
    assert!(page.1.contains("href=\"/at/did:plc:alice\""), "{}", page.1);

    assert!(front.1.contains(KIND), "{}", front.1);
}
