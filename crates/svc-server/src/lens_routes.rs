//! `GET /v1/routes` (and `/xrpc/dev.svc.query.routes`): the best chains of lenses from one
//! schema to another. Roads are the catalog's road indexes (lenses published as records, and
//! lenses known only from the encounters that used them), read from both ends within a
//! budget (`explore.rs`); chains are weighed with each lens's verifications by kind, counted
//! where sufficiency counts them (`chains.rs`). Answers are cached until any road, schema
//! name or verification changes, so a record added, removed or taken down shows at once.

mod chains;
mod explore;

use crate::cache::{Answer, CacheKey};
use crate::list::{cached, json_response};
use crate::params::Params;
use crate::{ApiError, AppState};
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
pub(crate) use chains::Chain;
use chains::TooManyChains;
use explore::ExploreError;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use svc_spec::roads::{ROAD_INDEXES, RoadKind};
use svc_spec::{
    QueryId, SCHEMA_NAMES_INDEX, SUFFICIENCY_INDEX, VERIFICATION_KINDS, check_at_uri_parameter,
};

/// Hops a chain may take: the default, and the most.
pub(crate) const HOPS: (u32, u32) = (4, 6);
/// Chains an answer lists: the default, and the most.
const LIMIT: (usize, usize) = (10, 100);
/// What route answers are cached under.
const ROUTES: &str = "routes";

/// A route question, every parameter checked.
#[derive(Debug, Clone)]
pub(crate) struct RouteAsk {
    pub from: String,
    pub to: String,
    pub max_hops: u32,
    /// Positions in [`VERIFICATION_KINDS`] every lens must have a holding verification of.
    pub kinds: Vec<usize>,
    pub limit: usize,
}

/// The chains found, best first, and the readable names of the schemas they pass.
pub(crate) struct Routes {
    pub chains: Vec<Chain>,
    pub names: HashMap<String, String>,
}

pub(crate) async fn serve(
    State(state): State<Arc<AppState>>,
    asker: crate::costly::Asker,
    RawQuery(raw): RawQuery,
) -> Response {
    let client = crate::costly::client_of(asker);
    let answer = async {
        let ask = read_ask(&Params::parse(raw.as_deref()))?;
        let version = version(&state);
        let answer = cached(&state, &cache_key(&ask), version, |kept| {
            crate::costly::gated(&state.costly, client, build(&state, &ask, kept))
        })
        .await?;
        answer.identity()
    };
    match answer.await {
        Ok(body) => json_response(body),
        Err(error) => error.into_response(),
    }
}

async fn build(state: &AppState, ask: &RouteAsk, kept: bool) -> Result<Arc<Answer>, ApiError> {
    let routes = find(state, ask).await?;
    let body = serde_json::to_vec(&encode(ask, &routes))
        .map_err(|e| ApiError::Internal(format!("routes do not encode: {e}")))?;
    Answer::built(body, kept)
}

/// The question from the request's parameters.
pub(crate) fn read_ask(params: &Params) -> Result<RouteAsk, ApiError> {
    let ends = (schema_uri(params, "from")?, schema_uri(params, "to")?);
    read_options(params, ends)
}

/// The schema a parameter names by its at-uri, which it requires.
pub(crate) fn schema_uri(params: &Params, name: &str) -> Result<String, ApiError> {
    let uri = params
        .get(name)?
        .ok_or_else(|| ApiError::InvalidRequest(format!("{name}: required (a schema's at-uri)")))?;
    check_at_uri_parameter(uri).map_err(|e| ApiError::InvalidRequest(format!("{name}: {e}")))?;
    Ok(uri.to_string())
}

/// The question between these two schemas, with the rest of its parameters checked.
pub(crate) fn read_options(
    params: &Params,
    (from, to): (String, String),
) -> Result<RouteAsk, ApiError> {
    params.only(&["from", "to", "max_hops", "kinds", "limit"])?;
    let number = |name: &str, (default, most): (u64, u64)| -> Result<u64, ApiError> {
        match params.get(name)? {
            None => Ok(default),
            Some(text) => crate::params::bounded(name, text, 1, most),
        }
    };
    Ok(RouteAsk {
        from,
        to,
        max_hops: number("max_hops", (u64::from(HOPS.0), u64::from(HOPS.1)))? as u32,
        kinds: match params.get("kinds")? {
            Some(text) => crate::sufficiency::kind_positions(text)?,
            None => Vec::new(),
        },
        limit: number("limit", (LIMIT.0 as u64, LIMIT.1 as u64))? as usize,
    })
}

