//! A record's page (`GET /at/<did>/<collection>/<rkey>`): its JSON with every at-uri and DID
//! a link, and what the catalog knows around it: a lens's verifications by kind and whether
//! they suffice, a bounty's schemas and lens, a community's members and dialects, and the
//! beliefs about any record. The JSON is laid out as far as [`json_view::PAGE`] reaches; the
//! whole record is its JSON, stored text as it is (`?format=json`). An author's page
//! (`GET /at/<did>`) lists their records.

use super::bounded::{self, Bounds, Json, Tally, Wanted};
use super::query::{EnvelopeItem, ask};
use super::{LENS, Linked, Links, SCHEMA, envelope, fields, json_view, page, record_path};
use crate::params::{Params, encode_component};
use crate::{ApiError, AppState};
use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use svc_catalog::RepositorySlice;
use svc_spec::{KindDef, People};
use svc_syntax::AtUri;

/// Records of a lens, community or subject a panel lists at most.
const PANEL_ROWS: u32 = 1000;
/// Records an author's page lists.
const AUTHOR_ROWS: usize = 50;
/// What a record's page reads of each field it shows apart from the layout (its title, its
/// facts, a community's members): a panel's rows of values.
const FIELD: Bounds = Bounds {
    values: PANEL_ROWS as u64 + 1,
    text_bytes: 64 * 1024,
    string_bytes: svc_spec::MAX_AT_URI_PARAM_BYTES,
};

#[derive(Template)]
#[template(path = "explorer/record.html")]
struct RecordPage {
    uri: String,
    kind: String,
    title: String,
    author: Linked,
    rev: Option<String>,
    facts: Vec<(String, Linked)>,
    /// The labels in force on the record or its author: value, and the labeler.
    labels: Vec<(String, Linked)>,
    lens: Option<LensPanel>,
    /// A schema's page asks for routes from it to another schema.
    route_from: Option<String>,
    lists: Vec<RecordList>,
    lines: Vec<json_view::Line>,
    /// What of the record the layout leaves out, when it leaves any.
    cut: Option<String>,
    /// The record's JSON, whole.
    json: String,
}

struct LensPanel {
    /// Each verification kind: how many there are, how many hold, and whether the kind is
    /// sufficient (a verification of it that holds).
    kinds: Vec<(String, u64, u64, bool)>,
    verifications: String,
    sufficiency: String,
    weeks: super::chart::Chart,
}

/// Records around this one, each a link.
struct RecordList {
    title: String,
    records: Vec<Linked>,
    /// The same list in the explorer, when a query gives it.
    more: Option<String>,
}

/// `GET /at/<did>/<collection>/<rkey>`: the page, or with `format=json` the record's JSON.
pub(crate) async fn record(
    State(state): State<Arc<AppState>>,
    Path((did, collection, rkey)): Path<(String, String, String)>,
    RawQuery(raw): RawQuery,
) -> Response {
    let text = format!("at://{did}/{collection}/{rkey}");
    let uri = match AtUri::new(text.as_str()) {
        Ok(uri) => uri,
        Err(error) => return super::failure(ApiError::InvalidRequest(format!("{text}: {error}"))),
    };
    match Params::parse(raw.as_deref()).get("format") {
        Ok(None | Some("html")) => {}
        Ok(Some("json")) => return stored_json(&state, uri).await,
        Ok(Some(other)) => {
            let message = format!("format: must be html or json, not {other:?}");
            return super::failure(ApiError::InvalidRequest(message));
        }
        Err(error) => return super::failure(error),
    }
    let author = uri.authority().to_string();
    let subject = uri.as_str().to_string();
    match build(&state, uri, collection).await {
        Ok(Some(record_page)) => page(&record_page, StatusCode::OK),
        Ok(None) => match taken_down(&state, subject, author).await {
            Ok(Some(hidden)) => super::taken_down(&hidden),
            Ok(None) => super::not_found("record at this address"),
            Err(error) => super::failure(error),
        },
        Err(error) => super::failure(error),
    }
}

/// The takedown (the operator's or a labeler's) that hides the record at `uri` or its
/// author's account, if one does.
async fn taken_down(
    state: &AppState,
    uri: String,
    author: String,
) -> Result<Option<super::Hidden>, ApiError> {
    for (subject, account) in [(uri, false), (author, true)] {
        let standing = state.catalog.takedown(subject).await?;
        if let Some(takedown) = standing.in_force() {
            let by = (!takedown.by_operator()).then(|| takedown.source.clone());
            return Ok(Some(super::Hidden {
                labeler: by,
                account,
            }));
        }
    }
    Ok(None)
}

