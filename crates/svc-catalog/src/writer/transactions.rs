//! The writer's transactions: each runs in one engine transaction with its change-log entry,
//! and publishes what it touched to the change clock only once committed.

use crate::activity::ActivityWrite;
use crate::engine::{Engine, Plan};
use crate::replication_log::LogEntry;
use crate::rules::Filing;
use crate::stream::StreamEntry;
use crate::{CatalogResult, ChangeClock};
use std::sync::Arc;

pub(crate) struct Transactions<E: Engine> {
    pub engine: E,
    pub clock: Arc<ChangeClock>,
    pub filing: Filing,
    /// The number of the next change-log entry: one writer numbers them without gaps.
    pub next_seq: i64,
    /// The number of the next change of the change stream, likewise.
    pub next_change: i64,
}

impl<E: Engine> Transactions<E> {
    /// Runs `work` in one transaction, rolled back if it fails; publishes the committed plan's
    /// changes to the clock.
    pub fn run<'a, T>(
        &mut self,
        work: impl FnOnce(&mut E, &Filing) -> CatalogResult<(Plan<'a>, T)>,
    ) -> CatalogResult<T> {
        self.engine.begin()?;
        let outcome = work(&mut self.engine, &self.filing).and_then(|(plan, value)| {
            let entry = plan.log_entry();
            let logged = self.log(&entry)?;
            let news = (entry.kinds, entry.changes_search());
            drop(entry);
            let streamed = self.stream(&plan.stream)?;
            let now = svc_syntax::UnixMillis::now();
            if let Some(activity) = ActivityWrite::of(now, &plan.stream, &plan.cursors) {
                self.engine.record_activity(&activity)?;
            }
            self.engine.commit()?;
            self.next_seq += i64::from(logged);
            self.next_change += streamed;
            Ok((plan, value, news))
        });
        match outcome {
            Ok((plan, value, (kinds, search))) => {
                self.publish(&plan.touched, kinds, search);
                Ok(value)
            }
            Err(error) => {
                self.engine.rollback();
                Err(error)
            }
        }
    }

    /// Inside the open transaction: appends the entry to the replication log unless it is empty;
    /// whether it did (the number is taken once the transaction commits).
    pub fn log(&mut self, entry: &LogEntry<'_>) -> CatalogResult<bool> {
        if entry.is_empty() {
            return Ok(false);
        }
        self.engine.log(self.next_seq, entry)?;
        Ok(true)
    }

    /// Inside the open transaction: appends the visible changes to the change stream; how
    /// many (their numbers are taken once the transaction commits).
    fn stream(&mut self, entries: &[StreamEntry]) -> CatalogResult<i64> {
        if entries.is_empty() {
            return Ok(0);
        }
        self.engine.stream(self.next_change, entries)?;
        Ok(entries.len() as i64)
    }

    /// Readers may cache against the clock: bump it only after the commit, as the committed
    /// log entry says (the keys it touched, whether kinds' counts moved and searches may
    /// have changed), as followers read it.
    fn publish(&self, touched: &svc_spec::IndexKeys, kinds: bool, search: bool) {
        self.clock.touch_keys(touched);
        if kinds {
            self.clock.touch_kinds();
        }
        if search {
            self.clock.touch_search();
        }
    }
}
