//! The catalog explorer's front page (`GET /`): counts per kind, whether the catalog is ready
//! and why not, and the newest changes, rendered on the server from a template checked at
//! compile time (askama, which escapes every value). Every record is a stranger's text: the
//! page runs no script, loads nothing from outside the binary, and says so in its
//! Content-Security-Policy.

use crate::{ApiError, AppState};
use askama::Template;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use svc_catalog::{Item, RecordChange};

/// What a page may load and do: its own stylesheet, nothing else.
const POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
/// The stylesheet, built into the binary.
const STYLE: &str = include_str!("../assets/explorer.css");
/// Changes the front page lists.
const NEWEST: i64 = 20;

#[derive(Template)]
#[template(path = "front.html")]
struct Front {
    ready: bool,
    readiness: String,
    notes: Vec<String>,
    kinds: Vec<KindRow>,
    total: u64,
    newest: Vec<ChangeRow>,
}

struct KindRow {
    name: String,
    count: u64,
}

struct ChangeRow {
    op: &'static str,
    uri: String,
    /// The record's `name`, when it has one.
    name: Option<String>,
    time: String,
}

/// `GET /`.
pub(crate) async fn front(State(state): State<Arc<AppState>>) -> Response {
    match render(&state).await {
        Ok(page) => page,
        Err(error) => error.into_response(),
    }
}

async fn render(state: &AppState) -> Result<Response, ApiError> {
    let not_ready = (state.not_ready)();
    let counts = state.catalog.kind_counts().await?;
    let kinds: Vec<KindRow> = state
        .kinds
        .iter()
        .map(|kind| KindRow {
            name: kind.clone(),
            count: counts.get(kind).copied().unwrap_or(0),
        })
        .collect();
    let page = Front {
        ready: not_ready.is_none(),
        readiness: not_ready.map_or("ready".to_string(), |why| format!("warming: {why}")),
        notes: (state.ready_notes)(),
        total: kinds.iter().map(|kind| kind.count).sum(),
        kinds,
        newest: newest(state).await?,
    };
    let html = page
        .render()
        .map_err(|e| ApiError::Internal(format!("the front page: {e}")))?;
    Ok(html_response(html, "text/html; charset=utf-8"))
}

/// The newest changes of the catalog, newest first, with the names of the records they leave.
async fn newest(state: &AppState) -> Result<Vec<ChangeRow>, ApiError> {
    let bounds = state.catalog.change_bounds().await?;
    let from = (bounds.newest - NEWEST).max(0);
    let mut changes: Vec<RecordChange> = state
        .catalog
        .changes_after(from, NEWEST as usize)
        .await?
        .into_iter()
        .filter(|change| !change.is_gap())
        .collect();
    changes.reverse();
    let uris = changes.iter().map(|change| change.uri.clone()).collect();
    let items = state.catalog.get_many(uris).await?;
    Ok(changes
        .into_iter()
        .zip(items)
        .filter_map(|(change, item)| {
            let op = change.op(None)?;
            Some(ChangeRow {
                op: op.label(),
                name: item.as_ref().and_then(name_of),
                time: svc_syntax::format_unix_micros(change.at.0.saturating_mul(1000)),
                uri: change.uri,
            })
        })
        .collect())
}

/// The record's `name` field, at most 200 characters of it.
fn name_of(item: &Item) -> Option<String> {
    let record: serde_json::Value = serde_json::from_str(&item.record_json).ok()?;
    let name = record.get("name")?.as_str()?;
    Some(name.chars().take(200).collect())
}

/// `GET /assets/explorer.css`.
pub(crate) async fn style() -> Response {
    html_response(STYLE.to_string(), "text/css; charset=utf-8")
}

fn html_response(body: String, content_type: &'static str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}
