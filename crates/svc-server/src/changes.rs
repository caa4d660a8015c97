//! The change stream as Server-Sent Events (`/v1/changes`): a subscription to one query's
//! answer (`query=<name>` with that query's own parameters, checked as its list endpoint
//! checks them) or to every record (no `query`), from `cursor=<seq>` (or `Last-Event-ID`) or
//! from now. Each message says what a change did to that answer: `enter` with the list item,
//! `update` with it, `leave` with the uri; `seq` numbers them in commit order, and resuming
//! from the last one held misses nothing and repeats nothing: the changes after it are read
//! from storage, then the live ones from the hub, each once.

use crate::client::Client;
use crate::params::{Params, lookup_key};
use crate::socket_budget::SocketBudget;
use crate::stream_hub::{Published, with_items};
use crate::{ApiError, AppState};
use axum::extract::{Request, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use svc_catalog::{CatalogError, RecordChange, StreamOp};
use svc_spec::QueryId;
use tokio::sync::{Notify, broadcast, mpsc};

/// Messages waiting for one subscriber's connection: one that falls this far behind is told
/// `ConsumerTooSlow` and closed.
const QUEUED_AT_MOST: usize = 1024;
/// A comment line this often keeps proxies from closing a quiet stream, and finds a
/// subscriber that left (its connection fails the write).
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(5);
/// Changes read from storage per step of a replay.
const REPLAY_STEP: usize = 500;
/// What reading one change from storage costs a replay's pace, besides its uri's bytes, sent
/// or not: a replay for a key that matches nothing still reads, and is paced by that.
const READ_COST_PER_CHANGE: usize = 64;
/// How long a full queue may wait before its subscriber is given up on.
const TOO_SLOW_AFTER: Duration = Duration::from_secs(5);
/// How long a subscriber given up on has to take its last word before its connection is
/// reset (when it reads nothing, at once after that).
const LAST_WORD_GRACE: Duration = Duration::from_secs(1);

/// What a subscription follows: one query's answer under one key, or every record.
#[derive(Debug, Clone)]
pub(crate) struct Answer(Option<(QueryId, String)>);

impl Answer {
    fn op(&self, change: &RecordChange) -> Option<StreamOp> {
        change.op(self.0.as_ref().map(|(query, key)| (query, key.as_str())))
    }
}

/// One message of the stream, as the transports send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// A change of the answer: its number and its JSON (shared by every subscriber).
    Change { seq: i64, json: Arc<str> },
    /// `{"info": ...}` or `{"error": ...}`; an error ends the stream.
    Notice { json: String, ends: bool },
}

/// Checks a subscription's parameters: the query (when one is named) and its own parameters,
/// as its list endpoint does, and the cursor.
pub(crate) fn subscription(
    state: &AppState,
    raw: Option<&str>,
    last_event_id: Option<&str>,
) -> Result<(Answer, Option<i64>), ApiError> {
    let params = Params::parse(raw);
    let cursor = match params.get("cursor")?.or(last_event_id) {
        None => None,
        Some(text) => Some(crate::params::bounded("cursor", text, 0, i64::MAX as u64)? as i64),
    };
    let Some(name) = params.get("query")? else {
        return Ok((Answer(None), cursor));
    };
    let position = state
        .queries
        .position(name)
        .ok_or_else(|| ApiError::InvalidRequest(format!("query: no query named {name:?}")))?;
    let query = &state.queries.all()[position];
    let key = lookup_key(query, &params)?;
    Ok((Answer(Some((query.id().clone(), key))), cursor))
}

