//! `/v1/verifications/sufficient`: does each listed verification kind have at least one
//! verification of the lens with the matching property variant (and, with `hold`, a `holds`
//! result)? One count lookup per distinct kind in the internal sufficiency index, however
//! often a kind is listed: the work is at most seven lookups, and the rest (reading the
//! tokens, echoing them) grows only with the request, which the URI limit bounds.

use crate::cache::{Answer, CacheKey};
use crate::list::json_response;
use crate::params::Params;
use crate::{ApiError, AppState};
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use svc_spec::{Index, QueryId, SUFFICIENCY_INDEX, VERIFICATION_KINDS, check_at_uri_parameter};

pub(crate) async fn serve(State(state): State<Arc<AppState>>, RawQuery(raw): RawQuery) -> Response {
    match answer(&state, raw.as_deref()).await {
        Ok(body) => json_response(body),
        Err(error) => error.into_response(),
    }
}

/// What one request asks: each kind token as its place in VERIFICATION_KINDS, in order and
/// with repeats, since the answer echoes every token given.
struct Question<'a> {
    lens: &'a str,
    tokens: Vec<usize>,
    /// Which kinds were named at all: the catalog is asked once for each.
    asked: [bool; VERIFICATION_KINDS.len()],
    require_holds: bool,
}

async fn answer(state: &AppState, raw: Option<&str>) -> Result<Bytes, ApiError> {
    let params = Params::parse(raw);
    let question = read_question(&params)?;
    let index = sufficiency_index(state)?;
    let result = question.require_holds.then_some("holds");
    let keys: Vec<String> = VERIFICATION_KINDS
        .iter()
        .zip(question.asked)
        .filter(|(_, asked)| *asked)
        .map(|((_, variant), _)| index.lookup_key(&[Some(question.lens), Some(variant), result]))
        .collect();
    // Versions only grow, so their sum moves whenever any of the keys changed.
    let clock = state.catalog.clock();
    let version = keys
        .iter()
        .map(|k| clock.key_version(index.id(), k))
        .fold(0u64, u64::wrapping_add);
    let cache_key = cache_key_of(state, index, &question);
    if let Some(answer) = cache_key
        .as_ref()
        .and_then(|key| state.cache.get(key, version))
    {
        return answer.identity();
    }
    let counts = state.catalog.count_keys(index.id().clone(), keys).await?;
    let body = encode_answer(&question, &counts)?;
    if let Some(key) = cache_key {
        state
            .cache
            .put(key, version, Arc::new(Answer::new(body.clone())));
    }
    Ok(body)
}

/// How many verifications of a lens each kind has, and how many hold: counted where the
/// sufficiency answer counts (a kind's property variant), in one lookup of fourteen keys. A
/// kind is sufficient when it has one that holds.
pub(crate) async fn tally(state: &AppState, lens: &str) -> Result<Vec<(u64, u64)>, ApiError> {
    let index = sufficiency_index(state)?;
    let keys: Vec<String> = VERIFICATION_KINDS
        .iter()
        .flat_map(|(_, variant)| {
            [None, Some("holds")]
                .map(|result| index.lookup_key(&[Some(lens), Some(variant), result]))
        })
        .collect();
    let counts = state.catalog.count_keys(index.id().clone(), keys).await?;
    Ok(counts
        .chunks_exact(2)
        .map(|pair| (pair[0], pair[1]))
        .collect())
}

fn sufficiency_index(state: &AppState) -> Result<&Index, ApiError> {
    state
        .queries
        .indexes()
        .get(&QueryId::new(SUFFICIENCY_INDEX))
        .ok_or_else(|| ApiError::Internal("the sufficiency index is missing".into()))
}

fn read_question<'a>(params: &'a Params) -> Result<Question<'a>, ApiError> {
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
    let tokens = kind_positions(kinds_text)?;
    let mut asked = [false; VERIFICATION_KINDS.len()];
    for kind in &tokens {
        asked[*kind] = true;
    }
    Ok(Question {
        lens,
        tokens,
        asked,
        require_holds,
    })
}

/// The verification kinds a `kinds` parameter lists (comma-separated), each as its place in
/// [`VERIFICATION_KINDS`], in order and with repeats; an unknown one is a bad request.
pub(crate) fn kind_positions(kinds_text: &str) -> Result<Vec<usize>, ApiError> {
    kinds_text
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|token| {
            VERIFICATION_KINDS
                .iter()
                .position(|(k, _)| *k == token)
                .ok_or_else(|| {
                    let known: Vec<&str> = VERIFICATION_KINDS.iter().map(|(k, _)| *k).collect();
                    ApiError::InvalidRequest(format!(
                        "kinds: unknown verification kind {token:?} (known: {})",
                        known.join(", ")
                    ))
                })
        })
        .collect()
}

/// The question in a byte a token: whether results must hold, each token's kind as a digit,
/// then the lens. Built only when short enough to keep.
fn cache_key_of(state: &AppState, index: &Index, question: &Question) -> Option<CacheKey> {
    let key_len = 2 + question.tokens.len() + question.lens.len();
    state.cache.keeps_key_of(key_len).then(|| {
        let mut key = String::with_capacity(key_len);
        key.push(if question.require_holds { 'h' } else { 'a' });
        key.extend(
            question
                .tokens
                .iter()
                .map(|kind| char::from(b'0' + *kind as u8)),
        );
        key.push('|');
        key.push_str(question.lens);
        CacheKey {
            query: index.id().clone(),
            key,
            page: None,
        }
    })
}

fn encode_answer(question: &Question, counts: &[u64]) -> Result<Bytes, ApiError> {
    let required: Vec<&str> = question
        .tokens
        .iter()
        .map(|kind| VERIFICATION_KINDS[*kind].0)
        .collect();
    let json = serde_json::to_vec(&serde_json::json!({
        "sufficient": counts.iter().all(|n| *n > 0),
        "required_kinds": required,
        "require_holds": question.require_holds,
    }))
    .map_err(|e| ApiError::Internal(format!("the answer does not encode: {e}")))?;
    // Exactly its length: the cache charges an answer its length.
    Ok(Bytes::from(json.into_boxed_slice()))
}
