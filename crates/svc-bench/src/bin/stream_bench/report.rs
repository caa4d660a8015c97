//! What a run found, printed: rates, latencies, memory, and what svc did with the stalled subscribers.

use super::*;

/// p50, p99 and max of the messages delivered, and what is known of those that were not:
/// percentiles of the delivered alone would flatter a stream that fell behind.
pub(crate) fn latency_figures(run: &Run) -> String {
    let l = &run.latencies;
    let owed = run.window_changes * run.subscribers as u64;
    let still_owed = owed.saturating_sub(l.n);
    let delivered = if l.n == 0 {
        "none of the messages committed in the window arrived".to_string()
    } else {
        format!(
            "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} messages committed in the window",
            l.quantile_ms(0.5),
            l.quantile_ms(0.99),
            l.max_us as f64 / 1000.0,
            l.n
        )
    };
    if still_owed == 0 {
        return delivered;
    }
    format!(
        "{delivered} ({:.1}% of the {owed} owed; the {still_owed} others had waited at least \
         {:.0} s when the benchmark stopped reading)",
        100.0 * l.n as f64 / owed.max(1) as f64,
        run.owed_waited_s
    )
}

pub(crate) fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

pub(crate) fn report(label: &str, run: &Run, none: Option<&Run>, options: &Options) {
    let ratio = none.map_or(String::new(), |none| {
        format!(
            " = {:.3} of none",
            run.applied_per_s / none.applied_per_s.max(1.0)
        )
    });
    println!(
        "{label}: applied {:.0} events/s{ratio} (fed {}/s; lowest second {:.0}/s; lag {:.2} s \
         at the end); svc CPU {:.2} cores, bench process {:.2}; run took {:.0} s",
        run.applied_per_s,
        options.rate,
        run.lowest_per_s,
        run.lag_end_s,
        run.svc_cores,
        run.bench_cores,
        run.wall_s
    );
    println!(
        "{label}: svc RSS {:.1} MB idle, {:.1} MB with subscribers connected, {:.1} MB at the \
         end of the window (peak {:.1} MB); its sockets' kernel send queues {:.1} MB at the \
         peak",
        mb(run.rss_idle_kb),
        mb(run.rss_connected_kb),
        mb(run.rss_end_kb),
        mb(run.rss_peak_kb),
        mb(run.send_queues_peak_kb)
    );
    let (p50, p99) = p50_p99(&run.healthz_ms);
    println!(
        "{label}: /healthz every 50 ms during the window: p50 {p50:.1} ms, p99 {p99:.1} ms ({} asked)",
        run.healthz_ms.len()
    );
    if run.subscribers > 0 {
        println!("{label}: commit-to-delivery {}", latency_figures(run));
        let slices: Vec<String> = run
            .slices
            .iter()
            .map(|s| {
                format!(
                    "{:.0}/{:.0}",
                    s.sum_us as f64 / s.n.max(1) as f64 / 1000.0,
                    s.max_us as f64 / 1000.0
                )
            })
            .collect();
        println!(
            "{label}: latency mean/max in ms by {SLICE_S} s of commits: {}",
            slices.join(" ")
        );
        println!(
            "{label}: {} of {} subscribers got every change to seq {} ({} received, {} \
             missed, {} repeated; the slowest was at seq {} after waiting {:.1} s for the \
             tail); {} ended early",
            run.complete,
            run.subscribers,
            run.last_seq,
            run.changes,
            run.missed,
            run.repeated,
            run.slowest_seq,
            run.tail_s,
            run.ended.len()
        );
        let mut reasons: Vec<(String, usize)> = Vec::new();
        for reason in &run.ended {
            match reasons.iter_mut().find(|(r, _)| r == reason) {
                Some((_, n)) => *n += 1,
                None => reasons.push((reason.clone(), 1)),
            }
        }
        for (reason, n) in reasons {
            println!("{label}:   {n} ended: {reason}");
        }
    }
    if let Some(none) = none {
        let per = |kb: u64, base: u64| (kb as f64 - base as f64) / run.subscribers.max(1) as f64;
        println!(
            "{label}: svc RSS per subscriber {:.1} KB streaming (end of window, against none's), \
             {:.1} KB connected and idle",
            per(run.rss_end_kb, none.rss_end_kb),
            per(run.rss_connected_kb, run.rss_idle_kb)
        );
    }
    if run.stalled > 0 {
        let found = &run.stalled_found;
        let count = |f: fn(&Stalled) -> bool| found.iter().filter(|s| f(s)).count();
        println!(
            "{label}: stalled {}: svc_stream_too_slow_total {}, svc_stream_subscribers {} after \
             the run; read at the end: {} told ConsumerTooSlow, {} streams ended, {} \
             connections closed by svc, {:.1} MB left unread in them",
            run.stalled,
            run.too_slow,
            run.subscribers_at_end,
            count(|s| s.told_too_slow),
            count(|s| s.stream_ended),
            count(|s| s.closed),
            mb(found.iter().map(|s| s.bytes_left).sum::<u64>() / 1024)
        );
    } else if run.too_slow > 0 {
        println!(
            "{label}: svc gave up on {} subscribers (svc_stream_too_slow_total)",
            run.too_slow
        );
    }
    if !run.warnings.is_empty() {
        println!(
            "{label}: svc logged {} warnings or errors:",
            run.warnings.len()
        );
        for warning in run.warnings.iter().take(5) {
            println!("{label}:   {warning}");
        }
    }
}
