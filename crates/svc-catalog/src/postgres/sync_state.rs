//! The repositories' synchronisation as PostgreSQL keeps it: the resynchronisation queue and
//! the chains' heads, written inside the writer's transactions and read by the queue's reader.

use super::link::Link;
use crate::CatalogResult;
use crate::resync::{self, RepositoryHead, ResyncEntry, ResyncSummary, SyncWrites};
use crate::runtime::now_ms;
use svc_syntax::UnixMillis;

impl Link {
    /// Inside the open transaction: what a batch says of the repositories' synchronisation.
    pub(super) async fn write_sync(&mut self, sync: &SyncWrites) -> CatalogResult<()> {
        for head in &sync.heads {
            let (did, rev) = (head.did.as_str(), head.rev.as_str());
            self.execute(resync::sql::HEAD, &[&did, &rev, &head.data])
                .await?;
        }
        let now = now_ms();
        for request in &sync.queued {
            let did = request.did.as_str();
            self.execute(resync::sql::QUEUE, &[&did, &request.reason, &now])
                .await?;
        }
        for retry in &sync.retried {
            let did = retry.did.as_str();
            self.execute(resync::sql::RETRY, &[&retry.due.0, &retry.error, &did])
                .await?;
        }
        for postponed in &sync.postponed {
            let did = postponed.did.as_str();
            self.execute(resync::sql::POSTPONE, &[&postponed.due.0, &did])
                .await?;
        }
        for did in &sync.done {
            self.execute(resync::sql::DONE, &[&did.as_str()]).await?;
        }
        for did in &sync.forgotten {
            self.execute(resync::sql::FORGET, &[&did.as_str()]).await?;
        }
        if let Some(at) = sync.hurry {
            self.execute(resync::sql::HURRY, &[&at.0, &resync::HURRIED_AT_MOST])
                .await?;
        }
        Ok(())
    }

    pub(super) async fn resync_due(
        &mut self,
        now: UnixMillis,
        limit: usize,
    ) -> CatalogResult<Vec<ResyncEntry>> {
        let rows = self
            .query(resync::sql::DUE, &[&now.0, &(limit as i64)])
            .await?;
        Ok(rows.iter().filter_map(queue_row).collect())
    }

    pub(super) async fn resync_summary(&mut self) -> CatalogResult<ResyncSummary> {
        let counts = self.query(resync::sql::COUNTS, &[]).await?;
        let (waiting, fresh): (i64, i64) = counts
            .first()
            .map_or((0, 0), |row| (row.get(0), row.get(1)));
        let oldest = self.query(resync::sql::OLDEST, &[]).await?;
        Ok(ResyncSummary {
            waiting: waiting.max(0) as u64,
            fresh: fresh.max(0) as u64,
            oldest: oldest.first().and_then(queue_row),
        })
    }

    pub(super) async fn repository_heads(
        &mut self,
        limit: usize,
    ) -> CatalogResult<Vec<RepositoryHead>> {
        let rows = self.query(resync::sql::HEADS, &[&(limit as i64)]).await?;
        Ok(rows
            .iter()
            .filter_map(|r| resync::head(r.get(0), r.get(1), r.get(2)))
            .collect())
    }
}

/// A queue row, or `None` when it does not hold a queue entry.
fn queue_row(r: &tokio_postgres::Row) -> Option<ResyncEntry> {
    resync::entry(r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5))
}
