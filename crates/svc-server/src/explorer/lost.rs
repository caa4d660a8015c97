//! An address nothing answers: a browser gets a page in the explorer's look with the ways on
//! (the front page, the map, the search box, the list of queries); any other client keeps the
//! API's JSON 404, so that a script never has to parse a page. `/explore` alone names no
//! query: it leads to the list of them.

use super::fields::cut;
use super::page;
use askama::Template;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{Redirect, Response};

/// Where the front page lists every query.
const QUERIES: &str = "/#queries";
/// The most characters of the asked path the page repeats.
const PATH_CHARS: usize = 200;

#[derive(Template)]
#[template(path = "explorer/lost.html")]
struct Lost {
    path: String,
}

/// The answer to any address no route takes.
pub(crate) async fn nowhere(headers: HeaderMap, uri: Uri) -> Response {
    if !prefers_html(&headers) {
        return crate::error::not_found(uri).await;
    }
    let lost = Lost {
        path: cut(uri.path(), PATH_CHARS),
    };
    page(&lost, StatusCode::NOT_FOUND)
}

/// `GET /explore` and `/explore/`: the queries are listed on the front page.
pub(crate) async fn queries() -> Redirect {
    Redirect::to(QUERIES)
}

/// Whether the client's `Accept` ranks a page (`text/html` or XHTML, named, not by a
/// wildcard) above JSON; a tie goes to whichever it names first. No `Accept`, `*/*` and
/// `application/json` all keep JSON.
pub(crate) fn prefers_html(headers: &HeaderMap) -> bool {
    let mut html: Option<(f32, usize)> = None;
    let mut json: Option<(f32, usize)> = None;
    let ranges = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','));
    for (position, range) in ranges.enumerate() {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let weight = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        let slot = match media.as_str() {
            "text/html" | "application/xhtml+xml" => &mut html,
            "application/json" => &mut json,
            _ => continue,
        };
        if slot.is_none_or(|(best, _)| weight > best) {
            *slot = Some((weight, position));
        }
    }
    match (html, json) {
        (Some((h, _)), _) if h <= 0.0 => false,
        (Some(_), None) => true,
        (Some((h, at)), Some((j, json_at))) => h > j || (h == j && at < json_at),
        (None, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn asks(accept: Option<&str>) -> bool {
        let mut headers = HeaderMap::new();
        if let Some(accept) = accept {
            headers.insert(
                header::ACCEPT,
                HeaderValue::from_str(accept).expect("ASCII"),
            );
        }
        prefers_html(&headers)
    }

    #[test]
    fn browsers_get_pages_and_every_other_client_json() {
        let chromium = "text/html,application/xhtml+xml,application/xml;q=0.9,\
            image/avif,image/webp,*/*;q=0.8";
        assert!(asks(Some(chromium)));
        assert!(asks(Some("application/xhtml+xml")));
        assert!(asks(Some("text/html;q=0.9, application/json;q=0.5")));
        assert!(asks(Some("TEXT/HTML, application/json")));
        for client in [
            None,
            Some("*/*"),
            Some("application/json"),
            Some("application/json, text/html"),
            Some("application/json, text/html;q=0.9"),
            Some("text/html;q=0"),
            Some("text/*"),
            Some("not a media range"),
        ] {
            assert!(!asks(client), "{client:?}");
        }
    }
}
