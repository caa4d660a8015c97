//! The `Catalog` over any engine: writes go to the rules' writer thread, reads to the engine's
//! read side by the engine's number for each query.

use super::{Engine, WriterHandle, writer::spawn_writer};
use crate::keys_column::QueryIds;
use crate::{
    AccountStatus, ApplyReport, Catalog, CatalogFuture, CatalogResult, Change, ChangeClock,
    CursorPosition, Item, KindCounts, Page, PageRequest, QueryId, QuerySet,
};
use std::sync::Arc;

/// What an engine's read side answers; a query is the engine's number for it.
pub trait Reads: Send + Sync + 'static {
    fn list(&self, qid: i64, key: String, page: PageRequest) -> CatalogFuture<'_, Page>;
    fn count_keys(&self, qid: i64, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>>;
    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts>;
    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>>;
    fn get(&self, uri: String) -> CatalogFuture<'_, Option<Item>>;
}

/// A catalog on one engine: its writer thread under the rules, and its reads.
pub struct EngineCatalog<R> {
    qids: QueryIds,
    clock: Arc<ChangeClock>,
    writer: WriterHandle,
    reads: R,
}

impl<R: Reads> EngineCatalog<R> {
    /// Readies the engine's storage (see `spawn_writer`) and starts its writer; runs the
    /// engine's blocking primitives on the calling thread until then.
    pub(crate) fn start<E: Engine>(
        engine: E,
        queries: &QuerySet,
        reads: R,
    ) -> CatalogResult<EngineCatalog<R>> {
        let clock = Arc::new(ChangeClock::default());
        let (writer, qids) = spawn_writer(engine, queries, Arc::clone(&clock))?;
        Ok(EngineCatalog {
            qids,
            clock,
            writer,
            reads,
        })
    }
}

impl<R: Reads> Catalog for EngineCatalog<R> {
    fn apply(
        &self,
        changes: Vec<Change>,
        cursor: Option<CursorPosition>,
    ) -> CatalogFuture<'_, ApplyReport> {
        self.writer.apply(changes, cursor)
    }

    fn list(&self, query: QueryId, key: String, page: PageRequest) -> CatalogFuture<'_, Page> {
        match self.qids.qid(&query) {
            Ok(qid) => self.reads.list(qid, key, page),
            Err(error) => Box::pin(async { Err(error) }),
        }
    }

    fn count_keys(&self, query: QueryId, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>> {
        match self.qids.qid(&query) {
            Ok(qid) => self.reads.count_keys(qid, keys),
            Err(error) => Box::pin(async { Err(error) }),
        }
    }

    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts> {
        self.reads.kind_counts()
    }

    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>> {
        self.reads.cursor(source)
    }

    fn get(&self, uri: String) -> CatalogFuture<'_, Option<Item>> {
        self.reads.get(uri)
    }

    fn set_account(&self, did: String, status: AccountStatus) -> CatalogFuture<'_, ()> {
        self.writer.set_account(did, status)
    }

    fn begin_bulk(&self) -> CatalogFuture<'_, bool> {
        self.writer.begin_bulk()
    }

    fn finish_bulk(&self, cursor: Option<CursorPosition>) -> CatalogFuture<'_, ApplyReport> {
        self.writer.finish_bulk(cursor)
    }

    fn clock(&self) -> &ChangeClock {
        &self.clock
    }
}