/// `GET /v1/changes`.
pub(crate) async fn serve(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let last_event_id = request
        .headers()
        .get("last-event-id")
        .and_then(|value| value.to_str().ok());
    let raw = request.uri().query();
    let (answer, cursor) = match subscription(&state, raw, last_event_id) {
        Ok(subscription) => subscription,
        Err(error) => return error.into_response(),
    };
    let subscriber = Subscriber::of(&request);
    let subscription = match subscribe(&state, subscriber, answer, cursor).await {
        Ok(subscription) => subscription,
        Err(error) => return error.into_response(),
    };
    let events = futures_util::stream::unfold(subscription, |mut subscription| async move {
        let message = subscription.next().await?;
        Some((Ok::<Event, Infallible>(sse_event(message)), subscription))
    });
    // Said at once: a person watching `curl -N` otherwise sees nothing until the first change.
    let greeting = Event::default().comment(format!(
        "subscribed; changes appear below as they happen (a comment every {} s keeps the \
         connection open)",
        KEEP_ALIVE_EVERY.as_secs()
    ));
    let events = futures_util::stream::once(async { Ok(greeting) }).chain(events);
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE_EVERY))
        .into_response();
    // A stream is its connection's last answer: once it ends, the connection closes.
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    // A buffering proxy (nginx) would hold messages back until its buffer fills.
    response.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    response
}

fn sse_event(message: Message) -> Event {
    match message {
        Message::Change { seq, json } => Event::default().id(seq.to_string()).data(&*json),
        Message::Notice { json, .. } => Event::default().data(json),
    }
}

/// A subscriber's messages, in order, and the last word of a feed that gave up on it. It
/// holds the subscriber's place among the server's and its client's until its connection
/// closes.
pub(crate) struct Subscription {
    messages: mpsc::Receiver<Message>,
    last_word: Arc<LastWord>,
    ended: bool,
    _slot: SubscriberSlot,
}

impl Subscription {
    /// The next message; `None` once the feed ended and its last word was said. A feed that
    /// gives up has its last word said next, before what is still queued.
    pub async fn next(&mut self) -> Option<Message> {
        if self.ended {
            return None;
        }
        let message = tokio::select! {
            biased;
            () = self.last_word.said.notified() => None,
            message = self.messages.recv() => message,
        };
        if message.is_none() {
            self.ended = true;
            return self.last_word.take();
        }
        message
    }
}

/// What a feed says as it gives up on its subscriber, and the signal that it did.
#[derive(Default)]
struct LastWord {
    word: Mutex<Option<Message>>,
    said: Notify,
}

impl LastWord {
    fn say(&self, message: Message) {
        *self.word.lock().unwrap_or_else(PoisonError::into_inner) = Some(message);
        self.said.notify_one();
    }

    fn take(&self) -> Option<Message> {
        self.word
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// Who asks for a subscription: the client, as the per-client limits count it, and the
/// connection's socket budget.
pub(crate) struct Subscriber {
    client: Option<Client>,
    budget: Option<Arc<SocketBudget>>,
}

impl Subscriber {
    pub fn of(request: &Request) -> Subscriber {
        let client = crate::client::client_of_request(request);
        let budget = request.extensions().get::<Arc<SocketBudget>>().cloned();
        Subscriber { client, budget }
    }
}

/// Starts feeding a subscriber. Refused past the subscriber limits: the whole server's and
/// one client's. Without a cursor it starts from the newest change as the request is
/// answered, before the client has the answer's head: a change the client causes after that
/// reaches it.
pub(crate) async fn subscribe(
    state: &Arc<AppState>,
    subscriber: Subscriber,
    answer: Answer,
    cursor: Option<i64>,
) -> Result<Subscription, ApiError> {
    let slot = SubscriberSlot::take(state, subscriber.client)?;
    let cursor = match cursor {
        Some(cursor) => cursor,
        None => state.catalog.change_bounds().await?.newest,
    };
    if let Some(budget) = &subscriber.budget {
        budget.carries_a_stream();
    }
    let (sender, receiver) = mpsc::channel(QUEUED_AT_MOST);
    let last_word = Arc::new(LastWord::default());
    let subscription = Subscription {
        messages: receiver,
        last_word: Arc::clone(&last_word),
        ended: false,
        _slot: slot,
    };
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let feed = Feed {
            state: &state,
            answer,
            sender,
            last_word,
            replay: state.stream.replay.of(subscriber.client),
            budget: subscriber.budget,
        };
        if let Err(FeedEnd::Catalog(error)) = feed.run(cursor).await {
            tracing::warn!("a change stream subscriber was ended: {error}");
        }
    });
    Ok(subscription)
}

