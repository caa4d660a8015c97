//! Liveness, readiness and the Prometheus exposition.

use crate::AppState;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

pub(crate) const HEALTHZ: &str = "/healthz";
pub(crate) const READYZ: &str = "/readyz";
/// The probes' paths: exempt from the request limits, and served on a lane of their own.
pub(crate) const PROBES: [&str; 2] = [HEALTHZ, READYZ];

pub(crate) fn is_probe(path: &str) -> bool {
    PROBES.contains(&path)
}

// Plain-text answers end with a line break, as a terminal and line-reading tools expect.
pub(crate) async fn healthz() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "ok\n",
    )
        .into_response()
}

pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    // The reason is the word the readiness rules use, for an operator reading it.
    let (status, mut body) = match (state.not_ready)() {
        None => (StatusCode::OK, "ready\n".to_string()),
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("warming: {reason}\n"),
        ),
    };
    for note in (state.ready_notes)() {
        body.push_str(&format!("note: {note}\n"));
    }
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

pub(crate) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub(crate) const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(crate) async fn metrics(
    State(state): State<Arc<AppState>>,
    request_headers: axum::http::HeaderMap,
) -> Response {
    state
        .metrics
        .ready
        .set(i64::from((state.not_ready)().is_none()));
    match crate::stats::per_kind(&state).await {
        Ok(counts) => {
            let mut total = 0;
            for (kind, n) in counts {
                total += n;
                let tail = kind.rsplit('.').next().unwrap_or(&kind).to_string();
                state
                    .metrics
                    .catalog_records
                    .get_or_create(&crate::metrics::KindLabel { kind: tail })
                    .set(n as i64);
            }
            state.metrics.catalog_total.set(total as i64);
        }
        Err(error) => return error.into_response(),
    }
    let mut text = String::new();
    if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &state.registry) {
        return crate::ApiError::Internal(format!("metrics encoding: {error}")).into_response();
    }
    // Scrapers that ask for OpenMetrics (Prometheus does) get it; anything else gets the
    // classic text format every tool reads.
    let openmetrics = request_headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    if openmetrics {
        ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response()
    } else {
        (
            [(header::CONTENT_TYPE, PROMETHEUS_TEXT)],
            classic_text(&text),
        )
            .into_response()
    }
}

/// The classic Prometheus text format (0.0.4) of an OpenMetrics exposition: a counter family
/// is named with its `_total` sample name, and `# UNIT` and `# EOF` are dropped.
fn classic_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" | "stateset" | "unknown" => (name.to_string(), "untyped"),
                "gaugehistogram" => (name.to_string(), "histogram"),
                other => (name.to_string(), other),
            };
            if let Some(text) = help.take() {
                let text = text.split_once(' ').map_or("", |(_, t)| t);
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn counters_take_their_sample_name_in_the_classic_format() {
        let openmetrics = "# HELP svc_x Things.\n# TYPE svc_x counter\nsvc_x_total 3\n\
                           # HELP svc_g Level.\n# TYPE svc_g gauge\n# UNIT svc_g seconds\nsvc_g 1.5\n# EOF\n";
        assert_eq!(
            super::classic_text(openmetrics),
            "# HELP svc_x_total Things.\n# TYPE svc_x_total counter\nsvc_x_total 3\n\
             # HELP svc_g Level.\n# TYPE svc_g gauge\nsvc_g 1.5\n"
        );
    }
}
