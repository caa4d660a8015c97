use super::{Fresh, at, delete, did, tid, upsert};
use crate::{
    AccountStatus, ApplyReport, Change, CursorPosition, ItemRef, Page, PageRequest, PageWriter,
    StreamOp, write_page,
};
use serde_json::json;
use svc_spec::QueryId;
use svc_syntax::AtUri;

/// Writes each item as a line, then the total and `more`.
pub(super) struct Lines(pub Vec<u8>);

impl PageWriter for Lines {
    fn item(&mut self, item: ItemRef<'_>) {
        let item = crate::Item::try_from(item).expect("stored text");
        let line = format!("{} {} {} ", item.uri, item.author, item.rev);
        self.0.extend_from_slice(line.as_bytes());
        self.0.extend_from_slice(item.record_json.as_bytes());
        self.0.push(b'\n');
    }

    fn finish(mut self: Box<Self>, total: u64, more: bool) -> Vec<u8> {
        self.0
            .extend_from_slice(format!("{total} {more}").as_bytes());
        self.0
    }
}

/// The uris [`Lines`] wrote, and whether it was told more follow.
pub(super) fn written_uris(written: &[u8]) -> (Vec<String>, bool) {
    let text = String::from_utf8(written.to_vec()).expect("UTF-8");
    let mut lines: Vec<&str> = text.lines().collect();
    let last = lines.pop().expect("the page's end");
    let uris = lines
        .iter()
        .map(|line| line.split(' ').next().unwrap_or_default().to_string())
        .collect();
    (uris, last.ends_with("true"))
}

/// A page by `list`, checked to be what `write_list` writes for the same request.
async fn listed_and_written(
    fresh: &Fresh,
    query: &QueryId,
    key: &str,
    request: PageRequest,
) -> Page {
    let catalog = &fresh.catalog;
    let page = catalog
        .list(query.clone(), key.to_string(), request.clone())
        .await
        .unwrap();
    let written = catalog
        .write_list(
            query.clone(),
            key.to_string(),
            request.clone(),
            Box::new(Lines(Vec::new())),
        )
        .await
        .unwrap();
    let expected = write_page(&page, Box::new(Lines(Vec::new())));
    assert_eq!(
        String::from_utf8_lossy(&written),
        String::from_utf8_lossy(&expected),
        "{request:?}"
    );
    page
}

pub(super) fn page(limit: u32, offset: u64) -> PageRequest {
    PageRequest {
        limit,
        offset,
        after: None,
    }
}

pub(super) fn key(fresh: &Fresh, query: &str, args: &[Option<&str>]) -> (QueryId, String) {
    let position = fresh.queries.position(query).expect("query");
    let query = &fresh.queries.all()[position];
    (query.id().clone(), query.lookup_key(args))
}

/// Applies changes without a cursor; a storage failure fails the test.
async fn apply(fresh: &Fresh, changes: Vec<Change>) -> ApplyReport {
    fresh.catalog.apply(changes, None).await.unwrap()
}

pub(super) async fn uris(fresh: &Fresh, query: &str, args: &[Option<&str>]) -> Vec<String> {
    let (query, key) = key(fresh, query, args);
    let page = fresh
        .catalog
        .list(query.clone(), key, page(1000, 0))
        .await
        .expect("list");
    assert_eq!(page.total as usize, page.items.len());
    page.items.into_iter().map(|i| i.uri).collect()
}

/// A client of the test database, at a location the test names, its connection driven
/// in the background.
pub(super) async fn connected(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to the test database: {e}"));
    tokio::spawn(connection);
    client
}

pub async fn upsert_list_and_count(fresh: Fresh) {
    let a = "at://did:plc:a/dev.svc.bounty/2";
    let b = "at://did:plc:a/dev.svc.bounty/1";
    let report = apply(
        &fresh,
        vec![
            upsert(a, "3a", json!({"requester": "did:plc:r", "status": "open"})),
            upsert(b, "3a", json!({"requester": "did:plc:r"})),
        ],
    )
    .await;
    assert_eq!(report.applied, 2);
    // Ordered by uri, not by arrival.
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")]).await,
        vec![b, a]
    );
    assert_eq!(uris(&fresh, "openBounties", &[]).await, vec![b, a]);
    assert!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:other")])
            .await
            .is_empty()
    );
    let item = fresh.catalog.get(at(a)).await.unwrap().unwrap();
    assert_eq!(item.author, "did:plc:a");
    assert_eq!(item.rev, tid("3a").as_str());
    let stored: serde_json::Value = serde_json::from_str(&item.record_json).unwrap();
    assert_eq!(stored["$type"], "dev.svc.bounty");
}

pub async fn updates_move_index_keys(fresh: Fresh) {
    let a = "at://did:plc:a/dev.svc.bounty/1";
    apply(
        &fresh,
        vec![upsert(
            a,
            "3a",
            json!({"requester": "did:plc:r", "status": "open"}),
        )],
    )
    .await;
    apply(
        &fresh,
        vec![upsert(
            a,
            "3b",
            json!({"requester": "did:plc:s", "status": "fulfilled"}),
        )],
    )
    .await;
    assert!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")])
            .await
            .is_empty()
    );
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:s")]).await,
        vec![a]
    );
    assert!(uris(&fresh, "openBounties", &[]).await.is_empty());
}

pub async fn stale_revisions_never_roll_back(fresh: Fresh) {
    let a = "at://did:plc:a/dev.svc.bounty/1";
    apply(
        &fresh,
        vec![upsert(a, "3b", json!({"requester": "did:plc:new"}))],
    )
    .await;
    let report = apply(
        &fresh,
        vec![
            upsert(a, "3a", json!({"requester": "did:plc:old"})),
            delete(a, "3a"),
        ],
    )
    .await;
    assert_eq!(report.stale, 2);
    assert_eq!(report.applied, 0);
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:new")]).await,
        vec![a]
    );
    assert!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:old")])
            .await
            .is_empty()
    );
}

