//! Concurrent misses on one key and version share one build (a flight): after a change to a
//! hot key, the clients asking for it wait for one query instead of each running their own.
//! Flights hold a key per distinct miss being built, outside the cache's budget: they last a
//! query each, and requests in flight are capped.

use super::{Answer, CacheKey};
use crate::ApiError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// An answer being built, and how the build ended; those who join it share the outcome.
pub(crate) type Flight = Arc<tokio::sync::OnceCell<Result<Arc<Answer>, ApiError>>>;

/// A request's part in a flight. The last one to leave takes the flight off the board, so the
/// next miss starts afresh (after a failure, too), and a flight whose requests all went away
/// before it was built does not stay behind.
pub(crate) struct Ticket<'a> {
    flights: &'a Flights,
    key: (CacheKey, u64),
    flight: Option<Flight>,
}

impl Ticket<'_> {
    pub fn flight(&self) -> &Flight {
        // `Some` from `join` until `drop`, which takes it only to count what is left.
        self.flight
            .as_ref()
            .expect("a ticket holds its flight until dropped")
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        // Flights are cloned and dropped under this lock only, so the count is exact.
        let Ok(mut flights) = self.flights.building.lock() else {
            return;
        };
        self.flight = None;
        if flights
            .get(&self.key)
            .is_some_and(|flight| Arc::strong_count(flight) == 1)
        {
            flights.remove(&self.key);
        }
    }
}

/// The flights under way, by key and version.
#[derive(Default)]
pub(super) struct Flights {
    building: Mutex<HashMap<(CacheKey, u64), Flight>>,
}

impl Flights {
    /// A part in the flight building the answer for this key and version, joined or started.
    pub fn join(&self, key: &CacheKey, version: u64) -> Ticket<'_> {
        let key = (key.clone(), version);
        let flight = match self.building.lock() {
            Ok(mut flights) => Arc::clone(flights.entry(key.clone()).or_default()),
            // Alone, then: a flight of its own that nobody else sees.
            Err(_) => Flight::default(),
        };
        Ticket {
            flights: self,
            key,
            flight: Some(flight),
        }
    }
}
