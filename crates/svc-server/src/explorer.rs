//! The catalog explorer: pages for people at `/`, `/explore/<query>` and `/at/...`, rendered
//! on the server from templates checked at compile time (askama, which escapes every value).
//! Every record is a stranger's text: the pages load nothing from outside the binary, run
//! only the explorer's own script (the live part; every page works without it), and say so
//! in their Content-Security-Policy. Nothing on them writes.

mod bounded;
mod chart;
mod envelope;
mod fields;
mod front;
mod json_view;
mod lens_weeks;
mod lost;
mod map;
mod query;
mod record;
mod routes;
mod search;

pub(crate) use front::FrontCache;
pub(crate) use front::front;
pub(crate) use lost::{nowhere, queries};
pub(crate) use map::map;
pub(crate) use query::query;
pub(crate) use record::{author, collection, record};
pub(crate) use routes::routes;
pub(crate) use search::search;

use crate::{ApiError, AppState};
use askama::Template;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::collections::HashSet;

/// What a page may load and do: its own stylesheet and script, and the change stream.
const POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; \
     connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
/// The files a page loads, built into the binary: name, type, contents.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "explorer.css",
        "text/css; charset=utf-8",
        include_str!("../assets/explorer.css"),
    ),
    (
        "explorer.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/explorer.js"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_str!("../assets/icon.svg"),
    ),
];
/// The type of every page.
const HTML: &str = "text/html; charset=utf-8";
/// The NSID of lens records: a lens has a page (its verifications) even when the catalog
/// holds no record of it.
const LENS: &str = "dev.panproto.schema.lens";
/// The NSID of schema records, whose links read as the schema's name.
const SCHEMA: &str = "dev.panproto.schema.schema";

/// A piece of a stranger's text, linked to the explorer's page for it where there is one.
pub(crate) struct Linked {
    pub text: String,
    pub href: Option<String>,
}

impl Linked {
    fn plain(text: impl Into<String>) -> Linked {
        Linked {
            text: text.into(),
            href: None,
        }
    }

    /// A DID linked to its author's records.
    fn did(did: &str) -> Linked {
        Linked {
            text: did.to_string(),
            href: svc_syntax::check_did(did).is_ok().then(|| author_path(did)),
        }
    }
}

/// Where links may point: the records the catalog holds, among those a page names; and the
/// readable names of the schemas among them, which their links read as.
#[derive(Default)]
pub(crate) struct Links {
    held: HashSet<String>,
    names: std::collections::HashMap<String, String>,
}

impl Links {
    /// How many uris a page asks about at most; any beyond are shown unlinked.
    const MOST: usize = 1000;

    async fn of(state: &AppState, mut uris: Vec<String>) -> Result<Links, ApiError> {
        uris.sort_unstable();
        uris.dedup();
        uris.truncate(Self::MOST);
        let schemas = uris
            .iter()
            .filter(|uri| collection_of(uri) == Some(SCHEMA))
            .map(String::as_str);
        let names = crate::schema_names::names_of(state.catalog.as_ref(), schemas).await?;
        let held = state.catalog.held(uris).await?;
        Ok(Links {
            held: held.into_iter().collect(),
            names,
        })
    }

    /// The readable name of the schema at `uri`, when it is one the catalog holds.
    fn name(&self, uri: &str) -> Option<&str> {
        self.names.get(uri).map(String::as_str)
    }

    /// A string's link: a DID to its author's records; an at-uri naming a record to its page
    /// when the catalog holds the record or it is a lens (whose page lists its
    /// verifications), one naming a repository or a collection to that list of records.
    fn link(&self, text: &str) -> Option<String> {
        if text.starts_with("did:") {
            return svc_syntax::check_did(text)
                .is_ok()
                .then(|| author_path(text));
        }
        if !text.starts_with("at://") {
            return None;
        }
        let parts = svc_syntax::check_at_uri(text).ok()?;
        let listed = parts.rkey.is_none() && svc_syntax::check_did(parts.authority).is_ok();
        let linkable = listed || self.held.contains(text) || parts.collection == Some(LENS);
        linkable.then(|| page_path(&parts))
    }
}

/// The page of a DID's records.
fn author_path(did: &str) -> String {
    format!("/at/{did}")
}

/// The page of the record at `uri`, for a checked at-uri naming a record.
fn record_path(uri: &str) -> Option<String> {
    let parts = svc_syntax::check_at_uri(uri).ok()?;
    parts.rkey.is_some().then(|| page_path(&parts))
}

/// The explorer's page of what an at-uri names: a record, a collection of a repository, or a
/// repository.
fn page_path(parts: &svc_syntax::AtUriParts<'_>) -> String {
    let mut path = format!("/at/{}", parts.authority);
    for part in [parts.collection, parts.rkey].into_iter().flatten() {
        path.push('/');
        path.push_str(part);
    }
    path
}

/// The collection an at-uri names, if it is one.
fn collection_of(uri: &str) -> Option<&str> {
    svc_syntax::check_at_uri(uri).ok()?.collection
}

/// A page, with the headers every page carries.
fn page(template: &impl Template, status: StatusCode) -> Response {
    match template.render() {
        Ok(html) => with_headers(html, HTML, status),
        Err(error) => {
            let message = format!("a page failed to render: {error}");
            failure(ApiError::Internal(message))
        }
    }
}

#[derive(Template)]
#[template(path = "explorer/error.html")]
struct Failure {
    title: String,
    message: String,
}

/// An error as a page: a bad parameter is a 400 naming it, as in the API.
fn failure(error: ApiError) -> Response {
    let status = error.status();
    let failure = Failure {
        title: status.canonical_reason().unwrap_or("Error").to_string(),
        message: error.message(),
    };
    match failure.render() {
        Ok(html) => error.with_retry_after(with_headers(html, HTML, status)),
        Err(_) => error.into_response(),
    }
}

/// A page that says the catalog holds nothing at this address.
fn not_found(what: &str) -> Response {
    let failure = Failure {
        title: "Not in this catalog".into(),
        message: format!("This catalog holds no {what}."),
    };
    page(&failure, StatusCode::NOT_FOUND)
}

/// A page that says the record at this address was taken down, and by whom (the operator, or
/// a labeler the catalog follows), without a word of its content (`410 Gone`: it is here, and
/// not to be shown).
fn taken_down(hidden: &Hidden) -> Response {
    let what = match hidden.account {
        true => "this record's account",
        false => "this record",
    };
    let who = match &hidden.labeler {
        None => "The operator of this catalog".to_string(),
        Some(labeler) => format!("A labeler this catalog follows ({labeler})"),
    };
    let failure = Failure {
        title: "Taken down".into(),
        message: format!("{who} took {what} down; it is not shown."),
    };
    page(&failure, StatusCode::GONE)
}

/// What hides a record: a labeler's takedown (its DID) or the operator's, of the record or
/// of its account.
pub(crate) struct Hidden {
    pub labeler: Option<String>,
    pub account: bool,
}

/// `GET /assets/<file>`.
pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => {
            with_headers(body.to_string(), content_type, StatusCode::OK)
        }
        None => not_found("file of that name"),
    }
}

fn with_headers(
    body: impl IntoResponse,
    content_type: &'static str,
    status: StatusCode,
) -> Response {
    let mut response = (status, [(header::CONTENT_TYPE, content_type)], body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}