fn cache_key(ask: &RouteAsk) -> CacheKey {
    let kinds: String = ask
        .kinds
        .iter()
        .map(|k| char::from(b'0' + *k as u8))
        .collect();
    CacheKey {
        query: QueryId::new(ROUTES),
        key: format!(
            "{}|{}|{}|{}|{}",
            ask.max_hops, kinds, ask.limit, ask.from, ask.to
        ),
        page: None,
    }
}

/// What a route answer is cached against: moves whenever a lens's road, a schema's name or a
/// verification changes anywhere.
pub(crate) fn version(state: &AppState) -> u64 {
    roads_version(state, false)
}

/// Moves whenever a road (with `wanted`, a wanted road too), a schema's name or a
/// verification changes anywhere: what the map and the routes read.
pub(crate) fn roads_version(state: &AppState, wanted: bool) -> u64 {
    let clock = state.catalog.clock();
    ROAD_INDEXES
        .iter()
        .filter(|index| wanted || index.kind != RoadKind::Wanted)
        .map(|index| index.name)
        .chain([SUFFICIENCY_INDEX, SCHEMA_NAMES_INDEX])
        .map(|name| clock.query_version(&QueryId::new(name)))
        .fold(0u64, u64::wrapping_add)
}

/// Finds the best chains the question asks for.
pub(crate) async fn find(state: &AppState, ask: &RouteAsk) -> Result<Routes, ApiError> {
    let catalog = state.catalog.as_ref();
    // Records already in the schema asked for need no lens: one chain, of no hop.
    if ask.from == ask.to {
        let chains = vec![Chain {
            hops: Vec::new(),
            sufficient: true,
        }];
        let names = crate::schema_names::names_of(catalog, [ask.from.as_str()]).await?;
        return Ok(Routes { chains, names });
    }
    let explored = explore::explore(catalog, &ask.from, &ask.to, ask.max_hops)
        .await
        .map_err(|error| match error {
            ExploreError::Catalog(message) => ApiError::Internal(message),
            bound => ApiError::InvalidRequest(format!("max_hops: {bound}")),
        })?;
    let schema_chains = chains::schema_chains(&explored, &ask.from, &ask.to, ask.max_hops)
        .map_err(|TooManyChains| ApiError::InvalidRequest(format!("max_hops: {TooManyChains}")))?;
    let lenses = chains::lenses_of(&explored, &schema_chains);
    let tallies = crate::lens_tally::tallies(catalog, &lenses).await?;
    let chains = chains::best(&explored, &schema_chains, &tallies, &ask.kinds, ask.limit);
    let schemas = chains
        .iter()
        .flat_map(|chain| &chain.hops)
        .flat_map(|hop| [hop.road.source.as_str(), hop.road.target.as_str()]);
    let names = crate::schema_names::names_of(catalog, schemas).await?;
    Ok(Routes { chains, names })
}

/// The answer's JSON: `{"routes": [{"hops": [...], "sufficient"}], "limit", "names"}`.
fn encode(ask: &RouteAsk, routes: &Routes) -> Value {
    let hop = |hop: &chains::Hop| {
        // By the kinds' names; a variant no kind proves is left out.
        let verifications: serde_json::Map<String, Value> = hop
            .tally
            .by_variant
            .iter()
            .filter_map(|counted| {
                let (name, _) = VERIFICATION_KINDS
                    .iter()
                    .find(|(_, variant)| *variant == counted.variant)?;
                let counts = json!({"held": counted.held, "failed": counted.failed});
                Some((name.to_string(), counts))
            })
            .collect();
        json!({
            "lens": hop.road.lens,
            "from": hop.road.source,
            "to": hop.road.target,
            "class": hop.road.class,
            "known_by": known_by(hop.road.kind),
            "verifications": verifications,
            "sufficient": hop.sufficient,
        })
    };
    let chains: Vec<Value> = routes
        .chains
        .iter()
        .map(|chain| {
            let hops: Vec<Value> = chain.hops.iter().map(hop).collect();
            json!({"hops": hops, "sufficient": chain.sufficient})
        })
        .collect();
    json!({"routes": chains, "limit": ask.limit, "names": routes.names})
}

/// Where a hop's lens is known from: its own record, or only the encounters that used it.
pub(crate) fn known_by(kind: RoadKind) -> &'static str {
    match kind {
        RoadKind::Published => "record",
        _ => "encounters",
    }
}
