//! Following a live source: where to resume, connecting, and reconnecting with exponential
//! backoff and jitter; each connection is followed by a [`Session`].

use super::MAX_MESSAGE_BYTES;
use super::session::{Connection, FollowError, Session, Socket};
use super::status::{LIVE_SOURCE, LiveConfig, LiveStatus};
use super::verifier::Verifier;
use super::{SourceKind, source_kind};
use crate::ingest::{Ingestor, is_plausible_time};
use crate::reconnect::{STABLE_AFTER, back_off, stop_requested};
use crate::resync::Resync;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use svc_atproto::Reach;
use svc_catalog::{CatalogError, CatalogWrite, CursorPosition};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// Jetstream cursors are times; resuming a little earlier covers events still in flight.
const JETSTREAM_REWIND_US: i64 = 5_000_000;

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

fn connect_url(kind: SourceKind, endpoint: &str, cursor: Option<i64>, compress: bool) -> String {
    match kind {
        SourceKind::Jetstream => {
            let wanted: Vec<String> = svc_lexicon::Lexicons::embedded()
                .record_namespaces()
                .iter()
                .map(|space| format!("wantedCollections={space}"))
                .collect();
            let mut url = format!("{endpoint}?{}", wanted.join("&"));
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
        let mut session = Session::new(self, cursor, *may_catch_up);
        let mut outcome = session.follow(socket, shutdown).await;
        // A catch-up is settled whenever the connection ends, so the writer is back to normal
        // for the next one.
        if let Err(error) = session.end_catch_up().await {
            outcome = Err(error);
        }
        *may_catch_up = session.may_catch_up();
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
        // accepts and never answers would otherwise hold the follow loop forever. The source
        // is the operator's own address, reached wherever it is.
        let connecting = tokio::time::timeout(
            self.config.liveness,
            crate::websocket::connect(Reach::Anywhere, &url, limits),
        );
        tokio::select! {
            connected = connecting => match connected {
                Ok(Ok(socket)) => Ok(socket),
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

#[cfg(test)]
mod tests {
    use super::*;
    use svc_syntax::now_unix_micros;

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
