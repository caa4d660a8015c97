//! Following a live source: connect, read, batch, apply with the cursor in the same
//! transaction, reconnect with exponential backoff and jitter, and notice a silent connection.

use super::jetstream_events::{JetstreamDecompressor, jetstream_message};
use super::verifier::{Checked, Verifier};
use super::{Proof, SourceEvent, SourceKind, SourceMessage, decode_frame, source_kind};
use crate::event::{CommitEvent, host_lost_sync};
use crate::ingest::{Ingestor, Prepared, is_plausible_time};
use crate::resync::Resync;
use crate::stream_account::FromStream as AccountFromStream;
use crate::verification::{Reason, Unverified};
use futures_util::stream::FuturesOrdered;
use futures_util::{SinkExt, StreamExt};
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};
use svc_catalog::{
    ApplyReport, CatalogError, CatalogWrite, Change, CursorPosition, ResyncRequest, SyncWrites,
};
use svc_syntax::now_unix_micros;
use svc_syntax::{Did, Tid};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// The source name under which the live cursor is stored.
pub const LIVE_SOURCE: &str = "firehose";
/// Jetstream cursors are times; resuming a little earlier covers events still in flight.
const JETSTREAM_REWIND_US: i64 = 5_000_000;
const BATCH_EVENTS: usize = 4000;
pub(crate) const MAX_MESSAGE_BYTES: usize = 8 << 20;
/// Silence that ends a catch-up.
const CATCH_UP_QUIET: Duration = Duration::from_secs(1);
const MAX_IN_FLIGHT: usize = 25;
/// Commits being checked at once (proof and signature, on every core), ahead of the one the
/// stream applies next.
const MAX_CHECKING: usize = 256;
const BATCH_WAIT: Duration = Duration::from_millis(50);
/// A connection that stayed up this long resets the backoff.
const STABLE_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct LiveConfig {
    pub url: String,
    /// Reuse a stored cursor even when it was stored for another endpoint.
    pub force_cursor: bool,
    /// No message and no pong for this long: the connection is dead.
    pub liveness: Duration,
    /// How old the newest event may be, or how long ago a ping was answered, to be caught up.
    pub ready_lag: Duration,
    pub max_backoff: Duration,
    /// Ask Jetstream for zstd-compressed events (`compress=true`).
    pub compress: bool,
    /// The repository firehose's commits are verified before they are applied (with the
    /// keys and chains of the resynchronisation given to [`run_live`]).
    pub verify: bool,
}

/// What the live source is doing, for readiness.
#[derive(Debug, Default)]
pub struct LiveStatus {
    connected: AtomicBool,
    /// Events read but not yet applied.
    pending: AtomicBool,
    last_event_us: AtomicI64,
    last_pong_us: AtomicI64,
    /// Whether the source's commits are verified before they apply.
    verified: AtomicBool,
}

impl LiveStatus {
    /// Caught up: connected, and either the newest event is recent, or nothing is
    /// pending and the connection answered a ping recently (a quiet source is not lagging).
    pub fn caught_up(&self, ready_lag: Duration) -> bool {
        let lag = ready_lag.as_micros() as i64;
        let now = now_unix_micros();
        self.connected.load(Ordering::Acquire)
            && (now - self.last_event_us.load(Ordering::Acquire) <= lag
                || (!self.pending.load(Ordering::Acquire)
                    && now - self.last_pong_us.load(Ordering::Acquire) <= lag))
    }