pub async fn deletes_leave_tombstones(fresh: Fresh) {
    let a = "at://did:plc:a/dev.svc.bounty/1";
    apply(
        &fresh,
        vec![upsert(a, "3a", json!({"requester": "did:plc:r"}))],
    )
    .await;
    apply(&fresh, vec![delete(a, "3b")]).await;
    assert!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")])
            .await
            .is_empty()
    );
    assert!(fresh.catalog.get(at(a)).await.unwrap().is_none());
    // A late create older than the delete stays deleted; a newer one comes back.
    let report = apply(
        &fresh,
        vec![upsert(a, "3a", json!({"requester": "did:plc:r"}))],
    )
    .await;
    assert_eq!(report.stale, 1);
    assert!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")])
            .await
            .is_empty()
    );
    apply(
        &fresh,
        vec![upsert(a, "3c", json!({"requester": "did:plc:r"}))],
    )
    .await;
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")]).await,
        vec![a]
    );
    // Deleting an absent uri changes nothing visible.
    let absent = "at://did:plc:a/dev.svc.bounty/9";
    let report = apply(&fresh, vec![delete(absent, "3a")]).await;
    assert_eq!(report.applied, 1);
    assert_eq!(
        fresh.catalog.kind_counts().await.unwrap()["dev.svc.bounty"],
        1
    );
}

pub async fn paging_by_offset_and_cursor(fresh: Fresh) {
    let changes = (0..25)
        .map(|i| {
            upsert(
                &format!("at://did:plc:a/dev.svc.bounty/{i:02}"),
                "3a",
                json!({"requester": "did:plc:r"}),
            )
        })
        .collect();
    apply(&fresh, changes).await;
    let (query, key) = key(&fresh, "bountiesByRequester", &[Some("did:plc:r")]);
    let first = fresh
        .catalog
        .list(query.clone(), key.clone(), page(10, 0))
        .await
        .unwrap();
    assert_eq!((first.items.len(), first.total, first.more), (10, 25, true));
    assert_eq!(first.items[0].uri, "at://did:plc:a/dev.svc.bounty/00");
    let last = fresh
        .catalog
        .list(query.clone(), key.clone(), page(10, 20))
        .await
        .unwrap();
    assert_eq!((last.items.len(), last.total, last.more), (5, 25, false));
    let beyond = fresh
        .catalog
        .list(query.clone(), key.clone(), page(10, 25))
        .await
        .unwrap();
    assert_eq!(
        (beyond.items.len(), beyond.total, beyond.more),
        (0, 25, false)
    );
    let mut after = None;
    let mut seen = Vec::new();
    loop {
        let request = PageRequest {
            limit: 7,
            offset: 0,
            after: after.clone(),
        };
        let page = listed_and_written(&fresh, &query, &key, request).await;
        seen.extend(page.items.iter().map(|i| i.uri.clone()));
        if !page.more {
            break;
        }
        after = page.items.last().map(|i| i.uri.clone());
    }
    assert_eq!(seen.len(), 25);
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    // Pages past the middle are read from the end of the key; every offset gives the same
    // slice of the whole order, in order.
    for offset in 0..=27 {
        let page = listed_and_written(&fresh, &query, &key, page(7, offset)).await;
        let from = (offset as usize).min(seen.len());
        let to = (from + 7).min(seen.len());
        let got: Vec<&String> = page.items.iter().map(|i| &i.uri).collect();
        let want: Vec<&String> = seen[from..to].iter().collect();
        assert_eq!(got, want, "offset {offset}");
        assert_eq!(
            (page.total, page.more),
            (25, to < seen.len()),
            "offset {offset}"
        );
    }
}

pub async fn cursor_is_stored_with_records(fresh: Fresh) {
    assert!(
        fresh
            .catalog
            .cursor("firehose".into())
            .await
            .unwrap()
            .is_none()
    );
    let cursor = CursorPosition {
        source: "firehose".into(),
        endpoint: "wss://example.test/subscribe".into(),
        cursor: "1700000000000000".into(),
        event_time: Some(svc_syntax::UnixMicros(1_700_000_000_000_000)),
    };
    fresh
        .catalog
        .apply(
            vec![upsert(
                "at://did:plc:a/dev.svc.bounty/1",
                "3a",
                json!({"requester": "did:plc:r"}),
            )],
            Some(cursor.clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        fresh.catalog.cursor("firehose".into()).await.unwrap(),
        Some(cursor.clone())
    );
    assert_eq!(fresh.catalog.cursors().await.unwrap(), vec![cursor]);
}

pub async fn kind_counts_follow_changes(fresh: Fresh) {
    apply(
        &fresh,
        vec![
            upsert("at://did:plc:a/dev.svc.bounty/1", "3a", json!({})),
            upsert("at://did:plc:a/dev.svc.bounty/2", "3a", json!({})),
            upsert(
                "at://did:plc:a/dev.svc.vocab/1",
                "3a",
                json!({"name": "x", "world": "open"}),
            ),
            upsert(
                "at://did:plc:a/dev.svc.bounty/1",
                "3b",
                json!({"status": "open"}),
            ),
            delete("at://did:plc:a/dev.svc.bounty/2", "3b"),
        ],
    )
    .await;
    let counts = fresh.catalog.kind_counts().await.unwrap();
    assert_eq!(counts.get("dev.svc.bounty"), Some(&1));
    assert_eq!(counts.get("dev.svc.vocab"), Some(&1));
}

pub async fn change_clock_moves_with_touched_keys(fresh: Fresh) {
    let (query, key_r) = key(&fresh, "bountiesByRequester", &[Some("did:plc:r")]);
    let (_, key_s) = key(&fresh, "bountiesByRequester", &[Some("did:plc:s")]);
    let before_r = fresh.catalog.clock().key_version(&query, &key_r);
    let before_s = fresh.catalog.clock().key_version(&query, &key_s);
    let kinds = fresh.catalog.clock().kinds_version();
    apply(
        &fresh,
        vec![upsert(
            "at://did:plc:a/dev.svc.bounty/1",
            "3a",
            json!({"requester": "did:plc:r"}),
        )],
    )
    .await;
    assert_ne!(fresh.catalog.clock().key_version(&query, &key_r), before_r);
    assert_eq!(fresh.catalog.clock().key_version(&query, &key_s), before_s);
    assert_ne!(fresh.catalog.clock().kinds_version(), kinds);
}

pub async fn bulk_loads_only_into_an_empty_catalog(fresh: Fresh) {
    let a = "at://did:plc:a/dev.svc.bounty/1";
    assert!(fresh.catalog.begin_bulk().await.unwrap());
    apply(
        &fresh,
        vec![
            upsert(a, "3b", json!({"requester": "did:plc:r"})),
            upsert(a, "3a", json!({"requester": "did:plc:old"})),
        ],
    )
    .await;
    // Nothing is visible before the merge.
    assert!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")])
            .await
            .is_empty()
    );
    let cursor = CursorPosition {
        source: "import:x".into(),
        endpoint: "e".into(),
        cursor: "9".into(),
        event_time: None,
    };
    let report = fresh
        .catalog
        .finish_bulk(Some(cursor.clone()))
        .await
        .unwrap();
    assert_eq!((report.applied, report.stale), (1, 1));
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")]).await,
        vec![a]
    );
    assert_eq!(
        fresh.catalog.cursor("import:x".into()).await.unwrap(),
        Some(cursor)
    );
    assert_eq!(
        fresh.catalog.kind_counts().await.unwrap()["dev.svc.bounty"],
        1
    );
    // Now the catalog holds records: no second bulk load, and apply works as before.
    assert!(!fresh.catalog.begin_bulk().await.unwrap());
    apply(&fresh, vec![delete(a, "3c")]).await;
    assert!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")])
            .await
            .is_empty()
    );
}

