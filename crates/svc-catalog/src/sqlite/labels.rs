//! Labels and takedowns in SQLite: the writer's reads and writes of them, and the reads
//! answers make.

use super::engine::SqliteEngine;
use crate::engine::{LabelKey, LabelWrite, TakedownState, TakedownWrite, Takedowns, label_sql};
use crate::runtime::now_ms;
use crate::{CatalogResult, LabelView};
use rusqlite::{Connection, OptionalExtension, params};
use svc_syntax::UnixMillis;

impl SqliteEngine {
    pub(super) fn write_takedown(&self, takedown: &TakedownWrite) -> CatalogResult<()> {
        match &takedown.state {
            TakedownState::Applied { reference } => self
                .conn
                .prepare_cached(label_sql::TAKE_DOWN)?
                .execute(params![
                    takedown.subject,
                    takedown.source,
                    reference,
                    now_ms()
                ])?,
            TakedownState::Lifted => self
                .conn
                .prepare_cached(label_sql::LIFT)?
                .execute(params![takedown.subject, takedown.source])?,
        };
        Ok(())
    }

    pub(super) fn write_labels(&self, writes: &[LabelWrite]) -> CatalogResult<()> {
        for write in writes {
            match write {
                LabelWrite::Put(row) => {
                    self.conn.prepare_cached(label_sql::PUT)?.execute(params![
                        row.key.subject,
                        row.key.src,
                        row.key.val,
                        row.neg,
                        row.cts,
                        row.exp_ms
                    ])?
                }
                LabelWrite::Remove(key) => self
                    .conn
                    .prepare_cached(label_sql::REMOVE)?
                    .execute(params![key.subject, key.src, key.val])?,
            };
        }
        Ok(())
    }

    pub(super) fn read_takedowns(&self) -> CatalogResult<Takedowns> {
        let mut stmt = self.conn.prepare(label_sql::TAKEDOWNS)?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub(super) fn read_stored_label(
        &self,
        key: &LabelKey,
    ) -> CatalogResult<Option<(bool, String)>> {
        Ok(self
            .conn
            .prepare_cached(label_sql::STORED)?
            .query_row(params![key.subject, key.src, key.val], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?)
    }

    pub(super) fn read_label_count(&self, src: &str) -> CatalogResult<u64> {
        let count: i64 = self
            .conn
            .prepare_cached(label_sql::COUNT)?
            .query_row([src], |r| r.get(0))?;
        Ok(count.max(0) as u64)
    }

    pub(super) fn read_expired_labels(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> CatalogResult<Vec<LabelKey>> {
        let mut stmt = self.conn.prepare_cached(label_sql::EXPIRED)?;
        let rows = stmt.query_map(params![now.0, limit as i64], label_key)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub(super) fn read_labelers(&self) -> CatalogResult<Vec<String>> {
        let mut stmt = self.conn.prepare_cached(label_sql::LABELERS)?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub(super) fn read_labels_of(&self, src: &str, limit: usize) -> CatalogResult<Vec<LabelKey>> {
        let mut stmt = self.conn.prepare_cached(label_sql::OF_SOURCE)?;
        let rows = stmt.query_map(params![src, limit as i64], label_key)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub(super) fn read_holds(&self, subject: &str) -> CatalogResult<bool> {
        let (from, to) = crate::engine::repository_range(subject);
        Ok(self
            .conn
            .prepare_cached(label_sql::HOLDS)?
            .query_row(params![subject, from, to], |r| r.get(0))?)
    }
}

/// A label's key from a row of (subject, src, val).
fn label_key(row: &rusqlite::Row<'_>) -> rusqlite::Result<LabelKey> {
    Ok(LabelKey {
        subject: row.get(0)?,
        src: row.get(1)?,
        val: row.get(2)?,
    })
}

/// The labels in force on `subjects`, at most `limit` in all.
pub(crate) fn labels(
    conn: &Connection,
    subjects: &[String],
    limit: usize,
) -> CatalogResult<Vec<LabelView>> {
    let mut found = Vec::new();
    let mut stmt = conn.prepare_cached(label_sql::IN_FORCE)?;
    for subject in subjects {
        let left = limit.saturating_sub(found.len());
        if left == 0 {
            break;
        }
        let rows = stmt.query_map(params![subject, left as i64], |r| {
            Ok(LabelView {
                subject: r.get(0)?,
                src: r.get(1)?,
                val: r.get(2)?,
                cts: r.get(3)?,
            })
        })?;
        found.extend(rows.collect::<rusqlite::Result<Vec<_>>>()?);
    }
    Ok(found)
}
