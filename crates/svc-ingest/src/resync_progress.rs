//! What the resynchronisation queue's reads did, for readiness, metrics and the backfill's
//! summary, and what `/readyz` says of the queue.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use svc_catalog::ResyncSummary;
use svc_syntax::UnixMillis;

/// Counts of what the queue's reads did, for readiness, metrics and the backfill's summary.
#[derive(Debug, Default)]
pub struct ResyncProgress {
    /// The queue at its last reading, and when it was read.
    summary: Mutex<Option<(ResyncSummary, Instant)>>,
    pub read: AtomicU64,
    /// Taken out of the queue on a verdict.
    pub refused: AtomicU64,
    pub records: AtomicU64,
    pub applied: AtomicU64,
    pub stale: AtomicU64,
    pub invalid: AtomicU64,
    /// (when, repositories read by then), once a poll, for the rate.
    samples: Mutex<VecDeque<(Instant, u64)>>,
}

impl ResyncProgress {
    fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        mutex.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn summary(&self) -> Option<ResyncSummary> {
        Self::lock(&self.summary)
            .as_ref()
            .map(|(summary, _)| summary.clone())
    }

    /// Whether the queue was counted within `every`.
    pub(crate) fn counted_within(&self, every: Duration) -> bool {
        Self::lock(&self.summary)
            .as_ref()
            .is_some_and(|(_, at)| at.elapsed() < every)
    }

    /// An entry left the queue: the count kept until the next is one less, so that an
    /// emptied queue is said at once.
    pub(crate) fn settled(&self) {
        if let Some((summary, _)) = Self::lock(&self.summary).as_mut() {
            summary.waiting = summary.waiting.saturating_sub(1);
            summary.fresh = summary.fresh.min(summary.waiting);
            if summary.waiting == 0 {
                summary.oldest = None;
            }
        }
    }

    pub(crate) fn observed(&self, summary: ResyncSummary) {
        *Self::lock(&self.summary) = Some((summary, Instant::now()));
        let mut samples = Self::lock(&self.samples);
        samples.push_back((Instant::now(), self.read.load(Ordering::Relaxed)));
        while samples.len() > 12 {
            samples.pop_front();
        }
    }

    /// Repositories read per second over the last minute, once there is one.
    pub fn rate(&self) -> Option<f64> {
        let samples = Self::lock(&self.samples);
        let ((first_at, first), (last_at, last)) = (samples.front()?, samples.back()?);
        let seconds = last_at.duration_since(*first_at).as_secs_f64();
        (seconds >= 1.0).then(|| (last - first) as f64 / seconds)
    }

    /// What `/readyz` and the explorer say of the queue, or nothing while it is empty.
    pub fn notes(&self) -> Vec<String> {
        let Some(summary) = self.summary().filter(|s| s.waiting > 0) else {
            return Vec::new();
        };
        let (noun, verb) = match summary.waiting {
            1 => ("repository", "waits"),
            _ => ("repositories", "wait"),
        };
        let mut note = format!("{} {noun} {verb} to be read whole", summary.waiting);
        let failing = summary.waiting.saturating_sub(summary.fresh);
        if failing > 0 {
            note.push_str(&format!(
                ", {failing} failing for {} reads or more",
                svc_catalog::FRESH_ATTEMPTS
            ));
        }
        let read = self.read.load(Ordering::Relaxed);
        if let Some(rate) = self.rate().filter(|rate| *rate > 0.0) {
            let left = summary.waiting as f64 / rate;
            note.push_str(&format!(
                " ({read} read, {rate:.1}/s, about {left:.0} s left)"
            ));
        }
        let mut notes = vec![note];
        if let Some(oldest) = &summary.oldest {
            let waited = (UnixMillis::now().0 - oldest.since.0).max(0) / 1000;
            let why = oldest
                .last_error
                .clone()
                .unwrap_or_else(|| format!("queued ({}), not read yet", oldest.reason));
            notes.push(format!(
                "the oldest, {}, waits since {waited} s ({} failed reads): {}",
                oldest.did,
                oldest.attempts,
                one_line(&why, 300)
            ));
        }
        notes
    }
}

/// At most `limit` bytes of the first line of `text`.
fn one_line(text: &str, limit: usize) -> &str {
    let line = text.lines().next().unwrap_or_default();
    let mut end = line.len().min(limit);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resync::reasons;
    use svc_catalog::ResyncEntry;
    use svc_syntax::Did;

    #[test]
    fn the_queue_is_described_by_its_size_and_its_oldest_wait() {
        let progress = ResyncProgress::default();
        assert!(progress.notes().is_empty());
        progress.observed(ResyncSummary {
            waiting: 3,
            fresh: 1,
            oldest: Some(ResyncEntry {
                did: Did::new("did:plc:aaa").unwrap(),
                reason: reasons::KEY.into(),
                since: UnixMillis(UnixMillis::now().0 - 12_000),
                attempts: 2,
                due: UnixMillis::now(),
                last_error: Some("http://plc.test: 503 Service Unavailable\nmore".into()),
            }),
        });
        let notes = progress.notes();
        assert_eq!(
            notes[0],
            "3 repositories wait to be read whole, 2 failing for 4 reads or more"
        );
        assert!(
            notes[1].starts_with("the oldest, did:plc:aaa, waits since 1"),
            "{notes:?}"
        );
        assert!(
            notes[1].ends_with("(2 failed reads): http://plc.test: 503 Service Unavailable"),
            "{notes:?}"
        );
        // Emptied, it says so at once, before the queue is counted again.
        for _ in 0..3 {
            progress.settled();
        }
        assert!(progress.notes().is_empty(), "{:?}", progress.notes());
    }
}
