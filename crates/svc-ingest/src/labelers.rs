//! Following labelers: each configured labeler's DID document names its label stream
//! (`#atproto_labeler`) and its key (`#atproto_label`); svc reads
//! `com.atproto.label.subscribeLabels` from the cursor it stored with the labels, checks each
//! label's signature, and stores them in batches with the cursor. A labeler that cannot be
//! reached, hangs, or sends garbage is connected to again with backoff; a storage failure
//! resumes from the stored cursor, so no label is lost. Expired labels are swept away.

mod frames;

use crate::IngestMetrics;
use crate::reconnect::{STABLE_AFTER, back_off, stop_requested};
use crate::websocket::{self, Socket};
use frames::{LabelerMessage, Refused, check_label, decode_message};
use futures_util::{SinkExt, StreamExt};
use std::sync::Arc;
use std::time::{Duration, Instant};
use svc_atproto::{AtprotoError, LabelerService, Reach, Resolver};
use svc_catalog::{CatalogError, CatalogWrite, CursorPosition, Label, LabelBatch};
use svc_repo::dagcbor::Cbor;
use svc_syntax::{Did, UnixMillis};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// A label stream's messages are small; this bounds what a hostile labeler makes svc hold.
const MAX_MESSAGE_BYTES: usize = 1 << 20;
/// Labels stored in one transaction at most.
const BATCH_LABELS: usize = 1_000;
/// How long labels wait for more before they are stored.
const BATCH_WAIT: Duration = Duration::from_millis(50);
/// One labeler's writes take at most one part in this many of the writer's time, over time:
/// each batch's time is spent from an allowance refilled at that share, a burst of
/// [`WRITER_BURST`] at most; once it is spent, reading waits until it is earned back.
const WRITER_SHARE_DIVISOR: u32 = 4;
/// The writer's time one labeler may spend at once (a flood of cheap labels, a restart).
const WRITER_BURST: Duration = Duration::from_secs(2);
const CONNECT_WITHIN: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A label that does not verify sends svc to the DID document again (a rotated key), at most
/// this often.
const KEY_READ_EVERY: Duration = Duration::from_secs(60);
/// How often expired labels are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// What following labelers needs.
#[derive(Clone)]
pub struct Labelers {
    pub catalog: Arc<dyn CatalogWrite>,
    pub resolver: Arc<Resolver>,
    /// Where a labeler's stream may be: only public addresses, unless allowed.
    pub reach: Reach,
    pub metrics: Arc<IngestMetrics>,
    /// Silence after which svc pings a labeler, and then how long it waits for any answer
    /// before it connects again (a quiet labeler is normal; one that answers nothing hangs).
    pub silence: Duration,
}

impl Labelers {
    /// Follows each labeler, and sweeps expired labels, until shutdown.
    pub async fn run(self, labelers: Vec<Did>, shutdown: watch::Receiver<bool>) {
        let mut tasks = Vec::new();
        for labeler in labelers {
            let this = self.clone();
            let shutdown = shutdown.clone();
            tasks.push(tokio::spawn(async move {
                this.follow(labeler, shutdown).await;
            }));
        }
        sweep_expired(self.catalog.as_ref(), shutdown).await;
        for task in tasks {
            let _ = task.await;
        }
    }

    /// One labeler, connection after connection, until shutdown.
    async fn follow(&self, labeler: Did, mut shutdown: watch::Receiver<bool>) {
        let mut backoff = FIRST_BACKOFF;
        let name = svc_ingest_name(&labeler);
        loop {
            let started = Instant::now();
            let outcome = tokio::select! {
                outcome = self.connection(&labeler) => outcome,
                _ = stop_requested(&mut shutdown) => return,
            };
            self.metrics.labeler_connected.get_or_create(&name).set(0);
            if let Err(reason) = outcome {
                tracing::warn!(%labeler, "following the labeler: {reason}; connecting again");
            }
            self.metrics.labeler_reconnects.get_or_create(&name).inc();
            if started.elapsed() >= STABLE_AFTER {
                backoff = FIRST_BACKOFF;
            }
            if !back_off(&mut backoff, MAX_BACKOFF, &mut shutdown).await {
                return;
            }
        }
    }

    /// One connection: the labeler's document read, its stream followed from the stored
    /// cursor until it ends or fails.
    async fn connection(&self, labeler: &Did) -> Result<(), String> {
        let service = self.resolver.labeler(labeler).await.map_err(|error| {
            self.count_refused(labeler, &error);
            format!("its DID document: {error}")
        })?;
        let source = svc_catalog::labeler_cursor_source(labeler);
        let stored = self.catalog.cursor(source.clone()).await;
        let stored = stored.map_err(|e| format!("the stored cursor: {e}"))?;
        let cursor = stored
            .filter(|position| position.endpoint == service.endpoint)
            .and_then(|position| position.cursor.parse::<i64>().ok())
            .unwrap_or(0);
        let url = stream_url(&service.endpoint, cursor)?;
        let socket = self.connect(labeler, &url).await?;
        tracing::info!(%labeler, %url, "following the labeler");
        self.metrics
            .labeler_connected
            .get_or_create(&svc_ingest_name(labeler))
            .set(1);
        let mut stream = Stream {
            labelers: self,
            labeler,
            service,
            source,
            cursor,
            pending: Vec::new(),
            pending_seq: cursor,
            key_read_at: Instant::now(),
            writer_time: WriterTime::new(),
        };
        stream.read(socket).await
    }

