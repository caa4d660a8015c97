//! The front page's charts, from the catalog's activity by minute: changes per minute over
//! the last hour, per hour over the last day, and how far behind the live source was over
//! the last hour (its lag at the end of each minute: the minute's end less the time of the
//! newest event it had stored by then, so a stalled source shows its lag growing).

use super::super::chart::{self, Axes, Chart, Slot};
use std::collections::HashMap;
use svc_catalog::{Activity, LIVE_SOURCE};
use svc_syntax::UnixMillis;

const MINUTE_MS: i64 = 60_000;
const HOUR_MINUTES: i64 = 60;

pub(super) struct FrontCharts {
    /// Its last minute is where the live script adds changes.
    pub per_minute: Chart,
    pub per_hour: Chart,
    /// None while no live source has stored a cursor.
    pub lag: Option<Chart>,
}

/// What to read: the last day and its first hour's edge.
pub(super) fn since(now: UnixMillis) -> UnixMillis {
    UnixMillis(now.0 - 24 * HOUR_MINUTES * MINUTE_MS)
}

pub(super) fn draw(activity: &Activity, now: UnixMillis) -> FrontCharts {
    let this_minute = now.0.div_euclid(MINUTE_MS);
    let changes: HashMap<i64, u64> = activity.changes.iter().copied().collect();
    FrontCharts {
        per_minute: per_minute(&changes, this_minute),
        per_hour: per_hour(&changes, this_minute),
        lag: lag(activity, now, this_minute),
    }
}

fn changes_in(changes: &HashMap<i64, u64>, from: i64, to: i64) -> u64 {
    (from..=to).filter_map(|minute| changes.get(&minute)).sum()
}

/// `14:05` (UTC) of a unix minute.
fn clock(minute: i64) -> String {
    let time = svc_syntax::format_unix_micros(minute * MINUTE_MS * 1000);
    time.get(11..16).unwrap_or_default().to_string()
}

fn per_minute(changes: &HashMap<i64, u64>, this_minute: i64) -> Chart {
    let first = this_minute - HOUR_MINUTES + 1;
    let slots: Vec<Slot> = (first..=this_minute)
        .map(|minute| Slot {
            label: clock(minute),
            values: vec![("changes", changes_in(changes, minute, minute))],
        })
        .collect();
    let axes = Axes {
        id: "changes-per-minute",
        title: "Changes per minute, the last hour (UTC)",
        x_label: "minute",
        y_label: "changes",
        label_every: 10,
    };
    let mut chart = chart::bars(&axes, &slots, describe(&slots, "minute"));
    chart.live_minute = Some(this_minute);
    chart
}

fn per_hour(changes: &HashMap<i64, u64>, this_minute: i64) -> Chart {
    let this_hour = this_minute.div_euclid(HOUR_MINUTES);
    let slots: Vec<Slot> = (this_hour - 23..=this_hour)
        .map(|hour| Slot {
            label: clock(hour * HOUR_MINUTES),
            values: vec![(
                "changes",
                changes_in(changes, hour * HOUR_MINUTES, hour * HOUR_MINUTES + 59),
            )],
        })
        .collect();
    let axes = Axes {
        id: "changes-per-hour",
        title: "Changes per hour, the last day (UTC)",
        x_label: "hour",
        y_label: "changes",
        label_every: 4,
    };
    chart::bars(&axes, &slots, describe(&slots, "hour"))
}

/// The chart in words: the total, and the busiest slot.
fn describe(slots: &[Slot], slot_name: &str) -> String {
    let total: u64 = slots.iter().flat_map(|s| &s.values).map(|(_, v)| v).sum();
    let busiest = slots
        .iter()
        .map(|s| (s.values.iter().map(|(_, v)| v).sum::<u64>(), &s.label))
        .max_by_key(|(n, _)| *n);
    match busiest {
        Some((most, label)) if total > 0 => {
            format!("{total} changes in all; the busiest {slot_name}, {label}, had {most}.")
        }
        _ => "No changes in this time.".to_string(),
    }
}

fn lag(activity: &Activity, now: UnixMillis, this_minute: i64) -> Option<Chart> {
    let moves: Vec<(i64, i64)> = activity
        .sources
        .iter()
        .filter(|m| m.source == LIVE_SOURCE)
        .map(|m| (m.minute, m.newest_event.0 / 1000))
        .collect();
    if moves.is_empty() {
        return None;
    }
    let first = this_minute - HOUR_MINUTES + 1;
    let points: Vec<(String, Option<f64>)> = (first..=this_minute)
        .map(|minute| {
            let end = ((minute + 1) * MINUTE_MS).min(now.0);
            let newest = moves
                .iter()
                .filter(|(at, _)| *at <= minute)
                .map(|(_, event)| *event)
                .max();
            let lag = newest.map(|event| (end - event).max(0) as f64 / 1000.0);
            (clock(minute), lag)
        })
        .collect();
    let known: Vec<f64> = points.iter().filter_map(|(_, lag)| *lag).collect();
    let alt = match (known.iter().copied().reduce(f64::max), known.last()) {
        (Some(most), Some(last)) => format!(
            "The live source was at most {most:.1} s behind the network over the last hour, and {last:.1} s behind now."
        ),
        _ => "The live source stored no position in the last hour.".to_string(),
    };
    let axes = Axes {
        id: "live-lag",
        title: "How far behind the live source was, the last hour (UTC)",
        x_label: "minute",
        y_label: "seconds",
        label_every: 10,
    };
    Some(chart::line(&axes, &points, alt))
}

#[cfg(test)]
mod tests {
    use super::*;
    use svc_catalog::SourceMinute;
    use svc_syntax::UnixMicros;

    #[test]
    fn a_stalled_live_source_shows_its_lag_growing_and_changes_fall_in_their_minutes() {
        let now = UnixMillis(1_000 * MINUTE_MS + 30_000);
        let activity = Activity {
            changes: vec![(1_000, 7), (990, 3), (100, 50)],
            sources: vec![SourceMinute {
                source: LIVE_SOURCE.into(),
                minute: 990,
                newest_event: UnixMicros(990 * MINUTE_MS * 1000),
            }],
        };
        let charts = draw(&activity, now);
        let minute_values: Vec<u64> = charts.per_minute.bars.iter().map(|b| b.value).collect();
        assert_eq!(minute_values.len(), 60);
        assert_eq!(minute_values.iter().sum::<u64>(), 10);
        assert_eq!(minute_values.last(), Some(&7));
        let lag = charts.lag.expect("a live source");
        assert!(lag.alt.contains("630.0 s behind now"), "{}", lag.alt);
        assert!(lag.line.expect("a line").starts_with('M'));
    }
}
