//! The catalog: the storage of records, their index keys, counts and cursors, read through
//! [`CatalogRead`], written through [`CatalogWrite`], with the process's part in it through
//! [`CatalogRole`]; and where a catalog lives.

mod activity;
mod change;
mod clock;
mod engine;
mod engine_catalog;
mod interface;
mod keys_column;
mod location;
mod page;
pub mod postgres;
mod replication_log;
mod resync;
mod rules;
mod runtime;
pub mod sqlite;
mod stream;
mod writer;

pub use activity::{ACTIVITY_KEEP_MS, Activity, SourceMinute};
pub use change::*;
pub use clock::ChangeClock;
pub use interface::*;
pub use location::{ACCEPTED_FORMS, Location, LocationError, PostgresUrl};
pub use page::*;
pub use resync::{
    FRESH_ATTEMPTS, RepositoryHead, ResyncEntry, ResyncPostponed, ResyncRequest, ResyncRetry,
    ResyncSummary, SyncWrites,
};
pub use stream::{RecordChange, StreamBounds, StreamOp, StreamRow};

#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
