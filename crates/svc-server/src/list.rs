//! The generated list endpoints: parameters checked against the specification, one index
//! lookup, and the envelope `{items, total, limit, offset, cursor?}` written directly around
//! the stored record text (records are never parsed on the read path). Cached answers of
//! 1 KiB or more are kept compressed, and go out gzip-compressed to clients that accept gzip,
//! compressed once.

use crate::cache::{Answer, CacheKey};
use crate::params::{PAGING_PARAMS, Params, encode_cursor, lookup_key, paging};
use crate::plain::plain_ascii;
use crate::{ApiError, AppState};
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use std::borrow::Cow;
use std::sync::Arc;
use svc_catalog::{ItemRef, PageWriter};

pub(crate) async fn serve(
    State(state): State<Arc<AppState>>,
    position: usize,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    match answer(&state, position, raw.as_deref()).await {
        Ok(answer) => respond(&answer, &headers),
        Err(error) => error.into_response(),
    }
}

/// An answer as JSON, gzip-compressed for a client that accepts it.
pub(crate) fn respond(answer: &Answer, headers: &HeaderMap) -> Response {
    let compressed = accepts_gzip(headers)
        .then(|| answer.gzip().cloned())
        .flatten();
    let mut response = match compressed {
        Some(body) => {
            let mut response = json_response(body);
            response
                .headers_mut()
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            response
        }
        None => match answer.identity() {
            Ok(body) => json_response(body),
            Err(error) => return error.into_response(),
        },
    };
    // Shared caches must keep the two forms apart.
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    response
}

pub(crate) fn json_response(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Whether `Accept-Encoding` accepts gzip: gzip (or x-gzip) listed with a non-zero quality,
/// or, when neither is listed, `*` with a non-zero quality. An element whose weight is not a
/// qvalue of RFC 9110 (`q=abc`, `q=2`, `q=0.0001`) is not understood, and counts as unlisted.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let (mut named, mut any) = (None, None);
    let codings = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','));
    for coding in codings {
        let mut parts = coding.split(';');
        let name = parts.next().unwrap_or_default().trim();
        let weight = parts
            .filter_map(|p| {
                let (key, value) = p.split_once('=')?;
                key.trim().eq_ignore_ascii_case("q").then(|| value.trim())
            })
            .next();
        let Some(quality) = weight.map_or(Some(1.0), qvalue) else {
            continue;
        };
        if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
            named = Some(named.unwrap_or(0.0f32).max(quality));
        } else if name == "*" {
            any = Some(quality);
        }
    }
    named.or(any).is_some_and(|quality| quality > 0.0)
}

/// A weight as RFC 9110 writes it: `0` to `1`, with at most three decimals.
fn qvalue(text: &str) -> Option<f32> {
    let (whole, decimals) = text.split_once('.').unwrap_or((text, ""));
    let valid = match whole {
        "0" => decimals.len() <= 3 && decimals.bytes().all(|b| b.is_ascii_digit()),
        "1" => decimals.len() <= 3 && decimals.bytes().all(|b| b == b'0'),
        _ => false,
    };
    valid.then(|| text.parse().ok()).flatten()
}

pub(crate) async fn answer(
    state: &AppState,
    position: usize,
    raw: Option<&str>,
) -> Result<Arc<Answer>, ApiError> {
    let params = Params::parse(raw);
    let query = &state.queries.all()[position];
    let known: Vec<&str> = query
        .params()
        .iter()
        .map(|param| param.name.as_str())
        .chain(PAGING_PARAMS)
        .collect();
    params.only(&known)?;
    let paging = paging(&params)?;
    let cache_key = CacheKey {
        query: query.id().clone(),
        key: lookup_key(query, &params)?,
        page: Some(paging),
    };
    // Read the version before the catalog: a change committed meanwhile makes the entry stale.
    let version = state
        .catalog
        .clock()
        .key_version(query.id(), &cache_key.key);
    cached(state, &cache_key, version, |kept| {
        build(state, &cache_key, kept)
    })
    .await
}

