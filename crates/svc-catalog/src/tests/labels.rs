//! Labelers' labels, on every backend: shown with the records they apply to (a record's own
//! and its account's), the latest statement of each value holding, negations and expiry
//! honoured, the labeler's cursor stored with them; `!takedown` holding its subject down
//! beside the operator's takedown.

use super::suite::{key, page, uris};
use super::{Fresh, at, did, upsert};
use crate::{CursorPosition, Label, LabelBatch, Subject};
use serde_json::{Value, json};
use svc_syntax::{UnixMicros, UnixMillis};

const A1: &str = "at://did:plc:a/dev.svc.bounty/1";
const A2: &str = "at://did:plc:a/dev.svc.bounty/2";
const B1: &str = "at://did:plc:b/dev.svc.bounty/1";
const LABELER: &str = "did:plc:labeler";

async fn bounties(fresh: &Fresh) {
    let changes = [A1, A2, B1]
        .iter()
        .map(|uri| upsert(uri, "3a", json!({"requester": "did:plc:r"})))
        .collect();
    fresh.catalog.apply(changes, None).await.expect("apply");
}

fn label(subject: &str, val: &str, neg: bool, cts_ms: i64) -> Label {
    Label {
        subject: Subject::parse(subject).expect("a subject"),
        val: val.to_string(),
        neg,
        cts: UnixMicros(cts_ms * 1000),
        exp: None,
    }
}

async fn store(fresh: &Fresh, labels: Vec<Label>, seq: u64) -> crate::LabelReport {
    let batch = LabelBatch {
        labeler: did(LABELER),
        labels,
        cursor: CursorPosition {
            source: format!("labeler:{LABELER}"),
            endpoint: "http://labeler.test".into(),
            cursor: seq.to_string(),
            event_time: None,
        },
    };
    fresh.catalog.apply_labels(batch).await.expect("labels")
}

/// Each listed bounty's uri with the values of the labels shown on it.
async fn labelled(fresh: &Fresh) -> Vec<(String, Vec<String>)> {
    let (query, key) = key(fresh, "bountiesByRequester", &[Some("did:plc:r")]);
    let listed = fresh.catalog.list(query, key, page(100, 0)).await;
    let items = listed.expect("list").items;
    items
        .into_iter()
        .map(|item| {
            let labels: Vec<Value> = match item.labels.as_str() {
                "" => Vec::new(),
                text => serde_json::from_str(text).expect("labels are JSON"),
            };
            for label in &labels {
                assert_eq!(label["src"], LABELER, "{label}");
                assert!(label["cts"].as_str().is_some_and(|cts| cts.ends_with('Z')));
            }
            let values = labels
                .iter()
                .map(|l| l["val"].as_str().unwrap_or("").to_string());
            (item.uri, values.collect())
        })
        .collect()
}

fn shown(rows: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    rows.iter()
        .map(|(uri, values)| {
            (
                uri.to_string(),
                values.iter().map(|v| v.to_string()).collect(),
            )
        })
        .collect()
}

pub async fn labels_show_on_what_they_apply_to_until_negated_or_expired(fresh: Fresh) {
    bounties(&fresh).await;
    let report = store(
        &fresh,
        vec![
            label(A1, "spam", false, 1_000),
            label("did:plc:b", "new-account", false, 1_000),
            label("at://did:plc:nobody/dev.svc.bounty/9", "spam", false, 1_000),
        ],
        7,
    )
    .await;
    assert_eq!(report.applied, 3);
    assert_eq!(
        labelled(&fresh).await,
        shown(&[(A1, &["spam"]), (A2, &[]), (B1, &["new-account"])])
    );
    let cursor = fresh.catalog.cursor(format!("labeler:{LABELER}")).await;
    assert_eq!(cursor.expect("cursor").map(|c| c.cursor), Some("7".into()));
    let views = fresh
        .catalog
        .labels(vec![A1.into(), "did:plc:a".into()], 10)
        .await;
    let views = views.expect("labels");
    assert_eq!(views.len(), 1, "{views:?}");
    assert_eq!(
        (views[0].subject.as_str(), views[0].val.as_str()),
        (A1, "spam")
    );

    // A negation older than the label is stale; a newer one takes it off.
    let report = store(&fresh, vec![label(A1, "spam", true, 500)], 8).await;
    assert_eq!((report.applied, report.stale), (0, 1));
    assert_eq!(labelled(&fresh).await[0].1, vec!["spam".to_string()]);
    store(&fresh, vec![label(A1, "spam", true, 2_000)], 9).await;
    assert_eq!(labelled(&fresh).await[0].1, Vec::<String>::new());
    // A label stated again after its negation holds again.
    store(&fresh, vec![label(A1, "spam", false, 3_000)], 10).await;
    assert_eq!(labelled(&fresh).await[0].1, vec!["spam".to_string()]);

    // An expiring label goes when the sweep passes its expiry, not before.
    let expiry = UnixMillis(UnixMillis::now().0 + 3_600_000);
    let mut expiring = label(A2, "hot", false, 3_000);
    expiring.exp = Some(expiry);
    store(&fresh, vec![expiring], 11).await;
    assert_eq!(labelled(&fresh).await[1].1, vec!["hot".to_string()]);
    let swept = fresh.catalog.expire_labels(UnixMillis(expiry.0 - 1)).await;
    assert_eq!(swept.expect("sweep"), 0);
    let swept = fresh.catalog.expire_labels(expiry).await;
    assert_eq!(swept.expect("sweep"), 1);
    assert_eq!(labelled(&fresh).await[1].1, Vec::<String>::new());
}

