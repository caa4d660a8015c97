//! The front page (`GET /`): whether the catalog is ready and why not, the sources it follows
//! and how far behind they are, the recent rate of change, counts per kind, the queries, and
//! the newest changes. Built at most once a second, whatever the traffic: its reads are the
//! kind counts, the cursors and the stream's last changes.

mod charts;

use super::bounded::Json;
use super::chart::Chart;
use super::{Linked, author_path, envelope, fields, page, record_path};
use crate::{ApiError, AppState};
use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svc_catalog::RecordChange;

/// Changes the front page lists.
const NEWEST: usize = 20;
/// Changes read to measure the rate: the rate is exact up to this many a minute.
const RATE_SAMPLE: usize = 1000;
/// The window the rate is measured over.
const RATE_WINDOW_MS: i64 = 60_000;
/// How long a built page is served again.
const FRESH_FOR: Duration = Duration::from_secs(1);

/// The last front page built, and when; and the one build under way, which the requests that
/// find the page stale meanwhile wait for instead of building their own.
#[derive(Default)]
pub(crate) struct FrontCache {
    kept: Mutex<Option<(Instant, String)>>,
    building: tokio::sync::Mutex<()>,
}

#[derive(Template)]
#[template(path = "explorer/front.html")]
struct Front {
    ready: bool,
    readiness: String,
    notes: Vec<String>,
    sources: Vec<SourceRow>,
    rate: String,
    kinds: Vec<KindRow>,
    total: u64,
    queries: Vec<QueryRow>,
    newest: Vec<ChangeRow>,
    /// The stream position the page shows: live updates continue from it.
    cursor: i64,
    per_minute: Chart,
    per_hour: Chart,
    lag: Option<Chart>,
}

struct SourceRow {
    name: String,
    endpoint: String,
    /// The time of the last event applied, and how long ago that was.
    event_time: String,
    behind: String,
}

struct KindRow {
    name: String,
    count: u64,
}

struct QueryRow {
    name: String,
    kind: String,
    description: String,
}

struct ChangeRow {
    op: &'static str,
    record: Linked,
    kind: String,
    author: Linked,
    time: String,
}

/// `GET /`.
pub(crate) async fn front(
    State(state): State<Arc<AppState>>,
    asker: crate::costly::Asker,
) -> Response {
    if let Some(html) = state.front.fresh() {
        return super::with_headers(html, super::HTML, StatusCode::OK);
    }
    let _building = state.front.building.lock().await;
    if let Some(html) = state.front.fresh() {
        return super::with_headers(html, super::HTML, StatusCode::OK);
    }
    let client = crate::costly::client_of(asker);
    match crate::costly::gated(&state.costly, client, build(&state)).await {
        Ok(front) => match front.render() {
            Ok(html) => {
                state.front.keep(html.clone());
                super::with_headers(html, super::HTML, StatusCode::OK)
            }
            Err(_) => page(&front, StatusCode::OK),
        },
        Err(error) => super::failure(error),
    }
}

impl FrontCache {
    fn fresh(&self) -> Option<String> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let (built, html) = kept.as_ref()?;
        (built.elapsed() < FRESH_FOR).then(|| html.clone())
    }

    fn keep(&self, html: String) {
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), html));
    }
}

async fn build(state: &AppState) -> Result<Front, ApiError> {
    let not_ready = (state.not_ready)();
    let counts = crate::stats::per_kind(state).await?;
    let bounds = state.catalog.change_bounds().await?;
    let from = (bounds.newest - RATE_SAMPLE as i64).max(bounds.oldest - 1);
    let recent = state.catalog.changes_after(from, RATE_SAMPLE).await?;
    let now = svc_syntax::UnixMillis::now();
    let activity = state.catalog.activity(charts::since(now)).await?;
    let charts = charts::draw(&activity, now);
    Ok(Front {
        ready: not_ready.is_none(),
        readiness: not_ready.map_or("ready".to_string(), |why| format!("warming: {why}")),
        notes: (state.ready_notes)(),
        sources: sources(state).await?,
        rate: rate(&recent),
        total: counts.iter().map(|(_, count)| count).sum(),
        kinds: counts
            .into_iter()
            .map(|(name, count)| KindRow { name, count })
            .collect(),
        queries: queries(state),
        newest: newest(state, recent).await?,
        cursor: bounds.newest,
        per_minute: charts.per_minute,
        per_hour: charts.per_hour,
        lag: charts.lag,
    })
}

