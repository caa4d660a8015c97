//! Property: for random catalogs of lens records, encounters, bounties and verifications,
//! built by upserts and deletes, the map of the whole catalog draws exactly the roads its
//! records state (each lens record from its source to its target; each encounter with its lens
//! and both schemas, one road with the lens's own record when they agree; each open bounty
//! wanting a lens), each with the
//! number of records stating it and the verdict the lens's verifications give; and every
//! neighbourhood holds exactly those roads among its schemas.

use super::graph::{Ask, Findings, Verdict, read};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use svc_catalog::sqlite::SqliteCatalog;
use svc_catalog::{CatalogRead, CatalogWrite, Change, Upsert};
use svc_spec::QuerySet;
use svc_syntax::{AtUri, Tid, UnixMicros};

const SCHEMAS: [&str; 5] = [
    "at://did:plc:s/dev.panproto.schema.schema/a",
    "at://did:plc:s/dev.panproto.schema.schema/b",
    "at://did:plc:t/dev.panproto.schema.schema/c",
    "at://did:plc:t/dev.panproto.schema.schema/d",
    "at://did:plc:u/dev.panproto.schema.schema/e",
];
const LENSES: [&str; 3] = [
    "at://did:plc:l/dev.panproto.schema.lens/1",
    "at://did:plc:l/dev.panproto.schema.lens/2",
    "at://did:plc:m/dev.panproto.schema.lens/3",
];
const STATUSES: [Option<&str>; 5] = [
    None,
    Some("open"),
    Some("claimed"),
    Some("fulfilled"),
    Some("withdrawn"),
];
const RESULTS: [&str; 3] = ["holds", "falsified", "inconclusive"];
/// Two verification kinds and the property each proves.
const PROVES: [(&str, &str); 2] = [
    ("roundtrip-test", "dev.svc.defs#lpRoundtrip"),
    ("property-test", "dev.svc.defs#lpGenerator"),
];

/// One write: a record at one of a few uris of its kind (so later writes replace earlier
/// ones), or its deletion.
#[derive(Debug, Clone)]
enum Write {
    Encounter {
        at: u8,
        lens: u8,
        source: u8,
        target: Option<u8>,
    },
    Bounty {
        at: u8,
        source: u8,
        target: u8,
        status: u8,
        wants_lens: bool,
    },
    Verification {
        at: u8,
        lens: u8,
        kind: u8,
        result: u8,
    },
    /// A lens record at one of [`LENSES`].
    Lens {
        at: u8,
        source: u8,
        target: u8,
    },
    Delete {
        kind: u8,
        at: u8,
    },
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        (
            0..6u8,
            0..3u8,
            0..5u8,
            proptest::option::weighted(0.85, 0..5u8)
        )
            .prop_map(|(at, lens, source, target)| Write::Encounter {
                at,
                lens,
                source,
                target
            }),
        (
            0..5u8,
            0..5u8,
            0..5u8,
            0..5u8,
            proptest::bool::weighted(0.8)
        )
            .prop_map(|(at, source, target, status, wants_lens)| Write::Bounty {
                at,
                source,
                target,
                status,
                wants_lens
            }),
        (0..5u8, 0..3u8, 0..2u8, 0..3u8).prop_map(|(at, lens, kind, result)| {
            Write::Verification {
                at,
                lens,
                kind,
                result,
            }
        }),
        (0..3u8, 0..5u8, 0..5u8).prop_map(|(at, source, target)| Write::Lens {
            at,
            source,
            target
        }),
        (0..4u8, 0..6u8).prop_map(|(kind, at)| Write::Delete { kind, at }),
    ]
}

const KINDS: [&str; 4] = [
    "dev.svc.encounter",
    "dev.svc.bounty",
    "dev.svc.verification",
    "dev.panproto.schema.lens",
];

/// The uri of the `at`th record of a kind; a lens record is at one of the lenses the other
/// records name.
fn uri(kind: usize, at: u8) -> String {
    match KINDS[kind] {
        "dev.panproto.schema.lens" => LENSES[at as usize % LENSES.len()].to_string(),
        kind => format!("at://did:plc:w{at}/{kind}/r{at}"),
    }
}

