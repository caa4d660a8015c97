//! Search, on every backend: a record is found by the words of its kind's fields as a
//! person types them (any order, any case, accents or not, a phrase, the last word's start,
//! part of a run of Chinese characters), best match first; written with the record, so an
//! answer never shows a deleted or old version; never a record out of sight; the same after
//! a bulk load and after the index is built again at open.

use super::suite::{Lines, written_uris};
use super::{Fresh, at, delete, did, upsert};
use crate::{AccountStatus, SEARCH_COUNT_LIMIT, SearchRequest, Subject};
use serde_json::{Value, json};
use svc_spec::search::SearchQuery;

const GEO: &str = "at://did:plc:a/dev.svc.vocab/1";
const DUBLIN: &str = "at://did:plc:a/dev.svc.vocab/2";
const TOKYO: &str = "at://did:plc:b/dev.svc.vocab/3";
const BIBLIO: &str = "at://did:plc:b/dev.svc.community/4";
const MENTIONS: &str = "at://did:plc:c/dev.svc.vocab/5";

fn vocab(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "world": "open",
        "occurredAt": "2026-11-01T12:00:00Z"})
}

fn records() -> Vec<crate::Change> {
    vec![
        upsert(GEO, "3a", vocab("GeoJSON to KML", "A lens for maps.")),
        upsert(
            DUBLIN,
            "3a",
            vocab("Dublin Core", "Métadonnées du café, bibliographic"),
        ),
        upsert(TOKYO, "3a", vocab("東京都の地図", "Tokyo maps")),
        upsert(
            BIBLIO,
            "3a",
            json!({"name": "Bibliographic records", "description": "Talk of catalogues",
                "members": [], "occurredAt": "2026-11-01T12:00:00Z"}),
        ),
        upsert(
            MENTIONS,
            "3a",
            vocab("Other", "It says Dublin and core apart: core, Dublin"),
        ),
    ]
}

/// The uris a search finds (all of them), and its total.
async fn found_kind(fresh: &Fresh, q: &str, kind: Option<&str>) -> (Vec<String>, u64) {
    let request = SearchRequest {
        query: SearchQuery::parse(q).expect("a query"),
        kind: kind.map(str::to_string),
        offset: 0,
        limit: 100,
        deadline: std::time::Duration::from_secs(10),
    };
    let written = fresh
        .catalog
        .search(request, Box::new(Lines(Vec::new())))
        .await
        .expect("search");
    let (uris, more) = written_uris(&written);
    assert!(!more, "{q}: one page holds every match");
    let text = String::from_utf8(written).expect("UTF-8");
    let total = text.lines().last().and_then(|l| l.split(' ').next());
    (uris, total.and_then(|t| t.parse().ok()).unwrap_or(u64::MAX))
}

async fn found(fresh: &Fresh, q: &str) -> Vec<String> {
    let (uris, total) = found_kind(fresh, q, None).await;
    assert_eq!(total, uris.len() as u64, "{q}");
    uris
}

pub async fn search_finds_records_by_their_words_as_people_type_them(fresh: Fresh) {
    fresh.catalog.apply(records(), None).await.expect("apply");
    assert_eq!(found(&fresh, "geoj").await, [GEO], "the last word's start");
    assert_eq!(found(&fresh, "geojso").await, [GEO], "a longer start");
    assert_eq!(found(&fresh, "maps geojsx").await, Vec::<String>::new());
    assert_eq!(
        found(&fresh, "bibliog").await,
        [BIBLIO, DUBLIN],
        "a longer start, the name first"
    );
    assert_eq!(
        found(&fresh, "geoj ").await,
        Vec::<String>::new(),
        "a whole word"
    );
    assert_eq!(
        found(&fresh, "KML geojson").await,
        [GEO],
        "any order, any case"
    );
    assert_eq!(
        found(&fresh, "cafe metadonnees").await,
        [DUBLIN],
        "accents or not"
    );
    assert_eq!(found(&fresh, "\"dublin core\"").await, [DUBLIN], "a phrase");
    assert_eq!(
        found(&fresh, "京都").await,
        [TOKYO],
        "part of a run of characters"
    );
    assert_eq!(found(&fresh, "都の地").await, [TOKYO]);
    // Both hold the two words; the one that names them ranks first.
    assert_eq!(found(&fresh, "core dublin").await, [DUBLIN, MENTIONS]);
    let bibliographic = found(&fresh, "bibliographic").await;
    assert_eq!(
        bibliographic,
        [BIBLIO, DUBLIN],
        "a name above a description"
    );
    let (kinds, _) = found_kind(&fresh, "bibliographic", Some("dev.svc.vocab")).await;
    assert_eq!(kinds, [DUBLIN], "one kind");
    assert!(found(&fresh, "nowhere").await.is_empty());
    assert!(
        found(&fresh, "world open").await.is_empty(),
        "fields search does not read"
    );
}