/// The operator's word is final: lifting a labeler's takedown keeps the subject shown whatever
/// the labeler says after, until the operator takes it down again.
pub async fn the_operator_overrules_a_labeler_s_takedown(fresh: Fresh) {
    bounties(&fresh).await;
    let subject = || Subject::Record(at(A1));
    store(&fresh, vec![label(A1, "!takedown", false, 1_000)], 1).await;
    assert_eq!(listed(&fresh).await, vec![A2, B1]);
    let was = fresh.catalog.lift_takedown(subject()).await;
    assert!(was.expect("lift"), "the labeler held it down");
    assert_eq!(listed(&fresh).await, vec![A1, A2, B1]);
    let standing = fresh.catalog.takedown(A1.into()).await.expect("status");
    assert!(standing.kept_shown && standing.in_force().is_none());
    assert_eq!(
        standing.takedowns[0].source, LABELER,
        "the labeler's word stays on record"
    );
    // The labeler says it again, later: the operator's word stands.
    store(&fresh, vec![label(A1, "!takedown", true, 2_000)], 2).await;
    store(&fresh, vec![label(A1, "!takedown", false, 3_000)], 3).await;
    assert_eq!(listed(&fresh).await, vec![A1, A2, B1]);
    // The operator takes it down, then lifts it again.
    let taken = fresh.catalog.take_down(subject(), None).await;
    assert!(!taken.expect("take down"), "it was shown");
    assert_eq!(listed(&fresh).await, vec![A2, B1]);
    let standing = fresh.catalog.takedown(A1.into()).await.expect("status");
    assert!(!standing.kept_shown);
    assert!(standing.in_force().expect("down").by_operator());
    fresh.catalog.lift_takedown(subject()).await.expect("lift");
    assert_eq!(listed(&fresh).await, vec![A1, A2, B1]);
    // A lift where no labeler holds it leaves no word behind.
    store(&fresh, vec![label(A1, "!takedown", true, 4_000)], 4).await;
    fresh
        .catalog
        .take_down(subject(), None)
        .await
        .expect("take down");
    fresh.catalog.lift_takedown(subject()).await.expect("lift");
    let standing = fresh.catalog.takedown(A1.into()).await.expect("status");
    assert_eq!(standing, Default::default());
}

/// A batch that toggles an account's `!takedown` many times costs what its final state costs:
/// the account's records leave the change stream once, or not at all.
pub async fn a_storm_of_takedown_toggles_costs_one_change(fresh: Fresh) {
    bounties(&fresh).await;
    let newest = || async { fresh.catalog.change_bounds().await.expect("bounds").newest };
    let storm = |last_neg: bool| -> Vec<Label> {
        (0..200)
            .map(|n| {
                label(
                    "did:plc:a",
                    "!takedown",
                    (n % 2 == 1) == last_neg,
                    1_000 + n,
                )
            })
            .collect()
    };
    let before = newest().await;
    store(&fresh, storm(false), 1).await;
    assert_eq!(listed(&fresh).await, vec![B1]);
    let changes = fresh
        .catalog
        .changes_after(before, 100)
        .await
        .expect("changes");
    assert_eq!(
        changes.len(),
        2,
        "each of the account's two records leaves once"
    );
    let before = newest().await;
    let mut back = storm(true);
    back.iter_mut().for_each(|label| label.cts.0 += 10_000_000);
    store(&fresh, back, 2).await;
    assert_eq!(listed(&fresh).await, vec![A1, A2, B1]);
    let changes = fresh
        .catalog
        .changes_after(before, 100)
        .await
        .expect("changes");
    assert_eq!(changes.len(), 2, "and comes back once");
}