/// The write's uri and its record (none for a deletion).
fn record(write: &Write) -> (String, Option<Value>) {
    let time = "2026-11-01T12:00:00Z";
    match *write {
        Write::Encounter {
            at,
            lens,
            source,
            target,
        } => {
            let mut record = json!({"lens": {"uri": LENSES[lens as usize]},
                "sourceSchema": {"uri": SCHEMAS[source as usize]}, "use": {"action": "read"},
                "kind": "curated", "visibility": "public-detailed", "occurredAt": time});
            if let Some(target) = target {
                record["targetSchema"] = json!({"uri": SCHEMAS[target as usize]});
            }
            (uri(0, at), Some(record))
        }
        Write::Bounty {
            at,
            source,
            target,
            status,
            wants_lens,
        } => {
            let wants = match wants_lens {
                true => json!({"$type": "dev.svc.bounty#wantLens",
                    "source": {"uri": SCHEMAS[source as usize]},
                    "target": {"uri": SCHEMAS[target as usize]}}),
                false => json!({"$type": "dev.svc.bounty#wantVerification",
                    "lens": {"uri": LENSES[0]}, "kind": "roundtrip-test"}),
            };
            let mut record = json!({"requester": "did:plc:r", "wants": wants, "occurredAt": time});
            if let Some(status) = STATUSES[status as usize] {
                record["status"] = json!(status);
            }
            (uri(1, at), Some(record))
        }
        Write::Verification {
            at,
            lens,
            kind,
            result,
        } => {
            let (kind, property) = PROVES[kind as usize];
            let record = json!({"lens": {"uri": LENSES[lens as usize]}, "kind": kind,
                "verifier": "did:plc:v", "tool": {"name": "t", "version": "1"},
                "property": {"$type": property, "domain": "d"},
                "result": RESULTS[result as usize], "occurredAt": time});
            (uri(2, at), Some(record))
        }
        Write::Lens { at, source, target } => {
            let record = json!({"sourceSchema": SCHEMAS[source as usize],
                "targetSchema": SCHEMAS[target as usize], "roundTripClass": "iso",
                "objectHash": "00", "createdAt": time});
            (uri(3, at), Some(record))
        }
        Write::Delete { kind, at } => (uri(kind as usize, at), None),
    }
}

fn change(queries: &QuerySet, uri: &str, rev: Tid, record: Option<Value>) -> Change {
    let uri = AtUri::new(uri).expect("a record's uri");
    let (author, collection, _) = uri.record_parts().expect("a record's uri");
    let Some(mut record) = record else {
        return Change::Delete {
            uri,
            collection,
            rev,
        };
    };
    record["$type"] = json!(collection.as_str());
    let json = svc_spec::Json::from_value(&record);
    Change::Upsert(Upsert {
        keys: queries.index_keys(&collection, uri.as_str(), &json),
        search: queries
            .indexes()
            .search_text(&collection, uri.as_str(), &json),
        uri,
        collection,
        author,
        rev,
        cid: None,
        record_json: record.to_string(),
    })
}

/// A road as compared: (source, target, lens), records, verdict and findings.
type Drawn = BTreeMap<(String, String, Option<String>), (u64, Verdict, Findings)>;

/// The kinds (property variants) in which each lens holds, and in which it is falsified.
fn kinds_found(
    records: &BTreeMap<String, Value>,
) -> BTreeMap<String, (BTreeSet<&str>, BTreeSet<&str>)> {
    let mut results: BTreeMap<String, (BTreeSet<&str>, BTreeSet<&str>)> = BTreeMap::new();
    for record in records
        .values()
        .filter(|r| r["$type"] == "dev.svc.verification")
    {
        let lens = record["lens"]["uri"].as_str().unwrap_or_default();
        let kind = record["property"]["$type"].as_str().unwrap_or_default();
        let tally = results.entry(lens.to_string()).or_default();
        match record["result"].as_str() {
            Some("holds") => tally.0.insert(kind),
            Some("falsified") => tally.1.insert(kind),
            _ => false,
        };
    }
    results
}

/// The roads the final records state, evaluated directly.
fn stated(records: &BTreeMap<String, Value>) -> Drawn {
    let text = |v: &Value, path: &[&str]| -> Option<String> {
        let mut at = v;
        for step in path {
            at = at.get(step)?;
        }
        at.as_str().map(str::to_string)
    };
    let results = kinds_found(records);
    let mut drawn = Drawn::new();
    for (uri, record) in records {
        let road = match record["$type"].as_str() {
            Some("dev.panproto.schema.lens") => (
                text(record, &["sourceSchema"]),
                text(record, &["targetSchema"]),
                Some(uri.clone()),
            ),
            Some("dev.svc.encounter") => (
                text(record, &["sourceSchema", "uri"]),
                text(record, &["targetSchema", "uri"]),
                text(record, &["lens", "uri"]),
            ),
            Some("dev.svc.bounty")
                if record["wants"]["$type"] == "dev.svc.bounty#wantLens"
                    && matches!(record["status"].as_str(), None | Some("open" | "claimed")) =>
            {
                (
                    text(record, &["wants", "source", "uri"]),
                    text(record, &["wants", "target", "uri"]),
                    None,
                )
            }
            _ => continue,
        };
        let (Some(source), Some(target)) = (road.0, road.1) else {
            continue;
        };
        if record["$type"] == "dev.svc.encounter" && road.2.is_none() {
            continue;
        }
        let findings = road
            .2
            .as_ref()
            .and_then(|lens| results.get(lens))
            .map(|(holds, falsified)| Findings {
                holds: holds.len() as u32,
                falsified: falsified.len() as u32,
            })
            .unwrap_or_default();
        let verdict = match (&road.2, findings.holds, findings.falsified) {
            (None, _, _) => Verdict::Wanted,
            (Some(_), 0, 0) => Verdict::Unverified,
            (Some(_), _, 0) => Verdict::Verified,
            (Some(_), 0, _) => Verdict::Falsified,
            (Some(_), _, _) => Verdict::Mixed,
        };
        drawn
            .entry((source, target, road.2))
            .or_insert((0, verdict, findings))
            .0 += 1;
    }
    drawn
}

