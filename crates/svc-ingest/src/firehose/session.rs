//! Following one connection to the live source: each message decoded, its commits checked
//! in order (`checks.rs`), its events staged into batches applied with the cursor that covers
//! them (one transaction each, several in flight), a catch-up from the past bulk-loaded, and
//! the connection kept alive with pings.

use super::MAX_MESSAGE_BYTES;
use super::checks::{Checks, Verdict};
use super::status::{LIVE_SOURCE, LiveConfig, LiveStatus};
use super::verifier::Verifier;
use super::{SourceEvent, SourceKind, SourceMessage, decode_frame};
use crate::event::{CommitEvent, host_lost_sync};
use crate::ingest::Ingestor;
use crate::ingest::{Prepared, is_plausible_time};
use crate::jetstream::events::{JetstreamDecompressor, jetstream_message};
use crate::reconnect::stop_requested;
use crate::stream_account::FromStream as AccountFromStream;
use futures_util::stream::FuturesOrdered;
use futures_util::{SinkExt, StreamExt};
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use svc_catalog::CatalogWrite;
use svc_catalog::{ApplyReport, CatalogError, Change, CursorPosition, ResyncRequest, SyncWrites};
use svc_syntax::now_unix_micros;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;

const BATCH_EVENTS: usize = 4000;
/// Silence that ends a catch-up.
const CATCH_UP_QUIET: Duration = Duration::from_secs(1);
const MAX_IN_FLIGHT: usize = 25;
const BATCH_WAIT: Duration = Duration::from_millis(50);

/// What one connection to the live source works with.
pub(super) struct Connection<'a> {
    pub catalog: &'a dyn CatalogWrite,
    pub ingestor: &'a Ingestor,
    pub kind: SourceKind,
    pub endpoint: &'a str,
    pub status: &'a LiveStatus,
    pub config: &'a LiveConfig,
    /// What commits are verified with, when they are; its chains span every connection.
    pub verifier: Option<&'a Arc<Verifier>>,
}

/// Why following a connection ended early.
pub(super) enum FollowError {
    Connection(String),
    Catalog(CatalogError),
}

impl From<CatalogError> for FollowError {
    fn from(error: CatalogError) -> Self {
        FollowError::Catalog(error)
    }
}

/// Following one connection: messages checked, batched and applied with the cursor.
pub(super) struct Session<'a> {
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
    /// Messages whose commits are being checked, taken in the stream's order.
    checks: Checks<'a>,
}

pub(super) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

type Applying<'a> =
    Pin<Box<dyn Future<Output = Result<(ApplyReport, Option<i64>), CatalogError>> + Send + 'a>>;

impl<'a> Session<'a> {
    pub fn new(
        source: &'a Connection<'a>,
        cursor: &'a mut Option<i64>,
        may_catch_up: bool,
    ) -> Session<'a> {
        Session {
            source,
            cursor,
            batch: Vec::new(),
            dirty: false,
            batch_time: None,
            in_flight: FuturesOrdered::new(),
            may_catch_up,
            catching_up: false,
            zstd: None,
            checks: Checks::new(source.verifier),
        }
    }

    /// Whether the next connection's first event may still start a catch-up.
    pub fn may_catch_up(&self) -> bool {
        self.may_catch_up
    }

    fn decompress(&mut self, frame: &[u8]) -> Result<String, String> {
        let zstd = match self.zstd.as_mut() {
            Some(zstd) => zstd,
            None => self.zstd.insert(JetstreamDecompressor::new()?),
        };
        zstd.decompress(frame, MAX_MESSAGE_BYTES)
    }

    pub async fn follow(
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
                Some((message, verdict)) = self.checks.next(), if !self.checks.is_empty() => {
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

    /// Hands a message to the check pipeline, and takes what it hands back. A message with an
    /// identity event waits for every one before it: a key may have rotated, so what came
    /// before is checked with the key it was signed with, what comes after with the key read
    /// anew.
    async fn check(&mut self, message: SourceMessage) -> Result<(), FollowError> {
        if message
            .events
            .iter()
            .any(|event| matches!(event, SourceEvent::Identity { .. }))
        {
            self.take_checked().await?;
        }
        if let Some((message, verdict)) = self.checks.admit(message).await {
            self.take(message, verdict).await?;
        }
        Ok(())
    }

    /// Takes every message being checked, in order (the connection is ending).
    async fn take_checked(&mut self) -> Result<(), FollowError> {
        while let Some((message, verdict)) = self.checks.next().await {
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
        let metrics = self.source.ingestor.metrics();
        self.checks.judge(&mut message, verdict, metrics);
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
            SourceEvent::Account { did, status } => self.account(did, status).await?,
            SourceEvent::Identity { did } => {
                if let Some(verifier) = self.source.verifier {
                    verifier.identity_changed(&did);
                }
            }
            SourceEvent::Sync(event) => self.sync_event(&event).await,
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

    /// An account's status: what was read before it applies first; a repository hidden and
    /// shown again on a verified source is queued to be read whole.
    async fn account(
        &mut self,
        did: svc_syntax::Did,
        status: svc_catalog::AccountStatus,
    ) -> Result<(), FollowError> {
        self.end_catch_up().await?;
        self.flush().await?;
        tracing::info!(%did, ?status, "account status");
        let account = AccountFromStream::of(status);
        let stored = account.stored.clone();
        let was_hidden = self.source.catalog.set_account(did.clone(), stored).await?;
        let verified = self.source.verifier.is_some();
        let Some(reason) = account.read_again(was_hidden, verified) else {
            return Ok(());
        };
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
        Ok(())
    }

    /// A `#sync` event, checked by the verifier when there is one.
    async fn sync_event(&mut self, event: &svc_repo::sync::SyncEvent) {
        let Some(verifier) = self.source.verifier else {
            return;
        };
        let Err(why) = verifier.sync_event(event).await else {
            return;
        };
        if why.transient {
            // The key could not be read now: a followed repository is read whole later,
            // which settles what the event would have.
            if verifier.follows(event.repo.as_str()) {
                verifier.owe(&event.repo, &event.rev);
            }
            return;
        }
        self.source.ingestor.metrics().count_unverified(why.reason);
        tracing::warn!(did = %event.repo, rev = %event.rev, reason = why.reason.label(), "#sync not believed: {why}");
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
    pub async fn end_catch_up(&mut self) -> Result<(), FollowError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firehose::Proof;

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
}