/// A labeler no longer followed is forgotten: its takedowns lifted, its labels and cursor
/// gone; the labelers still followed keep theirs.
pub async fn a_labeler_no_longer_followed_stops_applying(fresh: Fresh) {
    bounties(&fresh).await;
    store(&fresh, vec![label(A1, "!takedown", false, 1_000)], 1).await;
    store(&fresh, vec![label(A2, "spam", false, 1_000)], 2).await;
    let other = "did:plc:other";
    let mut theirs = label(B1, "kept", false, 1_000);
    theirs.subject = Subject::parse(B1).expect("a subject");
    let batch = LabelBatch {
        labeler: did(other),
        labels: vec![theirs],
        cursor: CursorPosition {
            source: crate::labeler_cursor_source(&did(other)),
            endpoint: "http://other.test".into(),
            cursor: "7".into(),
            event_time: None,
        },
    };
    fresh.catalog.apply_labels(batch).await.expect("labels");
    assert_eq!(listed(&fresh).await, vec![A2, B1]);

    let gone = fresh.catalog.forget_labelers(vec![did(other)]).await;
    assert_eq!(gone.expect("forget"), vec![LABELER.to_string()]);
    assert_eq!(listed(&fresh).await, vec![A1, A2, B1]);
    let shown = fresh
        .catalog
        .labels(vec![A1.into(), A2.into(), B1.into()], 10);
    let shown: Vec<(String, String)> = (shown.await.expect("labels").into_iter())
        .map(|view| (view.subject, view.src))
        .collect();
    assert_eq!(shown, vec![(B1.to_string(), other.to_string())]);
    let cursor = |labeler: &str| {
        fresh
            .catalog
            .cursor(crate::labeler_cursor_source(&did(labeler)))
    };
    assert!(cursor(LABELER).await.expect("cursor").is_none());
    assert!(cursor(other).await.expect("cursor").is_some());
    let again = fresh.catalog.forget_labelers(vec![did(other)]).await;
    assert!(again.expect("forget").is_empty(), "nothing left of it");
}

/// Search answers show labels: a label on a record that no query files (no key moves) still
/// moves the search clock, on the writer and, through the replication log, on followers.
pub async fn a_label_on_a_record_filed_under_no_key_moves_the_search_clock(fresh: Fresh) {
    // No query lists encounters.
    let keyless = "at://did:plc:a/dev.svc.encounter/keyless";
    let change = upsert(keyless, "3a", json!({"note": "filed under no key"}));
    fresh
        .catalog
        .apply(vec![change], None)
        .await
        .expect("apply");
    let before = fresh.catalog.clock().search_version();
    store(&fresh, vec![label(keyless, "spam", false, 1_000)], 1).await;
    assert!(
        fresh.catalog.clock().search_version() > before,
        "a search showing the record must be read again"
    );
}

async fn listed(fresh: &Fresh) -> Vec<String> {
    uris(fresh, "bountiesByRequester", &[Some("did:plc:r")]).await
}

