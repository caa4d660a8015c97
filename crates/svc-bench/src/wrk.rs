//! wrk, run by the benchmarks that measure throughput: its requests per second for one URL.

use std::process::Command;

/// Runs `wrk ARGS URL` and reads its `Requests/sec:` line: `None` when wrk printed none (every
/// request failed, say).
pub fn requests_per_second(args: &[&str], url: &str) -> std::io::Result<Option<f64>> {
    let output = Command::new("wrk").args(args).arg(url).output()?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("Requests/sec:"))
        .and_then(|rate| rate.trim().parse().ok()))
}
