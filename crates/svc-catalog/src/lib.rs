//! The catalog: the query specification, its index keys, and the storage of records, keys,
//! counts and cursors behind the [`Catalog`] trait.

mod catalog;
mod clock;
mod location;
pub mod spec;
pub mod sqlite;

pub use catalog::*;
pub use clock::ChangeClock;
pub use location::{ACCEPTED_FORMS, Location, LocationError, PostgresUrl};
pub use spec::{ParamError, Query, QuerySet, SpecError};

#[cfg(test)]
mod tests;