/// What a bulk load files (an engine may store its rows without their keys) moves, hides,
/// returns, goes and is rebuilt as what `apply` filed does.
pub async fn records_loaded_in_bulk_change_like_any_other(fresh: Fresh) {
    let bounty = |n: u8| {
        format!(
            "at://did:plc:{}/dev.svc.bounty/{n}",
            if n == 3 { "h" } else { "a" }
        )
    };
    let (b1, b2, b3, b4) = (bounty(1), bounty(2), bounty(3), bounty(4));
    assert!(fresh.catalog.begin_bulk().await.unwrap());
    let loaded = [
        (&b1, "did:plc:r", "open"),
        (&b2, "did:plc:r", "claimed"),
        (&b3, "did:plc:r", "open"),
        (&b4, "did:plc:s", "open"),
    ];
    let (gone, community) = (bounty(5), "at://did:plc:a/dev.svc.community/1");
    let mut changes: Vec<Change> = loaded
        .iter()
        .map(|(uri, requester, status)| {
            upsert(uri, "3a", json!({"requester": requester, "status": status}))
        })
        .collect();
    changes.push(delete(&gone, "3a"));
    changes.push(upsert(community, "3a", json!({"name": "Geo Collective"})));
    apply(&fresh, changes).await;
    fresh.catalog.finish_bulk(None).await.unwrap();
    if let crate::Location::Postgres(url) = &fresh.location {
        let client = connected(url.expose()).await;
        let keyless: i64 = client
            .query_one("SELECT count(*) FROM records WHERE keys IS NULL", &[])
            .await
            .expect("rows without keys")
            .get(0);
        assert_eq!(keyless, 6, "the bulk load stores no keys");
    }
    let by_requester =
        async |fresh: &Fresh, did: &str| uris(fresh, "bountiesByRequester", &[Some(did)]).await;
    let by_name =
        async |fresh: &Fresh, name: &str| uris(fresh, "communitiesByName", &[Some(name)]).await;
    apply(
        &fresh,
        vec![
            upsert(
                &gone,
                "3b",
                json!({"requester": "did:plc:t", "status": "closed"}),
            ),
            upsert(community, "3b", json!({"name": "Other"})),
        ],
    )
    .await;
    assert_eq!(by_requester(&fresh, "did:plc:t").await, vec![gone.clone()]);
    assert!(by_name(&fresh, "geo collective").await.is_empty());
    assert_eq!(by_name(&fresh, "OTHER").await, vec![community]);
    apply(
        &fresh,
        vec![
            upsert(
                &b1,
                "3b",
                json!({"requester": "did:plc:s", "status": "open"}),
            ),
            delete(&b4, "3b"),
        ],
    )
    .await;
    assert_eq!(
        by_requester(&fresh, "did:plc:r").await,
        vec![b2.clone(), b3.clone()]
    );
    assert_eq!(by_requester(&fresh, "did:plc:s").await, vec![b1.clone()]);
    assert_eq!(
        uris(&fresh, "openBounties", &[]).await,
        vec![b1.clone(), b2.clone(), b3.clone()]
    );
    let status = |inactive: bool| match inactive {
        true => AccountStatus::Inactive("deactivated".into()),
        false => AccountStatus::Active,
    };
    fresh
        .catalog
        .set_account(did("did:plc:h"), status(true))
        .await
        .unwrap();
    assert_eq!(by_requester(&fresh, "did:plc:r").await, vec![b2.clone()]);
    assert_eq!(
        uris(&fresh, "openBounties", &[]).await,
        vec![b1.clone(), b2.clone()]
    );
    fresh
        .catalog
        .set_account(did("did:plc:h"), status(false))
        .await
        .unwrap();
    assert_eq!(
        by_requester(&fresh, "did:plc:r").await,
        vec![b2.clone(), b3.clone()]
    );
    assert_eq!(
        fresh.catalog.kind_counts().await.unwrap()["dev.svc.bounty"],
        4
    );
    // Rebuilt under edited definitions, then changed again.
    let fresh = fresh.reopen(edited_specification()).await;
    assert_eq!(uris(&fresh, "openBounties", &[]).await, vec![b2.clone()]);
    assert_eq!(
        uris(&fresh, "bountiesByRequesterAgain", &[Some("did:plc:r")]).await,
        vec![b2.clone(), b3.clone()]
    );
    apply(&fresh, vec![delete(&b2, "3c")]).await;
    assert!(uris(&fresh, "openBounties", &[]).await.is_empty());
    assert_eq!(by_requester(&fresh, "did:plc:r").await, vec![b3.clone()]);
    assert_eq!(
        uris(&fresh, "bountiesByRequesterAgain", &[Some("did:plc:r")]).await,
        vec![b3]
    );
}

