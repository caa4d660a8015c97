//! `GET /v1/search` (and `/xrpc/dev.svc.query.search`): the records whose words match a
//! person's query, best match first, in the list envelope every query answers with, paged by
//! cursor. The query is read into words before the catalog sees it, so neither engine's own
//! search syntax can come through; answers are cached until a write could change them.

use crate::cache::{Answer, CacheKey};
use crate::list::{JsonPage, cached, kept_answer, respond};
use crate::params::{Params, decode_search_cursor};
use crate::{ApiError, AppState};
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use svc_catalog::{PageRequest, SearchRequest};
use svc_spec::QueryId;
use svc_spec::search::{SearchQuery, Term};

/// What a search is cached under: its kind and terms, the page apart.
const SEARCH: &str = "search";

pub(crate) async fn serve(
    State(state): State<Arc<AppState>>,
    asker: crate::costly::Asker,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let client = crate::costly::client_of(asker);
    match answer(&state, raw.as_deref(), client).await {
        Ok(answer) => respond(&answer, &headers),
        Err(error) => error.into_response(),
    }
}

/// A search as the request asks for it, every parameter checked.
struct Asked {
    query: SearchQuery,
    kind: Option<String>,
    page: PageRequest,
}

fn asked(state: &AppState, raw: Option<&str>) -> Result<Asked, ApiError> {
    let params = Params::parse(raw);
    params.only(&["q", "kind", "limit", "cursor"])?;
    let q = params
        .get("q")?
        .ok_or_else(|| ApiError::InvalidRequest("q: required (the words to search for)".into()))?;
    let query = SearchQuery::parse(q).map_err(ApiError::InvalidRequest)?;
    let kind = match params.get("kind")? {
        None => None,
        Some(name) => Some(
            state
                .kinds
                .named(name)
                .ok_or_else(|| {
                    let shown: String = name.chars().take(64).collect();
                    ApiError::InvalidRequest(format!("kind: no record kind is named {shown:?}"))
                })?
                .to_string(),
        ),
    };
    let limit = crate::params::page_limit(&params)?;
    let offset = params
        .get("cursor")?
        .map(decode_search_cursor)
        .transpose()?
        .unwrap_or(0);
    let page = PageRequest {
        limit,
        offset,
        after: None,
    };
    Ok(Asked { query, kind, page })
}

/// The terms as a cache key: the same words ask the same question.
fn key_of(asked: &Asked) -> String {
    let mut key = asked.kind.clone().unwrap_or_default();
    for term in &asked.query.terms {
        key.push('\n');
        match term {
            Term::Word(word) => key.push_str(word),
            Term::Prefix(start) => {
                key.push_str(start);
                key.push('*');
            }
            Term::Phrase(words) => {
                key.push('"');
                key.push_str(&words.join(" "));
            }
        }
    }
    key
}

async fn answer(
    state: &AppState,
    raw: Option<&str>,
    client: Option<crate::client::Client>,
) -> Result<Arc<Answer>, ApiError> {
    let asked = asked(state, raw)?;
    let cache_key = CacheKey {
        query: QueryId::new(SEARCH),
        key: key_of(&asked),
        page: Some(asked.page.clone()),
    };
    // Read before the catalog: a write committed meanwhile makes the entry stale.
    let version = state.catalog.clock().search_version();
    cached(state, &cache_key, version, |kept| {
        crate::costly::gated(&state.costly, client, build(state, &asked, kept))
    })
    .await
}

async fn build(state: &AppState, asked: &Asked, kept: bool) -> Result<Arc<Answer>, ApiError> {
    let writer = Box::new(JsonPage::searched(
        asked.page.limit,
        asked.page.offset,
        kept,
    ));
    // A query of no letter or digit finds nothing, without asking the catalog.
    if asked.query.terms.is_empty() {
        return kept_answer(svc_catalog::PageWriter::finish(writer, 0, false), kept);
    }
    let request = SearchRequest {
        query: asked.query.clone(),
        kind: asked.kind.clone(),
        offset: asked.page.offset,
        limit: asked.page.limit,
        deadline: state.request_timeout,
    };
    let body = state.catalog.search(request, writer).await?;
    kept_answer(body, kept)
}