pub async fn a_takedown_label_holds_its_subject_down_beside_the_operator(fresh: Fresh) {
    bounties(&fresh).await;
    store(&fresh, vec![label(A1, "!takedown", false, 1_000)], 1).await;
    assert_eq!(listed(&fresh).await, vec![A2, B1]);
    assert!(fresh.catalog.get(at(A1)).await.expect("get").is_none());
    // `!takedown` is not shown as a label; the takedown says whose it is.
    let views = fresh.catalog.labels(vec![A1.into()], 10).await;
    assert!(views.expect("labels").is_empty());
    let standing = fresh.catalog.takedown(A1.into()).await.expect("status");
    let takedown = standing.in_force().expect("taken down");
    assert_eq!(takedown.source, LABELER);
    assert!(!takedown.by_operator());

    // The operator takes it down too: the labeler's negation leaves it down.
    let operator = fresh.catalog.take_down(Subject::Record(at(A1)), None).await;
    assert!(operator.expect("take down"), "it was down already");
    store(&fresh, vec![label(A1, "!takedown", true, 2_000)], 2).await;
    assert_eq!(listed(&fresh).await, vec![A2, B1]);
    let lifted = fresh.catalog.lift_takedown(Subject::Record(at(A1))).await;
    assert!(lifted.expect("lift"));
    assert_eq!(listed(&fresh).await, vec![A1, A2, B1]);

    // An account's takedown with an expiry holds until the sweep passes it.
    let expiry = UnixMillis(UnixMillis::now().0 + 3_600_000);
    let mut account = label("did:plc:a", "!takedown", false, 3_000);
    account.exp = Some(expiry);
    store(&fresh, vec![account], 3).await;
    assert_eq!(listed(&fresh).await, vec![B1]);
    let swept = fresh.catalog.expire_labels(expiry).await;
    assert_eq!(swept.expect("sweep"), 1);
    assert_eq!(listed(&fresh).await, vec![A1, A2, B1]);

    // A label already expired when it arrives holds as its negation.
    let mut stale = label(B1, "!takedown", false, 4_000);
    stale.exp = Some(UnixMillis(1));
    let mut shown = label(B1, "old", false, 4_000);
    shown.exp = Some(UnixMillis(1));
    store(&fresh, vec![stale, shown], 4).await;
    assert_eq!(listed(&fresh).await, vec![A1, A2, B1]);
    let views = fresh
        .catalog
        .labels(vec![B1.into()], 10)
        .await
        .expect("labels");
    assert!(views.is_empty(), "{views:?}");
}

pub async fn a_labeler_s_labels_on_subjects_nobody_holds_are_bounded(fresh: Fresh) {
    bounties(&fresh).await;
    let allowance = crate::writer::LABELS_PER_LABELER;
    let nobody = |n: u64| format!("at://did:plc:nobody/dev.svc.bounty/{n}");
    let flood: Vec<Label> = (0..allowance + 2)
        .map(|n| label(&nobody(n), "spam", false, 1_000))
        .collect();
    let report = store(&fresh, flood, 1).await;
    assert_eq!((report.applied, report.over_allowance), (allowance, 2));
    // Past the allowance, labels on what the catalog holds are kept, and stored ones change.
    let held = vec![
        label(A1, "spam", false, 1_000),
        label("did:plc:b", "spam", false, 1_000),
        label(&nobody(0), "spam", true, 2_000),
        label(&nobody(allowance + 5), "spam", false, 1_000),
    ];
    let report = store(&fresh, held, 2).await;
    assert_eq!((report.applied, report.over_allowance), (3, 1));
    let shown = labelled(&fresh).await;
    assert_eq!(shown[0].1, vec!["spam".to_string()], "{shown:?}");
    assert_eq!(shown[2].1, vec!["spam".to_string()], "{shown:?}");

    // A held subject takes a bounded number of one labeler's values.
    let values = crate::writer::VALUES_PER_SUBJECT;
    let many: Vec<Label> = (0..values + 3)
        .map(|n| label(A2, &format!("value-{n}"), false, 1_000))
        .collect();
    let report = store(&fresh, many, 3).await;
    assert_eq!((report.applied, report.over_allowance), (values, 3));

    // Negations are swept once kept long enough, and what they held is given back.
    let taken_back: Vec<Label> = (0..allowance)
        .map(|n| label(&nobody(n), "spam", true, 3_000))
        .collect();
    store(&fresh, taken_back, 4).await;
    let later = UnixMillis(UnixMillis::now().0 + crate::writer::NEGATION_KEPT_MS + 1);
    let mut swept = 0;
    loop {
        let step = fresh.catalog.expire_labels(later).await.expect("sweep");
        if step == 0 {
            break;
        }
        swept += step;
    }
    assert_eq!(swept as u64, allowance, "each negation's row swept");
    let room: Vec<Label> = (0..allowance)
        .map(|n| label(&nobody(100 + n), "spam", false, 5_000))
        .collect();
    let report = store(&fresh, room, 5).await;
    // The rows that stay (two on held subjects, and the values on A2) count as before.
    let staying = 2 + values;
    assert_eq!(
        (report.applied, report.over_allowance),
        (allowance - staying, staying)
    );
}
