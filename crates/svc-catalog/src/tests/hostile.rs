//! Values a hostile author can publish, and refusals of the store: every engine stores,
//! indexes and answers them alike, and a change the store refuses is skipped without holding
//! back the changes queued with it.

use super::{Fresh, at, upsert};
use crate::{Catalog, Change, CursorPosition, Refusal};
use serde_json::json;

/// The longest DID the grammar allows is 2048 characters; this one, with a collection and
/// record key, makes a record uri of 2048 bytes, the longest a record may have.
fn long_did(length: usize) -> String {
    format!("did:plc:{}", "z".repeat(length - "did:plc:".len()))
}

/// An at-uri of about `length` characters: a schema's uri in another's record.
fn long_ref(length: usize) -> String {
    let did = long_did(2048);
    let prefix = format!("at://{did}/dev.panproto.schema.schema/");
    format!(
        "{prefix}{}",
        "k".repeat(length.saturating_sub(prefix.len()).min(512))
    )
}

/// The uris a query finds for these values, every one present.
async fn found(fresh: &Fresh, query: &str, args: &[&str]) -> Vec<String> {
    let args: Vec<Option<&str>> = args.iter().map(|a| Some(*a)).collect();
    super::suite::uris(fresh, query, &args).await
}

/// Records holding a NUL, every plane of Unicode, right-to-left text, the longest at-uris and
/// DIDs alone and combined in one key.
fn hostile_records() -> Vec<(String, Change)> {
    let (source, target) = (long_ref(2570), format!("{}x", long_ref(2570)));
    let requester = long_did(2048);
    let names = [
        "poison\u{0}pill".to_string(),
        "\u{202e}txet tfel-ot-thgir \u{1F600}\u{10FFFF}\u{FEFF}".to_string(),
        "n".repeat(10_000),
    ];
    let mut records = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let uri = format!("at://did:plc:a/dev.svc.vocab/{i}");
        let record = json!({"name": name, "world": "open"});
        records.push((uri.clone(), upsert(&uri, "3kaaaaaaaaaa2", record)));
    }
    let bounty = json!({
        "requester": requester,
        "wants": {"$type": "dev.svc.bounty#wantLens", "source": {"uri": source}, "target": {"uri": target}},
    });
    let uri = format!(
        "at://{}/dev.svc.bounty/{}",
        long_did(2048 - "at:///dev.svc.bounty/1".len()),
        1
    );
    assert_eq!(uri.len(), 2048);
    records.push((uri.clone(), upsert(&uri, "3kaaaaaaaaaa2", bounty)));
    records
}

/// Each hostile record is found under its own values, and nowhere else.
async fn hostile_records_are_found(catalog: &dyn Catalog, fresh: &Fresh) {
    let records = hostile_records();
    for (uri, change) in &records[..3] {
        let Change::Upsert(upsert) = change else {
            unreachable!("records are upserts")
        };
        let record: serde_json::Value = serde_json::from_str(&upsert.record_json).expect("json");
        let name = record["name"].as_str().expect("a name");
        assert_eq!(
            found(fresh, "vocabulariesByName", &[name]).await,
            vec![uri.clone()]
        );
        let item = catalog.get(at(uri)).await.expect("get").expect("held");
        assert_eq!(item.record_json, upsert.record_json);
    }
    assert!(
        found(fresh, "vocabulariesByName", &["poison"])
            .await
            .is_empty()
    );
    let bounty = &records[3].0;
    let (source, target) = (long_ref(2570), format!("{}x", long_ref(2570)));
    assert_eq!(
        found(fresh, "bountiesForWantLens", &[&source, &target]).await,
        vec![bounty.clone()]
    );
    assert!(
        found(fresh, "bountiesForWantLens", &[&target, &source])
            .await
            .is_empty()
    );
    assert_eq!(
        found(fresh, "bountiesByRequester", &[&long_did(2048)]).await,
        vec![bounty.clone()]
    );
    assert_eq!(
        catalog.kind_counts().await.expect("counts")["dev.svc.vocab"],
        3
    );
}

pub async fn hostile_values_are_stored_and_found(fresh: Fresh) {
    let records = hostile_records();
    let report = fresh
        .catalog
        .apply(records.iter().map(|(_, c)| c.clone()).collect(), None)
        .await
        .expect("apply");
    assert_eq!((report.applied, report.refused_total()), (4, 0));
    hostile_records_are_found(fresh.catalog.as_ref(), &fresh).await;
}