/// The answer for `cache_key` at `version`: from the cache, or from a flight under way for
/// it, or built (`build(kept)`, `kept` saying whether it is built in the form the cache keeps)
/// and kept.
pub(crate) async fn cached<F, B>(
    state: &AppState,
    cache_key: &CacheKey,
    version: u64,
    build: F,
) -> Result<Arc<Answer>, ApiError>
where
    F: Fn(bool) -> B,
    B: std::future::Future<Output = Result<Arc<Answer>, ApiError>>,
{
    let answers = &state.metrics.answers;
    // A key too long to keep (a cursor of any text can be) is built by its request alone: it
    // joins no flight, whose board would hold its key meanwhile.
    if !state.cache.keeps(cache_key) {
        answers.built.inc();
        return build(false).await;
    }
    if let Some(answer) = state.cache.get(cache_key, version) {
        answers.hit.inc();
        return Ok(answer);
    }
    let ticket = state.cache.join(cache_key, version);
    let mut outcome = &answers.shared;
    let answer = ticket
        .flight()
        .get_or_init(|| async {
            // A flight that ended just before this one began left its answer in the cache.
            if let Some(answer) = state.cache.get(cache_key, version) {
                outcome = &answers.hit;
                return Ok(answer);
            }
            outcome = &answers.built;
            let answer = build(true).await?;
            state
                .cache
                .put(cache_key.clone(), version, Arc::clone(&answer));
            Ok(answer)
        })
        .await
        .clone();
    outcome.inc();
    answer
}

/// The answer for a key; `kept`: in the form the cache keeps, compressed where it is written,
/// off the runtime's threads.
async fn build(
    state: &AppState,
    cache_key: &CacheKey,
    kept: bool,
) -> Result<Arc<Answer>, ApiError> {
    let Some(request) = cache_key.page.clone() else {
        return Err(ApiError::Internal("a list answer without a page".into()));
    };
    let writer = Box::new(JsonPage::new(request.limit, request.offset, kept));
    let body = state
        .catalog
        .write_list(
            cache_key.query.clone(),
            cache_key.key.clone(),
            request,
            writer,
        )
        .await?;
    kept_answer(body, kept)
}

/// A written answer, in the form the cache keeps when `kept` (compressed as it was written).
pub(crate) fn kept_answer(body: Vec<u8>, kept: bool) -> Result<Arc<Answer>, ApiError> {
    let answer = if kept {
        Answer::from_compressed(Bytes::from(body))?
    } else {
        Answer::new(Bytes::from(body))
    };
    Ok(Arc::new(answer))
}

fn push_json_string(out: &mut Vec<u8>, value: &str) {
    // Uris, DIDs and revisions never need escaping; checking that is far cheaper than
    // escaping character by character.
    if !needs_escaping(value.as_bytes()) {
        out.reserve(value.len() + 2);
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
    } else {
        // Writing a &str into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, value);
    }
}

