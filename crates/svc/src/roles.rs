//! The catalog roles of a `svc serve` process: the indexer writes the catalog (or stands by
//! while another does), a query replica only reads it. The indexer tells everyone how current
//! the catalog is with a heartbeat it stores while it is caught up; a process that does not
//! write judges readiness by that heartbeat's age.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use svc_catalog::Catalog;
use svc_ingest::Readiness;
use tokio::sync::watch;

/// How often a caught-up indexer stores its heartbeat.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// How often a process that does not write reads the heartbeat.
const HEARTBEAT_READ: Duration = Duration::from_millis(500);

/// What `/metrics` says of the roles.
#[derive(Default)]
pub struct RoleMetrics {
    writer: Gauge,
    heartbeat_age: Gauge<f64, AtomicU64>,
    change_log_delay: Gauge<f64, AtomicU64>,
}

impl RoleMetrics {
    pub fn register(self: &Arc<Self>, registry: &mut Registry) {
        registry.register(
            "svc_catalog_writer",
            "1 while this process holds the catalog's writer lock and indexes",
            self.writer.clone(),
        );
        registry.register(
            "svc_indexer_heartbeat_age_seconds",
            "Age of the indexer's last heartbeat as this process reads it",
            self.heartbeat_age.clone(),
        );
        registry.register(
            "svc_change_log_delay_seconds",
            "From the indexer logging a change to this process's answer cache knowing of it, for the last change followed",
            self.change_log_delay.clone(),
        );
    }
}

/// Why the catalog is not current as a process that does not write sees it.
#[derive(Default)]
pub struct IndexerWatch {
    not_ready: Mutex<Option<String>>,
}

impl IndexerWatch {
    pub fn not_ready_because(&self) -> Option<String> {
        self.not_ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set(&self, reason: Option<String>) {
        *self.not_ready.lock().unwrap_or_else(|p| p.into_inner()) = reason;
    }
}

/// Reads the indexer's heartbeat until stopped or until this process writes (a standby that
/// took over judges readiness by its own sources): ready while it is younger than `ready_lag`.
pub async fn watch_indexer(
    catalog: Arc<dyn Catalog>,
    ready_lag: Duration,
    watch: Arc<IndexerWatch>,
    metrics: Arc<RoleMetrics>,
    mut stopped: watch::Receiver<bool>,
) {
    watch.set(Some("reading the indexer's heartbeat".into()));
    while !*stopped.borrow() && !catalog.is_writer() {
        let reason = match catalog.indexer_heartbeat().await {
            Ok(Some(beat)) => {
                let age = Duration::from_millis(
                    u64::try_from(svc_syntax::UnixMillis::now().0 - beat.0).unwrap_or(0),
                );
                metrics.heartbeat_age.set(age.as_secs_f64());
                (age > ready_lag).then(|| {
                    format!(
                        "the indexer's last heartbeat is {:.1}s old (more than --ready-lag {:.1}s)",
                        age.as_secs_f64(),
                        ready_lag.as_secs_f64()
                    )
                })
            }
            Ok(None) => Some("no indexer has written a heartbeat yet".into()),
            Err(error) => Some(format!("reading the indexer's heartbeat: {error}")),
        };
        watch.set(reason);
        if let Some(delay) = catalog.change_log_delay() {
            metrics.change_log_delay.set(delay.as_secs_f64());
        }
        tokio::select! {
            _ = tokio::time::sleep(HEARTBEAT_READ) => {}
            _ = stopped.changed() => {}
        }
    }
}

/// Stores the heartbeat every second while this process writes and is caught up.
pub async fn beat(
    catalog: Arc<dyn Catalog>,
    readiness: Arc<Readiness>,
    metrics: Arc<RoleMetrics>,
    keep_changes: std::time::Duration,
    mut stopped: watch::Receiver<bool>,
) {
    let mut failing = false;
    while !*stopped.borrow() {
        metrics.writer.set(i64::from(catalog.is_writer()));
        if catalog.is_writer() && readiness.is_ready() {
            match catalog.heartbeat(keep_changes).await {
                Ok(()) => failing = false,
                Err(error) => {
                    if !failing {
                        tracing::warn!("storing the indexer's heartbeat: {error}");
                    }
                    failing = true;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(HEARTBEAT) => {}
            _ = stopped.changed() => {}
        }
    }
}
