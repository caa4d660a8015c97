//! `/v1/stats`: one camelCase plural count per record kind, plus `total`.

use crate::list::json_response;
use crate::{ApiError, AppState};
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

pub(crate) async fn serve(State(state): State<Arc<AppState>>) -> Response {
    match counts(&state).await {
        Ok(body) => json_response(Bytes::from(body.to_string())),
        Err(error) => error.into_response(),
    }
}

/// Counts for every known kind (zero included) and the total.
pub(crate) async fn per_kind(state: &AppState) -> Result<Vec<(String, u64)>, ApiError> {
    let stored = state.catalog.kind_counts().await?;
    Ok(state
        .kinds
        .nsids()
        .map(|kind| (kind.to_string(), stored.get(kind).copied().unwrap_or(0)))
        .collect())
}

async fn counts(state: &AppState) -> Result<serde_json::Value, ApiError> {
    let mut body = serde_json::Map::new();
    let mut total = 0;
    for (kind, n) in per_kind(state).await? {
        total += n;
        body.insert(state.kinds.plural(&kind), n.into());
    }
    body.insert("total".into(), total.into());
    Ok(body.into())
}
