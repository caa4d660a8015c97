//! The catalog's activity by minute, as PostgreSQL keeps it (see [`crate::activity`]).

use super::link::Link;
use crate::CatalogResult;
use crate::activity::{ActivityWrite, kept_from, sql};
use svc_syntax::UnixMillis;

impl Link {
    /// Inside the open transaction: adds a commit's activity to its minute.
    pub(super) async fn write_activity(&mut self, write: &ActivityWrite<'_>) -> CatalogResult<()> {
        if write.changes > 0 {
            self.execute(sql::ADD_CHANGES, &[&write.minute, &write.changes])
                .await?;
        }
        for (source, event) in &write.sources {
            self.execute(sql::MOVE_SOURCE, &[source, &write.minute, event])
                .await?;
        }
        Ok(())
    }

    /// Drops the minutes older than the charts show.
    pub(super) async fn trim_activity(&mut self, now: UnixMillis) -> CatalogResult<()> {
        let from = kept_from(now);
        self.execute(sql::TRIM_CHANGES, &[&from]).await?;
        self.execute(sql::TRIM_SOURCES, &[&from]).await?;
        Ok(())
    }
}
