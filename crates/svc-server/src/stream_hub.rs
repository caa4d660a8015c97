//! One reader of the catalog's change stream per process: it reads each new change once (as
//! soon as the change clock moves, or after a short wait), reads the record of each change
//! that leaves it answered, and hands both to every subscriber at once. A subscriber that
//! falls further behind than the hub keeps is told so and closed.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use svc_catalog::{CatalogRead, Item, RecordChange};
use tokio::sync::broadcast;

/// Changes the hub keeps for subscribers that have not taken them yet.
pub(crate) const HUB_KEEPS: usize = 4096;
/// How often the change clock is looked at.
const LOOK_EVERY: Duration = Duration::from_millis(20);
/// How long the hub waits without the clock moving before it reads anyway: a change of a
/// record no query files moves no key.
const READ_AT_LEAST_EVERY: Duration = Duration::from_millis(250);
/// Changes read per step.
const READ_AT_MOST: usize = 1000;

/// A change with its record as it stands when the change is sent.
#[derive(Debug)]
pub(crate) struct Published {
    pub change: RecordChange,
    /// The record, when the change leaves it answered and it is still stored.
    pub item: Option<Item>,
}

pub(crate) struct Hub {
    sender: broadcast::Sender<Arc<Published>>,
    /// The newest change handed out.
    newest: AtomicI64,
}

impl Hub {
    /// Starts the hub from the stream's newest change.
    pub fn start(catalog: Arc<dyn CatalogRead>) -> Arc<Hub> {
        let (sender, _) = broadcast::channel(HUB_KEEPS);
        let hub = Arc::new(Hub {
            sender,
            newest: AtomicI64::new(-1),
        });
        tokio::spawn(run(catalog, Arc::clone(&hub)));
        hub
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Published>> {
        self.sender.subscribe()
    }
}

async fn run(catalog: Arc<dyn CatalogRead>, hub: Arc<Hub>) {
    let mut last = match catalog.change_bounds().await {
        Ok(bounds) => bounds.newest,
        Err(error) => {
            tracing::warn!("the change stream's hub cannot start: {error}");
            0
        }
    };
    hub.newest.store(last, Ordering::Release);
    let mut ticks = catalog.clock().ticks();
    let mut waited = Duration::ZERO;
    loop {
        tokio::time::sleep(LOOK_EVERY).await;
        waited += LOOK_EVERY;
        let now = catalog.clock().ticks();
        if now == ticks && waited < READ_AT_LEAST_EVERY {
            continue;
        }
        (ticks, waited) = (now, Duration::ZERO);
        match publish_after(catalog.as_ref(), &hub, last).await {
            Ok(newest) => last = newest,
            Err(error) => tracing::warn!("the change stream's hub could not read: {error}"),
        }
    }
}

/// Hands out every change after `last`; the newest handed out.
async fn publish_after(
    catalog: &dyn CatalogRead,
    hub: &Hub,
    mut last: i64,
) -> Result<i64, svc_catalog::CatalogError> {
    loop {
        let changes = catalog.changes_after(last, READ_AT_MOST).await?;
        let Some(newest) = changes.last().map(|change| change.seq) else {
            return Ok(last);
        };
        for change in changes {
            let item = item_of(catalog, &change).await?;
            // Nobody listening is not an error: the change is in storage for later readers.
            let _ = hub.sender.send(Arc::new(Published { change, item }));
        }
        last = newest;
        hub.newest.store(last, Ordering::Release);
    }
}

/// The record a change leaves answered, as stored now.
pub(crate) async fn item_of(
    catalog: &dyn CatalogRead,
    change: &RecordChange,
) -> Result<Option<Item>, svc_catalog::CatalogError> {
    if !change.is_live || change.is_gap() {
        return Ok(None);
    }
    catalog.get(change.uri.clone()).await
}