async fn drawn(catalog: &dyn CatalogRead, centre: Option<&str>) -> (Drawn, BTreeSet<String>) {
    let ask = Ask {
        centre: centre.map(str::to_string),
        hops: 4,
        nodes: 300,
    };
    let graph = read(catalog, &ask).await.expect("the map's graph");
    let nodes = graph.nodes.iter().map(|n| n.uri.clone()).collect();
    let mut drawn = Drawn::new();
    for edge in graph.edges {
        let road = (
            graph.nodes[edge.source].uri.clone(),
            graph.nodes[edge.target].uri.clone(),
            edge.lens,
        );
        assert!(
            drawn
                .insert(road, (edge.records, edge.verdict, edge.findings))
                .is_none(),
            "a road drawn twice"
        );
    }
    (drawn, nodes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_map_draws_exactly_the_roads_the_records_state(writes in proptest::collection::vec(write(), 1..40)) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let dir = tempfile::tempdir().expect("a directory");
            let queries = QuerySet::embedded();
            let catalog = SqliteCatalog::open(&dir.path().join("c.db"), queries.indexes().clone(), 2)
                .expect("a catalog");
            let mut model: BTreeMap<String, Value> = BTreeMap::new();
            for (n, write) in writes.iter().enumerate() {
                let (uri, record) = record(write);
                let rev = Tid::from_time(UnixMicros(1_700_000_000_000_000 + n as i64), 0);
                let change = change(&queries, &uri, rev, record.clone());
                catalog.apply(vec![change], None).await.expect("apply");
                match record {
                    Some(mut record) => {
                        record["$type"] = json!(uri.split('/').nth(3).unwrap_or_default());
                        model.insert(uri, record);
                    }
                    None => {
                        model.remove(&uri);
                    }
                }
            }
            let expected = stated(&model);
            let (whole, _) = drawn(&catalog, None).await;
            assert_eq!(whole, expected);
            // A neighbourhood: the roads among its schemas, and every road at its centre.
            let (near, nodes) = drawn(&catalog, Some(SCHEMAS[0])).await;
            let among: Drawn = expected
                .iter()
                .filter(|((s, t, _), _)| nodes.contains(s) && nodes.contains(t))
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            assert_eq!(near, among);
            for (source, target, _) in expected.keys() {
                if source == SCHEMAS[0] || target == SCHEMAS[0] {
                    assert!(nodes.contains(source) && nodes.contains(target));
                }
            }
        });
    }
}

/// A schema with more roads than a map reads or draws: the map reads within its bounds,
/// draws the most used roads, and says what it left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowded_schema_is_drawn_within_bounds_and_says_what_it_left() {
    use super::graph::{ROADS_DRAWN_AT_MOST, ROADS_READ_AT_A_SCHEMA};
    let dir = tempfile::tempdir().expect("a directory");
    let queries = QuerySet::embedded();
    let catalog = SqliteCatalog::open(&dir.path().join("c.db"), queries.indexes().clone(), 2)
        .expect("a catalog");
    let centre = SCHEMAS[0];
    let each_way = 1_800;
    let rev = Tid::from_time(UnixMicros(1_700_000_000_000_000), 0);
    let mut changes = Vec::new();
    for (n, other) in SCHEMAS[1..4].iter().enumerate() {
        for (way, (source, target)) in [(centre, *other), (*other, centre)].into_iter().enumerate()
        {
            for i in 0..each_way {
                let name = format!("n{n}w{way}i{i}");
                let record = json!({"lens": {"uri": format!("at://did:plc:l/dev.panproto.schema.lens/{name}")},
                    "sourceSchema": {"uri": source}, "targetSchema": {"uri": target},
                    "use": {"action": "read"}, "kind": "curated",
                    "visibility": "public-detailed", "occurredAt": "2026-11-01T12:00:00Z"});
                let uri = format!("at://did:plc:w/dev.svc.encounter/{name}");
                changes.push(change(&queries, &uri, rev.clone(), Some(record)));
            }
        }
    }
    for batch in changes.chunks(2_700) {
        catalog.apply(batch.to_vec(), None).await.expect("apply");
    }
    let ask = Ask {
        centre: Some(centre.to_string()),
        hops: 1,
        nodes: 300,
    };
    let graph = read(&catalog, &ask).await.expect("the map's graph");
    assert!(
        graph.roads_cut,
        "the centre has more roads than are read at a schema"
    );
    assert_eq!(graph.nodes.len(), 4);
    assert_eq!(graph.edges.len(), ROADS_DRAWN_AT_MOST);
    // Out of the centre, what was read of it; into it, every road of the three.
    let found = ROADS_READ_AT_A_SCHEMA + 3 * each_way;
    assert_eq!(graph.roads_left_out, found - ROADS_DRAWN_AT_MOST);
}
