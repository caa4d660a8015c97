//! `/map`: the schemas the catalog's records name and the lenses between them, as a picture
//! drawn on the server (SVG inside the page, no script) and as a list of the same roads for
//! the keyboard and screen readers. A schema and the hops around it, chosen by a form whose
//! values stay in the address; the whole catalog when it fits. Kept in the answer cache until
//! a road or a verification changes.

mod graph;
mod labels;
mod layout;
#[cfg(test)]
mod tests;

use graph::{Ask, Graph};
pub(crate) use graph::{Findings, Verdict};
use layout::Layout;

use super::fields::cut;
use super::page;
use crate::cache::{Answer, CacheKey};
use crate::list::cached;
use crate::params::{Params, encode_component};
use crate::{ApiError, AppState};
use askama::Template;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use std::sync::Arc;
use svc_spec::{QueryId, check_at_uri_parameter};

/// Hops from the centre: the default, and the most.
const HOPS: (u32, u32) = (2, 4);
/// Schemas shown: the default, the least and the most.
const NODES: (usize, usize, usize) = (60, 2, 300);
/// The most characters of a schema's label drawn beside it (its whole uri is its title).
const LABEL_CHARS: usize = 28;
/// The most characters of a uri a page repeats.
const URI_CHARS: usize = 300;
/// The cache's name for map pages.
const CACHE_NAME: &str = "explorerMap";

#[derive(Template)]
#[template(path = "explorer/map.html")]
struct MapPage {
    schema: String,
    hops: u32,
    nodes: usize,
    max_hops: u32,
    max_nodes: usize,
    problem: Option<String>,
    picture: Option<Picture>,
    legend: Vec<Key>,
}

/// One colour of the legend: its class, its name and what it means.
struct Key {
    class: &'static str,
    name: &'static str,
    meaning: &'static str,
}

struct Picture {
    width: String,
    height: String,
    summary: String,
    left_out: Vec<String>,
    nodes: Vec<NodeView>,
    edges: Vec<EdgeView>,
}

struct NodeView {
    x: String,
    y: String,
    r: String,
    /// Where its label stands, when it has room.
    label: Option<LabelView>,
    title: String,
    href: String,
    centre: bool,
}

struct LabelView {
    text: String,
    x: String,
    y: String,
    anchor: &'static str,
    /// The length the text is set to, so that it covers the box it was placed by.
    width: String,
}

struct EdgeView {
    d: String,
    arrow: String,
    class: &'static str,
    /// The verdict and the findings behind it, in words.
    reading: String,
    href: String,
    title: String,
    source: String,
    target: String,
    lens: String,
    /// The short names the picture gives them, for the list (the whole uris are titles).
    short: [String; 3],
    records: u64,
}

/// `GET /map`.
pub(crate) async fn map(
    State(state): State<Arc<AppState>>,
    asker: crate::costly::Asker,
    RawQuery(raw): RawQuery,
) -> Response {
    let client = crate::costly::client_of(asker);
    let params = Params::parse(raw.as_deref());
    let mut form = blank();
    let ask = match read_ask(&params, &mut form) {
        Ok(ask) => ask,
        Err(ApiError::InvalidRequest(message)) => {
            form.problem = Some(message);
            return page(&form, StatusCode::BAD_REQUEST);
        }
        Err(error) => return super::failure(error),
    };
    let cache_key = CacheKey {
        query: QueryId::new(CACHE_NAME),
        key: format!("{}|{}|{}", ask.hops, ask.nodes, form.schema),
        page: None,
    };
    let version = crate::lens_routes::roads_version(&state, true);
    let drawn = cached(&state, &cache_key, version, |kept| {
        let build = drawn(&state, &ask, &form.schema, kept);
        crate::costly::gated(&state.costly, client, build)
    })
    .await;
    match drawn.and_then(|answer| answer.identity()) {
        Ok(html) if html.is_empty() => unknown_schema(form),
        Ok(html) => super::with_headers(html, super::HTML, StatusCode::OK),
        Err(error) => super::failure(error),
    }
}

/// The form again, saying that no record the catalog holds names the schema asked for.
fn unknown_schema(mut form: MapPage) -> Response {
    form.problem = Some(format!(
        "This catalog knows no such schema: no record it holds names {}. Check the uri, or \
         leave the field empty for the whole catalog.",
        cut(&form.schema, URI_CHARS)
    ));
    page(&form, StatusCode::NOT_FOUND)
}

