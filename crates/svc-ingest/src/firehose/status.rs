//! What the live source is told (its configuration) and what it says of itself (whether it
//! is connected, verified and caught up, for readiness).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;
use svc_syntax::now_unix_micros;

pub use svc_catalog::LIVE_SOURCE;

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
    /// keys and chains of the resynchronisation given to `run_live`).
    pub verify: bool,
}

/// What the live source is doing, for readiness.
#[derive(Debug, Default)]
pub struct LiveStatus {
    pub(super) connected: AtomicBool,
    /// Events read but not yet applied.
    pub(super) pending: AtomicBool,
    pub(super) last_event_us: AtomicI64,
    pub(super) last_pong_us: AtomicI64,
    /// Whether the source's commits are verified before they apply.
    pub(super) verified: AtomicBool,
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
