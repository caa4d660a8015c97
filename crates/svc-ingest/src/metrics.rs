//! Ingest counters, registered in the process's Prometheus registry.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub source: &'static str,
    /// `applied`, `stale`, `invalid` or `ignored`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// A [`svc_catalog::Refusal`]'s label.
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LabelerOutcome {
    pub labeler: String,
    /// `applied`, `stale`, `over_allowance`, or why a label was refused: `signature`,
    /// `malformed`, `foreign`, `oversized`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LabelerName {
    pub labeler: String,
}

#[derive(Debug, Default)]
pub struct IngestMetrics {
    /// Labels read from labelers, by labeler and outcome.
    pub labels: Family<LabelerOutcome, Counter>,
    /// 1 while a labeler's stream is connected.
    pub labeler_connected: Family<LabelerName, Gauge>,
    /// Connections to labelers that ended and were made again.
    pub labeler_reconnects: Family<LabelerName, Counter>,
    /// Connections to a labeler not made: its `did:web` host or the stream its DID document
    /// names is an address svc does not reach (loopback, private, link-local) without
    /// `--allow-private-peers`.
    pub labeler_refused: Family<LabelerName, Counter>,
    pub events: Family<EventLabels, Counter>,
    /// Changes the catalog's store refused for their content, skipped.
    pub refused: Family<ReasonLabel, Counter>,
    pub invalid_records: Counter,
    pub malformed_events: Counter,
    /// Seconds between the newest applied event's time and now.
    pub lag_seconds: Gauge<f64, AtomicU64>,
    pub reconnects: Counter,
    pub backfill_repos_done: Gauge,
    pub backfill_repos_total: Gauge,
    /// Repositories the backfill could not read and skipped.
    pub backfill_repos_skipped: Gauge,
    /// Commits not applied because they could not be verified, by reason.
    pub unverified: Family<ReasonLabel, Counter>,
    /// Commits whose signature and proof were checked before they were applied.
    pub verified: Counter,
    /// Reads of repositories owed a whole read, by outcome (`done`, `retried`, `refused`).
    pub resyncs: Family<OutcomeLabel, Counter>,
    /// Repositories queued to be read whole, by why (`chain`, `key`, `host`, `backfill`).
    pub resync_queued: Family<ReasonLabel, Counter>,
    /// Reads of queued repositories that failed for a reason a retry could undo, by why the
    /// repository was queued.
    pub resync_retries: Family<ReasonLabel, Counter>,
    /// Repositories waiting in the queue.
    pub resync_waiting: Gauge,
    /// 1 when the live source's commits are verified before they apply; 0 when they are not
    /// (Jetstream, which carries no proofs, or `--verify none`).
    pub live_verified: Gauge,
    /// Bytes of the repository reads' memory budget held now.
    pub read_memory_bytes: Gauge,
    /// Repository reads that waited for memory to verify what they read.
    pub read_memory_waits: Counter,
    /// Repository answers kept on disk while read, the budget having no room for them.
    pub read_spills: Counter,
}

impl IngestMetrics {
    pub fn register(&self, registry: &mut Registry) {
        self.register_labelers(registry);
        self.register_events(registry);
        self.register_resync(registry);
        self.register_backfill(registry);
    }

    /// The labelers' labels and connections.
    fn register_labelers(&self, registry: &mut Registry) {
        registry.register(
            "svc_labels",
            "Labels read from labelers, by labeler and outcome: applied, stale, over_allowance \
             (a new label on a subject the catalog does not hold, past the labeler's allowance), \
             or refused: signature, malformed, foreign (another labeler's), oversized",
            self.labels.clone(),
        );
        registry.register(
            "svc_labeler_connected",
            "1 while the labeler's label stream is connected",
            self.labeler_connected.clone(),
        );
        registry.register(
            "svc_labeler_reconnects",
            "Connections to a labeler that ended and were made again",
            self.labeler_reconnects.clone(),
        );
        registry.register(
            "svc_labeler_refused",
            "Connections to a labeler not made because its did:web host or the stream its \
             DID document names is a loopback, private or link-local address, which svc serve \
             reaches only with --allow-private-peers; tried again with backoff",
            self.labeler_refused.clone(),
        );
    }

