//! A lens's verifications by week, by result (holds, falsified, inconclusive), for its page:
//! the last half year, by the time each verification says it was made, read page by page.
//! A lens with none in the last half year shows the half year up to its newest instead, and
//! says so: an empty chart says nothing. The counts are kept in the answer cache until the
//! lens's verifications change (or the week turns).

use super::chart::{self, Axes, Chart, Slot};
use crate::cache::{Answer, CacheKey};
use crate::list::cached;
use crate::{ApiError, AppState};
use axum::body::Bytes;
use std::sync::Arc;
use svc_catalog::PageRequest;
use svc_spec::QueryId;

/// Weeks the chart shows, ending with this one.
const WEEKS: i64 = 26;
/// The most verifications of one lens read for the chart; past it the chart says so.
const READ_AT_MOST: u64 = 20_000;
const PAGE: u32 = 1_000;
const WEEK_MICROS: i64 = 7 * 24 * 3_600 * 1_000_000;
/// 1970-01-01 was a Thursday; weeks here begin on Mondays.
const MONDAY_OFFSET_MICROS: i64 = 3 * 24 * 3_600 * 1_000_000;
const RESULTS: [&str; 3] = ["holds", "falsified", "inconclusive"];

#[derive(serde::Deserialize)]
struct Verification {
    #[serde(rename = "occurredAt")]
    occurred_at: Option<String>,
    result: Option<String>,
}

/// Counts by week and result over [`WEEKS`] weeks ending with `last` (oldest first), and
/// how many were made before them.
#[derive(Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Window {
    last: i64,
    weeks: Vec<[u64; 3]>,
    earlier: u64,
}

impl Window {
    fn ending(last: i64) -> Window {
        Window {
            last,
            weeks: vec![[0; 3]; WEEKS as usize],
            earlier: 0,
        }
    }

    fn first(&self) -> i64 {
        self.last - WEEKS + 1
    }

    /// Counts one made in `week`, not after the window's last.
    fn count(&mut self, week: i64, result: usize) {
        match week - self.first() {
            slot if slot < 0 => self.earlier += 1,
            slot => {
                if let Some(counts) = self.weeks.get_mut(slot as usize) {
                    counts[result] += 1;
                }
            }
        }
    }

    /// Moves the window on to end with `week`; the weeks it leaves count as earlier.
    fn slide_to(&mut self, week: i64) {
        let by = (week - self.last).clamp(0, WEEKS) as usize;
        let left: u64 = self.weeks.drain(..by).flatten().sum();
        self.earlier += left;
        self.weeks.resize(WEEKS as usize, [0; 3]);
        self.last = week.max(self.last);
    }

    fn total(&self) -> u64 {
        self.weeks.iter().flatten().sum()
    }
}

/// The lens's verifications counted two ways: over the weeks ending with this one, and over
/// those ending with the week of its newest (not after this one), for a lens with none of
/// late; and what fell outside both.
#[derive(Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Tally {
    recent: Window,
    newest: Option<Window>,
    later: u64,
    other_results: u64,
    unread: u64,
}

pub(crate) async fn chart(state: &AppState, lens: &str) -> Result<Chart, ApiError> {
    let query = QueryId::new("verificationsForLens");
    let index =
        state.queries.indexes().get(&query).ok_or_else(|| {
            ApiError::Internal("the query verificationsForLens is missing".into())
        })?;
    let key = index.lookup_key(&[Some(lens)]);
    let this_week = week_of(svc_syntax::now_unix_micros());
    let version = state.catalog.clock().key_version(&query, &key);
    let cache_key = CacheKey {
        query: query.clone(),
        key: format!("weeks {this_week} {key}"),
        page: None,
    };
    let counted = cached(state, &cache_key, version, |_| async {
        let tally = read(state, &query, &key, this_week).await?;
        let json = serde_json::to_vec(&tally)
            .map_err(|e| ApiError::Internal(format!("a lens's counts do not encode: {e}")))?;
        Ok(Arc::new(Answer::new(Bytes::from(json))))
    })
    .await?;
    let tally: Tally = serde_json::from_slice(&counted.identity()?)
        .map_err(|e| ApiError::Internal(format!("a lens's kept counts do not decode: {e}")))?;
    Ok(draw(&tally))
}

