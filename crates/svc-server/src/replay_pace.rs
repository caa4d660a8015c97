//! Replays of the change stream paced per client. A subscription from a cursor first reads
//! what storage kept after it, as fast as its connection takes it; many of them from one
//! client (from `cursor=0`, gigabytes each) would take the server's cores from every other
//! answer. The bytes a client's replays read from storage and send share one budget per
//! second, with a second's worth as burst (a replay for a key that matches nothing still
//! reads); live changes, which come at the catalog's own pace, are not counted.

use crate::client::Client;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// Clients remembered past which budgets no replay holds any more are let go.
const PRUNE_PAST: usize = 1024;

/// Every client's replay budget.
pub(crate) struct ReplayBudgets {
    /// Bytes per second per client; 0: replays are not paced.
    rate: u64,
    budgets: Mutex<HashMap<Client, Weak<Budget>>>,
}

impl ReplayBudgets {
    pub fn new(rate: u64) -> ReplayBudgets {
        ReplayBudgets {
            rate,
            budgets: Mutex::new(HashMap::new()),
        }
    }

    /// The budget `client`'s replays share; `None` when replays are not paced.
    pub fn of(&self, client: Option<Client>) -> Option<Arc<Budget>> {
        if self.rate == 0 {
            return None;
        }
        let Some(client) = client else {
            return Some(Arc::new(Budget::new(self.rate)));
        };
        let mut budgets = self.budgets.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(budget) = budgets.get(&client).and_then(Weak::upgrade) {
            return Some(budget);
        }
        if budgets.len() >= PRUNE_PAST {
            budgets.retain(|_, budget| budget.strong_count() > 0);
        }
        let budget = Arc::new(Budget::new(self.rate));
        budgets.insert(client, Arc::downgrade(&budget));
        Some(budget)
    }
}

/// One client's replay budget: a bucket of bytes refilled at its rate.
pub(crate) struct Budget {
    rate: f64,
    bucket: Mutex<(f64, Instant)>,
}

impl Budget {
    fn new(rate: u64) -> Budget {
        let rate = rate as f64;
        Budget {
            rate,
            bucket: Mutex::new((rate, Instant::now())),
        }
    }

    /// Spends `bytes`, waiting while the client's replays have sent more than their rate.
    pub async fn spend(&self, bytes: usize) {
        let wait = {
            let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
            let (available, since) = &mut *bucket;
            let now = Instant::now();
            let refill = now.duration_since(*since).as_secs_f64() * self.rate;
            *available = (*available + refill).min(self.rate) - bytes as f64;
            *since = now;
            (*available < 0.0).then(|| Duration::from_secs_f64(-*available / self.rate))
        };
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientPrefixes;

    fn client(address: &str) -> Option<Client> {
        let address = address.parse().unwrap();
        Some(Client::of(address, ClientPrefixes::default()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_s_replays_share_one_rate() {
        let budgets = ReplayBudgets::new(1000);
        let (one, other) = (
            budgets.of(client("10.0.0.1")),
            budgets.of(client("10.0.0.2")),
        );
        let (one, other) = (one.unwrap(), other.unwrap());
        assert!(Arc::ptr_eq(&one, &other), "one /24 is one client");
        let started = Instant::now();
        // A second's worth goes at once; the next 3,000 bytes take 3 s.
        one.spend(1000).await;
        assert_eq!(started.elapsed(), Duration::ZERO);
        one.spend(1500).await;
        other.spend(1500).await;
        assert_eq!(started.elapsed().as_secs(), 3);
        let elsewhere = budgets.of(client("192.0.2.1")).unwrap();
        assert!(!Arc::ptr_eq(&one, &elsewhere));
        assert!(ReplayBudgets::new(0).of(client("10.0.0.1")).is_none());
    }
}