async fn sources(state: &AppState) -> Result<Vec<SourceRow>, ApiError> {
    let now = svc_syntax::now_unix_micros();
    Ok(state
        .catalog
        .cursors()
        .await?
        .into_iter()
        .map(|cursor| {
            let event = cursor.event_time.map(|time| time.0);
            SourceRow {
                name: cursor.source,
                // An import's endpoint is its file's identity, not an address.
                endpoint: match cursor.endpoint.contains("://") {
                    true => cursor.endpoint,
                    false => String::new(),
                },
                event_time: event
                    .map(svc_syntax::format_unix_micros)
                    .unwrap_or_default(),
                behind: event.map_or_else(String::new, |at| seconds(now.saturating_sub(at))),
            }
        })
        .collect())
}

/// `12.5 s`, `3 min`, `2 h`.
fn seconds(micros: i64) -> String {
    let seconds = micros.max(0) as f64 / 1e6;
    match seconds {
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.0} h", s / 3600.0),
    }
}

/// Changes a second over the last minute, from the newest changes.
fn rate(recent: &[RecordChange]) -> String {
    let now_ms = svc_syntax::now_unix_micros() / 1000;
    let in_window: Vec<&RecordChange> = recent
        .iter()
        .filter(|change| !change.is_gap() && change.at.0 >= now_ms - RATE_WINDOW_MS)
        .collect();
    let span_ms = match in_window.first() {
        // Every change read is in the window: more may precede them, so the rate is over
        // the time they span.
        Some(oldest) if in_window.len() == RATE_SAMPLE => (now_ms - oldest.at.0).max(1),
        Some(_) => RATE_WINDOW_MS,
        None => return "no changes in the last minute".into(),
    };
    let per_second = in_window.len() as f64 * 1000.0 / span_ms as f64;
    format!("{per_second:.1} changes a second over the last minute")
}

fn queries(state: &AppState) -> Vec<QueryRow> {
    state
        .queries
        .public()
        .map(|(_, query)| QueryRow {
            name: query.name().to_string(),
            kind: query.kind().to_string(),
            description: query.def().description.clone(),
        })
        .collect()
}

/// The newest changes, newest first, with the records they leave.
async fn newest(state: &AppState, recent: Vec<RecordChange>) -> Result<Vec<ChangeRow>, ApiError> {
    let changes: Vec<RecordChange> = recent
        .into_iter()
        .rev()
        .filter(|change| !change.is_gap() && change.op(None).is_some())
        .take(NEWEST)
        .collect();
    let mut uris: Vec<String> = changes.iter().map(|change| change.uri.clone()).collect();
    uris.sort_unstable();
    uris.dedup();
    let catalog = &state.catalog;
    let page = envelope::picked(fields::title_fields(), |picker| {
        catalog.write_records(uris, picker)
    })
    .await?;
    let held: HashMap<String, Json> = page
        .items
        .into_iter()
        .map(|item| (item.uri, item.record))
        .collect();
    Ok(changes
        .into_iter()
        .filter_map(|change| {
            let record = held.get(&change.uri);
            change_row(change, record)
        })
        .collect())
}

/// A change's row; `record` is the title fields of what the change left, if the catalog holds
/// it.
fn change_row(change: RecordChange, record: Option<&Json>) -> Option<ChangeRow> {
    let op = change.op(None)?;
    let parts = svc_syntax::check_at_uri(&change.uri).ok()?;
    let title = match record {
        Some(record) => fields::title(&change.uri, record),
        None => parts.rkey.unwrap_or_default().to_string(),
    };
    Some(ChangeRow {
        op: op.label(),
        // A record that left is no longer held: its page would say so.
        record: Linked {
            text: title,
            href: record.and_then(|_| record_path(&change.uri)),
        },
        kind: parts.collection.unwrap_or_default().to_string(),
        author: Linked {
            text: parts.authority.to_string(),
            href: Some(author_path(parts.authority)),
        },
        time: svc_syntax::format_unix_micros(change.at.0.saturating_mul(1000)),
    })
}
