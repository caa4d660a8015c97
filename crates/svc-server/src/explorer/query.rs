//! A query's page (`GET /explore/<name>`): a form made from the query's parameters in the
//! specification, and its answer as a table, read as the API reads it with the same query
//! string, so that the page and its JSON link show one answer; of each record the page reads
//! only the fields its table shows.

use super::HTML;
use super::bounded::Wanted;
pub(super) use super::envelope::{Envelope, EnvelopeItem};
use super::{Linked, Links, envelope, fields, json_view, page, record_path};
use crate::cache::{Answer, CacheKey};
use crate::params::{Params, encode_component, lookup_key, paging};
use crate::{ApiError, AppState};
use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use std::sync::Arc;
use svc_spec::{ParamDef, ParamType, Query, QueryId};

/// Rows a page shows unless the form asks for another number.
const ROWS: u32 = 25;
/// The parameters that page an answer: a live stream follows the whole answer.
const PAGING: &[&str] = &["limit", "offset", "cursor"];

#[derive(Template)]
#[template(path = "explorer/query.html")]
struct QueryPage {
    name: String,
    kind: String,
    description: String,
    fields: Vec<Field>,
    limit: String,
    /// Why there is no answer yet: a required parameter left empty.
    missing: Vec<String>,
    /// What is wrong with the parameters given, as the API says it.
    problem: Option<String>,
    answer: Option<Table>,
}

/// One parameter as a form field.
struct Field {
    name: String,
    description: String,
    value: String,
    required: bool,
    /// The values an enumerated parameter takes; empty for free text.
    options: Vec<String>,
    /// What the text must look like, for the field's hint.
    format: &'static str,
}

pub(crate) struct Table {
    pub columns: Vec<fields::Column>,
    pub rows: Vec<Row>,
    pub total: u64,
    pub json: String,
    pub next: Option<String>,
    /// The change stream of this answer from the moment it was read, on its first page.
    pub stream: Option<String>,
}

pub(crate) struct Row {
    pub uri: String,
    pub record: Linked,
    pub author: Linked,
    pub cells: Vec<Linked>,
    pub time: String,
    /// The values of the labels in force on the record or its author.
    pub labels: Vec<String>,
}

/// The first `limit` records of the query `name` for these parameters, as the API answers,
/// each read for the fields `wanted`; `None` when the specification has no such query.
pub(super) async fn ask(
    state: &AppState,
    name: &str,
    params: &[(&str, &str)],
    limit: u32,
    wanted: Wanted,
) -> Result<Option<Envelope>, ApiError> {
    let Some(position) = state.queries.position(name) else {
        return Ok(None);
    };
    let mut pairs: Vec<String> = params
        .iter()
        .map(|(name, value)| format!("{name}={}", encode_component(value)))
        .collect();
    pairs.push(format!("limit={limit}"));
    read(state, position, &pairs.join("&"), wanted)
        .await
        .map(Some)
}

/// The API's answer to `api_query`: its parameters checked and its page read as the list
/// endpoint does, so that the page and its JSON link show one answer, but each record read
/// for the fields `wanted` alone as its row comes, never the answer's text whole: a page may
/// list a thousand records of 8 MB.
async fn read(
    state: &AppState,
    position: usize,
    api_query: &str,
    wanted: Wanted,
) -> Result<Envelope, ApiError> {
    let query = &state.queries.all()[position];
    let params = Params::parse(Some(api_query));
    let request = paging(&params)?;
    let key = lookup_key(query, &params)?;
    let id = query.id().clone();
    envelope::picked(wanted, |picker| {
        state.catalog.write_list(id, key, request, picker)
    })
    .await
}

/// `GET /explore/<name>`. A page is kept in the answer cache while its answer's key is
/// unchanged: rendering it costs far more than the answer it shows.
pub(crate) async fn query(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let Some(position) = state.queries.position(&name) else {
        return super::not_found("query of that name");
    };
    let raw = raw.unwrap_or_default();
    let kept = kept_page(&state, position, &raw);
    let cached = kept
        .as_ref()
        .and_then(|(key, version)| state.cache.get(key, *version));
    if let Some(html) = cached.and_then(|answer| answer.identity().ok()) {
        return super::with_headers(html, HTML, StatusCode::OK);
    }
    let query_page = match build(&state, position, &raw).await {
        Ok(query_page) => query_page,
        Err(error) => return super::failure(error),
    };
    if query_page.problem.is_some() {
        return page(&query_page, StatusCode::BAD_REQUEST);
    }
    match (query_page.render(), kept) {
        (Ok(html), Some((key, version))) => {
            let html = Bytes::from(html);
            state
                .cache
                .put(key, version, Arc::new(Answer::new(html.clone())));
            super::with_headers(html, HTML, StatusCode::OK)
        }
        _ => page(&query_page, StatusCode::OK),
    }
}

/// Where the page of this query string is kept, and the version of its answer's key (read
/// before the page is built: a change meanwhile makes the page stale). `None` when the query
/// string names no answer (a parameter missing or bad), or is too long to keep.
fn kept_page(state: &AppState, position: usize, raw: &str) -> Option<(CacheKey, u64)> {
    let query = &state.queries.all()[position];
    let key = lookup_key(query, &Params::parse(Some(raw))).ok()?;
    let version = state.catalog.clock().key_version(query.id(), &key);
    let page_key = CacheKey {
        query: QueryId::new(&format!("explore:{}", query.name())),
        key: raw.to_string(),
        page: None,
    };
    state.cache.keeps(&page_key).then_some((page_key, version))
}

