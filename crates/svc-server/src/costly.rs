//! Pages that cost the catalog real work to build, whatever is asked (a map, a search, the
//! front page, a lens's chart): a client that varies its parameters misses the cache every
//! time, and could keep both cores building for nobody. So a build takes a turn first: at
//! most `per_client` of one client's at once, and at most `in_all` of everyone's. A build that
//! gets no turn within a second is refused with `Retry-After` (429 when its own client holds
//! its turns, 503 when everyone's are taken). Answers kept in the cache, and builds others
//! already started (a flight), take no turn: cheap answers and probes keep their cores.

use crate::ApiError;
use crate::client::Client;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a build waits for its turn before it is refused.
const WAIT_FOR_TURN: Duration = Duration::from_secs(1);
/// Clients remembered past which those holding no turn are let go.
const PRUNE_PAST: usize = 1024;

/// Whose turns were all taken when a build was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// The client's own: it asks for too many costly pages at once.
    ByThisClient,
    /// Everyone's together.
    ByEveryone,
}

pub(crate) struct CostlyGate {
    in_all: Arc<Semaphore>,
    per_client: usize,
    clients: Mutex<HashMap<Client, Weak<Semaphore>>>,
}

/// A build's turn, given back when dropped.
pub(crate) struct Turn {
    _own: Option<OwnedSemaphorePermit>,
    _all: OwnedSemaphorePermit,
}

impl CostlyGate {
    pub fn new(in_all: usize, per_client: usize) -> CostlyGate {
        CostlyGate {
            in_all: Arc::new(Semaphore::new(in_all.max(1))),
            per_client: per_client.max(1),
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for a turn to build a costly page for `client` (none: a connection without a
    /// peer address, counted only in all).
    pub async fn turn(&self, client: Option<Client>) -> Result<Turn, ApiError> {
        let own = match client {
            Some(client) => Some(take(self.semaphore_of(client), Taken::ByThisClient).await?),
            None => None,
        };
        let all = take(Arc::clone(&self.in_all), Taken::ByEveryone).await?;
        Ok(Turn {
            _own: own,
            _all: all,
        })
    }

    fn semaphore_of(&self, client: Client) -> Arc<Semaphore> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(semaphore) = clients.get(&client).and_then(Weak::upgrade) {
            return semaphore;
        }
        if clients.len() >= PRUNE_PAST {
            clients.retain(|_, semaphore| semaphore.strong_count() > 0);
        }
        let semaphore = Arc::new(Semaphore::new(self.per_client));
        clients.insert(client, Arc::downgrade(&semaphore));
        semaphore
    }
}

/// `build`, once `client` has a turn.
pub(crate) async fn gated<T>(
    gate: &CostlyGate,
    client: Option<Client>,
    build: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let _turn = gate.turn(client).await?;
    build.await
}

/// The client a handler's request comes from, as `every_request` told it.
pub(crate) type Asker = Option<axum::Extension<crate::client::Asking>>;

/// The client in an [`Asker`].
pub(crate) fn client_of(asker: Asker) -> Option<Client> {
    asker.map(|axum::Extension(asking)| asking.client)
}

async fn take(semaphore: Arc<Semaphore>, taken: Taken) -> Result<OwnedSemaphorePermit, ApiError> {
    match tokio::time::timeout(WAIT_FOR_TURN, semaphore.acquire_owned()).await {
        Ok(Ok(permit)) => Ok(permit),
        // A semaphore is never closed; a timeout is the refusal.
        _ => Err(ApiError::Busy(taken)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientPrefixes;

    fn client(last: u8) -> Option<Client> {
        Some(Client::of(
            [192, 0, 2, last].into(),
            ClientPrefixes::default(),
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_gets_its_turns_and_everyone_shares_the_rest() {
        let gate = CostlyGate::new(2, 1);
        let first = gate.turn(client(1)).await.expect("a turn");
        // The same client's second waits for its first, then is refused.
        let refused = gate.turn(client(1)).await.err();
        assert!(matches!(refused, Some(ApiError::Busy(Taken::ByThisClient))));
        // Another network's client has its own turn; a third finds every turn taken.
        let other = Some(Client::of(
            [198, 51, 100, 1].into(),
            ClientPrefixes::default(),
        ));
        let second = gate.turn(other).await.expect("a turn");
        let third = Some(Client::of(
            [203, 0, 113, 1].into(),
            ClientPrefixes::default(),
        ));
        let refused = gate.turn(third).await.err();
        assert!(matches!(refused, Some(ApiError::Busy(Taken::ByEveryone))));
        // A turn given back is taken by whoever waits for it.
        drop(first);
        let again = gate.turn(client(1)).await;
        assert!(again.is_ok());
        drop(second);
    }
}