    /// What an operator should know of the source while it is ready (for `/readyz`): that
    /// its events are not verified.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.connected.load(Ordering::Acquire) && !self.verified.load(Ordering::Acquire) {
            notes.push("the live source's events are applied unverified".to_string());
        }
        notes
    }

    /// Why the source is not caught up (for `/readyz`).
    pub fn lagging_because(&self) -> String {
        if self.connected.load(Ordering::Acquire) {
            "the live source is behind".into()
        } else {
            "the live source is not connected".into()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

/// A pseudo-random factor in [0.5, 1.5) for backoff jitter; no cryptographic need.
fn jitter() -> f64 {
    0.5 + f64::from(svc_syntax::clock_noise() % 1000) / 1000.0
}

fn connect_url(kind: SourceKind, endpoint: &str, cursor: Option<i64>, compress: bool) -> String {
    match kind {
        SourceKind::Jetstream => {
            let mut url = format!("{endpoint}?wantedCollections=dev.svc.*");
            if compress {
                url.push_str("&compress=true");
            }
            if let Some(cursor) = cursor {
                url.push_str(&format!(
                    "&cursor={}",
                    (cursor - JETSTREAM_REWIND_US).max(0)
                ));
            }
            url
        }
        SourceKind::Repos => match cursor {
            Some(cursor) => format!("{endpoint}?cursor={cursor}"),
            None => endpoint.to_string(),
        },
    }
}

/// Where to resume: the stored cursor, when it was stored for this endpoint (or is forced) and
/// can be true. One that cannot (stored by an older version, or written by hand) would resume
/// where the source has nothing, or nothing yet: the source's live tail is the better start.
fn resume_from(
    stored: Option<&CursorPosition>,
    kind: SourceKind,
    endpoint: &str,
    force: bool,
) -> Option<i64> {
    let stored = stored.filter(|s| s.endpoint == endpoint || force)?;
    match stored.cursor.parse() {
        Ok(cursor) if resumable(kind, cursor) => Some(cursor),
        _ => {
            let shown: String = stored.cursor.chars().take(64).collect();
            tracing::warn!(
                cursor = %shown,
                "the stored cursor cannot be true; starting from the live tail"
            );
            None
        }
    }
}

/// Whether a stored cursor can be resumed from: a Jetstream time not in the future, a
/// sequence number of the repository firehose not below 0 (a catch-up stores the one before
/// its first event, which is 0 when the source starts at 1).
fn resumable(kind: SourceKind, cursor: i64) -> bool {
    match kind {
        SourceKind::Jetstream => is_plausible_time(cursor),
        SourceKind::Repos => cursor >= 0,
    }
}

/// Takes off a message's cursor and time where they cannot be true: a Jetstream `time_us` in
/// the future or before the epoch (it is Jetstream's cursor too), a firehose `seq` that is not
/// positive, a firehose `time` in the future. Stored, such a cursor is where every restart
/// would resume (after everything), and as the newest event's time it would show the source
/// caught up forever. The events are applied as any others (their records pass the same
/// checks): only the cursor stays where the last plausible message left it, so a restart
/// reads them again, which the revisions make harmless.
fn drop_implausible(kind: SourceKind, message: &mut SourceMessage) {
    if let Some(time) = message.time_us.filter(|time| !is_plausible_time(*time)) {
        tracing::warn!(
            time_us = time,
            "a live event's time cannot be true; not used"
        );
        message.time_us = None;
    }
    let plausible = match kind {
        SourceKind::Jetstream => is_plausible_time,
        SourceKind::Repos => |seq: i64| seq > 0,
    };
    if let Some(cursor) = message.cursor.filter(|cursor| !plausible(*cursor)) {
        tracing::warn!(cursor, "a live event's cursor cannot be true; not stored");
        message.cursor = None;
    }
}

/// Follows the live source until shutdown. Only storage failure ends it with an error.
/// `resync`: what verified commits are checked with and broken chains are read whole by.
pub async fn run_live(
    catalog: Arc<dyn CatalogWrite>,
    ingestor: Ingestor,
    config: LiveConfig,
    status: Arc<LiveStatus>,
    resync: Option<Arc<Resync>>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), LiveError> {
    svc_atproto::install_crypto();
    let (kind, endpoint) = source_kind(&config.url).map_err(LiveError::Config)?;
    let stored = catalog.cursor(LIVE_SOURCE.to_string()).await?;
    // With no cursor stored at all, a source that starts far in the past is a catch-up into
    // an empty catalog: it is bulk-loaded (see `Session::catch_up`).
    let may_catch_up = stored.is_none();
    if let Some(other) = stored
        .as_ref()
        .filter(|s| s.endpoint != endpoint && !config.force_cursor)
    {
        tracing::warn!(
            stored = %other.endpoint,
            "the stored cursor belongs to another endpoint; starting from the live tail (--force-cursor reuses it)"
        );
    }
    let cursor = resume_from(stored.as_ref(), kind, &endpoint, config.force_cursor);
    let verifier = verifier(kind, &config, catalog.as_ref(), resync)
        .await?
        .map(Arc::new);
    status.verified.store(verifier.is_some(), Ordering::Release);
    ingestor
        .metrics()
        .live_verified
        .set(i64::from(verifier.is_some()));
    let connection = Connection {
        catalog: catalog.as_ref(),
        ingestor: &ingestor,
        kind,
        endpoint: &endpoint,
        status: &status,
        config: &config,
        verifier: verifier.as_ref(),
    };
    connection
        .reconnect_until_stopped(cursor, may_catch_up, &mut shutdown)
        .await;
    Ok(())
}

/// What the source's commits are verified with; `None` when they are not (said at start).
async fn verifier(
    kind: SourceKind,
    config: &LiveConfig,
    catalog: &dyn CatalogWrite,
    resync: Option<Arc<Resync>>,
) -> Result<Option<Verifier>, LiveError> {
    match (kind, resync.filter(|_| config.verify)) {
        (SourceKind::Jetstream, _) => {
            tracing::warn!(
                "Jetstream carries no proofs: its events are applied unverified \
                 (a relay's or a PDS's repository firehose is verified)"
            );
            Ok(None)
        }
        (SourceKind::Repos, None) => {
            tracing::warn!("--verify none: the firehose's commits are applied unverified");
            Ok(None)
        }
        (SourceKind::Repos, Some(resync)) => Ok(Some(Verifier::start(resync, catalog).await?)),
    }
}

/// How one connection to the live source ended.
enum ConnectionEnd {
    /// Shutdown was asked for.
    Stopped,
    /// The source closed or failed: connect again from the cursor in hand.
    Reconnect,
    /// A write to the catalog failed: connect again from the cursor the catalog holds.
    ResumeFromCatalog,
}

/// What one connection to the live source works with.
struct Connection<'a> {
    catalog: &'a dyn CatalogWrite,
    ingestor: &'a Ingestor,
    kind: SourceKind,
    endpoint: &'a str,
    status: &'a LiveStatus,
    config: &'a LiveConfig,
    /// What commits are verified with, when they are; its chains span every connection.
    verifier: Option<&'a Arc<Verifier>>,
}

impl Connection<'_> {
    /// Follows the source over one connection after another, backing off between them,
    /// until shutdown.
    async fn reconnect_until_stopped(
        &self,
        mut cursor: Option<i64>,
        mut may_catch_up: bool,
        shutdown: &mut watch::Receiver<bool>,
    ) {
        let mut backoff = Duration::from_millis(250);
        // After a failed write, the catalog's cursor is the only safe place to resume from: what
        // was read past it was never acknowledged.
        let mut reread_cursor = false;
        loop {
            if *shutdown.borrow() {
                return;
            }
            if reread_cursor {
                match self.reread_cursor().await {
                    Ok(stored) => {
                        cursor = self.resume_from(stored.as_ref());
                        reread_cursor = false;
                    }
                    Err(error) => {
                        tracing::warn!("reading the stored cursor failed; waiting: {error}");
                        if !back_off(&mut backoff, self.config.max_backoff, shutdown).await {
                            return;
                        }
                        continue;
                    }
                }
            }
            let connected_at = Instant::now();
            match self.follow(&mut cursor, &mut may_catch_up, shutdown).await {
                ConnectionEnd::Stopped => return,
                ConnectionEnd::Reconnect => {}
                ConnectionEnd::ResumeFromCatalog => reread_cursor = true,
            }
            if connected_at.elapsed() >= STABLE_AFTER {
                backoff = Duration::from_millis(250);
            }
            self.ingestor.metrics().reconnects.inc();
            if !back_off(&mut backoff, self.config.max_backoff, shutdown).await {
                return;
            }
        }
    }

    /// The stored cursor, and the chains stored with it: what was followed in memory past it
    /// was never acknowledged, and its commits come again.
    async fn reread_cursor(&self) -> Result<Option<CursorPosition>, CatalogError> {
        let stored = self.catalog.cursor(LIVE_SOURCE.to_string()).await?;
        if let Some(verifier) = self.verifier {
            verifier.reload(self.catalog).await?;
        }
        Ok(stored)
    }

    fn resume_from(&self, stored: Option<&CursorPosition>) -> Option<i64> {
        resume_from(stored, self.kind, self.endpoint, self.config.force_cursor)
    }

    /// Connects from `cursor` and follows the source until the connection ends, moving
    /// `cursor` along what was applied.
    async fn follow(
        &self,
        cursor: &mut Option<i64>,
        may_catch_up: &mut bool,
        shutdown: &mut watch::Receiver<bool>,
    ) -> ConnectionEnd {
        let socket = match self.connect(*cursor, shutdown).await {
            Ok(socket) => socket,
            Err(end) => return end,
        };
        let status = self.status;
        // Quiet is shown by this connection's first pong (a ping goes out at once), not
        // assumed on connecting: a source replaying old events may not have sent the first
        // one yet, and an earlier connection's pong says nothing of this one.
        status.last_pong_us.store(i64::MIN / 2, Ordering::Release);
        status.connected.store(true, Ordering::Release);
        let mut session = Session {
            source: self,
            cursor,
            batch: Vec::new(),
            dirty: false,
            batch_time: None,
            in_flight: FuturesOrdered::new(),
            may_catch_up: *may_catch_up,
            catching_up: false,
            zstd: None,
            checking: FuturesOrdered::new(),
        };
        let mut outcome = session.follow(socket, shutdown).await;
        // A catch-up is settled whenever the connection ends, so the writer is back to normal
        // for the next one.
        if let Err(error) = session.end_catch_up().await {
            outcome = Err(error);
        }
        *may_catch_up = session.may_catch_up;
        drop(session);
        status.connected.store(false, Ordering::Release);
        status.pending.store(false, Ordering::Release);
        self.ended(outcome, shutdown)
    }

    /// Opens the WebSocket from `cursor`; how the connection ended when it cannot.
    async fn connect(
        &self,
        cursor: Option<i64>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Socket, ConnectionEnd> {
        let url = connect_url(self.kind, self.endpoint, cursor, self.config.compress);
        tracing::info!(%url, "connecting to the live source");
        // Firehose frames are small (a commit carries a bounded CAR slice): a limit keeps a
        // hostile server from making the process buffer huge messages.
        let limits = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE_BYTES))
            .max_frame_size(Some(MAX_MESSAGE_BYTES));
        // Connecting and the upgrade are timed like a silent connection: a source that
        // accepts and never answers would otherwise hold the follow loop forever.
        let connecting = tokio::time::timeout(
            self.config.liveness,
            tokio_tungstenite::connect_async_with_config(url.as_str(), Some(limits), false),
        );
        tokio::select! {
            connected = connecting => match connected {
                Ok(Ok((socket, _))) => Ok(socket),
                Ok(Err(error)) => {
                    tracing::warn!(%url, "cannot connect to the live source: {error}");
                    Err(ConnectionEnd::Reconnect)
                }
                Err(_) => {
                    let within = self.config.liveness.as_secs_f64();
                    tracing::warn!(
                        %url,
                        "no WebSocket handshake from the live source in {within} s; reconnecting"
                    );
                    Err(ConnectionEnd::Reconnect)
                }
            },
            _ = stop_requested(shutdown) => Err(ConnectionEnd::Stopped),
        }
    }

    /// How the connection ended, from how following it ended.
    fn ended(
        &self,
        outcome: Result<(), FollowError>,
        shutdown: &watch::Receiver<bool>,
    ) -> ConnectionEnd {
        match outcome {
            Ok(()) if *shutdown.borrow() => ConnectionEnd::Stopped,
            Ok(()) => {
                tracing::warn!("the live source closed the connection");
                ConnectionEnd::Reconnect
            }
            Err(FollowError::Catalog(error)) => {
                // A full disk or a database away: wait, then go on from what the catalog
                // holds. Nothing past the stored cursor was acknowledged.
                tracing::error!("writing to the catalog failed; retrying: {error}");
                self.ingestor.writes().failed(error.to_string());
                ConnectionEnd::ResumeFromCatalog
            }
            Err(FollowError::Connection(reason)) => {
                tracing::warn!("live source: {reason}");
                ConnectionEnd::Reconnect
            }
        }
    }
}