pub async fn a_repository_replaced_whole_keeps_only_what_it_proves(fresh: Fresh) {
    let a1 = "at://did:plc:a/dev.svc.bounty/1";
    let a2 = "at://did:plc:a/dev.svc.bounty/2";
    let a3 = "at://did:plc:a/dev.svc.bounty/3";
    let a4 = "at://did:plc:a/dev.svc.bounty/4";
    let b1 = "at://did:plc:b/dev.svc.bounty/1";
    let r = json!({"requester": "did:plc:r"});
    apply(
        &fresh,
        vec![
            upsert(a1, "3a", r.clone()),
            upsert(a2, "3a", r.clone()),
            // Newer than the copy below: it stays, as a later commit would leave it.
            upsert(a3, "3d", r.clone()),
            upsert(b1, "3a", r.clone()),
        ],
    )
    .await;
    let other = json!({"requester": "did:plc:s"});
    // The copy comes in two batches: a2 first, then a4 with the replacement.
    apply(&fresh, vec![upsert(a2, "3c", other.clone())]).await;
    let report = fresh
        .catalog
        .replace_repository(
            did("did:plc:a"),
            tid("3c"),
            vec![upsert(a4, "3c", r.clone())],
            vec![AtUri::new(a2).unwrap()],
            crate::SyncWrites::default(),
        )
        .await
        .unwrap();
    // a1 deleted, a4 created, a2 kept as changed; the delete of a3 is older than a3.
    assert_eq!((report.applied, report.stale), (2, 1));
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")]).await,
        vec![a3, a4, b1]
    );
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:s")]).await,
        vec![a2]
    );
    assert!(fresh.catalog.get(at(a1)).await.unwrap().is_none());
    assert_eq!(
        fresh.catalog.kind_counts().await.unwrap()["dev.svc.bounty"],
        4
    );
}

pub async fn a_repository_is_read_in_pages_while_its_account_is_active(fresh: Fresh) {
    let r = json!({"requester": "did:plc:r"});
    let mine = [
        "at://did:plc:a/dev.svc.bounty/1",
        "at://did:plc:a/dev.svc.bounty/2",
        "at://did:plc:a/dev.svc.vocab/1",
    ];
    // Neighbours whose uris share the prefix "at://did:plc:a" but not the repository.
    let theirs = [
        "at://did:plc:a0/dev.svc.bounty/1",
        "at://did:plc:ab/dev.svc.bounty/1",
    ];
    let changes = mine
        .iter()
        .chain(&theirs)
        .map(|uri| upsert(uri, "3a", r.clone()))
        .collect();
    apply(&fresh, changes).await;
    apply(&fresh, vec![delete(mine[1], "3b")]).await;
    let page = |collection: Option<&str>, after: Option<&str>| {
        let slice = crate::RepositorySlice {
            did: "did:plc:a".into(),
            collection: collection.map(str::to_string),
        };
        let after = after.map(str::to_string);
        let catalog = &fresh.catalog;
        async move {
            let written = catalog
                .write_repository_records(slice, after, 1, Box::new(Lines(Vec::new())))
                .await
                .unwrap();
            written_uris(&written)
        }
    };
    assert_eq!(page(None, None).await, (vec![mine[0].into()], true));
    assert_eq!(
        page(None, Some(mine[0])).await,
        (vec![mine[2].into()], false),
        "the deleted record is not read"
    );
    assert!(page(None, Some(mine[2])).await.0.is_empty());
    assert_eq!(
        page(Some("dev.svc.vocab"), None).await,
        (vec![mine[2].into()], false)
    );
    assert!(
        page(Some("dev.svc.vocab"), Some(mine[2]))
            .await
            .0
            .is_empty()
    );
    assert!(
        page(Some("dev.svc.vo"), None).await.0.is_empty(),
        "a collection is whole"
    );
    let hidden = AccountStatus::Inactive("takendown".into());
    fresh
        .catalog
        .set_account(did("did:plc:a"), hidden)
        .await
        .unwrap();
    assert!(
        page(None, None).await.0.is_empty(),
        "an inactive account shows nothing"
    );
}

