//! The operator's takedowns, on every backend: a record or a whole account leaves answers,
//! counts, reads and the change stream, stays down through new revisions, new records, the
//! source's account events and a reopening, and comes back exactly when lifted.

use super::suite::uris;
use super::{Fresh, at, did, tid, upsert};
use crate::{AccountStatus, StreamOp, Subject};
use serde_json::json;

const A1: &str = "at://did:plc:a/dev.svc.bounty/1";
const A2: &str = "at://did:plc:a/dev.svc.bounty/2";
const A3: &str = "at://did:plc:a/dev.svc.bounty/3";
const B1: &str = "at://did:plc:b/dev.svc.bounty/1";

async fn apply(fresh: &Fresh, uri: &str, rev: &str) {
    let change = upsert(uri, rev, json!({"requester": "did:plc:r"}));
    fresh
        .catalog
        .apply(vec![change], None)
        .await
        .expect("apply");
}

/// The uris the requester's bounties answer, and the bounties counted.
async fn seen(fresh: &Fresh) -> (Vec<String>, u64) {
    let listed = uris(fresh, "bountiesByRequester", &[Some("did:plc:r")]).await;
    let counts = fresh.catalog.kind_counts().await.expect("counts");
    (listed, counts["dev.svc.bounty"])
}

fn expect(listed: &[&str]) -> (Vec<String>, u64) {
    let listed: Vec<String> = listed.iter().map(|uri| uri.to_string()).collect();
    let count = listed.len() as u64;
    (listed, count)
}

fn record(uri: &str) -> Subject {
    Subject::Record(at(uri))
}

fn account(text: &str) -> Subject {
    Subject::Account(did(text))
}

pub async fn a_record_taken_down_leaves_every_answer_until_lifted(fresh: Fresh) {
    for (uri, rev) in [(A1, "3a"), (A2, "3a"), (B1, "3a")] {
        apply(&fresh, uri, rev).await;
    }
    let last = fresh.catalog.change_bounds().await.expect("bounds").newest;
    let reference = Some("ticket 1".to_string());
    let was = fresh.catalog.take_down(record(A1), reference.clone()).await;
    assert!(!was.expect("take down"));
    assert_eq!(seen(&fresh).await, expect(&[A2, B1]));
    assert!(fresh.catalog.get(at(A1)).await.expect("get").is_none());
    let held = vec![A1.to_string(), A2.to_string()];
    assert_eq!(fresh.catalog.held(held).await.expect("held"), vec![A2]);
    let status = fresh.catalog.takedown(A1.into()).await.expect("status");
    assert_eq!(
        status.in_force().map(|t| t.reference.clone()),
        Some(reference)
    );
    let left = fresh
        .catalog
        .changes_after(last, 10)
        .await
        .expect("changes");
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(
        (left[0].uri.as_str(), left[0].op(None)),
        (A1, Some(StreamOp::Leave))
    );

    // A new revision of it is stored out of sight.
    apply(&fresh, A1, "3b").await;
    assert_eq!(seen(&fresh).await, expect(&[A2, B1]));

    let was = fresh.catalog.lift_takedown(record(A1)).await;
    assert!(was.expect("lift"));
    assert_eq!(seen(&fresh).await, expect(&[A1, A2, B1]));
    let item = fresh.catalog.get(at(A1)).await.expect("get").expect("held");
    assert_eq!(item.rev, tid("3b").as_str(), "the newest revision");
    assert!(
        fresh
            .catalog
            .takedown(A1.into())
            .await
            .expect("status")
            .in_force()
            .is_none()
    );
}

pub async fn an_account_taken_down_stays_down_through_its_host_and_a_reopening(fresh: Fresh) {
    for (uri, rev) in [(A1, "3a"), (A2, "3a"), (B1, "3a")] {
        apply(&fresh, uri, rev).await;
    }
    fresh
        .catalog
        .take_down(record(A1), None)
        .await
        .expect("record");
    let last = fresh.catalog.change_bounds().await.expect("bounds").newest;
    fresh
        .catalog
        .take_down(account("did:plc:a"), None)
        .await
        .expect("account");
    assert_eq!(seen(&fresh).await, expect(&[B1]));
    let left = fresh
        .catalog
        .changes_after(last, 10)
        .await
        .expect("changes");
    let left: Vec<_> = left.iter().map(|c| (c.uri.as_str(), c.op(None))).collect();
    assert_eq!(left, [(A2, Some(StreamOp::Leave))], "A1 was down already");
    // A record it publishes later, and its host calling it active, change nothing.
    apply(&fresh, A3, "3a").await;
    let active = fresh
        .catalog
        .set_account(did("did:plc:a"), AccountStatus::Active);
    active.await.expect("active");
    assert_eq!(seen(&fresh).await, expect(&[B1]));

    let queries = fresh.queries.clone();
    let fresh = fresh.reopen(queries).await;
    assert_eq!(seen(&fresh).await, expect(&[B1]), "after a reopening");

    // Lifted, the account's records come back; the record taken down on its own stays down.
    let was = fresh.catalog.lift_takedown(account("did:plc:a")).await;
    assert!(was.expect("lift"));
    assert_eq!(seen(&fresh).await, expect(&[A2, A3, B1]));
    // An account inactive at its host stays out of sight when the takedown is lifted.
    fresh
        .catalog
        .take_down(account("did:plc:a"), None)
        .await
        .expect("again");
    let inactive = AccountStatus::Inactive("deactivated".into());
    let hidden = fresh.catalog.set_account(did("did:plc:a"), inactive);
    hidden.await.expect("inactive");
    fresh
        .catalog
        .lift_takedown(account("did:plc:a"))
        .await
        .expect("lift");
    assert_eq!(seen(&fresh).await, expect(&[B1]));
    let active = fresh
        .catalog
        .set_account(did("did:plc:a"), AccountStatus::Active);
    active.await.expect("active");
    assert_eq!(seen(&fresh).await, expect(&[A2, A3, B1]));
}