/// The page with nothing asked yet: the form's defaults.
fn blank() -> MapPage {
    MapPage {
        schema: String::new(),
        hops: HOPS.0,
        nodes: NODES.0,
        max_hops: HOPS.1,
        max_nodes: NODES.2,
        problem: None,
        picture: None,
        legend: Verdict::ALL
            .iter()
            .map(|verdict| Key {
                class: verdict.class(),
                name: verdict.words(),
                meaning: verdict.meaning(),
            })
            .collect(),
    }
}

/// The map the ask names, rendered; in the form the cache keeps when `kept`. A schema the
/// catalog knows nothing of is an empty answer, kept as a page is.
async fn drawn(
    state: &AppState,
    ask: &Ask,
    schema: &str,
    kept: bool,
) -> Result<Arc<Answer>, ApiError> {
    let graph = graph::read(state.catalog.as_ref(), ask).await?;
    if ask.centre.is_some() && graph.centre_unknown() {
        return Ok(Arc::new(Answer::new(Bytes::new())));
    }
    let map_page = MapPage {
        schema: schema.to_string(),
        hops: ask.hops,
        nodes: ask.nodes,
        picture: Some(picture(&graph, ask)),
        ..blank()
    };
    let html = map_page
        .render()
        .map_err(|e| ApiError::Internal(format!("the map failed to render: {e}")))?;
    Answer::built(html.into_bytes(), kept)
}

/// The ask from the address, echoed into the form as given.
fn read_ask(params: &Params, form: &mut MapPage) -> Result<Ask, ApiError> {
    params.only(&["schema", "hops", "nodes"])?;
    let centre = match params.get("schema")? {
        None | Some("") => None,
        Some(schema) => {
            form.schema = schema.to_string();
            check_at_uri_parameter(schema)
                .map_err(|e| ApiError::InvalidRequest(format!("schema: {e}")))?;
            Some(schema.to_string())
        }
    };
    let hops = bounded(
        params.get("hops")?,
        "hops",
        1,
        HOPS.1 as usize,
        HOPS.0 as usize,
    )?;
    form.hops = hops as u32;
    let nodes = bounded(params.get("nodes")?, "nodes", NODES.1, NODES.2, NODES.0)?;
    form.nodes = nodes;
    Ok(Ask {
        centre,
        hops: hops as u32,
        nodes,
    })
}

/// A number the map is asked for, `default` when not given.
fn bounded(
    given: Option<&str>,
    name: &str,
    least: usize,
    most: usize,
    default: usize,
) -> Result<usize, ApiError> {
    match given {
        None => Ok(default),
        Some(text) => Ok(crate::params::bounded(name, text, least as u64, most as u64)? as usize),
    }
}

fn picture(graph: &Graph, ask: &Ask) -> Picture {
    let laid = layout::lay_out(graph);
    let link = |uri: &str| {
        format!(
            "/map?schema={}&hops={}&nodes={}",
            encode_component(uri),
            ask.hops,
            ask.nodes
        )
    };
    let nodes = node_views(graph, &laid, &link);
    let edges = graph
        .edges
        .iter()
        .zip(laid.paths.iter().zip(&laid.arrows))
        .map(|(edge, (d, arrow))| edge_view(graph, edge, d, &arrow.d, &link))
        .collect();
    Picture {
        width: format!("{:.0}", laid.width),
        height: format!("{:.0}", laid.height),
        summary: summary(graph, ask),
        left_out: left_out(graph),
        nodes,
        edges,
    }
}

/// Each schema as drawn, its label where it has room.
fn node_views(graph: &Graph, laid: &Layout, link: &dyn Fn(&str) -> String) -> Vec<NodeView> {
    let radii: Vec<f64> = (0..graph.nodes.len())
        .map(|i| layout::radius(graph, i))
        .collect();
    let texts: Vec<String> = graph
        .nodes
        .iter()
        .map(|node| cut(&schema_label(graph, &node.uri), LABEL_CHARS))
        .collect();
    let chars: Vec<usize> = texts.iter().map(|text| text.chars().count()).collect();
    let places = labels::place(laid, &radii, &chars);
    graph
        .nodes
        .iter()
        .zip(texts)
        .zip(laid.points.iter().zip(places))
        .enumerate()
        .map(|(i, ((node, text), (point, place)))| NodeView {
            x: format!("{:.1}", point.x),
            y: format!("{:.1}", point.y),
            r: format!("{:.0}", radii[i]),
            label: place.map(|place| LabelView {
                text,
                x: format!("{:.1}", place.x),
                y: format!("{:.1}", place.y),
                anchor: place.anchor,
                width: format!("{:.1}", place.width),
            }),
            title: format!("{} ({} records)", cut(&node.uri, URI_CHARS), node.weight),
            href: link(&node.uri),
            centre: graph.centred && i == 0,
        })
        .collect()
}