pub async fn the_change_stream_says_what_entered_changed_and_left(fresh: Fresh) {
    use crate::StreamOp::{Enter, Leave, Update};
    let a = "at://did:plc:a/dev.svc.bounty/1";
    let b = "at://did:plc:b/dev.svc.bounty/1";
    let (r, s) = (
        json!({"requester": "did:plc:r"}),
        json!({"requester": "did:plc:s"}),
    );
    apply(
        &fresh,
        vec![upsert(a, "3a", r.clone()), upsert(b, "3a", r.clone())],
    )
    .await;
    apply(&fresh, vec![upsert(a, "3b", s.clone())]).await;
    apply(&fresh, vec![delete(b, "3b"), delete(b, "3c")]).await;
    // A delete of what was never stored changes nothing anyone could see.
    apply(
        &fresh,
        vec![delete("at://did:plc:c/dev.svc.bounty/1", "3a")],
    )
    .await;
    let hidden = AccountStatus::Inactive("deactivated".into());
    fresh
        .catalog
        .set_account(did("did:plc:a"), hidden)
        .await
        .unwrap();
    fresh
        .catalog
        .set_account(did("did:plc:a"), AccountStatus::Active)
        .await
        .unwrap();
    let of_r = key(&fresh, "bountiesByRequester", &[Some("did:plc:r")]);
    let of_s = key(&fresh, "bountiesByRequester", &[Some("did:plc:s")]);
    let changes = fresh.catalog.changes_after(0, 100).await.unwrap();
    type Ops<'a> = (
        &'a str,
        Option<StreamOp>,
        Option<StreamOp>,
        Option<StreamOp>,
    );
    let seen: Vec<Ops> = changes
        .iter()
        .map(|c| {
            let (r, s) = (
                c.op(Some((&of_r.0, &of_r.1))),
                c.op(Some((&of_s.0, &of_s.1))),
            );
            (c.uri.as_str(), c.op(None), r, s)
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (a, Some(Enter), Some(Enter), None),
            (b, Some(Enter), Some(Enter), None),
            (a, Some(Update), Some(Leave), Some(Enter)),
            (b, Some(Leave), Some(Leave), None),
            (a, Some(Leave), None, Some(Leave)),
            (a, Some(Enter), None, Some(Enter)),
        ]
    );
    let seqs: Vec<i64> = changes.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, (1..=6).collect::<Vec<i64>>());
    let bounds = fresh.catalog.change_bounds().await.unwrap();
    assert_eq!((bounds.oldest, bounds.newest), (1, 6));
    let after = fresh.catalog.changes_after(4, 100).await.unwrap();
    assert_eq!(after.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![5, 6]);
    // Trimmed to what is younger than the retention, the last change stays: it numbers the
    // next.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    fresh
        .catalog
        .heartbeat(std::time::Duration::from_millis(5))
        .await
        .unwrap();
    let bounds = fresh.catalog.change_bounds().await.unwrap();
    assert_eq!((bounds.oldest, bounds.newest), (6, 6));
    // Numbering goes on after a reopen.
    let fresh = fresh.reopen(svc_spec::QuerySet::embedded()).await;
    apply(&fresh, vec![upsert(b, "3d", r)]).await;
    let last = fresh.catalog.changes_after(6, 100).await.unwrap();
    let of_r = key(&fresh, "bountiesByRequester", &[Some("did:plc:r")]);
    assert_eq!(
        (last[0].seq, last[0].op(Some((&of_r.0, &of_r.1)))),
        (7, Some(Enter))
    );
}

pub async fn accounts_hide_restore_and_remove_records(fresh: Fresh) {
    let a1 = "at://did:plc:a/dev.svc.bounty/1";
    let a2 = "at://did:plc:a/dev.svc.bounty/2";
    let b1 = "at://did:plc:b/dev.svc.bounty/1";
    let r = json!({"requester": "did:plc:r"});
    apply(
        &fresh,
        vec![upsert(a1, "3a", r.clone()), upsert(b1, "3a", r.clone())],
    )
    .await;
    let requester = [Some("did:plc:r")];
    fresh
        .catalog
        .set_account(
            did("did:plc:a"),
            AccountStatus::Inactive("deactivated".into()),
        )
        .await
        .unwrap();
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &requester).await,
        vec![b1]
    );
    assert_eq!(
        fresh.catalog.kind_counts().await.unwrap()["dev.svc.bounty"],
        1
    );
    let read = |uris: &[&str]| {
        fresh
            .catalog
            .get_many(uris.iter().map(|u| u.to_string()).collect())
    };
    let found = read(&[a1, b1]).await.unwrap();
    assert!(found[0].is_none() && found[1].is_some(), "{found:?}");
    let both = vec![a1.to_string(), b1.to_string()];
    assert_eq!(fresh.catalog.held(both.clone()).await.unwrap(), vec![b1]);
    let written = fresh
        .catalog
        .write_records(both, Box::new(Lines(Vec::new())))
        .await
        .unwrap();
    assert_eq!(written_uris(&written), (vec![b1.into()], false));
    assert!(fresh.catalog.get(at(a1)).await.unwrap().is_none());
    // Writes of an inactive account are kept, out of sight.
    apply(&fresh, vec![upsert(a2, "3b", r.clone())]).await;
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &requester).await,
        vec![b1]
    );
    fresh
        .catalog
        .set_account(did("did:plc:a"), AccountStatus::Active)
        .await
        .unwrap();
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &requester).await,
        vec![a1, a2, b1]
    );
    assert!(fresh.catalog.get(at(a1)).await.unwrap().is_some());
    assert_eq!(
        fresh.catalog.kind_counts().await.unwrap()["dev.svc.bounty"],
        3
    );
    // Activating an active account changes nothing.
    fresh
        .catalog
        .set_account(did("did:plc:a"), AccountStatus::Active)
        .await
        .unwrap();
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &requester).await.len(),
        3
    );
    fresh
        .catalog
        .set_account(did("did:plc:a"), AccountStatus::Deleted)
        .await
        .unwrap();
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &requester).await,
        vec![b1]
    );
    assert!(fresh.catalog.get(at(a1)).await.unwrap().is_none());
    assert_eq!(
        fresh.catalog.kind_counts().await.unwrap()["dev.svc.bounty"],
        1
    );
    // A late event for the deleted account (a backfill page read before the deletion) is
    // kept out of sight.
    apply(&fresh, vec![upsert(a1, "3a", r.clone())]).await;
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &requester).await,
        vec![b1]
    );
    assert_eq!(
        fresh.catalog.kind_counts().await.unwrap()["dev.svc.bounty"],
        1
    );
}