    /// The sources' events, their verification and what the catalog refused.
    fn register_events(&self, registry: &mut Registry) {
        registry.register(
            "svc_ingest_events",
            "Events by source and outcome",
            self.events.clone(),
        );
        registry.register(
            "svc_catalog_refused",
            "Changes the catalog's store refused for their content, skipped, by reason",
            self.refused.clone(),
        );
        registry.register(
            "svc_ingest_unverified",
            "Commits not applied because they could not be verified, by reason: \
             cid, commit, proof, signature, key, rev, chain, desynchronized",
            self.unverified.clone(),
        );
        registry.register(
            "svc_ingest_verified",
            "Commits whose signature and proof were checked before they were applied",
            self.verified.clone(),
        );
        registry.register(
            "svc_ingest_live_verified",
            "1 when the live source's commits are verified before they apply, 0 when not \
             (Jetstream carries no proofs; --verify none)",
            self.live_verified.clone(),
        );
        registry.register(
            "svc_ingest_invalid_records",
            "Records refused by ingest checks: lexicon, identifiers, revision, uri length",
            self.invalid_records.clone(),
        );
        registry.register(
            "svc_ingest_malformed_events",
            "Events that could not be parsed",
            self.malformed_events.clone(),
        );
        registry.register(
            "svc_ingest_lag_seconds",
            "Age of the newest applied event",
            self.lag_seconds.clone(),
        );
        registry.register(
            "svc_ingest_reconnects",
            "Reconnections to the live source",
            self.reconnects.clone(),
        );
    }

    /// Repositories read whole: the queue, its reads and their memory.
    fn register_resync(&self, registry: &mut Registry) {
        registry.register(
            "svc_ingest_resyncs",
            "Reads of repositories owed a whole read, by outcome: done, retried (a failure a \
             retry could undo), refused (a verdict on the data)",
            self.resyncs.clone(),
        );
        registry.register(
            "svc_ingest_resync_queued",
            "Repositories queued to be read whole, by why: chain, key, host, backfill",
            self.resync_queued.clone(),
        );
        registry.register(
            "svc_ingest_resync_retries",
            "Reads of queued repositories that failed for a reason a retry could undo, by why \
             the repository was queued: chain, key, host, backfill",
            self.resync_retries.clone(),
        );
        registry.register(
            "svc_ingest_resync_waiting",
            "Repositories waiting to be read whole",
            self.resync_waiting.clone(),
        );
        registry.register(
            "svc_ingest_read_memory_bytes",
            "Bytes of memory held by repositories read whole now, within --read-memory-mb",
            self.read_memory_bytes.clone(),
        );
        registry.register(
            "svc_ingest_read_memory_waits",
            "Repositories read whole that waited for memory to be verified",
            self.read_memory_waits.clone(),
        );
        registry.register(
            "svc_ingest_read_spills",
            "Repository answers kept on disk while read, memory being in use by other reads",
            self.read_spills.clone(),
        );
    }

    /// The backfill's repositories.
    fn register_backfill(&self, registry: &mut Registry) {
        registry.register(
            "svc_backfill_repos_done",
            "Repositories backfilled",
            self.backfill_repos_done.clone(),
        );
        registry.register(
            "svc_backfill_repos_total",
            "Repositories to backfill",
            self.backfill_repos_total.clone(),
        );
        registry.register(
            "svc_backfill_repos_skipped",
            "Repositories the backfill could not read and skipped: an error answer, or a peer \
             that failed, timed out, answered too much or was given up on",
            self.backfill_repos_skipped.clone(),
        );
    }

    /// `n` labels of `labeler` came to `outcome`.
    pub fn count_labels(&self, labeler: &str, outcome: &'static str, n: u64) {
        if n > 0 {
            let labeler = labeler.to_string();
            let key = LabelerOutcome { labeler, outcome };
            self.labels.get_or_create(&key).inc_by(n);
        }
    }

    /// What the catalog did with one source's batch.
    pub fn count_report(&self, source: &'static str, report: &svc_catalog::ApplyReport) {
        self.count(source, "applied", report.applied);
        self.count(source, "stale", report.stale);
        self.count(source, "refused", report.refused_total());
        for reason in svc_catalog::Refusal::ALL {
            let n = report.refused(reason);
            if n > 0 {
                let reason = reason.label();
                self.refused
                    .get_or_create(&ReasonLabel { reason })
                    .inc_by(n);
            }
        }
    }

    pub fn count_unverified(&self, reason: crate::unverified::Reason) {
        let reason = reason.label();
        self.unverified.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Static labels: this runs per event on the live path, so it must not allocate.
    pub fn count(&self, source: &'static str, outcome: &'static str, n: u64) {
        if n > 0 {
            self.events
                .get_or_create(&EventLabels { source, outcome })
                .inc_by(n);
        }
    }
}