/// A subscriber's place among the server's and its client's; given back when dropped.
struct SubscriberSlot {
    state: Arc<AppState>,
    client: Option<Client>,
}

impl SubscriberSlot {
    fn take(state: &Arc<AppState>, client: Option<Client>) -> Result<SubscriberSlot, ApiError> {
        let stream = &state.stream;
        if let Some(client) = client {
            let mut clients = stream.per_client.lock().unwrap_or_else(|p| p.into_inner());
            let held = clients.entry(client).or_default();
            if *held >= stream.max_per_client {
                return Err(ApiError::ClientSubscribers(stream.max_per_client));
            }
            *held += 1;
        }
        let slot = SubscriberSlot {
            state: Arc::clone(state),
            client,
        };
        if stream.subscribers.fetch_add(1, Ordering::AcqRel) >= stream.max_subscribers {
            // Dropping the slot gives both places back.
            return Err(ApiError::TooManySubscribers);
        }
        state.metrics.stream_subscribers.inc();
        Ok(slot)
    }
}

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        let stream = &self.state.stream;
        if stream.subscribers.fetch_sub(1, Ordering::AcqRel) <= stream.max_subscribers {
            self.state.metrics.stream_subscribers.dec();
        }
        if let Some(client) = self.client {
            let mut clients = stream.per_client.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(held) = clients.get_mut(&client) {
                *held = held.saturating_sub(1);
                if *held == 0 {
                    clients.remove(&client);
                }
            }
        }
    }
}

/// Why a feed ended early.
#[derive(Debug, thiserror::Error)]
enum FeedEnd {
    #[error("the subscriber left")]
    Left,
    #[error("the subscriber fell behind")]
    TooSlow,
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

/// One subscriber's feed.
struct Feed<'a> {
    state: &'a AppState,
    answer: Answer,
    sender: mpsc::Sender<Message>,
    /// Said next, before what is queued, when the feed gives up on its subscriber.
    last_word: Arc<LastWord>,
    /// Its client's replay budget, when replays are paced.
    replay: Option<Arc<crate::replay_pace::Budget>>,
    /// Its connection's, hung up when the feed gives up.
    budget: Option<Arc<SocketBudget>>,
}

