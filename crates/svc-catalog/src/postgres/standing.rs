//! Where things stand, as a plan writes it in PostgreSQL: each source's cursor, the
//! repositories' synchronisation, accounts inactive at their hosts, takedowns and labels.

use super::link::Link;
use crate::CatalogResult;
use crate::engine::Plan;
use crate::runtime::now_ms;

impl Link {
    /// Inside the open transaction: the sources' cursors, the repositories' synchronisation,
    /// an account's status and a takedown, as the plan says them.
    pub(super) async fn write_status(&mut self, plan: &Plan<'_>) -> CatalogResult<()> {
        for source in &plan.forget_cursors {
            self.execute(crate::engine::label_sql::FORGET_CURSOR, &[source])
                .await?;
        }
        for cursor in &plan.cursors {
            self.execute(
                "INSERT INTO cursors (source, endpoint, cursor, event_time_us, updated_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (source) DO UPDATE SET endpoint = excluded.endpoint, cursor = excluded.cursor, \
                   event_time_us = excluded.event_time_us, updated_at = excluded.updated_at",
                &[&cursor.source, &cursor.endpoint, &cursor.cursor, &cursor.event_time.map(|time| time.0), &now_ms()],
            )
            .await?;
        }
        for sync in &plan.sync {
            self.write_sync(sync).await?;
        }
        if let Some(account) = &plan.account {
            match &account.inactive {
                Some(status) => {
                    self.execute(
                        "INSERT INTO inactive_accounts (did, status, updated_at) VALUES ($1, $2, $3) \
                         ON CONFLICT (did) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at",
                        &[&account.did, status, &now_ms()],
                    )
                    .await?
                }
                None => {
                    self.execute("DELETE FROM inactive_accounts WHERE did = $1", &[&account.did])
                        .await?
                }
            };
        }
        for takedown in &plan.takedowns {
            self.write_takedown(takedown).await?;
        }
        self.write_labels(&plan.labels).await?;
        Ok(())
    }
}
