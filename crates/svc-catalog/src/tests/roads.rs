//! What the map and the charts read, on every backend: the counts of an index's keys under a
//! prefix (the roads from or into a schema, grouped, following every write and takedown), and
//! the catalog's activity by minute.

use super::{Fresh, at, delete, upsert};
use crate::{CursorPosition, Subject};
use serde_json::{Value, json};
use svc_spec::QueryId;
use svc_spec::roads::{ROAD_INDEXES, Road, RoadKind};
use svc_syntax::{UnixMicros, UnixMillis};

const S: &str = "at://did:plc:s/dev.panproto.schema.schema/1";
const T: &str = "at://did:plc:s/dev.panproto.schema.schema/2";
const LENS: &str = "at://did:plc:l/dev.panproto.schema.lens/1";

fn encounter(source: &str, target: &str) -> Value {
    json!({"lens": {"uri": LENS}, "sourceSchema": {"uri": source},
        "targetSchema": {"uri": target}, "use": {"action": "read"}, "kind": "curated",
        "visibility": "public-detailed", "occurredAt": "2026-11-01T12:00:00Z"})
}

fn wanted(status: &str) -> Value {
    json!({"requester": "did:plc:r", "status": status, "occurredAt": "2026-11-01T12:00:00Z",
        "wants": {"$type": "dev.svc.bounty#wantLens", "source": {"uri": T},
            "target": {"uri": S}}})
}

/// Every road at `schema`, both ways, as the map reads them.
async fn roads_at(fresh: &Fresh, schema: &str) -> Vec<Road> {
    let mut roads = Vec::new();
    for index in ROAD_INDEXES {
        let found = fresh
            .catalog
            .keys_under(QueryId::new(index.name), vec![index.prefix(schema)], 100)
            .await
            .expect("keys under a prefix");
        for (key, n) in found.into_iter().flatten() {
            roads.push(index.road(&key, n).expect("a readable road"));
        }
    }
    roads.sort();
    roads
}

fn road(source: &str, target: &str, lens: Option<&str>, records: u64) -> Road {
    Road {
        source: source.into(),
        target: target.into(),
        kind: match lens {
            Some(_) => RoadKind::Lens,
            None => RoadKind::Wanted,
        },
        lens: lens.map(str::to_string),
        class: None,
        records,
    }
}

pub(super) async fn roads_are_the_records_counts_grouped_and_follow_writes(fresh: Fresh) {
    let a = "at://did:plc:a/dev.svc.encounter/1";
    let b = "at://did:plc:b/dev.svc.encounter/1";
    let bounty = "at://did:plc:a/dev.svc.bounty/1";
    let changes = vec![
        upsert(a, "3a", encounter(S, T)),
        upsert(b, "3a", encounter(S, T)),
        upsert(bounty, "3a", wanted("open")),
    ];
    fresh.catalog.apply(changes, None).await.expect("apply");
    let lens = road(S, T, Some(LENS), 2);
    let want = road(T, S, None, 1);
    // Each road is found from both its ends.
    assert_eq!(roads_at(&fresh, S).await, expected_at(&[&lens, &want], S));
    // Several prefixes in one read, each answered as if read alone, in the order asked.
    let index = ROAD_INDEXES
        .iter()
        .find(|index| index.kind == RoadKind::Lens && index.keyed_by_source)
        .expect("the used lenses' roads from their sources");
    let query = QueryId::new(index.name);
    let prefixes = vec![
        index.prefix(S),
        index.prefix("at://none/x/1"),
        index.prefix(S),
    ];
    let together = fresh
        .catalog
        .keys_under(query.clone(), prefixes.clone(), 100)
        .await
        .expect("keys under prefixes");
    let mut alone = Vec::new();
    for prefix in prefixes {
        let mut read = fresh
            .catalog
            .keys_under(query.clone(), vec![prefix], 100)
            .await
            .expect("keys under a prefix");
        alone.push(read.pop().unwrap_or_default());
    }
    assert_eq!(together, alone);
    assert_eq!(
        (together[0].len(), together[1].len(), together[2].len()),
        (1, 0, 1)
    );
    fresh
        .catalog
        .apply(
            vec![
                upsert(b, "3b", encounter(T, S)),
                upsert(bounty, "3b", wanted("fulfilled")),
            ],
            None,
        )
        .await
        .expect("apply");
    let moved = road(T, S, Some(LENS), 1);
    let one = road(S, T, Some(LENS), 1);
    assert_eq!(roads_at(&fresh, S).await, expected_at(&[&one, &moved], S));
    fresh
        .catalog
        .take_down(Subject::Record(at(a)), None)
        .await
        .expect("take down");
    assert_eq!(roads_at(&fresh, S).await, expected_at(&[&moved], S));
    fresh
        .catalog
        .apply(vec![delete(b, "3c")], None)
        .await
        .expect("delete");
    assert_eq!(roads_at(&fresh, S).await, vec![]);
}

fn sorted(mut roads: Vec<Road>) -> Vec<Road> {
    roads.sort();
    roads
}

/// The roads at `schema` as its indexes list them: each once from its source's index and
/// once from its target's.
fn expected_at(roads: &[&Road], schema: &str) -> Vec<Road> {
    let mut found = Vec::new();
    for road in roads {
        if road.source == schema {
            found.push((*road).clone());
        }
        if road.target == schema {
            found.push((*road).clone());
        }
    }
    sorted(found)
}

pub(super) async fn activity_counts_changes_and_sources_by_minute(fresh: Fresh) {
    let before = UnixMillis::now();
    let cursor = |n: i64| CursorPosition {
        source: "firehose".into(),
        endpoint: "wss://relay.example".into(),
        cursor: n.to_string(),
        event_time: Some(UnixMicros(1_000_000 * n)),
    };
    let a = "at://did:plc:a/dev.svc.encounter/1";
    let b = "at://did:plc:a/dev.svc.encounter/2";
    fresh
        .catalog
        .apply(vec![upsert(a, "3a", encounter(S, T))], Some(cursor(7)))
        .await
        .expect("apply");
    fresh
        .catalog
        .apply(
            vec![upsert(b, "3a", encounter(S, T)), delete(a, "3b")],
            Some(cursor(9)),
        )
        .await
        .expect("apply");
    let activity = fresh.catalog.activity(before).await.expect("activity");
    let changes: u64 = activity.changes.iter().map(|(_, n)| n).sum();
    assert_eq!(changes, 3, "{activity:?}");
    let newest = activity
        .sources
        .iter()
        .filter(|minute| minute.source == "firehose")
        .map(|minute| minute.newest_event)
        .max();
    assert_eq!(newest, Some(UnixMicros(9_000_000)));
    let later = UnixMillis(before.0 + 3_600_000);
    let since_later = fresh.catalog.activity(later).await.expect("activity");
    assert!(since_later.changes.is_empty());
    assert_eq!(
        since_later.sources.last().map(|minute| minute.newest_event),
        Some(UnixMicros(9_000_000)),
        "where a source stood before the window is kept"
    );
}