pub async fn an_interrupted_bulk_load_is_undone_at_the_next_open(fresh: Fresh) {
    let bounty = |n: usize| format!("at://did:plc:a/dev.svc.bounty/{n}");
    assert!(fresh.catalog.begin_bulk().await.unwrap());
    let staged = (0..50)
        .map(|n| upsert(&bounty(n), "3a", json!({"requester": "did:plc:r"})))
        .collect();
    apply(&fresh, staged).await;
    // Closed before the load settled, as a crash would leave it.
    let queries = fresh.queries.clone();
    let fresh = fresh.reopen(queries).await;
    assert!(fresh.catalog.kind_counts().await.unwrap().is_empty());
    assert!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")])
            .await
            .is_empty()
    );
    // The catalog is empty again, so the load can be done again, whole.
    assert!(fresh.catalog.begin_bulk().await.unwrap());
    let again = (0..3)
        .map(|n| upsert(&bounty(n), "3b", json!({"requester": "did:plc:r"})))
        .collect();
    apply(&fresh, again).await;
    let report = fresh.catalog.finish_bulk(None).await.unwrap();
    assert_eq!((report.applied, report.stale), (3, 0));
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")]).await,
        (0..3).map(bounty).collect::<Vec<_>>()
    );
}

pub async fn no_bulk_load_while_accounts_are_inactive(fresh: Fresh) {
    fresh
        .catalog
        .set_account(
            did("did:plc:a"),
            AccountStatus::Inactive("suspended".into()),
        )
        .await
        .unwrap();
    assert!(!fresh.catalog.begin_bulk().await.unwrap());
    apply(
        &fresh,
        vec![upsert(
            "at://did:plc:a/dev.svc.bounty/1",
            "3a",
            json!({"requester": "did:plc:r"}),
        )],
    )
    .await;
    assert!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")])
            .await
            .is_empty()
    );
    assert_eq!(
        fresh
            .catalog
            .kind_counts()
            .await
            .unwrap()
            .get("dev.svc.bounty")
            .copied()
            .unwrap_or(0),
        0
    );
}

/// The embedded specification with one query's filter changed and one query added.
fn edited_specification() -> svc_spec::QuerySet {
    let mut spec: serde_json::Value =
        serde_json::from_str(svc_spec::EMBEDDED_SPEC).expect("the embedded specification");
    let queries = spec["queries"].as_array_mut().expect("queries");
    for query in queries.iter_mut() {
        if query["name"] == "openBounties" {
            query["filter"] =
                json!([{"op": "in", "path": "status", "values": ["claimed"], "or_absent": false}]);
        }
    }
    let mut added = queries
        .iter()
        .find(|q| q["name"] == "bountiesByRequester")
        .expect("bountiesByRequester")
        .clone();
    added["name"] = json!("bountiesByRequesterAgain");
    added["path"] = json!("/v1/bounties/by-requester-again");
    queries.push(added);
    svc_spec::QuerySet::load(&spec.to_string()).expect("the edited specification")
}

pub async fn queries_redefined_or_added_between_opens_are_rebuilt(fresh: Fresh) {
    let (open, claimed, hidden) = (
        "at://did:plc:a/dev.svc.bounty/1",
        "at://did:plc:a/dev.svc.bounty/2",
        "at://did:plc:h/dev.svc.bounty/3",
    );
    apply(
        &fresh,
        vec![
            upsert(
                open,
                "3a",
                json!({"requester": "did:plc:r", "status": "open"}),
            ),
            upsert(
                claimed,
                "3a",
                json!({"requester": "did:plc:r", "status": "claimed"}),
            ),
            upsert(
                hidden,
                "3a",
                json!({"requester": "did:plc:r", "status": "claimed"}),
            ),
        ],
    )
    .await;
    fresh
        .catalog
        .set_account(
            did("did:plc:h"),
            AccountStatus::Inactive("deactivated".into()),
        )
        .await
        .unwrap();
    assert_eq!(uris(&fresh, "openBounties", &[]).await, vec![open, claimed]);
    let fresh = fresh.reopen(edited_specification()).await;
    // The redefined query answers its new filter; the added one was filed from what is stored;
    // the inactive account's record stays out of both until it is active again.
    assert_eq!(uris(&fresh, "openBounties", &[]).await, vec![claimed]);
    assert_eq!(
        uris(&fresh, "bountiesByRequesterAgain", &[Some("did:plc:r")]).await,
        vec![open, claimed]
    );
    fresh
        .catalog
        .set_account(did("did:plc:h"), AccountStatus::Active)
        .await
        .unwrap();
    assert_eq!(
        uris(&fresh, "openBounties", &[]).await,
        vec![claimed, hidden]
    );
    assert_eq!(
        uris(&fresh, "bountiesByRequesterAgain", &[Some("did:plc:r")]).await,
        vec![open, claimed, hidden]
    );
    // Back to the shipped specification: the added query's keys are dropped, the old filter
    // is rebuilt, and an update files under the current definitions only.
    let fresh = fresh.reopen(svc_spec::QuerySet::embedded()).await;
    assert_eq!(
        uris(&fresh, "openBounties", &[]).await,
        vec![open, claimed, hidden]
    );
    apply(
        &fresh,
        vec![upsert(
            open,
            "3b",
            json!({"requester": "did:plc:s", "status": "closed"}),
        )],
    )
    .await;
    assert_eq!(
        uris(&fresh, "openBounties", &[]).await,
        vec![claimed, hidden]
    );
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")]).await,
        vec![claimed, hidden]
    );
}

