//! The catalog: the storage of records, their index keys, counts and cursors behind the
//! [`Catalog`] trait, and where a catalog lives. The query specification is `svc-spec`.

mod catalog;
mod changelog;
mod clock;
mod keys_column;
mod location;
pub mod postgres;
mod rules;
pub mod sqlite;

pub use catalog::*;
pub use clock::ChangeClock;
pub use location::{ACCEPTED_FORMS, Location, LocationError, PostgresUrl};
pub use svc_spec as spec;
pub use svc_spec::{Json, ParamError, Query, QuerySet, SpecError};

#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