/// The record's JSON as it is stored, neither parsed nor laid out: what its page leaves out.
async fn stored_json(state: &AppState, uri: AtUri) -> Response {
    match state.catalog.get(uri).await {
        Ok(Some(item)) => super::with_headers(item.record_json, JSON, StatusCode::OK),
        Ok(None) => crate::error::json_error(
            StatusCode::NOT_FOUND,
            "not_found",
            "this catalog holds no record at this address",
        ),
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// The type of a record's JSON.
const JSON: &str = "application/json";

/// The record as its page reads it: laid out from its start within [`json_view::PAGE`], with
/// what that left out, and the fields the page shows, each picked within [`FIELD`].
struct Reading {
    shown: Json,
    tally: Tally,
    fields: Json,
}

fn read(text: &str, wanted: &Wanted) -> Result<Reading, ApiError> {
    let unread =
        |e: serde_json::Error| ApiError::Internal(format!("a stored record did not read: {e}"));
    let (shown, tally) = bounded::read(text, json_view::PAGE).map_err(unread)?;
    let fields = bounded::pick(text, wanted, FIELD).map_err(unread)?;
    Ok(Reading {
        shown,
        tally,
        fields,
    })
}

async fn build(
    state: &AppState,
    uri: AtUri,
    collection: String,
) -> Result<Option<RecordPage>, ApiError> {
    let item = state.catalog.get(uri.clone()).await?;
    let uri = uri.as_str().to_string();
    if item.is_none() && collection != LENS {
        return Ok(None);
    }
    let (rev, text) = match item {
        Some(item) => (Some(item.rev), item.record_json),
        None => (None, "null".to_string()),
    };
    let kinds = Arc::clone(&state.kinds);
    let kind = kinds.def(&collection);
    let wanted = page_fields(kind);
    // Reading a record of 8 MB takes milliseconds: off the threads that answer requests.
    let reading = tokio::task::spawn_blocking(move || read(&text, &wanted))
        .await
        .map_err(|e| ApiError::Internal(format!("a record's reading failed: {e}")))??;
    let mut uris = Vec::new();
    json_view::at_uris(&reading.shown, &mut uris);
    json_view::at_uris(&reading.fields, &mut uris);
    uris.push(uri.clone());
    let links = Links::of(state, uris).await?;
    let author = svc_syntax::at_uri_authority(&uri).unwrap_or_default();
    let record = &reading.fields;
    let lists = lists(state, &collection, &uri, record).await?;
    let subjects = vec![uri.clone(), author.to_string()];
    let labels = state
        .catalog
        .labels(subjects, envelope::LABELS_SHOWN)
        .await?;
    Ok(Some(RecordPage {
        labels: labels
            .into_iter()
            .map(|label| (label.val, Linked::did(&label.src)))
            .collect(),
        title: links
            .name(&uri)
            .map_or_else(|| heading(&collection, &uri, record), str::to_string),
        route_from: (collection == SCHEMA).then(|| uri.clone()),
        author: Linked::did(author),
        rev,
        facts: facts(kind, record, &links),
        lens: match collection == LENS {
            true => Some(lens_panel(state, &uri).await?),
            false => None,
        },
        lists,
        lines: json_view::lines(&reading.shown, &links),
        cut: cut(&reading.tally),
        json: record_path(&uri)
            .map(|path| format!("{path}?format=json"))
            .unwrap_or_default(),
        kind: collection,
        uri,
    }))
}

/// What the layout leaves out, said plainly.
fn cut(tally: &Tally) -> Option<String> {
    let mut said = Vec::new();
    if tally.kept < tally.values {
        said.push(format!(
            "This record holds {} values; the first {} are shown.",
            json_view::grouped(tally.values),
            json_view::grouped(tally.kept)
        ));
    }
    if tally.cut > 0 {
        let strings = match tally.cut {
            1 => "One string shown is".to_string(),
            n => format!("{} strings shown are", json_view::grouped(n)),
        };
        said.push(format!(
            "{strings} cut at {} bytes.",
            json_view::grouped(json_view::PAGE.string_bytes as u64)
        ));
    }
    (!said.is_empty()).then(|| said.join(" "))
}

/// The fields a record's page reads apart from its layout: its title, its kind's facts and
/// the people it names.
fn page_fields(kind: &KindDef) -> Wanted {
    let facts = kind.facts.iter().map(|fact| fact.path.as_str());
    let people = kind.people.iter().map(|people| people.path.as_str());
    let named = fields::TITLES.iter().copied();
    Wanted::of(named.chain(people).chain(facts))
}

/// The records around this one: the people it names, then the lists its kind and every kind
/// show (a community's dialects, a change's migration runs, the beliefs about any record).
async fn lists(
    state: &AppState,
    kind: &str,
    uri: &str,
    record: &Json,
) -> Result<Vec<RecordList>, ApiError> {
    let mut lists: Vec<RecordList> = state
        .kinds
        .def(kind)
        .people
        .iter()
        .map(|people| people_list(people, record))
        .collect();
    for list in state.kinds.related(kind) {
        let found = related(state, &list.query, &list.title, &list.param, uri).await?;
        lists.extend(found);
    }
    Ok(lists)
}

/// What a record's page is headed with: its name or title, else its kind and key
/// (`bounty 3lqnj54becahi`).
fn heading(kind: &str, uri: &str, record: &Json) -> String {
    let title = fields::title(uri, record);
    let key = uri.rsplit('/').next().unwrap_or(uri);
    match title == key {
        true => format!("{} {key}", kind.rsplit('.').next().unwrap_or(kind)),
        false => title,
    }
}

/// The fields a kind is read by, linked: a bounty's wants, schemas, lens and status.
fn facts(kind: &KindDef, record: &Json, links: &Links) -> Vec<(String, Linked)> {
    kind.facts
        .iter()
        .filter_map(|fact| {
            let value = fields::at_path(record, &fact.path)?;
            Some((fact.label.clone(), fields::listed(value, links)))
        })
        .collect()
}

/// A lens's verifications by kind (by the property each proves, as sufficiency counts them),
/// and whether each kind is sufficient.
async fn lens_panel(state: &AppState, lens: &str) -> Result<LensPanel, ApiError> {
    let tally = crate::sufficiency::tally(state, lens).await?;
    let weeks = super::lens_weeks::chart(state, lens).await?;
    let kinds = svc_spec::VERIFICATION_KINDS
        .iter()
        .zip(tally)
        .map(|((kind, _), (count, holds))| (kind.to_string(), count, holds, holds > 0))
        .collect();
    let lens = encode_component(lens);
    let all_kinds = svc_spec::VERIFICATION_KINDS.iter().map(|(kind, _)| *kind);
    Ok(LensPanel {
        kinds,
        verifications: format!("/explore/verificationsForLens?lens_uri={lens}"),
        sufficiency: format!(
            "/v1/verifications/sufficient?lens_uri={lens}&kinds={}&hold=true",
            all_kinds.collect::<Vec<_>>().join(",")
        ),
        weeks,
    })
}

/// A community's members and dialects.
/// The DIDs a record names in one field (a community's members), linked to their authors.
fn people_list(people: &People, record: &Json) -> RecordList {
    let (named, more) = match fields::at_path(record, &people.path) {
        Some(Json::Array(named, more)) => (named.as_slice(), *more),
        _ => (&[][..], 0),
    };
    let title = match more {
        0 => people.title.clone(),
        more => format!(
            "{} (the first {} of {})",
            people.title,
            named.len(),
            json_view::grouped(named.len() as u64 + more)
        ),
    };
    RecordList {
        title,
        records: named
            .iter()
            .filter_map(Json::as_str)
            .map(Linked::did)
            .collect(),
        more: None,
    }
}

/// The records a query finds for one parameter, as links, with a link to its page.
async fn related(
    state: &AppState,
    query: &str,
    title: &str,
    param: &str,
    value: &str,
) -> Result<Option<RecordList>, ApiError> {
    let titles = fields::title_fields();
    let Some(found) = ask(state, query, &[(param, value)], PANEL_ROWS, titles).await? else {
        return Ok(None);
    };
    Ok(Some(RecordList {
        title: format!("{title} ({})", found.total),
        records: found.items.iter().map(linked_record).collect(),
        more: Some(format!(
            "/explore/{query}?{param}={}",
            encode_component(value)
        )),
    }))
}

fn linked_record(item: &EnvelopeItem) -> Linked {
    Linked {
        text: format!(
            "{} by {}",
            fields::title(&item.uri, &item.record),
            item.author
        ),
        href: record_path(&item.uri),
    }
}

#[derive(Template)]
#[template(path = "explorer/author.html")]
struct AuthorPage {
    did: String,
    /// The one collection listed, when the page lists one.
    collection: Option<String>,
    rows: Vec<(Linked, Linked, String)>,
    next: Option<String>,
}

/// `GET /at/<did>`: the author's records, in uri order, a page at a time (`after`, a uri).
pub(crate) async fn author(
    State(state): State<Arc<AppState>>,
    Path(did): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    author_or_collection(&state, did, None, raw.as_deref()).await
}

/// `GET /at/<did>/<collection>`: the author's records of one collection.
pub(crate) async fn collection(
    State(state): State<Arc<AppState>>,
    Path((did, collection)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Response {
    author_or_collection(&state, did, Some(collection), raw.as_deref()).await
}

async fn author_or_collection(
    state: &AppState,
    did: String,
    collection: Option<String>,
    raw: Option<&str>,
) -> Response {
    let checked = svc_syntax::check_did(&did)
        .map_err(|e| format!("{did}: {e}"))
        .and_then(|()| match &collection {
            Some(nsid) => svc_syntax::check_nsid(nsid).map_err(|e| format!("{nsid}: {e}")),
            None => Ok(()),
        });
    if let Err(message) = checked {
        return super::failure(ApiError::InvalidRequest(message));
    }
    let slice = RepositorySlice { did, collection };
    match author_page(state, slice, raw).await {
        Ok(author_page) => page(&author_page, StatusCode::OK),
        Err(error) => super::failure(error),
    }
}

async fn author_page(
    state: &AppState,
    slice: RepositorySlice,
    raw: Option<&str>,
) -> Result<AuthorPage, ApiError> {
    let after = Params::parse(raw).get("after")?.map(str::to_string);
    let catalog = &state.catalog;
    let read = slice.clone();
    let page = envelope::picked(fields::row_fields(&[]), |picker| {
        catalog.write_repository_records(read, after, AUTHOR_ROWS, picker)
    })
    .await?;
    let here = match &slice.collection {
        Some(collection) => format!("/at/{}/{collection}", slice.did),
        None => super::author_path(&slice.did),
    };
    let next = page
        .cursor
        .and(page.items.last())
        .map(|last| format!("{here}?after={}", encode_component(&last.uri)));
    let rows = page
        .items
        .into_iter()
        .map(|item| {
            // A record that does not read shows its key and no time.
            let kind = super::collection_of(&item.uri).unwrap_or_default();
            let kind = Linked {
                href: Some(format!("/at/{}/{kind}", slice.did)),
                text: kind.to_string(),
            };
            let link = Linked {
                text: fields::title(&item.uri, &item.record),
                href: record_path(&item.uri),
            };
            (kind, link, fields::time(&item.record))
        })
        .collect();
    Ok(AuthorPage {
        did: slice.did,
        collection: slice.collection,
        rows,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The most a record can make of its page: 5,000 values at the deepest nesting JSON is
    /// read to, each a string of quotes (six bytes of HTML each) as long as the text allowed
    /// them can make it.
    #[test]
    fn no_record_lays_out_more_than_4_mb() {
        let deep = 120;
        let quotes = format!("\"{}\"", "\\\"".repeat(52));
        let items = vec![quotes; 20_000].join(",");
        let json = format!("{}{items}{}", "[".repeat(deep), "]".repeat(deep));
        let (shown, tally) = bounded::read(&json, json_view::PAGE).expect("JSON");
        assert_eq!(tally.kept, json_view::PAGE.values);
        let record_page = RecordPage {
            uri: "at://did:plc:a/dev.svc.vocab/1".into(),
            kind: "dev.svc.vocab".into(),
            title: "vocab 1".into(),
            author: Linked::did("did:plc:a"),
            rev: Some("3l".into()),
            facts: Vec::new(),
            labels: Vec::new(),
            lens: None,
            route_from: None,
            lists: Vec::new(),
            lines: json_view::lines(&shown, &Links::default()),
            cut: cut(&tally),
            json: "/at/did:plc:a/dev.svc.vocab/1?format=json".into(),
        };
        let html = record_page.render().expect("the page");
        assert!(html.len() > 2 << 20, "the worst case: {} bytes", html.len());
        assert!(html.len() < 4 << 20, "{} bytes", html.len());
    }
}
