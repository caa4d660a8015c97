//! `/routes`: the best chains of lenses from one schema to another, as a page: a form (a
//! schema's page fills in where from; either end may be given by its at-uri or by its
//! readable name), then each chain hop by hop, every schema by its name
//! and linked to its page, every lens linked and coloured as the map colours its road. The
//! same question as `/v1/routes`, answered by the same search; kept in the answer cache until
//! a lens, a verification or a schema's name changes.

use super::bounded::Wanted;
use super::fields::cut;
use super::map::{Findings, Verdict};
use super::query::ask;
use super::{Linked, page, record_path};
use crate::cache::{Answer, CacheKey};
use crate::lens_routes::{self, Chain, RouteAsk, Routes};
use crate::list::cached;
use crate::params::Params;
use crate::{ApiError, AppState};
use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use std::sync::Arc;
use svc_spec::QueryId;

/// The most characters of a name or uri a hop shows (the whole uri is its title).
const NAME_CHARS: usize = 64;

#[derive(Template)]
#[template(path = "explorer/routes.html")]
struct RoutesPage {
    from: String,
    to: String,
    max_hops: String,
    kinds: String,
    most_hops: u32,
    problem: Option<String>,
    found: Option<Found>,
}

struct Found {
    summary: String,
    chains: Vec<ChainView>,
}

struct ChainView {
    summary: String,
    sufficient: bool,
    hops: Vec<HopView>,
}

struct HopView {
    from: Linked,
    to: Linked,
    lens: Linked,
    /// The map's colour of the lens's road.
    verdict: &'static str,
    reading: String,
}

pub(crate) async fn routes(
    State(state): State<Arc<AppState>>,
    asker: crate::costly::Asker,
    RawQuery(raw): RawQuery,
) -> Response {
    let client = crate::costly::client_of(asker);
    let params = Params::parse(raw.as_deref());
    let text = |name| params.echoed(name);
    let mut form = RoutesPage {
        from: text("from"),
        to: text("to"),
        max_hops: text("max_hops"),
        kinds: text("kinds"),
        most_hops: lens_routes::HOPS.1,
        problem: None,
        found: None,
    };
    if form.from.is_empty() || form.to.is_empty() {
        return page(&form, StatusCode::OK);
    }
    let ask = match ask_by_uris(&state, &params).await {
        Ok(ask) => ask,
        Err(error) => return with_problem(form, error),
    };
    let cache_key = CacheKey {
        query: QueryId::new("explore:routes"),
        key: raw.unwrap_or_default(),
        page: None,
    };
    let version = lens_routes::version(&state);
    let built = cached(&state, &cache_key, version, |kept| {
        let build = rendered(&state, &ask, &form, kept);
        crate::costly::gated(&state.costly, client, build)
    })
    .await;
    match built.and_then(|answer| answer.identity()) {
        Ok(html) => super::with_headers(html, super::HTML, StatusCode::OK),
        Err(error) => {
            form.found = None;
            with_problem(form, error)
        }
    }
}

/// The question the form asks, each end named by its at-uri, or by a schema's readable name
/// (the first schema of that name in uri order).
async fn ask_by_uris(state: &AppState, params: &Params) -> Result<RouteAsk, ApiError> {
    let from = schema_given(state, params, "from").await?;
    let to = schema_given(state, params, "to").await?;
    lens_routes::read_options(params, (from, to))
}

/// The at-uri of the schema a parameter names by its at-uri or its readable name.
async fn schema_given(state: &AppState, params: &Params, name: &str) -> Result<String, ApiError> {
    let given = params.echoed(name);
    if given.starts_with("at://") {
        return lens_routes::schema_uri(params, name);
    }
    schema_named(state, &given).await?.ok_or_else(|| {
        let shown = cut(&given, NAME_CHARS);
        ApiError::InvalidRequest(format!("{name}: no schema is named {shown:?}"))
    })
}

/// The uri of the first schema whose readable name is `name`, if any.
async fn schema_named(state: &AppState, name: &str) -> Result<Option<String>, ApiError> {
    let found = ask(state, "schemasByName", &[("name", name)], 1, Wanted::of([])).await?;
    Ok(found.and_then(|envelope| envelope.items.first().map(|item| item.uri.clone())))
}

/// The form again, saying what was wrong with the question.
fn with_problem(mut form: RoutesPage, error: ApiError) -> Response {
    match error {
        ApiError::InvalidRequest(message) => {
            form.problem = Some(message);
            page(&form, StatusCode::BAD_REQUEST)
        }
        error => super::failure(error),
    }
}

/// The page with its chains, in the form the cache keeps when `kept`.
async fn rendered(
    state: &AppState,
    ask: &RouteAsk,
    form: &RoutesPage,
    kept: bool,
) -> Result<Arc<Answer>, ApiError> {
    let routes = lens_routes::find(state, ask).await?;
    let found = RoutesPage {
        from: form.from.clone(),
        to: form.to.clone(),
        max_hops: form.max_hops.clone(),
        kinds: form.kinds.clone(),
        most_hops: form.most_hops,
        problem: None,
        found: Some(found(ask, &routes)),
    };
    let html = found
        .render()
        .map_err(|e| ApiError::Internal(format!("the routes page failed to render: {e}")))?;
    Answer::built(html.into_bytes(), kept)
}

fn found(ask: &RouteAsk, routes: &Routes) -> Found {
    let named = |uri: &str| schema_link(routes, uri);
    let summary = format!(
        "{} chain{} from {} to {} within {} hops.",
        routes.chains.len(),
        if routes.chains.len() == 1 { "" } else { "s" },
        named(&ask.from).text,
        named(&ask.to).text,
        ask.max_hops
    );
    Found {
        summary,
        chains: routes
            .chains
            .iter()
            .map(|c| chain_view(routes, c))
            .collect(),
    }
}

fn chain_view(routes: &Routes, chain: &Chain) -> ChainView {
    let hops = chain.hops.len();
    let summary = match (hops, chain.sufficient) {
        (0, _) => "The same schema: no lens is needed.".to_string(),
        (1, true) => "1 hop; its lens suffices".to_string(),
        (1, false) => "1 hop; its lens does not suffice".to_string(),
        (_, true) => format!("{hops} hops; every lens suffices"),
        (_, false) => format!("{hops} hops; not every lens suffices"),
    };
    ChainView {
        summary,
        sufficient: chain.sufficient,
        hops: chain
            .hops
            .iter()
            .map(|hop| {
                let findings = Findings::from(&hop.tally);
                let lens = hop.road.lens.as_deref().unwrap_or_default();
                let class = hop.road.class.as_deref().unwrap_or("class not given");
                let known = lens_routes::known_by(hop.road.kind);
                HopView {
                    from: schema_link(routes, &hop.road.source),
                    to: schema_link(routes, &hop.road.target),
                    lens: Linked {
                        text: cut(lens.rsplit('/').next().unwrap_or(lens), NAME_CHARS),
                        href: record_path(lens),
                    },
                    verdict: Verdict::of(findings).class(),
                    reading: format!("{class}; known by its {known}; {}", findings.words()),
                }
            })
            .collect(),
    }
}

/// A schema by its readable name (else its uri), linked to its page.
fn schema_link(routes: &Routes, uri: &str) -> Linked {
    let text = routes.names.get(uri).map_or(uri, String::as_str);
    Linked {
        text: cut(text, NAME_CHARS),
        href: record_path(uri),
    }
}
