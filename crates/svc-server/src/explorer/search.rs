//! `/search`: the explorer's search page. A plain GET form (on every page, in the header)
//! and the records it finds, each with its kind, its name and the words of its text that
//! matched, marked, linked to its page, paged by cursor. Works without script. A page is kept
//! in the answer cache until a write may change what search finds; building one is costly
//! work, which waits for its client's turn.

use super::bounded::{Json, Wanted};
use super::envelope::{EnvelopeItem, picked};
use super::fields::{self, TITLES};
use super::{collection_of, page, record_path};
use crate::cache::{Answer, CacheKey};
use crate::list::cached;
use crate::params::{Params, decode_search_cursor, encode_component, encode_search_cursor};
use crate::{ApiError, AppState};
use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use std::sync::Arc;
use svc_catalog::SearchRequest;
use svc_spec::QueryId;
use svc_spec::search::{SearchQuery, fold, unspaced};

/// Matches a page shows.
const PAGE_SIZE: u32 = 25;
/// The most of a matched text a result shows, in characters.
const SNIPPET_CHARS: usize = 200;

#[derive(Template)]
#[template(path = "explorer/search.html")]
struct SearchPage {
    q: String,
    kind: String,
    kinds: Vec<String>,
    problem: Option<String>,
    results: Option<Results>,
}

struct Results {
    total: String,
    matches: Vec<Match>,
    next: Option<String>,
}

struct Match {
    kind: String,
    href: Option<String>,
    title: Vec<Segment>,
    snippet: Vec<Segment>,
}

/// A piece of a stranger's text; `marked` when it is one of the words searched for.
struct Segment {
    text: String,
    marked: bool,
}

pub(crate) async fn search(
    State(state): State<Arc<AppState>>,
    asker: crate::costly::Asker,
    RawQuery(raw): RawQuery,
) -> Response {
    let client = crate::costly::client_of(asker);
    let params = Params::parse(raw.as_deref());
    let text = |name| params.echoed(name);
    let mut search_page = SearchPage {
        q: text("q"),
        kind: text("kind"),
        kinds: state.kinds.nsids().map(str::to_string).collect(),
        problem: None,
        results: None,
    };
    if search_page.q.is_empty() {
        return page(&search_page, StatusCode::OK);
    }
    let cache_key = CacheKey {
        query: QueryId::new("explore:search"),
        key: raw.unwrap_or_default(),
        page: None,
    };
    // Read before the catalog: a write committed meanwhile makes the page stale.
    let version = state.catalog.clock().search_version();
    let built = cached(&state, &cache_key, version, |kept| {
        let build = rendered(&state, &params, &search_page, kept);
        crate::costly::gated(&state.costly, client, build)
    })
    .await;
    match built.and_then(|answer| answer.identity()) {
        Ok(html) => super::with_headers(html, super::HTML, StatusCode::OK),
        Err(ApiError::InvalidRequest(message)) => {
            search_page.problem = Some(message);
            page(&search_page, StatusCode::BAD_REQUEST)
        }
        Err(error) => super::failure(error),
    }
}

/// The page with its results, in the form the cache keeps when `kept`.
async fn rendered(
    state: &AppState,
    params: &Params,
    asked: &SearchPage,
    kept: bool,
) -> Result<Arc<Answer>, ApiError> {
    let found = SearchPage {
        q: asked.q.clone(),
        kind: asked.kind.clone(),
        kinds: asked.kinds.clone(),
        problem: None,
        results: Some(results(state, params, asked).await?),
    };
    let html = found
        .render()
        .map_err(|e| ApiError::Internal(format!("the search page failed to render: {e}")))?;
    Answer::built(html.into_bytes(), kept)
}

async fn results(
    state: &AppState,
    params: &Params,
    asked: &SearchPage,
) -> Result<Results, ApiError> {
    params.only(&["q", "kind", "cursor"])?;
    let query = SearchQuery::parse(&asked.q).map_err(ApiError::InvalidRequest)?;
    let kind = kind_asked(state, &asked.kind)?;
    let offset = match params.get("cursor")? {
        Some(cursor) => decode_search_cursor(cursor)?,
        None => 0,
    };
    if query.terms.is_empty() {
        // No letter or digit: nothing to find.
        return Ok(Results {
            total: "0".into(),
            matches: Vec::new(),
            next: None,
        });
    }
    let request = SearchRequest {
        query: query.clone(),
        kind: kind.clone(),
        offset,
        limit: PAGE_SIZE,
        deadline: state.request_timeout,
    };
    let text_fields = text_fields(state);
    let wanted = Wanted::of(
        TITLES
            .iter()
            .copied()
            .chain(text_fields.iter().map(String::as_str)),
    );
    let envelope = picked(wanted, |writer| state.catalog.search(request, writer)).await?;
    let shown = envelope.items.len() as u64;
    let next = envelope
        .cursor
        .as_ref()
        .map(|_| next_page(&asked.q, kind.as_deref(), offset + shown));
    let total = match envelope.total > svc_catalog::SEARCH_COUNT_LIMIT {
        true => format!("More than {}", svc_catalog::SEARCH_COUNT_LIMIT),
        false => envelope.total.to_string(),
    };
    let matches = envelope
        .items
        .into_iter()
        .map(|item| found(item, &query, &text_fields))
        .collect();
    Ok(Results {
        total,
        matches,
        next,
    })
}

