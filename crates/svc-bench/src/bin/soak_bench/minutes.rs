//! What is sampled while the load runs, and each minute figured from it.

use super::*;

#[derive(Clone, Copy, Default)]
pub(crate) struct Sample {
    pub(crate) t: f64,
    pub(crate) rss_kb: u64,
    pub(crate) applied: u64,
    pub(crate) streamed: u64,
    pub(crate) lag_s: f64,
}

/// The live source's counters from `/metrics`: (applied, stale + invalid + ignored, lag).
pub(crate) fn live_counters(
    client: &reqwest::blocking::Client,
    url: &str,
) -> Option<(u64, u64, f64)> {
    let text = client
        .get(format!("{url}/metrics"))
        .send()
        .and_then(|r| r.text())
        .ok()?;
    let (mut applied, mut refused, mut lag) = (0, 0, 0.0);
    for line in text.lines() {
        let value = line.rsplit(' ').next().unwrap_or_default();
        if line.starts_with("svc_ingest_events_total{") && line.contains("source=\"firehose\"") {
            let n = value.parse::<f64>().unwrap_or(0.0) as u64;
            if line.contains("outcome=\"applied\"") {
                applied += n;
            } else {
                refused += n;
            }
        } else if line.starts_with("svc_ingest_lag_seconds ") {
            lag = value.parse().unwrap_or(0.0);
        }
    }
    Some((applied, refused, lag))
}

pub(crate) fn get_json(
    client: &reqwest::blocking::Client,
    url: &str,
) -> Result<serde_json::Value, String> {
    let response = client.get(url).send().map_err(|e| format!("{url}: {e}"))?;
    let status = response.status();
    let body = response.text().map_err(|e| format!("{url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("{url}: {status}: {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("{url}: not JSON: {e}"))
}

pub(crate) struct Minute {
    pub(crate) p50: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
    pub(crate) samples: usize,
    pub(crate) rss_mb: f64,
    pub(crate) applied_per_s: f64,
    pub(crate) streamed_per_s: f64,
    pub(crate) lag_s: f64,
}

/// Figures of minute `m` (the last one takes whatever ran over the nominal duration).
pub(crate) fn minute(m: u64, last: bool, probes: &Probes, samples: &[Sample]) -> Minute {
    let (from, to) = (m as f64 * 60.0, (m + 1) as f64 * 60.0);
    let inside = |t: f64| t >= from && (last || t < to);
    let mut latencies: Vec<f64> = probes
        .latencies
        .iter()
        .filter(|(t, _)| inside(*t))
        .map(|(_, ms)| *ms)
        .collect();
    latencies.sort_by(f64::total_cmp);
    let before = samples.iter().rfind(|s| s.t <= from).copied();
    let within: Vec<&Sample> = samples.iter().filter(|s| inside(s.t)).collect();
    let end = within.last().copied().copied();
    let rate = |f: fn(&Sample) -> u64| match (before, end) {
        (Some(a), Some(b)) if b.t > a.t => (f(&b) - f(&a)) as f64 / (b.t - a.t),
        _ => f64::NAN,
    };
    Minute {
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
        max: latencies.last().copied().unwrap_or(f64::NAN),
        samples: latencies.len(),
        rss_mb: within.iter().map(|s| s.rss_kb as f64).sum::<f64>()
            / within.len().max(1) as f64
            / 1024.0,
        applied_per_s: rate(|s| s.applied),
        streamed_per_s: rate(|s| s.streamed),
        lag_s: within.iter().map(|s| s.lag_s).fold(0.0, f64::max),
    }
}

pub(crate) fn print_minute(m: u64, figures: &Minute) {
    println!(
        "{:>6} {:>9.2} {:>8.2} {:>8.2} {:>8} {:>8.0} {:>10.0} {:>11.0} {:>8.1}",
        m + 1,
        figures.p50,
        figures.p99,
        figures.max,
        figures.samples,
        figures.rss_mb,
        figures.applied_per_s,
        figures.streamed_per_s,
        figures.lag_s
    );
}
