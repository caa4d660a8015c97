//! The reads of the repositories' synchronisation that run on the writer's connection.

use crate::engine::Engine;
use crate::{CatalogResult, RepositoryHead, ResyncEntry, ResyncSummary};
use svc_syntax::UnixMillis;

/// The reads of the repositories' synchronisation, as the writer's engine answers them.
pub(crate) trait SyncReads {
    fn resync_due(&mut self, now: UnixMillis, limit: usize) -> CatalogResult<Vec<ResyncEntry>>;
    fn resync_summary(&mut self) -> CatalogResult<ResyncSummary>;
    fn repository_heads(&mut self, limit: usize) -> CatalogResult<Vec<RepositoryHead>>;
}

impl<E: Engine> SyncReads for E {
    fn resync_due(&mut self, now: UnixMillis, limit: usize) -> CatalogResult<Vec<ResyncEntry>> {
        Engine::resync_due(self, now, limit)
    }

    fn resync_summary(&mut self) -> CatalogResult<ResyncSummary> {
        Engine::resync_summary(self)
    }

    fn repository_heads(&mut self, limit: usize) -> CatalogResult<Vec<RepositoryHead>> {
        Engine::repository_heads(self, limit)
    }
}