/// A road as drawn and listed: its lens's page (or the bounties wanting it) and what its
/// verifications found, in words.
fn edge_view(
    graph: &Graph,
    edge: &graph::Edge,
    d: &str,
    arrow: &str,
    link: &dyn Fn(&str) -> String,
) -> EdgeView {
    let source = &graph.nodes[edge.source].uri;
    let target = &graph.nodes[edge.target].uri;
    let href = match &edge.lens {
        Some(lens) => super::record_path(lens).unwrap_or_else(|| link(source)),
        None => format!(
            "/explore/bountiesForWantLens?source_uri={}&target_uri={}",
            encode_component(source),
            encode_component(target)
        ),
    };
    let lens = edge.lens.as_deref().map_or_else(
        || "a lens wanted by bounties".to_string(),
        |l| cut(l, URI_CHARS),
    );
    let short = [
        cut(&schema_label(graph, source), LABEL_CHARS),
        match &edge.lens {
            Some(lens) => cut(&label(lens), LABEL_CHARS),
            None => lens.clone(),
        },
        cut(&schema_label(graph, target), LABEL_CHARS),
    ];
    let reading = match edge.verdict {
        Verdict::Wanted => "wanted: no lens yet".to_string(),
        verdict => format!("{}: {}", verdict.words(), edge.findings.words()),
    };
    EdgeView {
        d: d.to_string(),
        arrow: arrow.to_string(),
        class: edge.verdict.class(),
        title: format!("{lens}: {reading}; {} records", edge.records),
        reading,
        href,
        source: cut(source, URI_CHARS),
        target: cut(target, URI_CHARS),
        lens,
        short,
        records: edge.records,
    }
}

fn summary(graph: &Graph, ask: &Ask) -> String {
    let (schemas, roads) = (graph.nodes.len(), graph.edges.len());
    match (graph.centred, graph.nodes.first()) {
        (true, Some(centre)) => format!(
            "{schemas} schemas within {} of {}, and the {roads} roads between them.",
            match ask.hops {
                1 => "one hop".to_string(),
                hops => format!("{hops} hops"),
            },
            cut(&centre.uri, URI_CHARS)
        ),
        _ => format!(
            "Every schema the catalog's records name ({schemas}), and every road between them ({roads})."
        ),
    }
}

fn left_out(graph: &Graph) -> Vec<String> {
    let mut notes = Vec::new();
    if graph.schemas_left_out > 0 {
        notes.push(format!(
            "{} more schemas next to those shown are left out, the least busy first; raise the number of schemas or choose one of them.",
            graph.schemas_left_out
        ));
    }
    if graph.roads_cut {
        notes.push(format!(
            "Some schemas have more roads than a map reads (at most {} of a kind at a schema, {} in all); only the first were read.",
            graph::ROADS_READ_AT_A_SCHEMA,
            graph::ROADS_READ_AT_MOST
        ));
    }
    if graph.roads_left_out > 0 {
        notes.push(format!(
            "{} more roads among these schemas are not drawn, the least used first (a map draws at most {}).",
            graph.roads_left_out,
            graph::ROADS_DRAWN_AT_MOST
        ));
    }
    match graph.unreadable {
        0 => {}
        1 => notes.push("1 record states a road whose uris are too long to draw.".into()),
        n => notes.push(format!(
            "{n} records state roads whose uris are too long to draw."
        )),
    }
    notes
}

/// A schema's readable name, else its short name.
fn schema_label(graph: &Graph, uri: &str) -> String {
    graph.names.get(uri).cloned().unwrap_or_else(|| label(uri))
}

/// A record's short name: its record key and its author's DID, shortened.
fn label(uri: &str) -> String {
    match svc_syntax::check_at_uri(uri) {
        Ok(parts) => {
            let author = parts
                .authority
                .rsplit(':')
                .next()
                .unwrap_or(parts.authority);
            match parts.rkey {
                Some(rkey) => format!("{rkey} · {}", cut(author, 8)),
                None => author.to_string(),
            }
        }
        Err(_) => uri.to_string(),
    }
}