pub async fn hostile_values_are_loaded_in_bulk_and_found(fresh: Fresh) {
    let records = hostile_records();
    assert!(fresh.catalog.begin_bulk().await.expect("begin"));
    fresh
        .catalog
        .apply(records.iter().map(|(_, c)| c.clone()).collect(), None)
        .await
        .expect("stage");
    let report = fresh.catalog.finish_bulk(None).await.expect("settle");
    assert_eq!(report.applied, 4);
    hostile_records_are_found(fresh.catalog.as_ref(), &fresh).await;
}

/// The store refuses, from now on, every record whose text holds `poison`.
async fn refuse_poison(fresh: &Fresh) {
    crate::testing::refuse_records_holding(&fresh.location, "poison").await;
}

fn vocab(uri: &str, rev: &str, name: &str) -> Change {
    upsert(uri, rev, json!({"name": name, "world": "open"}))
}

pub async fn a_refused_change_is_skipped_and_its_neighbours_applied(fresh: Fresh) {
    let catalog = fresh.catalog.as_ref();
    refuse_poison(&fresh).await;
    let uris: Vec<String> = (0..5)
        .map(|i| format!("at://did:plc:a/dev.svc.vocab/{i}"))
        .collect();
    let cursor = CursorPosition {
        source: "test".into(),
        endpoint: "wss://example.test".into(),
        cursor: "42".into(),
        event_time: None,
    };
    // Two batches queued together share a commit: the refusal in the first holds back
    // neither its neighbours nor the second batch, nor its cursor.
    let first = catalog.apply(
        vec![
            vocab(&uris[0], "3kaaaaaaaaaa2", "kept"),
            vocab(&uris[1], "3kaaaaaaaaaa2", "poison"),
            vocab(&uris[2], "3kaaaaaaaaaa2", "kept"),
        ],
        None,
    );
    let second = catalog.apply(
        vec![
            vocab(&uris[3], "3kaaaaaaaaaa2", "kept"),
            vocab(&uris[4], "3kaaaaaaaaaa2", "more poison"),
        ],
        Some(cursor.clone()),
    );
    let (first, second) = tokio::join!(first, second);
    let (first, second) = (first.expect("first batch"), second.expect("second batch"));
    assert_eq!((first.applied, first.refused(Refusal::Constraint)), (2, 1));
    assert_eq!(
        (second.applied, second.refused(Refusal::Constraint)),
        (1, 1)
    );
    assert_eq!(
        found(&fresh, "vocabulariesByName", &["kept"]).await,
        vec![uris[0].clone(), uris[2].clone(), uris[3].clone()]
    );
    assert!(catalog.get(at(&uris[1])).await.expect("get").is_none());
    let stored = catalog.cursor("test".into()).await.expect("cursor");
    assert_eq!(stored.map(|c| c.cursor), Some("42".to_string()));
    assert_eq!(
        catalog.kind_counts().await.expect("counts")["dev.svc.vocab"],
        3
    );
    // A refused update leaves the version before it; the writer goes on.
    let report = catalog
        .apply(vec![vocab(&uris[0], "3kaaaaaaaaaa3", "poison")], None)
        .await
        .expect("apply");
    assert_eq!(report.refused_total(), 1);
    let report = catalog
        .apply(vec![vocab(&uris[1], "3kaaaaaaaaaa3", "late")], None)
        .await
        .expect("apply");
    assert_eq!(report.applied, 1);
    assert_eq!(
        found(&fresh, "vocabulariesByName", &["kept"]).await,
        vec![uris[0].clone(), uris[2].clone(), uris[3].clone()]
    );
    assert_eq!(
        found(&fresh, "vocabulariesByName", &["late"]).await,
        vec![uris[1].clone()]
    );
}

pub async fn a_refused_change_in_a_bulk_load_is_skipped(fresh: Fresh) {
    let catalog = fresh.catalog.as_ref();
    refuse_poison(&fresh).await;
    assert!(catalog.begin_bulk().await.expect("begin"));
    let report = catalog
        .apply(
            (0..9)
                .map(|i| {
                    let name = if i == 4 { "poison" } else { "kept" };
                    vocab(
                        &format!("at://did:plc:a/dev.svc.vocab/{i}"),
                        "3kaaaaaaaaaa2",
                        name,
                    )
                })
                .collect(),
            None,
        )
        .await
        .expect("stage");
    assert_eq!(report.refused(Refusal::Constraint), 1);
    let report = catalog.finish_bulk(None).await.expect("settle");
    assert_eq!(report.applied, 8);
    assert_eq!(
        found(&fresh, "vocabulariesByName", &["kept"]).await.len(),
        8
    );
}
