//! Arbitrary text through the ingest rules and the catalog's writer: no record can stop the
//! indexer. Each line of the input becomes the name of a record that passes validation (any
//! Unicode scalar, NUL included, any length), created, updated or deleted; the writer must take
//! every batch, and a record written after them must be found.

use std::sync::{Arc, OnceLock};
use svc_catalog::{Catalog, Change, PageRequest};
use svc_ingest::{Ingestor, JetstreamLine, Prepared, parse_jetstream_line};
use svc_spec::QuerySet;

/// A catalog for the writer target to drive, with what it takes to feed it.
pub struct WriterBench {
    runtime: tokio::runtime::Runtime,
    catalog: Box<dyn Catalog>,
    ingestor: Ingestor,
    queries: QuerySet,
    /// Keeps an SQLite catalog's folder while the bench lives.
    _dir: Option<tempfile::TempDir>,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime")
}

impl WriterBench {
    /// A catalog in an SQLite file of its own.
    pub fn sqlite() -> WriterBench {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let queries = QuerySet::embedded();
        let catalog = svc_catalog::sqlite::SqliteCatalog::open(
            &dir.path().join("catalog.db"),
            queries.indexes().clone(),
            1,
        )
        .expect("an SQLite catalog");
        WriterBench::on(runtime(), Box::new(catalog), queries, Some(dir))
    }

    /// A catalog in a fresh database of the PostgreSQL test cluster (`SVC_TEST_POSTGRES`);
    /// `None` without one, outside CI.
    pub fn postgres() -> Option<WriterBench> {
        let runtime = runtime();
        let queries = QuerySet::embedded();
        let catalog = runtime.block_on(async {
            let url = svc_catalog::testing::fresh_database().await?;
            let Ok(svc_catalog::Location::Postgres(url)) = url.parse() else {
                panic!("the test cluster's URL is not a PostgreSQL URL");
            };
            let catalog =
                svc_catalog::postgres::PostgresCatalog::open(&url, queries.indexes().clone(), 2)
                    .await
                    .expect("a PostgreSQL catalog");
            Some(catalog)
        })?;
        Some(WriterBench::on(runtime, Box::new(catalog), queries, None))
    }

    fn on(
        runtime: tokio::runtime::Runtime,
        catalog: Box<dyn Catalog>,
        queries: QuerySet,
        dir: Option<tempfile::TempDir>,
    ) -> WriterBench {
        let ingestor = Ingestor::new(Arc::new(queries.clone()), Arc::default());
        WriterBench {
            runtime,
            catalog,
            ingestor,
            queries,
            _dir: dir,
        }
    }

    /// Drives one input through the rules and the writer; panics if the writer fails a batch
    /// or stops taking records.
    pub fn drive(&self, data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        let changes: Vec<Change> = text
            .split('\n')
            .filter_map(|piece| self.change_of(piece))
            .collect();
        self.runtime.block_on(async {
            let report = self
                .catalog
                .apply(changes, None)
                .await
                .expect("the writer takes every batch");
            assert_eq!(report.refused_total(), 0, "a valid record was refused");
            let sentinel = format!("sentinel-{}", next_tid());
            let after = self.change_of(&sentinel).expect("the sentinel is valid");
            self.catalog
                .apply(vec![after], None)
                .await
                .expect("the writer takes the record after them");
            assert_eq!(self.found(&sentinel).await, 1, "the record after them");
        });
    }

    async fn found(&self, name: &str) -> u64 {
        let position = self.queries.position("vocabulariesByName").expect("query");
        let query = &self.queries.all()[position];
        let page = self
            .catalog
            .list(
                query.id().clone(),
                query.lookup_key(&[Some(name)]),
                PageRequest {
                    limit: 1,
                    offset: 0,
                    after: None,
                },
            )
            .await
            .expect("list");
        page.total
    }

    /// A vocabulary named `piece` (a delete when it starts with `-`), at a record key drawn
    /// from it, so that lines repeat, update and delete records.
    fn change_of(&self, piece: &str) -> Option<Change> {
        let rkey = format!("k{}", piece.len() % 7);
        let (operation, record) = if piece.starts_with('-') {
            ("delete", serde_json::Value::Null)
        } else {
            let world = ["open", "closed-with-default", "hierarchy-closed"][piece.len() % 3];
            let record = serde_json::json!({"$type": "dev.svc.vocab", "name": piece,
                "world": world, "occurredAt": "2026-01-01T00:00:00Z"});
            ("create", record)
        };
        let line = serde_json::json!({"did": "did:plc:fuzz", "time_us": 1, "kind": "commit",
            "commit": {"rev": next_tid(), "operation": operation, "collection": "dev.svc.vocab",
                "rkey": rkey, "record": record}});
        let Ok(JetstreamLine::Commit(event)) = parse_jetstream_line(&line.to_string()) else {
            return None;
        };
        match self.ingestor.prepare(event) {
            Prepared::Change(change) => Some(change),
            Prepared::Invalid | Prepared::Ignored => None,
        }
    }
}

/// Revisions that only grow, so that every change applies.
fn next_tid() -> String {
    static GENERATOR: OnceLock<svc_syntax::TidGenerator> = OnceLock::new();
    GENERATOR
        .get_or_init(|| svc_syntax::TidGenerator::new(1))
        .next_tid()
}

/// The fuzz target: one SQLite catalog for the whole run, as an indexer keeps one.
pub fn writer(data: &[u8]) {
    static BENCH: OnceLock<WriterBench> = OnceLock::new();
    BENCH.get_or_init(WriterBench::sqlite).drive(data);
}