/// Whether JSON needs any of these bytes escaped: a control character, `"` or `\\`. Checked
/// eight bytes at a time (a byte-wise check was a tenth of an uncached page's instructions).
fn needs_escaping(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    // The high bit of a byte is set in the result where that byte of `word` is below `n`
    // (exact as a yes or no for n <= 128; bytes of 0x80 and above never count).
    let any_below =
        |word: u64, n: u8| word.wrapping_sub(ONES * u64::from(n)) & !word & HIGH_BITS != 0;
    let any_equal = |word: u64, b: u8| any_below(word ^ (ONES * u64::from(b)), 1);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        let word = u64::from_le_bytes(eight);
        if any_below(word, 0x20) || any_equal(word, b'"') || any_equal(word, b'\\') {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// The most a page reserves ahead of its items; beyond, it grows as they come.
const MAX_PAGE_RESERVE: usize = 256 * 1024;

/// The answer's JSON, written as the catalog reads the page: the envelope
/// `{items, total, limit, offset, cursor?}` around each record's stored text; compressed as
/// the cache keeps it when `compress`.
pub(crate) struct JsonPage {
    out: Vec<u8>,
    paging: Paging,
    compress: bool,
    /// The last item's uri: the cursor, if more follow.
    last_uri: LastUri,
    /// Items written so far.
    written: usize,
    limit: u32,
    offset: u64,
}

/// Where a page's last uri is: in the answer, written as it is (most uris), or copied
/// (one the answer holds escaped).
enum LastUri {
    None,
    Written(std::ops::Range<usize>),
    Copied(String),
}

/// How a page's envelope ends, and how the next page is asked for.
#[derive(Clone, Copy)]
enum Paging {
    /// A list: its total exact, the next page after its last uri.
    AfterUri,
    /// A search: its matches counted up to a bound (past it, the total is a lower bound), the
    /// next page from the next offset.
    ByOffset,
}

impl Paging {
    /// The total shown, and whether it is a lower bound.
    fn total(self, total: u64) -> (u64, bool) {
        match self {
            Paging::ByOffset if total > svc_catalog::SEARCH_COUNT_LIMIT => {
                (svc_catalog::SEARCH_COUNT_LIMIT, true)
            }
            _ => (total, false),
        }
    }

    /// The cursor of the next page.
    fn cursor(self, last_uri: Option<&str>, next_offset: u64) -> Option<String> {
        match self {
            Paging::AfterUri => last_uri.map(encode_cursor),
            Paging::ByOffset => Some(crate::params::encode_search_cursor(next_offset)),
        }
    }
}

impl JsonPage {
    /// A search's page, which pages by offset.
    pub(crate) fn searched(limit: u32, offset: u64, compress: bool) -> JsonPage {
        JsonPage {
            paging: Paging::ByOffset,
            ..JsonPage::new(limit, offset, compress)
        }
    }

    fn new(limit: u32, offset: u64, compress: bool) -> JsonPage {
        let mut out = Vec::with_capacity(1024);
        out.extend_from_slice(b"{\"items\":[");
        JsonPage {
            out,
            paging: Paging::AfterUri,
            compress,
            last_uri: LastUri::None,
            written: 0,
            limit,
            offset,
        }
    }
}

impl PageWriter for JsonPage {
    fn item(&mut self, item: ItemRef<'_>) {
        let plain = plain_ascii(item.uri).zip(plain_ascii(item.rev));
        // Stored from valid UTF-8: only a damaged row is read with replacement characters.
        let (uri, rev) = match plain {
            Some((uri, rev)) => (Cow::Borrowed(uri), Cow::Borrowed(rev)),
            None => (
                String::from_utf8_lossy(item.uri),
                String::from_utf8_lossy(item.rev),
            ),
        };
        let author = svc_syntax::at_uri_authority(&uri).unwrap_or_default();
        // The envelope's names, quotes and commas take 42 bytes; the rest is room to spare.
        let size = item.record_json.len() + uri.len() + author.len() + rev.len() + 48;
        if self.out.capacity() - self.out.len() < size {
            // Items of a key are of a size: reserve for the rest of the page at a quarter more
            // than this one, within reason (one large record must not reserve a thousand times
            // itself). Growing by doubling instead would copy the whole page each time.
            let rest = (self.limit as usize).saturating_sub(self.written).max(1);
            let ahead = size.saturating_mul(rest).saturating_mul(5) / 4 + 128;
            self.out.reserve(ahead.min(MAX_PAGE_RESERVE).max(size));
        }
        if self.written > 0 {
            self.out.push(b',');
        }
        self.written += 1;
        // Two ways of writing the same fields: the plain one copies each quote with the names
        // around it, a shared helper writing quotes apart cost 6,000 instructions a page.
        if plain.is_some() {
            self.out.extend_from_slice(b"{\"uri\":\"");
            let start = self.out.len();
            self.out.extend_from_slice(uri.as_bytes());
            self.last_uri = LastUri::Written(start..self.out.len());
            self.out.extend_from_slice(b"\",\"author\":\"");
            self.out.extend_from_slice(author.as_bytes());
            self.out.extend_from_slice(b"\",\"rev\":\"");
            self.out.extend_from_slice(rev.as_bytes());
            self.out.extend_from_slice(b"\",\"record\":");
        } else {
            self.out.extend_from_slice(b"{\"uri\":");
            push_json_string(&mut self.out, &uri);
            self.out.extend_from_slice(b",\"author\":");
            push_json_string(&mut self.out, author);
            self.out.extend_from_slice(b",\"rev\":");
            push_json_string(&mut self.out, &rev);
            self.out.extend_from_slice(b",\"record\":");
            self.last_uri = LastUri::Copied(uri.into_owned());
        }
        self.out.extend_from_slice(item.record_json);
        if let Some(labels) = item.labels() {
            self.out.extend_from_slice(b",\"labels\":");
            self.out.extend_from_slice(labels);
        }
        self.out.push(b'}');
    }

    fn finish(self: Box<Self>, total: u64, more: bool) -> Vec<u8> {
        let JsonPage {
            mut out,
            paging,
            compress,
            last_uri,
            limit,
            offset,
            written,
        } = *self;
        let (shown, capped) = paging.total(total);
        out.extend_from_slice(
            format!("],\"total\":{shown},\"limit\":{limit},\"offset\":{offset}").as_bytes(),
        );
        if capped {
            out.extend_from_slice(b",\"total_is_lower_bound\":true");
        }
        let last_uri = match &last_uri {
            LastUri::None => None,
            LastUri::Written(range) => std::str::from_utf8(&out[range.clone()]).ok(),
            LastUri::Copied(uri) => Some(uri.as_str()),
        };
        let cursor = paging.cursor(last_uri, offset + written as u64);
        if let Some(cursor) = cursor.filter(|_| more) {
            out.extend_from_slice(b",\"cursor\":");
            push_json_string(&mut out, &cursor);
        }
        out.push(b'}');
        if compress {
            return crate::cache::compress(&out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepting(value: &str) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(value).unwrap(),
        );
        accepts_gzip(&headers)
    }

    #[test]
    fn gzip_is_chosen_only_when_accepted() {
        assert!(accepting("gzip"));
        assert!(accepting("br, GZIP;q=0.5"));
        assert!(accepting("deflate, *"));
        assert!(!accepting("gzip;q=0"));
        assert!(!accepting("gzip;Q=0"));
        assert!(!accepting("gzip;q=0, *"));
        assert!(!accepting("*;q=0"));
        assert!(accepting("identity, *;q=0.1"));
        assert!(!accepting("br, zstd"));
        assert!(!accepting("identity"));
        assert!(!accepts_gzip(&HeaderMap::new()));
        // Weights that are no qvalue: the element is not understood.
        for odd in [
            "gzip;q=abc",
            "gzip;q=2",
            "gzip;q=-1",
            "gzip;q=0.0001",
            "gzip;q=NaN",
        ] {
            assert!(!accepting(odd), "{odd}");
        }
        assert!(accepting("gzip;q=abc, *;q=0.5"));
        assert!(accepting("gzip;q=1.000"));
        assert!(accepting("gzip;q=0.001"));
        assert!(!accepting("gzip;q=0.000"));
    }

    #[test]
    fn strings_are_escaped_only_where_json_needs_it() {
        for value in [
            "at://did:plc:a/dev.svc.bounty/3l",
            "",
            "a\"b",
            "back\\slash",
            "tab\t",
            "é\u{7f}",
        ] {
            let mut out = Vec::new();
            push_json_string(&mut out, value);
            let expected = serde_json::to_vec(value).unwrap();
            assert_eq!(out, expected, "{value:?}");
        }
    }

    fn item<'a>(uri: &'a str, rev: &'a str, record_json: &'a [u8]) -> ItemRef<'a> {
        ItemRef {
            uri: uri.as_bytes(),
            rev: rev.as_bytes(),
            record_json,
            labels: &[],
        }
    }

    /// Items whose uri, author or revision need escaping are written as serde_json writes
    /// them, beside items copied as they are; the cursor names the last uri unescaped.
    #[test]
    fn pages_mix_copied_and_escaped_items_and_the_cursor_names_the_last_uri() {
        let plain = "at://did:plc:a/dev.svc.bounty/1";
        let quoted = "at://did:plc:a/dev.svc.bounty/\"2";
        for (first, last) in [(plain, quoted), (quoted, plain)] {
            let mut page: Box<dyn PageWriter> = Box::new(JsonPage::new(2, 0, false));
            for uri in [first, last] {
                page.item(item(uri, "3l\trev", b"{\"k\":1}"));
            }
            let answer: serde_json::Value = serde_json::from_slice(&page.finish(5, true)).unwrap();
            let uris: Vec<&str> = answer["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|item| item["uri"].as_str().unwrap())
                .collect();
            assert_eq!(uris, [first, last]);
            assert_eq!(answer["items"][1]["rev"], "3l\trev");
            assert_eq!(answer["items"][1]["record"]["k"], 1);
            assert_eq!(answer["cursor"], encode_cursor(last));
        }
        let mut page: Box<dyn PageWriter> = Box::new(JsonPage::new(2, 0, false));
        page.item(item(plain, "3lrev", b"{}"));
        let answer: serde_json::Value = serde_json::from_slice(&page.finish(1, false)).unwrap();
        assert_eq!(answer["items"][0]["author"], "did:plc:a");
        assert!(answer.get("cursor").is_none());
    }

    #[test]
    fn every_byte_that_needs_escaping_is_found_at_every_position() {
        let bytewise = |bytes: &[u8]| bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
        for len in 0..24 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = b;
                    assert_eq!(needs_escaping(&bytes), bytewise(&bytes), "{bytes:?}");
                    // Beside bytes that borrow or carry in the word arithmetic.
                    bytes.iter_mut().for_each(|x| *x = 0xff);
                    bytes[at] = b;
                    assert_eq!(needs_escaping(&bytes), bytewise(&bytes), "{bytes:?}");
                    bytes.iter_mut().for_each(|x| *x = 0x20);
                    bytes[at] = b;
                    assert_eq!(needs_escaping(&bytes), bytewise(&bytes), "{bytes:?}");
                }
            }
        }
    }
}
