//! Labels and takedowns in PostgreSQL: the writer's reads and writes of them, and the reads
//! answers make.

use super::link::Link;
use super::reads::{Reads, connection};
use super::storage;
use crate::engine::{LabelKey, LabelWrite, TakedownState, TakedownWrite, Takedowns, label_sql};
use crate::runtime::now_ms;
use crate::{CatalogResult, LabelView};
use svc_syntax::UnixMillis;

impl Link {
    pub(super) async fn write_takedown(&mut self, takedown: &TakedownWrite) -> CatalogResult<()> {
        let (subject, source) = (&takedown.subject, &takedown.source);
        match &takedown.state {
            TakedownState::Applied { reference } => {
                let at = now_ms();
                self.execute(label_sql::TAKE_DOWN, &[subject, source, reference, &at])
                    .await?
            }
            TakedownState::Lifted => self.execute(label_sql::LIFT, &[subject, source]).await?,
        };
        Ok(())
    }

    pub(super) async fn write_labels(&mut self, writes: &[LabelWrite]) -> CatalogResult<()> {
        for write in writes {
            match write {
                LabelWrite::Put(row) => {
                    let key = &row.key;
                    let values: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
                        &key.subject,
                        &key.src,
                        &key.val,
                        &row.neg,
                        &row.cts,
                        &row.exp_ms,
                    ];
                    self.execute(label_sql::PUT, &values).await?
                }
                LabelWrite::Remove(key) => {
                    self.execute(label_sql::REMOVE, &[&key.subject, &key.src, &key.val])
                        .await?
                }
            };
        }
        Ok(())
    }

    pub(super) async fn read_takedowns(&mut self) -> CatalogResult<Takedowns> {
        let rows = self.query(label_sql::TAKEDOWNS, &[]).await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    pub(super) async fn read_stored_label(
        &mut self,
        key: &LabelKey,
    ) -> CatalogResult<Option<(bool, String)>> {
        let rows = self
            .query(label_sql::STORED, &[&key.subject, &key.src, &key.val])
            .await?;
        Ok(rows.first().map(|r| (r.get(0), r.get(1))))
    }

    pub(super) async fn read_label_count(&mut self, src: &str) -> CatalogResult<u64> {
        let rows = self.query(label_sql::COUNT, &[&src]).await?;
        Ok(rows.first().map_or(0, |r| r.get::<_, i64>(0).max(0) as u64))
    }

    pub(super) async fn read_expired_labels(
        &mut self,
        now: UnixMillis,
        limit: usize,
    ) -> CatalogResult<Vec<LabelKey>> {
        let rows = self
            .query(label_sql::EXPIRED, &[&now.0, &(limit as i64)])
            .await?;
        Ok(rows.iter().map(label_key).collect())
    }

    pub(super) async fn read_label_values(
        &mut self,
        subject: &str,
        src: &str,
    ) -> CatalogResult<u64> {
        let rows = self.query(label_sql::VALUES_ON, &[&subject, &src]).await?;
        let count: i64 = rows.first().map_or(0, |r| r.get(0));
        Ok(count.max(0) as u64)
    }

    pub(super) async fn read_labelers(&mut self) -> CatalogResult<Vec<String>> {
        let rows = self.query(label_sql::LABELERS, &[]).await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    pub(super) async fn read_labels_of(
        &mut self,
        src: &str,
        limit: usize,
    ) -> CatalogResult<Vec<LabelKey>> {
        let rows = self
            .query(label_sql::OF_SOURCE, &[&src, &(limit as i64)])
            .await?;
        Ok(rows.iter().map(label_key).collect())
    }

    pub(super) async fn read_holds(&mut self, subject: &str) -> CatalogResult<bool> {
        let (from, to) = crate::engine::repository_range(subject);
        let rows = self
            .query(label_sql::HOLDS, &[&subject, &from, &to])
            .await?;
        Ok(rows.first().is_some_and(|r| r.get(0)))
    }
}

/// A label's key from a row of (subject, src, val).
fn label_key(row: &tokio_postgres::Row) -> LabelKey {
    LabelKey {
        subject: row.get(0),
        src: row.get(1),
        val: row.get(2),
    }
}

/// The labels in force on `subjects`, at most `limit` in all.
pub(super) async fn labels(
    pool: &Reads,
    subjects: &[String],
    limit: usize,
) -> CatalogResult<Vec<LabelView>> {
    let client = connection(pool).await?;
    let statement = client
        .prepare_cached(label_sql::IN_FORCE)
        .await
        .map_err(storage)?;
    let mut found = Vec::new();
    for subject in subjects {
        let left = limit.saturating_sub(found.len());
        if left == 0 {
            break;
        }
        let rows = client
            .query(&statement, &[subject, &(left as i64)])
            .await
            .map_err(storage)?;
        found.extend(rows.iter().map(|r| LabelView {
            subject: r.get(0),
            src: r.get(1),
            val: r.get(2),
            cts: r.get(3),
        }));
    }
    Ok(found)
}