    /// The label stream's WebSocket, on an address `reach` allows: the endpoint is what the
    /// labeler's DID document names, so a refused address is counted as such.
    async fn connect(&self, labeler: &Did, url: &str) -> Result<Socket, String> {
        let limits = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE_BYTES))
            .max_frame_size(Some(MAX_MESSAGE_BYTES));
        let connecting = websocket::connect(self.reach, url, limits);
        let connected = tokio::time::timeout(CONNECT_WITHIN, connecting)
            .await
            .map_err(|_| format!("no WebSocket handshake from {url} in {CONNECT_WITHIN:?}"))?;
        connected.map_err(|error| {
            self.count_refused(labeler, &error);
            format!("connecting: {error}")
        })
    }

    /// A `did:web` host or a stream on an address svc does not reach is counted as such.
    fn count_refused(&self, labeler: &Did, error: &AtprotoError) {
        if matches!(error, AtprotoError::Refused { .. }) {
            let name = svc_ingest_name(labeler);
            self.metrics.labeler_refused.get_or_create(&name).inc();
        }
    }
}

fn svc_ingest_name(labeler: &Did) -> crate::metrics::LabelerName {
    crate::metrics::LabelerName {
        labeler: labeler.to_string(),
    }
}

/// The label stream of an endpoint, from `cursor`.
fn stream_url(endpoint: &str, cursor: i64) -> Result<String, String> {
    let base = endpoint.trim_end_matches('/');
    let socket = if let Some(rest) = base.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = base.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        let shown: String = base.chars().take(64).collect();
        return Err(format!(
            "the labeler endpoint {shown:?} is not an http(s) URL"
        ));
    };
    Ok(format!(
        "{socket}/xrpc/com.atproto.label.subscribeLabels?cursor={cursor}"
    ))
}

/// One connection's reading: labels checked and gathered, stored with the cursor in batches.
struct Stream<'a> {
    labelers: &'a Labelers,
    labeler: &'a Did,
    service: LabelerService,
    source: String,
    /// The last sequence number stored.
    cursor: i64,
    pending: Vec<Label>,
    /// The sequence number the pending labels reach.
    pending_seq: i64,
    key_read_at: Instant,
    writer_time: WriterTime,
}

/// The writer's time a labeler may spend: an allowance refilled at its share, in seconds;
/// below zero, what it owes.
struct WriterTime {
    left: f64,
    refilled: Instant,
}

impl WriterTime {
    fn new() -> WriterTime {
        WriterTime {
            left: WRITER_BURST.as_secs_f64(),
            refilled: Instant::now(),
        }
    }

    /// Spends `took`; how long to wait until what is owed is earned back.
    fn spend(&mut self, took: Duration) -> Duration {
        let share = 1.0 / f64::from(WRITER_SHARE_DIVISOR);
        let earned = self.refilled.elapsed().as_secs_f64() * share;
        self.refilled = Instant::now();
        self.left = (self.left + earned).min(WRITER_BURST.as_secs_f64()) - took.as_secs_f64();
        match self.left < 0.0 {
            true => Duration::from_secs_f64(-self.left / share),
            false => Duration::ZERO,
        }
    }
}

