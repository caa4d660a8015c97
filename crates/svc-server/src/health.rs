//! Liveness, readiness and the Prometheus exposition.

use crate::AppState;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

pub(crate) async fn healthz() -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response()
}

pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let (status, body) = if (state.ready)() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "warming")
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    state.metrics.ready.set(i64::from((state.ready)()));
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
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