/// Waits out one backoff step, with jitter, and doubles the step (up to `max`) for the next
/// time; `false` when shutdown was asked for meanwhile.
async fn back_off(
    backoff: &mut Duration,
    max: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    let wait = backoff.mul_f64(jitter());
    *backoff = (*backoff * 2).min(max);
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = stop_requested(shutdown) => false,
    }
}

/// Sends one control message, waiting at most `limit`: a source that stops reading fills the
/// socket's buffer, and a send that waits on it forever would stop the follow loop with it.
async fn sent_in_time<S>(sink: &mut S, message: Message, limit: Duration) -> bool
where
    S: futures_util::Sink<Message> + Unpin,
{
    matches!(
        tokio::time::timeout(limit, sink.send(message)).await,
        Ok(Ok(()))
    )
}

/// Resolves once shutdown is asked for (the watch guard is dropped inside, so the
/// future stays `Send`).
async fn stop_requested(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

enum FollowError {
    Connection(String),
    Catalog(CatalogError),
}

impl From<CatalogError> for FollowError {
    fn from(error: CatalogError) -> Self {
        FollowError::Catalog(error)
    }
}

struct Session<'a> {
    source: &'a Connection<'a>,
    cursor: &'a mut Option<i64>,
    batch: Vec<Change>,
    /// The cursor moved since it was last stored.
    dirty: bool,
    batch_time: Option<i64>,
    /// Batches sent to the catalog and not yet committed, oldest first: the writer merges
    /// queued batches into one commit, which keeps up with a busy stream.
    in_flight: FuturesOrdered<Applying<'a>>,
    /// The first event decides whether this is a catch-up (see `catch_up`); once only.
    may_catch_up: bool,
    /// Changes are being staged into a bulk load.
    catching_up: bool,
    /// Made at the first compressed event.
    zstd: Option<JetstreamDecompressor>,
    /// Messages whose commits are being checked, in the stream's order: each is taken once
    /// it and every one before it are.
    checking: FuturesOrdered<Checking>,
}