/// Reads the lens's verifications page by page, at most [`READ_AT_MOST`].
async fn read(
    state: &AppState,
    query: &QueryId,
    key: &str,
    this_week: i64,
) -> Result<Tally, ApiError> {
    let mut tally = Tally::new(this_week);
    let mut after = None;
    let mut read = 0u64;
    loop {
        let request = PageRequest {
            limit: PAGE,
            offset: 0,
            after: after.take(),
        };
        let page = state
            .catalog
            .list(query.clone(), key.to_string(), request)
            .await?;
        for item in &page.items {
            if let Ok(found) = serde_json::from_str::<Verification>(&item.record_json) {
                tally.add(&found, this_week);
            }
        }
        read += page.items.len() as u64;
        after = page.items.last().map(|item| item.uri.clone());
        if !page.more || after.is_none() || read >= READ_AT_MOST {
            tally.unread = page.total.saturating_sub(read);
            return Ok(tally);
        }
    }
}

fn week_of(micros: i64) -> i64 {
    (micros + MONDAY_OFFSET_MICROS).div_euclid(WEEK_MICROS)
}

impl Tally {
    fn new(this_week: i64) -> Tally {
        Tally {
            recent: Window::ending(this_week),
            ..Tally::default()
        }
    }

    fn add(&mut self, verification: &Verification, this_week: i64) {
        let Some(result) = RESULTS
            .iter()
            .position(|r| verification.result.as_deref() == Some(*r))
        else {
            self.other_results += 1;
            return;
        };
        let Some(at) = verification
            .occurred_at
            .as_deref()
            .and_then(svc_syntax::datetime_to_unix_micros)
        else {
            self.other_results += 1;
            return;
        };
        let week = week_of(at);
        if week > this_week {
            self.later += 1;
            return;
        }
        self.recent.count(week, result);
        let newest = self.newest.get_or_insert_with(|| Window::ending(week));
        newest.slide_to(week);
        newest.count(week, result);
    }

    /// The window the chart shows: the last weeks when any falls in them, else those up to
    /// the newest (whether the newest is shown is the second value).
    fn shown(&self) -> (&Window, bool) {
        match &self.newest {
            Some(newest) if self.recent.total() == 0 && newest.total() > 0 => (newest, true),
            _ => (&self.recent, false),
        }
    }
}

/// `2026-11-23`: a week's Monday.
fn monday(week: i64) -> String {
    let micros = week * WEEK_MICROS - MONDAY_OFFSET_MICROS;
    svc_syntax::format_unix_micros(micros)
        .get(..10)
        .unwrap_or_default()
        .to_string()
}