/// A PostgreSQL catalog written under schema version 4 (the index entries' key without the
/// record id, entries naming their key by its text) gives the same answers after a later build migrates it at open, and takes
/// changes after.
pub async fn a_catalog_of_schema_4_answers_the_same_once_migrated(fresh: Fresh) {
    let crate::Location::Postgres(url) = &fresh.location else {
        panic!("a PostgreSQL catalog")
    };
    let bounty = |n: usize| format!("at://did:plc:a/dev.svc.bounty/{n:02}");
    let changes = (0..30)
        .map(|n| upsert(&bounty(n), "3a", json!({"requester": "did:plc:r"})))
        .collect();
    apply(&fresh, changes).await;
    apply(&fresh, vec![delete(&bounty(7), "3b")]).await;
    let before = uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")]).await;
    assert_eq!(before.len(), 29);
    let client = connected(url.expose()).await;
    client
        .batch_execute(
            r#"ALTER TABLE query_keys RENAME TO entries_by_number;
             ALTER INDEX query_keys_pkey RENAME TO entries_by_number_pkey;
             CREATE TABLE query_keys AS
                 SELECT c.qid, c.key, e.uri, e.rid FROM entries_by_number e JOIN query_counts c USING (kid);
             ALTER TABLE query_keys ADD PRIMARY KEY (qid, key, uri);
             DROP TABLE entries_by_number;
             ALTER TABLE query_counts DROP COLUMN kid;
             ALTER TABLE records ADD COLUMN author TEXT COLLATE "C" NOT NULL DEFAULT '',
                 ALTER COLUMN keys SET NOT NULL;
             DROP TABLE record_changes;
             DROP TABLE resync_queue;
             DROP TABLE repository_heads;
             DROP TABLE takedowns;
             DROP TABLE labels;
             DROP TABLE search;
             DROP TABLE search_state;
             DROP TABLE search_staging;
             DROP TABLE activity_minutes;
             DROP TABLE source_minutes;
             UPDATE svc_schema SET version = 4;"#,
        )
        .await
        .expect("the catalog as schema 4 left it");
    let queries = fresh.queries.clone();
    let fresh = fresh.reopen(queries).await;
    let version: i32 = client
        .query_one("SELECT version FROM svc_schema", &[])
        .await
        .expect("schema version")
        .get(0);
    assert!(version >= 5, "migrated to {version}");
    let entries_key: String = client
        .query_one(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'query_keys_pkey'",
            &[],
        )
        .await
        .expect("the entries' key")
        .get(0);
    assert!(
        entries_key.contains("(kid, uri) INCLUDE (rid)"),
        "{entries_key}"
    );
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")]).await,
        before
    );
    let (query, key) = key(&fresh, "bountiesByRequester", &[Some("did:plc:r")]);
    for (request, want) in [
        (page(5, 0), &before[..5]),
        (page(5, 22), &before[22..27]),
        (
            PageRequest {
                limit: 5,
                offset: 0,
                after: Some(before[9].clone()),
            },
            &before[10..15],
        ),
    ] {
        let page = listed_and_written(&fresh, &query, &key, request).await;
        let got: Vec<&String> = page.items.iter().map(|i| &i.uri).collect();
        assert_eq!(got, want.iter().collect::<Vec<_>>());
        assert_eq!(page.total, 29);
    }
    apply(
        &fresh,
        vec![upsert(&bounty(7), "3c", json!({"requester": "did:plc:r"}))],
    )
    .await;
    assert_eq!(
        uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")]).await,
        (0..30).map(bounty).collect::<Vec<_>>()
    );
}

