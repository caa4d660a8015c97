//! What a subscriber keeps of its stream: latencies in buckets, by slice of the window, and the commit times its messages carry.

use super::*;

/// Latencies in buckets 1% apart: millions of messages a second are too many to keep each.
pub(crate) const BUCKETS: usize = 2000;
pub(crate) const BUCKET_RATIO: f64 = 1.01;

#[derive(Clone)]
pub(crate) struct Latencies {
    pub(crate) counts: Vec<u64>,
    pub(crate) n: u64,
    pub(crate) max_us: u64,
}

impl Latencies {
    pub(crate) fn new() -> Latencies {
        Latencies {
            counts: vec![0; BUCKETS],
            n: 0,
            max_us: 0,
        }
    }

    pub(crate) fn record(&mut self, us: u64) {
        let bucket = if us <= 1 {
            0
        } else {
            ((us as f64).ln() / BUCKET_RATIO.ln()) as usize
        };
        self.counts[bucket.min(BUCKETS - 1)] += 1;
        self.n += 1;
        self.max_us = self.max_us.max(us);
    }

    pub(crate) fn merge(&mut self, other: &Latencies) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.n += other.n;
        self.max_us = self.max_us.max(other.max_us);
    }

    /// The `p` quantile in milliseconds: the middle of its bucket.
    pub(crate) fn quantile_ms(&self, p: f64) -> f64 {
        let rank = ((self.n as f64 * p).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return BUCKET_RATIO.powf(bucket as f64 + 0.5) / 1000.0;
            }
        }
        self.max_us as f64 / 1000.0
    }
}

/// The window is cut into slices of this many seconds of commits, to show whether delivery
/// keeps pace (latency flat) or falls behind (latency growing through the window).
pub(crate) const SLICE_S: i64 = 5;

/// Latency of the changes committed in one slice of the window.
#[derive(Clone, Copy, Default)]
pub(crate) struct Slice {
    pub(crate) sum_us: u64,
    pub(crate) n: u64,
    pub(crate) max_us: u64,
}

/// What the subscribers share with the benchmark: the window whose changes are timed, how
/// many are connected, and each one's last seq.
pub(crate) struct Shared {
    /// The window's changes by seq, from the applied counter at its start (excluded) to the
    /// one at its end: then exactly the changes counted as owed are the ones timed.
    pub(crate) window_after_seq: AtomicI64,
    pub(crate) window_last_seq: AtomicI64,
    /// When the window started, where its slices are counted from.
    pub(crate) window_from_us: AtomicI64,
    pub(crate) connected: AtomicUsize,
    pub(crate) last_seq: Vec<AtomicI64>,
}

/// One subscriber's account of its stream.
pub(crate) struct Tally {
    pub(crate) latencies: Latencies,
    pub(crate) slices: Vec<Slice>,
    pub(crate) changes: u64,
    /// Seqs skipped (every change of this run is in both answers, so none should be).
    pub(crate) missed: u64,
    /// Seqs at or before one already received.
    pub(crate) repeated: u64,
    pub(crate) last_seq: i64,
    /// Why the stream ended before the benchmark stopped reading it.
    pub(crate) ended: Option<String>,
}

/// Microseconds of the `time` of a message (`YYYY-MM-DDTHH:MM:SS.fffZ`): the date and
/// second are parsed once per second of messages, the fraction each time.
#[derive(Default)]
pub(crate) struct CommitClock {
    pub(crate) second: Vec<u8>,
    pub(crate) second_us: i64,
}

impl CommitClock {
    pub(crate) fn micros(&mut self, time: &[u8]) -> Option<i64> {
        let second = time.get(..19)?;
        if second != self.second.as_slice() {
            let whole = format!("{}Z", std::str::from_utf8(second).ok()?);
            self.second_us = svc_syntax::datetime_to_unix_micros(&whole)?;
            self.second = second.to_vec();
        }
        let mut fraction = 0i64;
        let mut scale = 100_000;
        for &digit in time.get(20..)?.iter().take_while(|b| b.is_ascii_digit()) {
            fraction += i64::from(digit - b'0') * scale;
            scale /= 10;
        }
        Some(self.second_us + fraction)
    }
}