/// The kind the form names (a name or an NSID), none when left empty.
fn kind_asked(state: &AppState, name: &str) -> Result<Option<String>, ApiError> {
    if name.is_empty() {
        return Ok(None);
    }
    let kind = state.kinds.named(name).map(str::to_string);
    kind.map(Some)
        .ok_or_else(|| ApiError::InvalidRequest("kind: no record kind of that name".into()))
}

/// The address of the page of the same search from `offset` on.
fn next_page(q: &str, kind: Option<&str>, offset: u64) -> String {
    let mut href = format!("/search?q={}", encode_component(q));
    if let Some(kind) = kind {
        href.push_str(&format!("&kind={}", encode_component(kind)));
    }
    href.push_str(&format!("&cursor={}", encode_search_cursor(offset)));
    href
}

/// Every searched kind's name and text fields.
fn text_fields(state: &AppState) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for nsid in state.kinds.nsids() {
        if let Some(search) = &state.kinds.def(nsid).search {
            for path in search.name.iter().chain(&search.text) {
                if !paths.contains(path) {
                    paths.push(path.clone());
                }
            }
        }
    }
    paths
}

fn found(item: EnvelopeItem, query: &SearchQuery, text_fields: &[String]) -> Match {
    let title = fields::title(&item.uri, &item.record);
    let snippet = text_fields
        .iter()
        .filter_map(|path| fields::at_path(&item.record, path))
        .filter_map(Json::as_str)
        .map(|text| marked(text, query))
        .find(|segments| segments.iter().any(|s| s.marked))
        .map(around_first_mark)
        .unwrap_or_default();
    Match {
        kind: collection_of(&item.uri).unwrap_or_default().to_string(),
        href: record_path(&item.uri),
        title: marked(&title, query),
        snippet,
    }
}

/// `text` cut into words and what lies between them, the searched words marked.
fn marked(text: &str, query: &SearchQuery) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, segments: &mut Vec<Segment>| {
        if !word.is_empty() {
            let marked = fold(word).iter().any(|w| query.matches(w));
            segments.push(Segment {
                text: std::mem::take(word),
                marked,
            });
        }
    };
    for c in text.chars() {
        let lone = unspaced(c);
        if c.is_alphanumeric() && !lone {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut segments);
        if lone {
            word.push(c);
            flush(&mut word, &mut segments);
        } else {
            match segments.last_mut().filter(|s| !s.marked) {
                Some(plain) => plain.text.push(c),
                None => segments.push(Segment {
                    text: c.to_string(),
                    marked: false,
                }),
            }
        }
    }
    flush(&mut word, &mut segments);
    segments
}

/// The segments within [`SNIPPET_CHARS`] of the first mark, with an ellipsis where cut.
fn around_first_mark(segments: Vec<Segment>) -> Vec<Segment> {
    let first = segments.iter().position(|s| s.marked).unwrap_or(0);
    let mut start = first;
    let mut before = 0;
    while start > 0 && before + segments[start - 1].text.chars().count() <= SNIPPET_CHARS / 3 {
        start -= 1;
        before += segments[start].text.chars().count();
    }
    let mut kept: Vec<Segment> = Vec::new();
    if start > 0 {
        kept.push(Segment {
            text: "…".into(),
            marked: false,
        });
    }
    let mut length = 0;
    for (at, segment) in segments.into_iter().enumerate().skip(start) {
        length += segment.text.chars().count();
        if length > SNIPPET_CHARS && at > first {
            kept.push(Segment {
                text: "…".into(),
                marked: false,
            });
            break;
        }
        kept.push(segment);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(segments: &[Segment]) -> String {
        segments
            .iter()
            .map(|s| match s.marked {
                true => format!("[{}]", s.text),
                false => s.text.clone(),
            })
            .collect()
    }

    #[test]
    fn the_words_searched_for_are_marked_as_written() {
        let query = SearchQuery::parse("cafe \"dublin core\" geoj").expect("a query");
        let text = "Le Café of Dublin: GeoJSON, core <b>";
        assert_eq!(
            shown(&marked(text, &query)),
            "Le [Café] of [Dublin]: [GeoJSON], [core] <b>"
        );
        let cjk = SearchQuery::parse("京都").expect("a query");
        assert_eq!(shown(&marked("東京都の地図", &cjk)), "東[京][都]の地図");
    }

    #[test]
    fn a_long_text_is_cut_around_its_first_match() {
        let query = SearchQuery::parse("needle").expect("a query");
        let text = format!("{} needle {}", "hay ".repeat(200), "straw ".repeat(200));
        let snippet = shown(&around_first_mark(marked(&text, &query)));
        assert!(
            snippet.starts_with('…') && snippet.ends_with('…'),
            "{snippet}"
        );
        assert!(snippet.contains("[needle]"));
        assert!(snippet.chars().count() < SNIPPET_CHARS + 80, "{snippet}");
    }
}
