//! `/v1/verifications/sufficient`: does each listed verification kind have at least one
//! verification of the lens with the matching property variant (and, with `hold`, a `holds`
//! result)? One count lookup per kind in the internal sufficiency index.

use crate::cache::{Answer, CacheKey};
use crate::list::json_response;
use crate::params::Params;
use crate::{ApiError, AppState};
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use svc_catalog::spec::{
    SUFFICIENCY_QUERY, VERIFICATION_KINDS, check_at_uri_parameter, encode_key, property_of_kind,
};

pub(crate) async fn serve(State(state): State<Arc<AppState>>, RawQuery(raw): RawQuery) -> Response {
    match answer(&state, raw.as_deref()).await {
        Ok(body) => json_response(body),
        Err(error) => error.into_response(),
    }
}

async fn answer(state: &AppState, raw: Option<&str>) -> Result<Bytes, ApiError> {
    let params = Params::parse(raw);
    let lens = params
        .get("lens_uri")?
        .ok_or_else(|| ApiError::InvalidRequest("lens_uri: required parameter missing".into()))?;
    check_at_uri_parameter(lens).map_err(|e| ApiError::InvalidRequest(format!("lens_uri: {e}")))?;
    let kinds_text = params
        .get("kinds")?
        .ok_or_else(|| ApiError::InvalidRequest("kinds: required parameter missing".into()))?;
    let require_holds = match params.get("hold")? {
        None | Some("true") => true,
        Some("false") => false,
        Some(other) => {
            return Err(ApiError::InvalidRequest(format!(
                "hold: must be true or false, not {other:?}"
            )));
        }
    };
    let mut kinds = Vec::new();
    let mut variants = Vec::new();
    for token in kinds_text
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        let Some(variant) = property_of_kind(token) else {
            let known: Vec<&str> = VERIFICATION_KINDS.iter().map(|(k, _)| *k).collect();
            return Err(ApiError::InvalidRequest(format!(
                "kinds: unknown verification kind {token:?} (known: {})",
                known.join(", ")
            )));
        };
        kinds.push(token.to_string());
        variants.push(variant);
    }
    let index = state
        .queries
        .position(SUFFICIENCY_QUERY)
        .map(|position| &state.queries.all()[position])
        .ok_or_else(|| ApiError::Internal("the sufficiency index is missing".into()))?;
    let result = require_holds.then_some("holds");
    let keys: Vec<String> = variants
        .iter()
        .map(|v| index.lookup_key(&[Some(lens), Some(v), result]))
        .collect();
    // Versions only grow, so their sum moves whenever any of the keys changed.
    let clock = state.catalog.clock();
    let version = keys
        .iter()
        .map(|k| clock.key_version(index.id(), k))
        .fold(0u64, u64::wrapping_add);
    let key_parts: Vec<Option<&str>> = keys.iter().map(|k| Some(k.as_str())).collect();
    let cache_key = CacheKey {
        query: index.id().clone(),
        key: format!("{}|{}", encode_key(&key_parts), kinds.join(",")),
        page: None,
    };
    if let Some(answer) = state.cache.get(&cache_key, version) {
        return answer.identity();
    }
    let counts = state.catalog.count_keys(index.id().clone(), keys).await?;
    let body = Bytes::from(
        serde_json::json!({
            "sufficient": counts.iter().all(|n| *n > 0),
            "required_kinds": kinds,
            "require_holds": require_holds,
        })
        .to_string(),
    );
    state
        .cache
        .put(cache_key, version, Arc::new(Answer::new(body.clone())));
    Ok(body)
}