async fn build(state: &AppState, position: usize, raw: &str) -> Result<QueryPage, ApiError> {
    let query = &state.queries.all()[position];
    let params = Params::parse(Some(raw));
    let fields = query
        .params()
        .iter()
        .map(|param| field(param, &params))
        .collect::<Result<Vec<Field>, ApiError>>()?;
    let missing: Vec<String> = fields
        .iter()
        .filter(|field| field.required && field.value.is_empty())
        .map(|field| field.name.clone())
        .collect();
    let asked = given(raw);
    let (mut answer, mut problem) = (None, None);
    if missing.is_empty() {
        match table(state, position, query, &asked).await {
            Ok(table) => answer = Some(table),
            Err(ApiError::InvalidRequest(message)) => problem = Some(message),
            Err(error) => return Err(error),
        }
    }
    Ok(QueryPage {
        name: query.name().to_string(),
        kind: query.kind().to_string(),
        description: query.def().description.clone(),
        fields,
        limit: params.get("limit")?.unwrap_or_default().to_string(),
        missing,
        problem,
        answer,
    })
}

fn field(param: &ParamDef, params: &Params) -> Result<Field, ApiError> {
    let options = match (&param.values, param.values_of) {
        (Some(values), _) => values.clone(),
        (None, Some(list)) => list.values(),
        (None, None) => Vec::new(),
    };
    Ok(Field {
        name: param.name.clone(),
        description: param.description.clone(),
        value: params.get(&param.name)?.unwrap_or_default().to_string(),
        required: param.required,
        options,
        format: match param.param_type {
            ParamType::AtUri => "an at:// uri",
            ParamType::Did => "a DID",
            _ => "",
        },
    })
}

/// The query string's pairs that hold a value: a form sends its empty fields too.
fn given(raw: &str) -> Vec<&str> {
    raw.split('&')
        .filter(|pair| !pair.is_empty() && !pair.ends_with('='))
        .collect()
}

async fn table(
    state: &AppState,
    position: usize,
    query: &Query,
    asked: &[&str],
) -> Result<Table, ApiError> {
    let is_paging = |pair: &&str| PAGING.iter().any(|p| pair.split('=').next() == Some(*p));
    let mut api_query: Vec<String> = asked.iter().map(|pair| pair.to_string()).collect();
    if !asked.iter().any(|pair| pair.starts_with("limit=")) {
        api_query.push(format!("limit={ROWS}"));
    }
    // The stream's position before the answer: what changes after is sent, maybe twice.
    let from = state.catalog.change_bounds().await?.newest;
    let api_query = api_query.join("&");
    let columns = fields::columns(&state.kinds, query);
    let wanted = fields::row_fields(&columns);
    let envelope = read(state, position, &api_query, wanted).await?;
    let answer_only: Vec<&str> = asked.iter().copied().filter(|p| !is_paging(p)).collect();
    // A page after the first does not follow the stream: new records enter at the top.
    let first_page = !asked.iter().any(|pair| {
        pair.starts_with("cursor=") || (pair.starts_with("offset=") && *pair != "offset=0")
    });
    let rows = rows(state, &columns, envelope.items).await?;
    let path = format!("/explore/{}", query.name());
    Ok(Table {
        json: format!("{}?{api_query}", query.def().path),
        next: envelope.cursor.map(|cursor| {
            let mut pairs = answer_only.clone();
            let cursor = format!("cursor={}", encode_component(&cursor));
            pairs.push(&cursor);
            format!("{path}?{}", pairs.join("&"))
        }),
        stream: first_page.then(|| stream_url(query, &answer_only, from)),
        columns,
        rows,
        total: envelope.total,
    })
}

fn stream_url(query: &Query, answer_only: &[&str], from: i64) -> String {
    let mut pairs = vec![format!("query={}", query.name())];
    pairs.extend(answer_only.iter().map(|pair| pair.to_string()));
    pairs.push(format!("cursor={from}"));
    format!("/v1/changes?{}", pairs.join("&"))
}

async fn rows(
    state: &AppState,
    columns: &[fields::Column],
    items: Vec<EnvelopeItem>,
) -> Result<Vec<Row>, ApiError> {
    let mut uris = Vec::new();
    for item in &items {
        for column in columns {
            if let Some(value) = fields::at_path(&item.record, &column.path) {
                json_view::at_uris(value, &mut uris);
            }
        }
    }
    let links = Links::of(state, uris).await?;
    Ok(items
        .into_iter()
        .map(|item| Row {
            record: Linked {
                text: fields::title(&item.uri, &item.record),
                href: record_path(&item.uri),
            },
            author: Linked::did(&item.author),
            cells: columns
                .iter()
                .map(|column| fields::cell(fields::at_path(&item.record, &column.path), &links))
                .collect(),
            time: fields::time(&item.record),
            labels: item.labels,
            uri: item.uri,
        })
        .collect())
}
