//! One reader of the catalog's change stream per process: it reads each new change once (as
//! soon as the change clock moves, or after a short wait), reads the record of each change
//! that leaves it answered, and hands both to every subscriber at once. A subscriber that
//! falls further behind than the hub keeps reads what it missed from storage.

use std::sync::{Arc, OnceLock};
use std::time::Duration;
use svc_catalog::{CatalogRead, Item, RecordChange, StreamOp};
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

/// A change with its record as it stands when the change is sent, and the message it makes
/// for each op, written once for every subscriber that sends it.
#[derive(Debug)]
pub(crate) struct Published {
    pub change: RecordChange,
    /// The record, when the change leaves it answered and it is still stored.
    pub item: Option<Item>,
    written: [OnceLock<Arc<str>>; 3],
}

impl Published {
    pub fn new(change: RecordChange, item: Option<Item>) -> Published {
        Published {
            change,
            item,
            written: Default::default(),
        }
    }

    /// The message of this change for a subscriber it does `op` to.
    pub fn message(&self, op: StreamOp) -> Arc<str> {
        let slot = match op {
            StreamOp::Enter => &self.written[0],
            StreamOp::Update => &self.written[1],
            StreamOp::Leave => &self.written[2],
        };
        Arc::clone(slot.get_or_init(|| change_json(&self.change, op, self.item.as_ref()).into()))
    }
}

/// `{"seq", "time", "op", "uri", "item"?}`; the item as the list endpoints write it.
fn change_json(change: &RecordChange, op: StreamOp, item: Option<&Item>) -> String {
    let time = svc_syntax::format_unix_micros(change.at.0.saturating_mul(1000));
    let mut json = serde_json::json!({
        "seq": change.seq,
        "time": time,
        "op": op.label(),
        "uri": change.uri,
    });
    if let (StreamOp::Enter | StreamOp::Update, Some(item)) = (op, item) {
        let record = serde_json::from_str::<serde_json::Value>(&item.record_json)
            .unwrap_or(serde_json::Value::Null);
        json["item"] = serde_json::json!({
            "uri": item.uri, "author": item.author, "rev": item.rev, "record": record,
        });
    }
    json.to_string()
}

pub(crate) struct Hub {
    sender: broadcast::Sender<Arc<Published>>,
}

impl Hub {
    /// Starts the hub after the change `from`: the last its first subscriber read from
    /// storage, so that a change committed while the hub starts reaches that subscriber.
    pub fn start(catalog: Arc<dyn CatalogRead>, from: i64) -> Arc<Hub> {
        let (sender, _) = broadcast::channel(HUB_KEEPS);
        let hub = Arc::new(Hub { sender });
        tokio::spawn(run(catalog, Arc::clone(&hub), from));
        hub
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Published>> {
        self.sender.subscribe()
    }
}

async fn run(catalog: Arc<dyn CatalogRead>, hub: Arc<Hub>, from: i64) {
    let mut last = from;
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
        for published in with_items(catalog, changes).await? {
            // Nobody listening is not an error: the change is in storage for later readers.
            let _ = hub.sender.send(Arc::new(published));
        }
        last = newest;
    }
}

/// The changes with the records they leave answered, as stored now, read in one go.
pub(crate) async fn with_items(
    catalog: &dyn CatalogRead,
    changes: Vec<RecordChange>,
) -> Result<Vec<Published>, svc_catalog::CatalogError> {
    let wanted = |change: &RecordChange| change.is_live && !change.is_gap();
    let uris = changes
        .iter()
        .filter(|change| wanted(change))
        .map(|change| change.uri.clone())
        .collect();
    let mut items = catalog.get_many(uris).await?.into_iter();
    Ok(changes
        .into_iter()
        .map(|change| {
            let item = if wanted(&change) {
                items.next().flatten()
            } else {
                None
            };
            Published::new(change, item)
        })
        .collect())
}
