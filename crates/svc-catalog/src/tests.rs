//! One suite for every backend: each test takes a fresh catalog from a backend's factory.

mod hostile;
mod labels;
mod properties;
mod roads;
mod search;
mod suite;
mod takedowns;

use crate::sqlite::SqliteCatalog;
use crate::{Catalog, Change, Upsert};
use serde_json::{Value, json};
use svc_spec::QuerySet;
use svc_syntax::{AtUri, Did, Tid};

pub(crate) struct Fresh {
    pub catalog: Box<dyn Catalog>,
    pub queries: QuerySet,
    /// Where the catalog lives, to open it again.
    pub location: crate::Location,
    _dir: Option<tempfile::TempDir>,
}

impl Fresh {
    /// Closes the catalog and opens it again on the same storage with another specification.
    pub async fn reopen(self, queries: QuerySet) -> Fresh {
        let Fresh {
            catalog,
            location,
            _dir,
            ..
        } = self;
        drop(catalog);
        let catalog: Box<dyn Catalog> = match &location {
            crate::Location::Sqlite(path) => {
                Box::new(SqliteCatalog::open(path, queries.indexes().clone(), 2).expect("reopen"))
            }
            crate::Location::Postgres(url) => Box::new(
                crate::postgres::PostgresCatalog::open(url, queries.indexes().clone(), 4)
                    .await
                    .expect("reopen"),
            ),
        };
        Fresh {
            catalog,
            queries,
            location,
            _dir,
        }
    }
}

pub(crate) async fn postgres() -> Option<Fresh> {
    let url = crate::testing::fresh_database().await?;
    let url: crate::Location = url.parse().expect("a postgres URL");
    let crate::Location::Postgres(url) = url else {
        panic!("not a postgres URL")
    };
    let queries = QuerySet::embedded();
    let catalog = crate::postgres::PostgresCatalog::open(&url, queries.indexes().clone(), 4)
        .await
        .expect("open");
    Some(Fresh {
        catalog: Box::new(catalog),
        queries,
        location: crate::Location::Postgres(url),
        _dir: None,
    })
}

pub(crate) fn sqlite() -> Fresh {
    let dir = tempfile::tempdir().expect("temporary directory");
    let queries = QuerySet::embedded();
    let path = dir.path().join("catalog.db");
    let catalog = SqliteCatalog::open(&path, queries.indexes().clone(), 2).expect("open");
    Fresh {
        catalog: Box::new(catalog),
        queries,
        location: crate::Location::Sqlite(path),
        _dir: Some(dir),
    }
}

pub(crate) fn upsert(uri: &str, rev: &str, record: Value) -> Change {
    let queries = QuerySet::embedded();
    let uri = AtUri::new(uri).expect("a record's uri");
    let (author, collection, _) = uri.record_parts().expect("a record's uri");
    let mut record = record;
    record["$type"] = json!(collection.as_str());
    let json = svc_spec::Json::from_value(&record);
    let keys = queries.index_keys(&collection, uri.as_str(), &json);
    let search = queries
        .indexes()
        .search_text(&collection, uri.as_str(), &json);
    Change::Upsert(Upsert {
        keys,
        search,
        uri,
        collection,
        author,
        rev: tid(rev),
        cid: None,
        record_json: record.to_string(),
    })
}

pub(crate) fn delete(uri: &str, rev: &str) -> Change {
    let uri = AtUri::new(uri).expect("a record's uri");
    let (_, collection, _) = uri.record_parts().expect("a record's uri");
    Change::Delete {
        uri,
        collection,
        rev: tid(rev),
    }
}

/// A revision from the start of one (`3a`, `3b`...), padded with the TID alphabet's first
/// character, so that revisions order as their starts do.
pub(crate) fn tid(start: &str) -> Tid {
    Tid::new(format!("{start:2<13}")).expect("a TID's start")
}

/// A DID for a test account.
/// A checked at-uri of the tests' own text.
pub(crate) fn at(uri: &str) -> AtUri {
    AtUri::new(uri).expect("an at-uri")
}

pub(crate) fn did(text: &str) -> Did {
    Did::new(text).expect("a DID")
}

/// Runs every suite test against each backend.
macro_rules! each_backend {
    ($($test:ident),* $(,)?) => {
        mod sqlite_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::sqlite()).await;
                }
            )*
        }
        mod postgres_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    if let Some(fresh) = super::postgres().await {
                        super::$test(fresh).await;
                    }
                }
            )*
        }
    };
}

each_backend!(
    upsert_list_and_count,
    updates_move_index_keys,
    stale_revisions_never_roll_back,
    deletes_leave_tombstones,
    paging_by_offset_and_cursor,
    cursor_is_stored_with_records,
    kind_counts_follow_changes,
    change_clock_moves_with_touched_keys,
    bulk_loads_only_into_an_empty_catalog,
    records_loaded_in_bulk_change_like_any_other,
    accounts_hide_restore_and_remove_records,
    a_repository_replaced_whole_keeps_only_what_it_proves,
    a_repository_is_read_in_pages_while_its_account_is_active,
    the_change_stream_says_what_entered_changed_and_left,
    no_bulk_load_while_accounts_are_inactive,
    an_interrupted_bulk_load_is_undone_at_the_next_open,
    queries_redefined_or_added_between_opens_are_rebuilt,
    hostile_values_are_stored_and_found,
    hostile_values_are_loaded_in_bulk_and_found,
    a_refused_change_is_skipped_and_its_neighbours_applied,
    a_refused_change_in_a_bulk_load_is_skipped,
    the_resync_queue_and_heads_move_with_their_batch,
    a_record_taken_down_leaves_every_answer_until_lifted,
    an_account_taken_down_stays_down_through_its_host_and_a_reopening,
    labels_show_on_what_they_apply_to_until_negated_or_expired,
    a_takedown_label_holds_its_subject_down_beside_the_operator,
    the_operator_overrules_a_labeler_s_takedown,
    a_storm_of_takedown_toggles_costs_one_change,
    a_label_on_a_record_filed_under_no_key_moves_the_search_clock,
    a_labeler_no_longer_followed_stops_applying,
    a_labeler_s_labels_on_subjects_nobody_holds_are_bounded,
    search_finds_records_by_their_words_as_people_type_them,
    search_follows_writes_and_never_shows_what_is_out_of_sight,
    search_counts_exactly_up_to_its_limit_and_pages,
    search_finds_records_loaded_in_bulk_and_after_a_rebuild,
    roads_are_the_records_counts_grouped_and_follow_writes,
    activity_counts_changes_and_sources_by_minute,
);

use hostile::*;
use labels::*;
use roads::*;
use search::*;
use suite::*;
use takedowns::*;

/// What only SQLite has.
mod sqlite_only {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_sqlite_catalog_lists_its_words_when_migrated() {
        super::search::an_sqlite_catalog_lists_its_words_when_migrated(super::sqlite()).await;
    }
}

/// What only one engine has.
mod postgres_only {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_catalog_of_schema_4_answers_the_same_once_migrated() {
        if let Some(fresh) = super::postgres().await {
            super::suite::a_catalog_of_schema_4_answers_the_same_once_migrated(fresh).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_id_index_follows_a_bulk_load() {
        if let Some(fresh) = super::postgres().await {
            super::suite::the_id_index_follows_a_bulk_load(fresh).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_catalog_opens_through_the_database_socket() {
        if let Some(fresh) = super::postgres().await {
            super::suite::a_catalog_opens_through_the_database_socket(fresh).await;
        }
    }
}