fn draw(tally: &Tally) -> Chart {
    let (window, up_to_newest) = tally.shown();
    let first = window.first();
    let slots: Vec<Slot> = window
        .weeks
        .iter()
        .enumerate()
        .map(|(i, counts)| Slot {
            // Month and day: the year is in the words below.
            label: monday(first + i as i64)
                .get(5..)
                .unwrap_or_default()
                .to_string(),
            values: RESULTS
                .iter()
                .copied()
                .zip(counts.iter().copied())
                .collect(),
        })
        .collect();
    let sums: Vec<u64> = (0..3)
        .map(|r| window.weeks.iter().map(|w| w[r]).sum())
        .collect();
    let counts = format!(
        "{} hold, {} falsified, {} inconclusive.",
        sums[0], sums[1], sums[2]
    );
    let mut alt = match up_to_newest {
        false => format!("In the {WEEKS} weeks from {}: {counts}", monday(first)),
        true => format!(
            "None in the last {WEEKS} weeks; the {WEEKS} weeks up to its newest, week of {}: {counts}",
            monday(window.last)
        ),
    };
    for (n, words) in [
        (window.earlier, "made earlier"),
        (tally.later, "dated after this week"),
        (
            tally.other_results,
            "with another result or no readable time",
        ),
        (tally.unread, "not read (past the most a chart reads)"),
    ] {
        if n > 0 {
            alt.push_str(&format!(" {n} more {words}."));
        }
    }
    let axes = Axes {
        id: "verifications-by-week",
        title: "Verifications by week and result",
        x_label: "week",
        y_label: "verifications",
        label_every: 5,
    };
    chart::bars(&axes, &slots, alt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verification(at: &str, result: &str) -> Verification {
        Verification {
            occurred_at: Some(at.into()),
            result: Some(result.into()),
        }
    }

    #[test]
    fn verifications_fall_in_their_monday_weeks_and_the_rest_is_said() {
        let now = svc_syntax::datetime_to_unix_micros("2026-11-29T10:00:00Z").unwrap_or_default();
        let this_week = week_of(now);
        assert_eq!(monday(this_week), "2026-11-23");
        let mut tally = Tally::new(this_week);
        tally.add(&verification("2026-11-23T00:00:00Z", "holds"), this_week);
        tally.add(
            &verification("2026-11-22T23:59:59Z", "falsified"),
            this_week,
        );
        tally.add(&verification("2020-01-01T00:00:00Z", "holds"), this_week);
        tally.add(&verification("2030-01-01T00:00:00Z", "holds"), this_week);
        tally.add(&verification("2026-11-24T00:00:00Z", "maybe"), this_week);
        assert_eq!(tally.recent.weeks[25], [1, 0, 0]);
        assert_eq!(tally.recent.weeks[24], [0, 1, 0]);
        assert_eq!(
            (tally.recent.earlier, tally.later, tally.other_results),
            (1, 1, 1)
        );
        let chart = draw(&tally);
        assert!(
            chart
                .alt
                .contains("In the 26 weeks from 2026-06-01: 1 hold, 1 falsified, 0 inconclusive"),
            "{}",
            chart.alt
        );
        assert_eq!(chart.bars.len(), 26 * 3);
    }

    #[test]
    fn a_lens_with_none_of_late_shows_the_weeks_up_to_its_newest() {
        let now = svc_syntax::datetime_to_unix_micros("2026-12-02T10:00:00Z").unwrap_or_default();
        let this_week = week_of(now);
        let mut tally = Tally::new(this_week);
        // Read in no order of time: the window follows the newest as it is found.
        for (at, result) in [
            ("2024-12-10T00:00:00Z", "falsified"),
            ("2025-01-06T00:00:00Z", "holds"),
            ("2025-06-10T12:00:00Z", "holds"),
            ("2025-06-09T00:00:00Z", "falsified"),
            ("2024-06-01T00:00:00Z", "inconclusive"),
            ("2031-01-01T00:00:00Z", "holds"),
        ] {
            tally.add(&verification(at, result), this_week);
        }
        let (window, up_to_newest) = tally.shown();
        assert!(up_to_newest);
        assert_eq!(monday(window.last), "2025-06-09");
        assert_eq!(window.weeks[25], [1, 1, 0]);
        // The 26 weeks up to 2025-06-09 begin on 2024-12-16: the first one read slid out.
        assert_eq!(monday(window.first()), "2024-12-16");
        assert_eq!(window.weeks[3], [1, 0, 0]);
        assert_eq!(window.earlier, 2);
        let chart = draw(&tally);
        assert!(
            chart.alt.starts_with(
                "None in the last 26 weeks; the 26 weeks up to its newest, week of 2025-06-09: \
                 2 hold, 1 falsified, 0 inconclusive. 2 more made earlier. 1 more dated after"
            ),
            "{}",
            chart.alt
        );
        // One of late, and the last weeks are shown as ever.
        tally.add(&verification("2026-11-30T00:00:00Z", "holds"), this_week);
        assert!(!tally.shown().1);
        assert!(draw(&tally).alt.starts_with("In the 26 weeks from"));
    }
}