impl Stream<'_> {
    async fn read(&mut self, mut socket: Socket) -> Result<(), String> {
        let mut heard = Instant::now();
        let mut pinged = false;
        let silence = self.labelers.silence;
        loop {
            let wait = match self.pending.is_empty() {
                true if pinged => (silence * 2).saturating_sub(heard.elapsed()),
                true => silence.saturating_sub(heard.elapsed()),
                false => BATCH_WAIT,
            };
            let message = match tokio::time::timeout(wait, socket.next()).await {
                Err(_) if !self.pending.is_empty() => {
                    self.store().await?;
                    continue;
                }
                Err(_) if pinged => {
                    return Err(format!("silent for {:?}, a ping unanswered", silence * 2));
                }
                Err(_) => {
                    socket
                        .send(Message::Ping(Vec::new().into()))
                        .await
                        .map_err(|e| format!("pinging: {e}"))?;
                    pinged = true;
                    continue;
                }
                Ok(None) => {
                    self.store().await?;
                    return Err("the labeler closed the stream".into());
                }
                Ok(Some(Err(error))) => {
                    self.store().await?;
                    return Err(format!("reading: {error}"));
                }
                Ok(Some(Ok(message))) => message,
            };
            heard = Instant::now();
            pinged = false;
            match message {
                Message::Binary(bytes) => self.message(&bytes).await?,
                Message::Close(_) => {
                    self.store().await?;
                    return Err("the labeler closed the stream".into());
                }
                _ => {}
            }
            if self.pending.len() >= BATCH_LABELS {
                self.store().await?;
            }
        }
    }

    async fn message(&mut self, bytes: &[u8]) -> Result<(), String> {
        match decode_message(bytes) {
            Ok(LabelerMessage::Labels { seq, labels }) => {
                if seq <= self.pending_seq {
                    return Ok(());
                }
                for label in &labels {
                    self.check(label).await;
                }
                self.pending_seq = seq;
                Ok(())
            }
            Ok(LabelerMessage::Info { name, message }) => {
                tracing::info!(labeler = %self.labeler, %name, %message, "the labeler says");
                Ok(())
            }
            Ok(LabelerMessage::Error { error, message }) => {
                self.store().await?;
                if error == "FutureCursor" {
                    // The labeler holds fewer labels than svc read (it lost them, or this is
                    // another labeler at the same place): read it again from the start; what
                    // svc holds already is stale, and is counted so.
                    self.restart_from_the_first().await?;
                }
                Err(format!("the labeler answered {error}: {message}"))
            }
            Ok(LabelerMessage::Unknown(kind)) => {
                tracing::debug!(labeler = %self.labeler, %kind, "skipping a message of an unknown type");
                Ok(())
            }
            Err(error) => {
                let metrics = &self.labelers.metrics;
                metrics.count_labels(self.labeler.as_str(), "malformed", 1);
                self.store().await?;
                Err(format!("a message that is not a label frame ({error})"))
            }
        }
    }

    /// A label checked and kept for the batch, or refused and counted. A signature that does
    /// not verify reads the labeler's key again (it may have rotated) before refusing.
    async fn check(&mut self, label: &Cbor) {
        let mut checked = check_label(label, self.labeler, &self.service.key);
        if matches!(
            &checked,
            Err(Refused {
                outcome: "signature",
                ..
            })
        ) && self.key_read_at.elapsed() >= KEY_READ_EVERY
        {
            self.key_read_at = Instant::now();
            if let Ok(service) = self.labelers.resolver.labeler(self.labeler).await {
                self.service.key = service.key;
                checked = check_label(label, self.labeler, &self.service.key);
            }
        }
        match checked {
            Ok(label) => self.pending.push(label),
            Err(refused) => {
                tracing::debug!(labeler = %self.labeler, reason = %refused.reason, "label refused");
                let metrics = &self.labelers.metrics;
                metrics.count_labels(self.labeler.as_str(), refused.outcome, 1);
            }
        }
    }

    /// Stores cursor 0, so that the next connection reads the labeler from its first label.
    async fn restart_from_the_first(&mut self) -> Result<(), String> {
        self.pending.clear();
        self.pending_seq = 0;
        self.cursor = -1;
        self.store().await
    }

    /// Stores the pending labels with the cursor they reach; a failure ends the connection,
    /// and the next resumes from the cursor stored.
    async fn store(&mut self) -> Result<(), String> {
        if self.pending_seq == self.cursor {
            return Ok(());
        }
        let batch = LabelBatch {
            labeler: self.labeler.clone(),
            labels: std::mem::take(&mut self.pending),
            cursor: CursorPosition {
                source: self.source.clone(),
                endpoint: self.service.endpoint.clone(),
                cursor: self.pending_seq.to_string(),
                event_time: None,
            },
        };
        let started = Instant::now();
        let report = self
            .labelers
            .catalog
            .apply_labels(batch)
            .await
            .map_err(|e: CatalogError| format!("storing labels: {e}"))?;
        self.cursor = self.pending_seq;
        // Whatever it sends, a labeler's writes take at most a share of the writer's time: the
        // rest waits in its own stream, read on from the stored cursor.
        tokio::time::sleep(self.writer_time.spend(started.elapsed())).await;
        let metrics = &self.labelers.metrics;
        let labeler = self.labeler.as_str();
        metrics.count_labels(labeler, "applied", report.applied);
        metrics.count_labels(labeler, "stale", report.stale);
        metrics.count_labels(labeler, "over_allowance", report.over_allowance);
        Ok(())
    }
}

/// Removes expired labels as they expire, until shutdown; storage failures are waited out.
async fn sweep_expired(catalog: &dyn CatalogWrite, mut shutdown: watch::Receiver<bool>) {
    let mut failing = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SWEEP_EVERY) => {}
            _ = stop_requested(&mut shutdown) => return,
        }
        loop {
            match catalog.expire_labels(UnixMillis::now()).await {
                // A sweep that worked: the next failure is news again.
                Ok(0) => {
                    failing = false;
                    break;
                }
                Ok(_) => failing = false,
                Err(error) => {
                    if !failing {
                        tracing::warn!("removing expired labels: {error}");
                    }
                    failing = true;
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_labeler_spends_the_writer_s_time_at_its_share() {
        let mut time = WriterTime::new();
        // A burst passes at once.
        assert_eq!(time.spend(Duration::from_millis(1_500)), Duration::ZERO);
        // Past it, the time owed is earned back at a quarter: four times it.
        let wait = time.spend(Duration::from_secs(1));
        let expected = Duration::from_secs(2);
        assert!(
            wait.abs_diff(expected) < Duration::from_millis(50),
            "{wait:?}"
        );
    }
}
