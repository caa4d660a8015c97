//! A record's page (`GET /at/<did>/<collection>/<rkey>`): its JSON with every at-uri and DID
//! a link, and what the catalog knows around it: a lens's verifications by kind and whether
//! they suffice, a bounty's schemas and lens, a community's members and dialects, and the
//! beliefs about any record. An author's page (`GET /at/<did>`) lists their records.

use super::query::{EnvelopeItem, ask};
use super::{LENS, Linked, Links, fields, json_view, page, record_path};
use crate::params::{Params, encode_component};
use crate::{ApiError, AppState};
use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;
use std::sync::Arc;
use svc_catalog::RepositorySlice;

/// Records of a lens, community or subject a panel lists at most.
const PANEL_ROWS: u32 = 1000;
/// Records an author's page lists.
const AUTHOR_ROWS: usize = 50;

#[derive(Template)]
#[template(path = "explorer/record.html")]
struct RecordPage {
    uri: String,
    kind: String,
    title: String,
    author: Linked,
    rev: Option<String>,
    facts: Vec<(String, Linked)>,
    lens: Option<LensPanel>,
    lists: Vec<RecordList>,
    lines: Vec<json_view::Line>,
}

struct LensPanel {
    /// Each verification kind: how many there are, how many hold, and whether the kind is
    /// sufficient (a verification of it that holds).
    kinds: Vec<(String, u64, u64, bool)>,
    verifications: String,
    sufficiency: String,
}

/// Records around this one, each a link.
struct RecordList {
    title: String,
    records: Vec<Linked>,
    /// The same list in the explorer, when a query gives it.
    more: Option<String>,
}

/// `GET /at/<did>/<collection>/<rkey>`.
pub(crate) async fn record(
    State(state): State<Arc<AppState>>,
    Path((did, collection, rkey)): Path<(String, String, String)>,
) -> Response {
    let uri = format!("at://{did}/{collection}/{rkey}");
    if let Err(error) = svc_syntax::check_at_uri(&uri) {
        return super::failure(ApiError::InvalidRequest(format!("{uri}: {error}")));
    }
    match build(&state, uri, collection).await {
        Ok(Some(record_page)) => page(&record_page, StatusCode::OK),
        Ok(None) => super::not_found("record at this address"),
        Err(error) => super::failure(error),
    }
}

async fn build(
    state: &AppState,
    uri: String,
    collection: String,
) -> Result<Option<RecordPage>, ApiError> {
    let item = state.catalog.get(uri.clone()).await?;
    if item.is_none() && collection != LENS {
        return Ok(None);
    }
    let record: Value = match &item {
        Some(item) => serde_json::from_str(&item.record_json)
            .map_err(|e| ApiError::Internal(format!("a stored record did not read: {e}")))?,
        None => Value::Null,
    };
    let mut uris = Vec::new();
    json_view::at_uris(&record, &mut uris);
    let links = Links::of(state, uris).await?;
    let author = svc_syntax::at_uri_authority(&uri).unwrap_or_default();
    let lists = lists(state, &collection, &uri, &record).await?;
    Ok(Some(RecordPage {
        title: heading(&collection, &uri, &record),
        author: Linked::did(author),
        rev: item.map(|item| item.rev),
        facts: facts(&collection, &record, &links),
        lens: match collection == LENS {
            true => Some(lens_panel(state, &uri).await?),
            false => None,
        },
        lists,
        lines: json_view::lines(&record, &links),
        kind: collection,
        uri,
    }))
}

/// The records around this one: a community's members, dialects, changes, releases and
/// federations; a change's migration runs; the beliefs about any record.
async fn lists(
    state: &AppState,
    kind: &str,
    uri: &str,
    record: &Value,
) -> Result<Vec<RecordList>, ApiError> {
    let mut lists = Vec::new();
    if kind == "dev.svc.community" {
        lists.extend(community_lists(state, uri, record).await?);
    }
    let mut around = vec![("beliefsAboutRecord", "Beliefs about it", "subject_uri")];
    if kind == "dev.svc.changeProposal" {
        around.insert(
            0,
            ("migrationRunsForChange", "Migration runs", "change_uri"),
        );
    }
    for (query, title, param) in around {
        lists.extend(related(state, query, title, param, uri).await?);
    }
    Ok(lists)
}

/// What a record's page is headed with: its name or title, else its kind and key
/// (`bounty 3lqnj54becahi`).
fn heading(kind: &str, uri: &str, record: &Value) -> String {
    let title = fields::title(uri, record);
    let key = uri.rsplit('/').next().unwrap_or(uri);
    match title == key {
        true => format!("{} {key}", kind.rsplit('.').next().unwrap_or(kind)),
        false => title,
    }
}

