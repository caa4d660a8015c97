//! After the load: the catalog settled and compared, every list paged through, and the verdict printed.

use super::*;

/// The catalog once the stream has stopped, against what was imported and streamed.
pub(crate) struct Settled {
    pub(crate) seconds: f64,
    pub(crate) stats_total: u64,
    pub(crate) expected_total: u64,
    pub(crate) applied_total: u64,
    pub(crate) refused_total: u64,
    pub(crate) count_line: Vec<String>,
    pub(crate) count_mismatches: Vec<String>,
}

/// Waits until every streamed event is applied (or nothing has moved for 30 s), then compares
/// `/v1/stats` per kind with what was imported and streamed.
pub(crate) fn settle(
    client: &Http,
    url: &str,
    load: &Load,
    base_kinds: BTreeMap<String, u64>,
    base_total: u64,
) -> Settled {
    let expected_total = base_total + load.streamed;
    let settling = Instant::now();
    let mut last_change = Instant::now();
    let mut stats_total = 0;
    let stats = loop {
        let stats = get_json(client, &format!("{url}/v1/stats")).unwrap_or_default();
        let total = stats["total"].as_u64().unwrap_or(0);
        if total != stats_total {
            stats_total = total;
            last_change = Instant::now();
        }
        if total >= expected_total || last_change.elapsed() > Duration::from_secs(30) {
            break stats;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let seconds = settling.elapsed().as_secs_f64();
    let lexicons = svc_lexicon::Lexicons::embedded();
    let collections: Vec<String> = lexicons.record_collections().map(str::to_string).collect();
    let kinds = svc_spec::Kinds::embedded(&collections);
    let (applied_total, refused_total, _) = live_counters(client, url).unwrap_or_default();
    let mut expected = base_kinds;
    for (kind, n) in &load.streamed_kinds {
        *expected.entry(kind.clone()).or_insert(0) += n;
    }
    let mut count_mismatches = Vec::new();
    let mut count_line = Vec::new();
    for (kind, n) in &expected {
        let name = kinds.plural(kind);
        let got = stats[name.as_str()].as_u64().unwrap_or(0);
        count_line.push(format!("{name} {got}"));
        if got != *n {
            count_mismatches.push(format!(
                "{name}: {got} in /v1/stats, {n} imported + streamed"
            ));
        }
    }
    if stats_total != expected_total {
        count_mismatches.push(format!(
            "total: {stats_total} in /v1/stats, {expected_total} imported + streamed"
        ));
    }
    Settled {
        seconds,
        stats_total,
        expected_total,
        applied_total,
        refused_total,
        count_line,
        count_mismatches,
    }
}

/// Every list route of the mix paged to its end by cursor.
pub(crate) struct Paging {
    pub(crate) routes: usize,
    pub(crate) seconds: f64,
    pub(crate) lines: Vec<String>,
    pub(crate) failures: Vec<String>,
}

/// Pages every list route of the mix, with the first key the mix asks it for (a hot one).
pub(crate) fn page_every_list_route(client: &Http, url: &str, mix: &Path) -> Paging {
    let mix_text = std::fs::read_to_string(mix)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", mix.display()));
    let mut routes: Vec<&str> = Vec::new();
    let mut paths_seen = HashSet::new();
    for line in mix_text.lines() {
        let path = line.split('?').next().unwrap_or(line);
        let list_route = path.starts_with("/v1/")
            && path != "/v1/stats"
            && path != "/v1/verifications/sufficient";
        if list_route && paths_seen.insert(path) {
            routes.push(line);
        }
    }
    let mut failures = Vec::new();
    let mut lines = Vec::new();
    let started = Instant::now();
    for route in &routes {
        match page_through(client, url, route) {
            Ok((total, items, distinct, pages)) => {
                let path = route.split('?').next().unwrap_or(route);
                lines.push(format!(
                    "  {path}: total {total}, {items} items in {pages} pages, {distinct} distinct"
                ));
                if items != total || distinct as u64 != total {
                    failures.push(format!(
                        "{route}: total {total}, {items} items, {distinct} distinct"
                    ));
                }
            }
            Err(e) => failures.push(e),
        }
    }
    Paging {
        routes: routes.len(),
        seconds: started.elapsed().as_secs_f64(),
        lines,
        failures,
    }
}

pub(crate) fn errors(load: &Load) -> u64 {
    load.wrk.socket_errors + load.wrk.non_2xx + load.probes.errors
}

pub(crate) fn applied_rate(load: &Load) -> f64 {
    load.applied_during as f64 / load.wrk_seconds
}

/// RSS of the last minute against the second's (the first holds the start's growth).
pub(crate) fn rss_ratio(minutes: &[Minute]) -> Option<f64> {
    (minutes.len() >= 2).then(|| minutes[minutes.len() - 1].rss_mb / minutes[1].rss_mb)
}

pub(crate) fn report(load: &Load, settled: &Settled, paging: &Paging, rss_end_kb: u64) {
    let (wrk, probes, minutes) = (&load.wrk, &load.probes, &load.minutes);
    println!("\nsummary:");
    println!(
        "  queries: {:.0} requests/s, p50 {:.2} ms, p99 {:.2} ms; errors {} (socket {}, non-2xx {}, healthz {}{})",
        wrk.requests_per_s,
        wrk.p50_ms,
        wrk.p99_ms,
        errors(load),
        wrk.socket_errors,
        wrk.non_2xx,
        probes.errors,
        probes
            .last_error
            .as_ref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default()
    );
    println!(
        "  events: {} streamed, {} applied during the run ({:.0}/s over {:.0} s), \
         {} applied in all, {} not applied (stale, invalid or ignored); settled {:.1} s after the stream stopped",
        load.streamed,
        load.applied_during,
        applied_rate(load),
        load.wrk_seconds,
        settled.applied_total,
        settled.refused_total,
        settled.seconds
    );
    match rss_ratio(minutes) {
        Some(ratio) => println!(
            "  RSS: second minute {:.0} MB, last minute {:.0} MB ({ratio:.3}); {} MB at the end",
            minutes[1].rss_mb,
            minutes[minutes.len() - 1].rss_mb,
            rss_end_kb / 1024
        ),
        None => println!(
            "  RSS: {:.0} MB over the only minute; {} MB at the end",
            minutes[0].rss_mb,
            rss_end_kb / 1024
        ),
    }
    println!(
        "  healthz: worst minute p99 {:.2} ms, max {:.2} ms over {} probes",
        minutes.iter().map(|m| m.p99).fold(f64::NAN, f64::max),
        minutes.iter().map(|m| m.max).fold(f64::NAN, f64::max),
        probes.latencies.len()
    );
    println!(
        "  counts (/v1/stats after settling): {}, total {}; expected total {}",
        settled.count_line.join(", "),
        settled.stats_total,
        settled.expected_total
    );
    println!(
        "  paging by cursor to the end ({} routes, {:.1} s):",
        paging.routes, paging.seconds
    );
    for line in &paging.lines {
        println!("{line}");
    }
}

/// The criteria that fail, each named with its figure.
pub(crate) fn failures(load: Load, settled: Settled, paging: Paging) -> Vec<String> {
    let mut failed = Vec::new();
    let errors = errors(&load);
    if errors > 0 {
        failed.push(format!("errors: {errors}, not 0"));
    }
    if !load.wrk_status.success() {
        failed.push(format!("wrk exited with {}", load.wrk_status));
    }
    match rss_ratio(&load.minutes) {
        Some(ratio) if ratio > RSS_GROWTH => failed.push(format!(
            "RSS: last minute / second minute {ratio:.3} > {RSS_GROWTH}"
        )),
        Some(_) => {}
        None => println!("  (RSS flatness needs two minutes or more: not checked)"),
    }
    for (m, figures) in load.minutes.iter().enumerate() {
        if figures.p99.is_nan() || figures.p99 >= HEALTHZ_P99_MS {
            failed.push(format!(
                "healthz p99 in minute {}: {:.2} ms, not under {HEALTHZ_P99_MS} ms",
                m + 1,
                figures.p99
            ));
        }
    }
    let applied_rate = applied_rate(&load);
    if applied_rate < MIN_APPLIED_PER_S {
        failed.push(format!(
            "applied rate {applied_rate:.0}/s < {MIN_APPLIED_PER_S}/s"
        ));
    }
    failed.extend(
        settled
            .count_mismatches
            .into_iter()
            .map(|m| format!("count {m}")),
    );
    failed.extend(paging.failures.into_iter().map(|m| format!("paging {m}")));
    failed
}