/// Waits (up to half a minute) for the records' id index, which follows a bulk load in the
/// background, to be usable.
async fn id_index_comes(client: &tokio_postgres::Client) {
    for _ in 0..300 {
        let valid = client
            .query_opt(
                "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('records_id_hash')",
                &[],
            )
            .await
            .expect("the records' indexes");
        if valid.is_some_and(|row| row.get::<_, bool>(0)) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the records' id index was not built");
}

/// A bulk load leaves the records' id index out and builds it after, in the background; a
/// catalog found without it, or with it invalid (a build that did not finish), answers all the
/// same and builds it at its next open.
pub async fn the_id_index_follows_a_bulk_load(mut fresh: Fresh) {
    let crate::Location::Postgres(url) = &fresh.location else {
        panic!("a PostgreSQL catalog")
    };
    let bounty = |n: usize| format!("at://did:plc:a/dev.svc.bounty/{n:02}");
    let everyone: Vec<String> = (0..30).map(bounty).collect();
    assert!(fresh.catalog.begin_bulk().await.unwrap());
    let changes = everyone
        .iter()
        .map(|uri| upsert(uri, "3a", json!({"requester": "did:plc:r"})))
        .collect();
    apply(&fresh, changes).await;
    fresh.catalog.finish_bulk(None).await.unwrap();
    let client = connected(url.expose()).await;
    id_index_comes(&client).await;
    for (breaking, left_as) in [
        (
            "DROP INDEX records_id_hash",
            "the index dropped, as a build that never began leaves it",
        ),
        // The test cluster's user is a superuser, which may mark an index invalid by hand.
        (
            "UPDATE pg_index SET indisvalid = false \
             WHERE indexrelid = 'records_id_hash'::regclass",
            "the index left invalid, as an interrupted concurrent build leaves it",
        ),
    ] {
        client.batch_execute(breaking).await.expect(left_as);
        assert_eq!(
            uris(&fresh, "bountiesByRequester", &[Some("did:plc:r")]).await,
            everyone
        );
        let queries = fresh.queries.clone();
        fresh = fresh.reopen(queries).await;
        id_index_comes(&client).await;
    }
    let (query, key) = key(&fresh, "bountiesByRequester", &[Some("did:plc:r")]);
    let page = listed_and_written(&fresh, &query, &key, page(5, 10)).await;
    let got: Vec<&String> = page.items.iter().map(|i| &i.uri).collect();
    assert_eq!(got, everyone[10..15].iter().collect::<Vec<_>>());
    assert_eq!(page.total, 30);
}

/// A database on the same machine is reached through its socket directory, given as the URL's
/// host (percent-encoded), and the catalog there works as over TCP.
pub async fn a_catalog_opens_through_the_database_socket(fresh: Fresh) {
    let crate::Location::Postgres(tcp_url) = &fresh.location else {
        panic!("a PostgreSQL catalog")
    };
    let client = connected(tcp_url.expose()).await;
    let row = client
        .query_one(
            "SELECT current_setting('unix_socket_directories'), current_setting('port'), \
             current_database()",
            &[],
        )
        .await
        .expect("read where the server listens");
    let (directories, port, database): (String, String, String) =
        (row.get(0), row.get(1), row.get(2));
    let directory = directories
        .split(',')
        .next()
        .expect("a socket directory")
        .trim();
    let encoded = directory.replace('/', "%2F");
    let socket_url = format!("postgres://svc@{encoded}:{port}/{database}");
    // The form names the socket, not a host: the server sees no client address.
    let over_socket = connected(&socket_url).await;
    let row = over_socket
        .query_one("SELECT inet_client_addr() IS NULL", &[])
        .await
        .expect("ask for the client address");
    assert!(row.get::<_, bool>(0), "{socket_url} connected over TCP");
    let location: crate::Location = socket_url.parse().expect("a socket URL is accepted");
    assert!(
        matches!(location, crate::Location::Postgres(_)),
        "{socket_url} read as another engine"
    );
    let queries = fresh.queries.clone();
    let through_socket = Fresh { location, ..fresh }.reopen(queries).await;
    let bounty = "at://did:plc:a/dev.svc.bounty/01";
    apply(
        &through_socket,
        vec![upsert(bounty, "3a", json!({"requester": "did:plc:r"}))],
    )
    .await;
    assert_eq!(
        uris(&through_socket, "bountiesByRequester", &[Some("did:plc:r")]).await,
        vec![bounty.to_string()]
    );
}

pub async fn the_resync_queue_and_heads_move_with_their_batch(fresh: Fresh) {
    use crate::{RepositoryHead, ResyncPostponed, ResyncRequest, ResyncRetry, SyncWrites};
    use svc_syntax::UnixMillis;
    let catalog = &fresh.catalog;
    let head = |rev: &str, data: &[u8]| RepositoryHead {
        did: did("did:plc:a"),
        rev: tid(rev),
        data: data.to_vec(),
    };
    let queue = |name: &str, reason: &str| ResyncRequest {
        did: did(name),
        reason: reason.into(),
    };
    let sync = SyncWrites {
        heads: vec![head("3b", b"root-b")],
        queued: vec![queue("did:plc:q", "key"), queue("did:plc:r", "chain")],
        ..SyncWrites::default()
    };
    let cursor = CursorPosition {
        source: "firehose".into(),
        endpoint: "ws://pds.test".into(),
        cursor: "7".into(),
        event_time: None,
    };
    catalog
        .apply_synced(Vec::new(), Some(cursor.clone()), sync)
        .await
        .unwrap();
    assert_eq!(
        catalog.cursor("firehose".into()).await.unwrap(),
        Some(cursor)
    );
    assert_eq!(
        catalog.repository_heads(10).await.unwrap(),
        vec![head("3b", b"root-b")]
    );
    // An older head never replaces a newer one; a queued repository keeps its schedule.
    let far = UnixMillis(i64::MAX / 2);
    let later = SyncWrites {
        heads: vec![head("3a", b"root-a")],
        queued: vec![queue("did:plc:q", "chain")],
        retried: vec![ResyncRetry {
            did: did("did:plc:r"),
            due: far,
            error: "503 from the directory".into(),
        }],
        ..SyncWrites::default()
    };
    catalog.apply_synced(Vec::new(), None, later).await.unwrap();
    assert_eq!(
        catalog.repository_heads(10).await.unwrap(),
        vec![head("3b", b"root-b")]
    );
    let due = catalog.resync_due(UnixMillis::now(), 10).await.unwrap();
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(
        (due[0].did.as_str(), due[0].reason.as_str()),
        ("did:plc:q", "key")
    );
    assert_eq!(due[0].attempts, 0);
    let summary = catalog.resync_summary().await.unwrap();
    // Neither has failed 4 reads yet.
    assert_eq!((summary.waiting, summary.fresh), (2, 2));
    let everything = catalog.resync_due(far, 10).await.unwrap();
    let retried = everything.iter().find(|e| e.did.as_str() == "did:plc:r");
    let retried = retried.expect("the retried entry");
    assert_eq!(retried.attempts, 1);
    assert_eq!(
        retried.last_error.as_deref(),
        Some("503 from the directory")
    );
    // Postponed for a turn: later, with no failure counted.
    let turn = SyncWrites {
        postponed: vec![ResyncPostponed {
            did: did("did:plc:q"),
            due: UnixMillis(far.0 - 1),
        }],
        ..SyncWrites::default()
    };
    catalog.apply_synced(Vec::new(), None, turn).await.unwrap();
    assert!(
        catalog
            .resync_due(UnixMillis::now(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let waiting = catalog.resync_due(far, 10).await.unwrap();
    assert_eq!(
        waiting
            .iter()
            .map(|e| (e.did.as_str(), e.attempts))
            .collect::<Vec<_>>(),
        [("did:plc:q", 0), ("did:plc:r", 1)]
    );
    // Read whole: out of the queue, in the transaction of the repository's records.
    let done = SyncWrites {
        done: vec![did("did:plc:q")],
        forgotten: vec![did("did:plc:a")],
        ..SyncWrites::default()
    };
    let uri = "at://did:plc:q/dev.svc.bounty/1";
    catalog
        .replace_repository(
            did("did:plc:q"),
            tid("3c"),
            vec![upsert(uri, "3c", json!({"requester": "did:plc:r"}))],
            Vec::new(),
            done,
        )
        .await
        .unwrap();
    assert!(catalog.get(at(uri)).await.unwrap().is_some());
    let left = catalog.resync_due(far, 10).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].did.as_str(), "did:plc:r");
    assert!(catalog.repository_heads(10).await.unwrap().is_empty());
    // A peer answers again: what waits after failures is due now.
    let now = UnixMillis::now();
    let hurry = SyncWrites {
        hurry: Some(now),
        ..SyncWrites::default()
    };
    catalog.apply_synced(Vec::new(), None, hurry).await.unwrap();
    let due = catalog.resync_due(now, 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].did.as_str(), due[0].attempts), ("did:plc:r", 1));
}
