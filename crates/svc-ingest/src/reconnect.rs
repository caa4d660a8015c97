//! Following a stream again after it ended: the live source and each labeler wait out a
//! doubling, jittered step between connections, reset once a connection has stayed up a
//! while, and stop waiting when shutdown is asked for.

use std::time::Duration;
use tokio::sync::watch;

/// A connection that stayed up this long resets the backoff.
pub(crate) const STABLE_AFTER: Duration = Duration::from_secs(30);

/// A pseudo-random factor in [0.5, 1.5) for backoff jitter; no cryptographic need.
fn jitter() -> f64 {
    0.5 + f64::from(svc_syntax::clock_noise() % 1000) / 1000.0
}

/// Resolves once shutdown is asked for (the watch guard is dropped inside, so the
/// future stays `Send`).
pub(crate) async fn stop_requested(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// Waits out one backoff step, with jitter, and doubles the step (up to `max`) for the next
/// time; `false` when shutdown was asked for meanwhile.
pub(crate) async fn back_off(
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