/// What checking a message's commit found: nothing to check, or the commit checked, or why
/// not, with the repository and revision it claims.
type Verdict = Option<Result<Checked, (Option<(Did, Tid)>, Unverified)>>;

type Checking = Pin<Box<dyn Future<Output = (SourceMessage, Verdict)> + Send>>;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

type Applying<'a> =
    Pin<Box<dyn Future<Output = Result<(ApplyReport, Option<i64>), CatalogError>> + Send + 'a>>;

impl Session<'_> {
    fn decompress(&mut self, frame: &[u8]) -> Result<String, String> {
        let zstd = match self.zstd.as_mut() {
            Some(zstd) => zstd,
            None => self.zstd.insert(JetstreamDecompressor::new()?),
        };
        zstd.decompress(frame, MAX_MESSAGE_BYTES)
    }

    async fn follow(
        &mut self,
        socket: Socket,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), FollowError> {
        let config = self.source.config;
        let (mut sink, mut stream) = socket.split();
        let mut flush_tick = tokio::time::interval(BATCH_WAIT);
        let ping_every = (config.ready_lag / 2)
            .min(config.liveness / 2)
            .max(Duration::from_millis(100));
        let mut ping_tick = tokio::time::interval(ping_every);
        let mut last_heard = Instant::now();
        loop {
            tokio::select! {
                message = stream.next() => {
                    let message = match message {
                        None => {
                            self.take_checked().await?;
                            return self.flush().await;
                        }
                        Some(Err(error)) => {
                            self.flush().await?;
                            return Err(FollowError::Connection(error.to_string()));
                        }
                        Some(Ok(message)) => message,
                    };
                    last_heard = Instant::now();
                    if self.received(message, &mut sink).await?.is_break() {
                        return Ok(());
                    }
                }
                Some((message, verdict)) = self.checking.next(), if !self.checking.is_empty() => {
                    self.take(message, verdict).await?;
                }
                Some(done) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                    let (report, time) = done?;
                    self.committed(report, time);
                }
                _ = flush_tick.tick() => {
                    // A catch-up ends when the source goes quiet: everything old has come.
                    if self.catching_up && self.batch.is_empty() && last_heard.elapsed() >= CATCH_UP_QUIET {
                        self.end_catch_up().await?;
                    }
                    self.send();
                }
                _ = ping_tick.tick() => self.keep_alive(&mut sink, last_heard).await?,
                _ = stop_requested(shutdown) => {
                    self.take_checked().await?;
                    return self.flush().await;
                }
            }
        }
    }

    /// Handles one message of the source; `Break` once the source closed the connection and
    /// what was read is flushed.
    async fn received<S>(
        &mut self,
        message: Message,
        sink: &mut S,
    ) -> Result<ControlFlow<()>, FollowError>
    where
        S: futures_util::Sink<Message> + Unpin,
    {
        let decoded = match &message {
            Message::Ping(payload) => {
                let pong = Message::Pong(payload.clone());
                if !sent_in_time(sink, pong, self.source.config.liveness).await {
                    self.flush().await?;
                    return Err(FollowError::Connection("pong failed".into()));
                }
                None
            }
            Message::Pong(_) => {
                self.source
                    .status
                    .last_pong_us
                    .store(now_unix_micros(), Ordering::Release);
                None
            }
            Message::Close(_) => {
                self.take_checked().await?;
                self.flush().await?;
                return Ok(ControlFlow::Break(()));
            }
            _ => self.decode(&message),
        };
        match decoded {
            Some(Ok(message)) => self.check(message).await?,
            Some(Err(reason)) => {
                self.source.ingestor.metrics().malformed_events.inc();
                tracing::warn!("malformed live event skipped: {reason}");
            }
            None => {}
        }
        if self.batch.len() >= BATCH_EVENTS {
            self.send();
            // Back-pressure: a bounded number of batches wait for the writer.
            if self.in_flight.len() >= MAX_IN_FLIGHT
                && let Some(done) = self.in_flight.next().await
            {
                let (report, time) = done?;
                self.committed(report, time);
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// A data message as the source's message; `None` for a kind of message this source
    /// does not send data in.
    fn decode(&mut self, message: &Message) -> Option<Result<SourceMessage, String>> {
        match (message, self.source.kind) {
            (Message::Binary(bytes), SourceKind::Repos) => Some(decode_frame(
                bytes,
                |c| self.source.ingestor.wants(c),
                |repo| self.source.verifier.is_some_and(|v| v.follows(repo)),
            )),
            (Message::Text(text), SourceKind::Jetstream) => Some(jetstream_message(text.as_str())),
            (Message::Binary(bytes), SourceKind::Jetstream) => Some(
                self.decompress(bytes)
                    .and_then(|text| jetstream_message(&text)),
            ),
            _ => None,
        }
    }

    /// Pings the source, or gives up on a connection that has been silent too long.
    async fn keep_alive<S>(&mut self, sink: &mut S, last_heard: Instant) -> Result<(), FollowError>
    where
        S: futures_util::Sink<Message> + Unpin,
    {
        let liveness = self.source.config.liveness;
        if last_heard.elapsed() > liveness {
            self.flush().await?;
            return Err(FollowError::Connection(format!(
                "nothing heard for {} s; reconnecting",
                last_heard.elapsed().as_secs()
            )));
        }
        let ping = Message::Ping(Vec::new().into());
        if !sent_in_time(sink, ping, liveness).await {
            self.flush().await?;
            return Err(FollowError::Connection("ping failed".into()));
        }
        Ok(())
    }

    /// Starts checking a message's commit, on a task of its own; a message with nothing to
    /// check is taken at once when none waits before it. At most [`MAX_CHECKING`] wait.
    async fn check(&mut self, mut message: SourceMessage) -> Result<(), FollowError> {
        // A key may have rotated: what came before is checked with the key it was signed
        // with, what comes after with the key read anew.
        if message
            .events
            .iter()
            .any(|event| matches!(event, SourceEvent::Identity { .. }))
        {
            self.take_checked().await?;
        }
        let verdict: Checking = match (self.source.verifier, std::mem::take(&mut message.proof)) {
            (Some(verifier), Proof::Carried(proof)) => {
                let verifier = Arc::clone(verifier);
                let checking = tokio::spawn(async move {
                    let claimed = Some((proof.repo.clone(), proof.rev.clone()));
                    verifier.check(&proof).await.map_err(|why| (claimed, why))
                });
                Box::pin(async move {
                    let verdict = checking.await.unwrap_or_else(|error| {
                        Err((
                            None,
                            Unverified::new(Reason::Proof, format!("the check failed: {error}")),
                        ))
                    });
                    (message, Some(verdict))
                })
            }
            (Some(_), Proof::Missing(what)) => {
                let refused = Err((None, Unverified::new(Reason::Proof, what)));
                Box::pin(std::future::ready((message, Some(refused))))
            }
            (_, _) if self.checking.is_empty() => return self.take(message, None).await,
            (_, _) => Box::pin(std::future::ready((message, None))),
        };
        self.checking.push_back(verdict);
        if self.checking.len() >= MAX_CHECKING
            && let Some((message, verdict)) = self.checking.next().await
        {
            self.take(message, verdict).await?;
        }
        Ok(())
    }

    /// Takes every message being checked, in order (the connection is ending).
    async fn take_checked(&mut self) -> Result<(), FollowError> {
        while let Some((message, verdict)) = self.checking.next().await {
            self.take(message, verdict).await?;
        }
        Ok(())
    }

    async fn take(
        &mut self,
        mut message: SourceMessage,
        verdict: Verdict,
    ) -> Result<(), FollowError> {
        drop_implausible(self.source.kind, &mut message);
        self.drop_unverified(&mut message, verdict);
        let recent = message.time_us.is_some_and(|time| {
            now_unix_micros() - time <= self.source.config.ready_lag.as_micros() as i64
        });
        if self.may_catch_up && !message.events.is_empty() {
            self.may_catch_up = false;
            if !recent {
                self.catch_up(&message).await?;
            }
        } else if self.catching_up && recent {
            self.end_catch_up().await?;
        }
        for event in message.events {
            self.take_event(event).await?;
        }
        if let Some(cursor) = message.cursor {
            *self.cursor = Some(cursor);
            self.dirty = true;
        }
        if message.time_us.is_some() {
            self.batch_time = message.time_us;
        }
        Ok(())
    }

    /// Places a checked commit in its repository's chain, or takes the commit events out of a
    /// message whose commit cannot be verified: counted by reason and logged; the cursor moves
    /// on.
    fn drop_unverified(&mut self, message: &mut SourceMessage, verdict: Verdict) {
        let (Some(verifier), Some(verdict)) = (self.source.verifier, verdict) else {
            return;
        };
        let outcome = verdict.and_then(|checked| {
            let claimed = Some((checked.did.clone(), checked.rev.clone()));
            verifier.follow(&checked).map_err(|why| (claimed, why))
        });
        let metrics = self.source.ingestor.metrics();
        match outcome {
            Ok(()) => {
                metrics.verified.inc();
            }
            Err((Some((did, rev)), why)) if why.transient => {
                // Not a verdict: the repository is owed a whole read, stored with this batch.
                if verifier.owe(&did, &rev) {
                    tracing::warn!(%did, %rev, "commit held back, its repository will be read whole: {why}");
                }
                message
                    .events
                    .retain(|event| !matches!(event, SourceEvent::Commit(_)));
            }
            Err((claimed, why)) => {
                metrics.count_unverified(why.reason);
                let (did, rev) = claimed.map_or_else(
                    || ("?".to_string(), "?".to_string()),
                    |(did, rev)| (did.to_string(), rev.to_string()),
                );
                tracing::warn!(%did, %rev, reason = why.reason.label(), "commit not applied: {why}");
                message
                    .events
                    .retain(|event| !matches!(event, SourceEvent::Commit(_)));
            }
        }
    }

    async fn take_event(&mut self, event: SourceEvent) -> Result<(), FollowError> {
        match event {
            SourceEvent::Commit(commit) => self.stage(commit),
            SourceEvent::Account { did, status } if host_lost_sync(&status) => {
                // The host's own state, not the account's: its records stay served, and a
                // followed repository is read whole again.
                tracing::info!(%did, ?status, "the source lost the account's repository");
                if let Some(verifier) = self.source.verifier {
                    verifier.host_lost(&did);
                }
            }
            SourceEvent::Account { did, status } => {
                // Changes read before the account event apply before it.
                self.end_catch_up().await?;
                self.flush().await?;
                tracing::info!(%did, ?status, "account status");
                let account = AccountFromStream::of(status);
                let stored = account.stored.clone();
                let was_hidden = self.source.catalog.set_account(did.clone(), stored).await?;
                let verified = self.source.verifier.is_some();
                if let Some(reason) = account.read_again(was_hidden, verified) {
                    let queued = &self.source.ingestor.metrics().resync_queued;
                    queued
                        .get_or_create(&crate::metrics::ReasonLabel { reason })
                        .inc();
                    let sync = SyncWrites {
                        queued: vec![ResyncRequest {
                            did,
                            reason: reason.into(),
                        }],
                        ..SyncWrites::default()
                    };
                    self.source
                        .catalog
                        .apply_synced(Vec::new(), None, sync)
                        .await?;
                    if let Some(verifier) = self.source.verifier {
                        verifier.queued();
                    }
                }
            }
            SourceEvent::Identity { did } => {
                if let (Some(verifier), Ok(did)) = (self.source.verifier, svc_syntax::Did::new(did))
                {
                    verifier.identity_changed(&did);
                }
            }
            SourceEvent::Sync(event) => {
                if let Some(verifier) = self.source.verifier
                    && let Err(why) = verifier.sync_event(&event).await
                {
                    if why.transient {
                        // The key could not be read now: a followed repository is read whole
                        // later, which settles what the event would have.
                        if verifier.follows(event.repo.as_str()) {
                            verifier.owe(&event.repo, &event.rev);
                        }
                        return Ok(());
                    }
                    self.source.ingestor.metrics().count_unverified(why.reason);
                    tracing::warn!(did = %event.repo, rev = %event.rev, reason = why.reason.label(), "#sync not believed: {why}");
                }
            }
            SourceEvent::Info { name, message } => {
                tracing::warn!(%name, "live source says: {message}");
            }
            SourceEvent::Error { error, message } => {
                self.flush().await?;
                if error == "FutureCursor" {
                    // The server has not reached our cursor (it was reset, or another
                    // server answers at this address): start over from its live tail.
                    tracing::warn!(
                        "the live source is behind the stored cursor; resuming from its live tail"
                    );
                    *self.cursor = None;
                }
                return Err(FollowError::Connection(format!(
                    "error frame {error}: {message}"
                )));
            }
        }
        Ok(())
    }

    /// Adds a commit's change to the batch, or counts why it has none.
    fn stage(&mut self, commit: CommitEvent) {
        let metrics = self.source.ingestor.metrics();
        match self.source.ingestor.prepare(commit) {
            Prepared::Change(change) => {
                self.batch.push(change);
                self.source.status.pending.store(true, Ordering::Release);
            }
            Prepared::Invalid => metrics.count(LIVE_SOURCE, "invalid", 1),
            Prepared::Ignored => metrics.count(LIVE_SOURCE, "ignored", 1),
        }
    }

    /// The stored form of a live cursor.
    fn position(&self, cursor: i64, event_time_us: Option<i64>) -> CursorPosition {
        CursorPosition {
            source: LIVE_SOURCE.to_string(),
            endpoint: self.source.endpoint.to_string(),
            cursor: cursor.to_string(),
            event_time: event_time_us.map(svc_syntax::UnixMicros),
        }
    }

    /// Starts a catch-up: the catalog is empty, no cursor was ever stored, and the source begins
    /// far in the past (a replay, a relay from an old cursor). The changes are bulk-loaded,
    /// invisible until the catch-up ends, which is many times faster than filing them one by
    /// one. First a resume point just before this message is stored, so a crash during the
    /// catch-up (which empties the catalog again at the next start) replays from here.
    async fn catch_up(&mut self, first: &SourceMessage) -> Result<(), FollowError> {
        let Some(resume) = first.cursor.map(|c| c - 1) else {
            return Ok(());
        };
        let position = self.position(resume, first.time_us);
        self.source
            .catalog
            .apply(Vec::new(), Some(position))
            .await?;
        if self.source.catalog.begin_bulk().await? {
            self.catching_up = true;
            self.source.status.pending.store(true, Ordering::Release);
            tracing::info!("the live source starts in the past: catching up with a bulk load");
        }
        Ok(())
    }

    /// Settles a catch-up, with the cursor of the last staged event.
    async fn end_catch_up(&mut self) -> Result<(), FollowError> {
        if !self.catching_up {
            return Ok(());
        }
        self.flush().await?;
        let cursor = self
            .cursor
            .map(|cursor| self.position(cursor, self.batch_time));
        let report = self.source.catalog.finish_bulk(cursor).await?;
        self.catching_up = false;
        tracing::info!(
            applied = report.applied,
            stale = report.stale,
            "catch-up settled"
        );
        self.committed(report, self.batch_time);
        self.source.status.pending.store(false, Ordering::Release);
        Ok(())
    }

    /// Sends what was read to the catalog, with the cursor that covers it (one transaction),
    /// without waiting for the commit.
    fn send(&mut self) {
        let sync = self
            .source
            .verifier
            .map(|verifier| verifier.take_sync())
            .unwrap_or_default();
        if self.batch.is_empty() && !self.dirty && sync.is_empty() {
            return;
        }
        let cursor = self
            .cursor
            .map(|cursor| self.position(cursor, self.batch_time));
        let changes = std::mem::take(&mut self.batch);
        let queued = !sync.queued.is_empty();
        let applying = self.source.catalog.apply_synced(changes, cursor, sync);
        let time = self.batch_time;
        let verifier = self.source.verifier.cloned();
        self.in_flight.push_back(Box::pin(async move {
            let report = applying.await?;
            if let Some(verifier) = verifier.filter(|_| queued) {
                verifier.queued();
            }
            Ok((report, time))
        }));
        self.dirty = false;
    }

    /// Accounts for one committed batch.
    fn committed(&mut self, report: ApplyReport, time: Option<i64>) {
        self.source.ingestor.writes().succeeded();
        if self.catching_up {
            // Staged, not visible: nothing to count or to call current yet.
            return;
        }
        let metrics = self.source.ingestor.metrics();
        metrics.count_report(LIVE_SOURCE, &report);
        if let Some(time) = time {
            self.source
                .status
                .last_event_us
                .store(time, Ordering::Release);
            metrics
                .lag_seconds
                .set(((now_unix_micros() - time) as f64 / 1e6).max(0.0));
        }
        if self.in_flight.is_empty() && self.batch.is_empty() {
            self.source.status.pending.store(false, Ordering::Release);
        }
    }

    /// Sends what was read and waits until everything sent is committed. During a catch-up
    /// what was committed is staged, not visible: it stays pending until the catch-up settles.
    async fn flush(&mut self) -> Result<(), FollowError> {
        self.send();
        while let Some(done) = self.in_flight.next().await {
            let (report, time) = done?;
            self.committed(report, time);
        }
        if !self.catching_up {
            self.source.status.pending.store(false, Ordering::Release);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(cursor: Option<i64>, time_us: Option<i64>) -> SourceMessage {
        SourceMessage {
            events: Vec::new(),
            cursor,
            time_us,
            proof: Proof::NotNeeded,
        }
    }

    fn checked(
        kind: SourceKind,
        cursor: Option<i64>,
        time_us: Option<i64>,
    ) -> (Option<i64>, Option<i64>) {
        let mut message = message(cursor, time_us);
        drop_implausible(kind, &mut message);
        (message.cursor, message.time_us)
    }

    #[test]
    fn a_cursor_or_time_that_cannot_be_true_is_taken_off() {
        let now = now_unix_micros();
        let jetstream = SourceKind::Jetstream;
        assert_eq!(
            checked(jetstream, Some(now), Some(now)),
            (Some(now), Some(now))
        );
        assert_eq!(
            checked(jetstream, Some(i64::MAX), Some(i64::MAX)),
            (None, None)
        );
        assert_eq!(checked(jetstream, Some(-1), Some(-1)), (None, None));
        let an_hour_ahead = now + 3_600_000_000;
        assert_eq!(
            checked(jetstream, Some(an_hour_ahead), Some(an_hour_ahead)),
            (None, None)
        );
        let repos = SourceKind::Repos;
        assert_eq!(checked(repos, Some(1), Some(now)), (Some(1), Some(now)));
        assert_eq!(checked(repos, Some(0), Some(now)), (None, Some(now)));
        assert_eq!(checked(repos, Some(-5), None), (None, None));
        assert_eq!(
            checked(repos, Some(9), Some(an_hour_ahead)),
            (Some(9), None)
        );
    }

    #[test]
    fn a_stored_cursor_that_cannot_be_true_is_not_resumed_from() {
        let stored = |cursor: &str| CursorPosition {
            source: LIVE_SOURCE.into(),
            endpoint: "ws://host/subscribe".into(),
            cursor: cursor.into(),
            event_time: None,
        };
        let resume = |kind, cursor: &str| {
            resume_from(Some(&stored(cursor)), kind, "ws://host/subscribe", false)
        };
        let now = now_unix_micros();
        assert_eq!(resume(SourceKind::Jetstream, &now.to_string()), Some(now));
        assert_eq!(resume(SourceKind::Jetstream, &i64::MAX.to_string()), None);
        assert_eq!(resume(SourceKind::Jetstream, "-3"), None);
        assert_eq!(resume(SourceKind::Jetstream, "soon"), None);
        assert_eq!(resume(SourceKind::Repos, "0"), Some(0));
        assert_eq!(resume(SourceKind::Repos, "-1"), None);
        let other = resume_from(Some(&stored("5")), SourceKind::Repos, "ws://other", false);
        assert_eq!(other, None);
    }
}