impl Feed<'_> {
    async fn run(&self, cursor: i64) -> Result<(), FeedEnd> {
        let catalog = self.state.catalog.as_ref();
        let bounds = catalog.change_bounds().await?;
        let mut last = match cursor {
            cursor if cursor > bounds.newest => {
                let json = serde_json::json!({"error": "FutureCursor",
                    "message": format!("the newest change is {}", bounds.newest)});
                return self.notice(json, true).await;
            }
            cursor if cursor + 1 < bounds.oldest => {
                let json = serde_json::json!({"info": "OutdatedCursor", "oldest": bounds.oldest});
                self.notice(json, false).await?;
                bounds.oldest - 1
            }
            cursor => cursor,
        };
        let mut live = self.follow(&mut last).await?;
        loop {
            let received = tokio::select! {
                received = live.recv() => received,
                // A subscriber that left while nothing changed gives its place back now.
                () = self.sender.closed() => return Err(FeedEnd::Left),
            };
            match received {
                Ok(published) if published.change.seq <= last => {}
                Ok(published) => {
                    last = published.change.seq;
                    self.deliver(&published).await?;
                }
                // A burst (a repository read whole, a bulk load) outran what the hub keeps:
                // the changes it dropped are in storage, read at the subscriber's own pace. A
                // subscriber that cannot take them is given up on as `send` says.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    self.state.metrics.stream_caught_up.inc();
                    live = self.follow(&mut last).await?;
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            }
        }
    }

    /// Sends every stored change after `*last`, then follows the hub from where that ends.
    async fn follow(&self, last: &mut i64) -> Result<broadcast::Receiver<Arc<Published>>, FeedEnd> {
        *last = self.replay(*last).await?;
        let live = self
            .state
            .stream
            .hub(&self.state.catalog, *last)
            .subscribe();
        // What was committed between the replay's end and the subscription.
        *last = self.replay(*last).await?;
        Ok(live)
    }

    /// Sends every stored change after `last`; the last one sent. Each step first checks that
    /// the subscriber is still there, so a replay outlives its client by one step at most.
    async fn replay(&self, mut last: i64) -> Result<i64, FeedEnd> {
        let catalog = self.state.catalog.as_ref();
        loop {
            if self.sender.is_closed() {
                return Err(FeedEnd::Left);
            }
            let changes = catalog.changes_after(last, REPLAY_STEP).await?;
            let Some(newest) = changes.last().map(|change| change.seq) else {
                return Ok(last);
            };
            self.state
                .metrics
                .stream_replay_read
                .inc_by(changes.len() as u64);
            let read: usize = changes
                .iter()
                .map(|change| READ_COST_PER_CHANGE + change.uri.len())
                .sum();
            self.pace(read).await?;
            let sent: Vec<RecordChange> = changes
                .into_iter()
                .filter(|change| self.answer.op(change).is_some() || change.is_gap())
                .collect();
            for published in with_items(catalog, sent).await? {
                let bytes = self.deliver(&published).await?;
                self.pace(bytes).await?;
            }
            last = newest;
        }
    }

    /// Waits as the client's replay budget says for `bytes` read and sent; a subscriber that
    /// leaves meanwhile ends the wait and the replay.
    async fn pace(&self, bytes: usize) -> Result<(), FeedEnd> {
        let Some(replay) = &self.replay else {
            return Ok(());
        };
        tokio::select! {
            () = replay.spend(bytes) => Ok(()),
            () = self.sender.closed() => Err(FeedEnd::Left),
        }
    }

    /// Sends what a change says to this subscriber, if anything; the bytes of its message.
    async fn deliver(&self, published: &Published) -> Result<usize, FeedEnd> {
        let change = &published.change;
        if change.is_gap() {
            let json = serde_json::json!({"info": "OutdatedCursor", "oldest": change.seq});
            return self.notice(json, false).await.map(|()| 0);
        }
        let Some(op) = self.answer.op(change) else {
            return Ok(0);
        };
        // A record gone since its change was made: a later change says so.
        let item = published.item.as_ref();
        if op != StreamOp::Leave && item.is_none() {
            return Ok(0);
        }
        let json = published.message(op);
        let bytes = json.len();
        self.send(Message::Change {
            seq: change.seq,
            json,
        })
        .await
        .map(|()| bytes)
    }

    async fn notice(&self, json: serde_json::Value, ends: bool) -> Result<(), FeedEnd> {
        let message = Message::Notice {
            json: json.to_string(),
            ends,
        };
        self.send(message).await
    }

    /// Queues a message; a subscriber whose queue stays full is told so and given up on.
    async fn send(&self, message: Message) -> Result<(), FeedEnd> {
        match self.sender.try_send(message) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(FeedEnd::Left),
            Err(mpsc::error::TrySendError::Full(message)) => {
                match tokio::time::timeout(TOO_SLOW_AFTER, self.sender.send(message)).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(_)) => Err(FeedEnd::Left),
                    Err(_) => Err(self.too_slow()),
                }
            }
        }
    }

    /// Gives up on a subscriber that fell behind: its last word says where to resume.
    fn too_slow(&self) -> FeedEnd {
        let json = serde_json::json!({"error": "ConsumerTooSlow",
            "message": "the subscriber fell behind; resume from the last seq it holds"});
        self.last_word.say(Message::Notice {
            json: json.to_string(),
            ends: true,
        });
        if let Some(budget) = self.budget.clone() {
            tokio::spawn(async move {
                tokio::time::sleep(LAST_WORD_GRACE).await;
                budget.hang_up();
            });
        }
        self.state.metrics.stream_too_slow.inc();
        FeedEnd::TooSlow
    }
}