/// The fields a kind is read by, linked: a bounty's wants, schemas, lens and status.
fn facts(kind: &str, record: &Value, links: &Links) -> Vec<(String, Linked)> {
    let wanted: &[(&str, &str)] = match kind {
        "dev.svc.bounty" => &[
            ("Wants", "wants.$type"),
            ("Source schema", "wants.source.uri"),
            ("Target schema", "wants.target.uri"),
            ("Lens", "wants.lens.uri"),
            ("Framework", "wants.framework"),
            ("Status", "status"),
            ("Requester", "requester"),
        ],
        "dev.svc.verification" => &[
            ("Lens", "lens.uri"),
            ("Kind", "kind"),
            ("Result", "result"),
            ("Verifier", "verifier"),
        ],
        "dev.svc.dialect" => &[("Community", "owningCommunity")],
        "dev.svc.changeProposal" => &[
            ("Community", "community"),
            ("Status", "status"),
            ("Compatibility", "compatibility"),
            ("Verification", "verificationStatus"),
            ("Deliberation", "deliberation"),
        ],
        "dev.svc.migrationRun" => &[
            ("Community", "community"),
            ("Change", "change"),
            ("Lens", "lens"),
            ("Status", "status"),
        ],
        "dev.svc.federation" => &[
            ("Community", "community"),
            ("Peer", "peer"),
            ("Relation", "relation"),
        ],
        "dev.svc.communityRelease" => &[("Community", "community"), ("Version", "version")],
        _ => &[],
    };
    wanted
        .iter()
        .filter_map(|(label, path)| {
            let value = fields::at_path(record, path)?;
            Some((label.to_string(), fields::cell(Some(value), links)))
        })
        .collect()
}

/// A lens's verifications by kind (by the property each proves, as sufficiency counts them),
/// and whether each kind is sufficient.
async fn lens_panel(state: &AppState, lens: &str) -> Result<LensPanel, ApiError> {
    let tally = crate::sufficiency::tally(state, lens).await?;
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
    })
}

/// A community's members and dialects.
async fn community_lists(
    state: &AppState,
    uri: &str,
    record: &Value,
) -> Result<Vec<RecordList>, ApiError> {
    let members = record["members"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut lists = vec![RecordList {
        title: "Members".into(),
        records: members
            .iter()
            .filter_map(Value::as_str)
            .map(Linked::did)
            .collect(),
        more: None,
    }];
    let around = [
        ("dialectsForCommunity", "Dialects", "community_uri"),
        (
            "changeProposalsForCommunity",
            "Change proposals",
            "community_uri",
        ),
        ("communityReleasesForCommunity", "Releases", "community_uri"),
        (
            "federationsForCommunity",
            "Federations it declares",
            "community_uri",
        ),
        (
            "federationsForPeer",
            "Federations naming it as peer",
            "peer_uri",
        ),
    ];
    for (query, title, param) in around {
        lists.extend(related(state, query, title, param, uri).await?);
    }
    Ok(lists)
}

/// The records a query finds for one parameter, as links, with a link to its page.
async fn related(
    state: &AppState,
    query: &str,
    title: &str,
    param: &str,
    value: &str,
) -> Result<Option<RecordList>, ApiError> {
    let Some(found) = ask(state, query, &[(param, value)], PANEL_ROWS).await? else {
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
    let items = state
        .catalog
        .repository_records(slice.clone(), after, AUTHOR_ROWS)
        .await?;
    let here = match &slice.collection {
        Some(collection) => format!("/at/{}/{collection}", slice.did),
        None => super::author_path(&slice.did),
    };
    let next = (items.len() == AUTHOR_ROWS)
        .then(|| items.last())
        .flatten()
        .map(|last| format!("{here}?after={}", encode_component(&last.uri)));
    let rows = items
        .into_iter()
        .map(|item| {
            let record: Value = serde_json::from_str(&item.record_json).unwrap_or(Value::Null);
            let kind = super::collection_of(&item.uri).unwrap_or_default();
            let kind = Linked {
                href: Some(format!("/at/{}/{kind}", slice.did)),
                text: kind.to_string(),
            };
            let link = Linked {
                text: fields::title(&item.uri, &record),
                href: record_path(&item.uri),
            };
            (kind, link, fields::time(&record))
        })
        .collect();
    Ok(AuthorPage {
        did: slice.did,
        collection: slice.collection,
        rows,
        next,
    })
}