pub async fn search_follows_writes_and_never_shows_what_is_out_of_sight(fresh: Fresh) {
    fresh.catalog.apply(records(), None).await.expect("apply");
    let renamed = upsert(GEO, "3b", vocab("TopoJSON to SVG", "Another lens."));
    fresh
        .catalog
        .apply(vec![renamed], None)
        .await
        .expect("apply");
    assert!(
        found(&fresh, "geojson").await.is_empty(),
        "the old version's words"
    );
    assert_eq!(found(&fresh, "topojson").await, [GEO]);
    fresh
        .catalog
        .apply(vec![delete(GEO, "3c")], None)
        .await
        .expect("delete");
    assert!(found(&fresh, "topojson").await.is_empty(), "deleted");
    // An account out of sight, and a record taken down, are not found, until they are back.
    let inactive = AccountStatus::Inactive("deactivated".into());
    fresh
        .catalog
        .set_account(did("did:plc:b"), inactive)
        .await
        .expect("status");
    assert!(found(&fresh, "bibliographic").await == [DUBLIN]);
    fresh
        .catalog
        .set_account(did("did:plc:b"), AccountStatus::Active)
        .await
        .expect("status");
    assert_eq!(found(&fresh, "bibliographic").await, [BIBLIO, DUBLIN]);
    let down = fresh
        .catalog
        .take_down(Subject::Record(at(DUBLIN)), None)
        .await;
    down.expect("take down");
    assert_eq!(found(&fresh, "bibliographic").await, [BIBLIO]);
    // An account deleted at its host takes its records' words with it.
    fresh
        .catalog
        .set_account(did("did:plc:b"), AccountStatus::Deleted)
        .await
        .expect("status");
    assert!(found(&fresh, "bibliographic").await.is_empty());
    assert!(found(&fresh, "tokyo").await.is_empty());
}

pub async fn search_counts_exactly_up_to_its_limit_and_pages(fresh: Fresh) {
    let many: Vec<crate::Change> = (0..SEARCH_COUNT_LIMIT + 5)
        .map(|n| {
            let uri = format!("at://did:plc:many/dev.svc.vocab/{n:06}");
            upsert(&uri, "3a", vocab(&format!("Common {n}"), "shared words"))
        })
        .collect();
    fresh.catalog.apply(many, None).await.expect("apply");
    let request = |offset| SearchRequest {
        query: SearchQuery::parse("common").expect("a query"),
        kind: None,
        offset,
        limit: 10,
        deadline: std::time::Duration::from_secs(30),
    };
    let first = fresh
        .catalog
        .search(request(0), Box::new(Lines(Vec::new())))
        .await;
    let first = String::from_utf8(first.expect("search")).expect("UTF-8");
    assert!(
        first.ends_with(&format!("{} true", SEARCH_COUNT_LIMIT + 1)),
        "{first}"
    );
    let near_end = fresh
        .catalog
        .search(request(9_990), Box::new(Lines(Vec::new())))
        .await;
    let (uris, more) = written_uris(&near_end.expect("search"));
    assert_eq!((uris.len(), more), (10, true));
}

pub async fn search_finds_records_loaded_in_bulk_and_after_a_rebuild(fresh: Fresh) {
    assert!(fresh.catalog.begin_bulk().await.expect("begin"));
    fresh.catalog.apply(records(), None).await.expect("stage");
    fresh.catalog.finish_bulk(None).await.expect("finish");
    assert_eq!(found(&fresh, "geoj").await, [GEO]);
    assert_eq!(found(&fresh, "geojso").await, [GEO]);
    assert_eq!(found(&fresh, "京都").await, [TOKYO]);
    // A catalog whose index was built under another definition builds it again at open.
    forget_search_definition(&fresh.location).await;
    let queries = fresh.queries.clone();
    let fresh = fresh.reopen(queries).await;
    assert_eq!(found(&fresh, "geoj").await, [GEO]);
    assert_eq!(found(&fresh, "metadonn").await, [DUBLIN]);
    assert_eq!(found(&fresh, "core dublin").await, [DUBLIN, MENTIONS]);
}

/// A catalog made before words were listed lists them as it is migrated.
pub async fn an_sqlite_catalog_lists_its_words_when_migrated(fresh: Fresh) {
    fresh.catalog.apply(records(), None).await.expect("apply");
    let crate::Location::Sqlite(path) = &fresh.location else {
        panic!("an SQLite catalog")
    };
    let conn = rusqlite::Connection::open(path).expect("open");
    conn.execute_batch("DROP TABLE search_words; PRAGMA user_version = 10")
        .expect("the schema before");
    drop(conn);
    let queries = fresh.queries.clone();
    let fresh = fresh.reopen(queries).await;
    assert_eq!(found(&fresh, "geojso").await, [GEO]);
    assert_eq!(found(&fresh, "bibliog").await, [BIBLIO, DUBLIN]);
}

/// Stores another definition beside the index, as a catalog of an older build would.
async fn forget_search_definition(location: &crate::Location) {
    let sql = "UPDATE search_state SET fingerprint = 'an older definition'";
    match location {
        crate::Location::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).expect("open");
            conn.execute(sql, []).expect("update");
        }
        crate::Location::Postgres(url) => {
            let client = super::suite::connected(url.expose()).await;
            client.execute(sql, &[]).await.expect("update");
        }
    }
}
