//! Query-string parsing shared by the list endpoints: the paging parameters and the lookup of
//! declared parameters. A parameter given twice is refused rather than guessed at.

use crate::ApiError;
use base64::Engine;
use svc_catalog::PageRequest;

pub(crate) use svc_spec::{DEFAULT_LIMIT, MAX_LIMIT};

/// What every list endpoint takes beside its query's own parameters.
pub(crate) const PAGING_PARAMS: [&str; 3] = ["limit", "offset", "cursor"];

pub(crate) struct Params {
    /// Each pair's decoded name, and its decoded value or the reason it does not decode.
    pairs: Vec<(String, Result<String, &'static str>)>,
    /// Names that do not decode, and why.
    bad_names: Vec<(String, &'static str)>,
}

impl Params {
    pub fn parse(raw: Option<&str>) -> Params {
        let mut bad_names = Vec::new();
        let pairs = raw
            .unwrap_or_default()
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                // A name that does not decode matches no parameter; `only` refuses it.
                let name = decode_component(name).unwrap_or_else(|reason| {
                    bad_names.push((name.to_string(), reason));
                    name.to_string()
                });
                (name, decode_component(value))
            })
            .collect();
        Params { pairs, bad_names }
    }

    /// Refuses a parameter the endpoint does not take (a misspelt filter would otherwise
    /// answer the unfiltered list), naming the nearest one it does take, and a name that is
    /// not percent-encoded UTF-8.
    pub fn only(&self, known: &[&str]) -> Result<(), ApiError> {
        if let Some((name, reason)) = self.bad_names.first() {
            return Err(ApiError::InvalidRequest(format!(
                "a parameter's name, {name:?}: {reason}"
            )));
        }
        let Some(unknown) = self
            .pairs
            .iter()
            .map(|(name, _)| name)
            .find(|name| !known.contains(&name.as_str()))
        else {
            return Ok(());
        };
        let nearest = known
            .iter()
            .map(|candidate| (edit_distance(unknown, candidate), candidate))
            .filter(|(distance, _)| *distance <= 2.max(unknown.chars().count() / 3))
            .min();
        let hint = match nearest {
            Some((_, name)) => format!("; did you mean {name}?"),
            None => format!("; it takes {}", known.join(", ")),
        };
        Err(ApiError::InvalidRequest(format!(
            "{unknown}: not a parameter of this query{hint}"
        )))
    }

    /// The value of a parameter; an error when it is given more than once, or when it is not
    /// percent-encoded UTF-8.
    pub fn get(&self, name: &str) -> Result<Option<&str>, ApiError> {
        let mut found = self.pairs.iter().filter(|(n, _)| n == name);
        let first = found.next().map(|(_, v)| v);
        if found.next().is_some() {
            return Err(ApiError::InvalidRequest(format!(
                "{name}: given more than once"
            )));
        }
        match first {
            None => Ok(None),
            Some(Ok(value)) => Ok(Some(value.as_str())),
            Some(Err(reason)) => Err(ApiError::InvalidRequest(format!("{name}: {reason}"))),
        }
    }

    /// A parameter's value as a page's form echoes it back: empty when absent, repeated or
    /// unreadable (reading it for the answer says what is wrong).
    pub fn echoed(&self, name: &str) -> String {
        self.get(name)
            .ok()
            .flatten()
            .unwrap_or_default()
            .to_string()
    }
}

/// The index key a query's parameters ask for: each declared parameter given at most once,
/// every value checked against its declaration.
pub(crate) fn lookup_key(query: &svc_spec::Query, params: &Params) -> Result<String, ApiError> {
    for param in query.params() {
        params.get(&param.name)?;
    }
    let args = query
        .bind(|name| params.get(name).ok().flatten())
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    Ok(query.lookup_key(&args))
}

/// How many single-character insertions, deletions and substitutions turn `a` into `b`.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// One component of a query string, as HTML forms encode it (`+` is a space), refusing what
/// a lenient decoder would silently change: a `%` without two hex digits, and bytes that are
/// not UTF-8. A NUL is text like any other: records may hold one, and a lookup finds them.
/// `value` percent-encoded for a query string: every byte but ASCII letters, digits and
/// `-._~` escaped.
pub(crate) fn encode_component(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

fn decode_component(raw: &str) -> Result<String, &'static str> {
    let mut bytes = Vec::with_capacity(raw.len());
    let mut input = raw.bytes();
    while let Some(byte) = input.next() {
        match byte {
            b'+' => bytes.push(b' '),
            b'%' => {
                let hex = |digit: Option<u8>| {
                    digit
                        .and_then(|d| (d as char).to_digit(16))
                        .ok_or("a % not followed by two hex digits")
                };
                let high = hex(input.next())?;
                let low = hex(input.next())?;
                bytes.push((high * 16 + low) as u8);
            }
            other => bytes.push(other),
        }
    }
    String::from_utf8(bytes).map_err(|_| "not valid percent-encoded UTF-8")
}

/// A number as every parameter is read: decimal digits alone (no sign, no space, no point).
fn digits(value: &str) -> Option<u64> {
    match value.bytes().all(|b| b.is_ascii_digit()) {
        true => value.parse().ok(),
        false => None,
    }
}

/// The value shown in an error, cut so that a huge one does not come back whole.
fn shown(value: &str) -> String {
    value.chars().take(40).collect()
}

/// A parameter that is a whole number from `least` to `most`.
pub(crate) fn bounded(name: &str, value: &str, least: u64, most: u64) -> Result<u64, ApiError> {
    digits(value)
        .filter(|n| (least..=most).contains(n))
        .ok_or_else(|| {
            ApiError::InvalidRequest(format!(
                "{name}: must be an integer from {least} to {most}, not {:?}",
                shown(value)
            ))
        })
}

/// A parameter that is a whole number with no bound of its own.
fn unsigned(name: &str, value: &str) -> Result<u64, ApiError> {
    digits(value).ok_or_else(|| {
        ApiError::InvalidRequest(format!(
            "{name}: must be a non-negative integer, not {:?}",
            shown(value)
        ))
    })
}

/// The paging of a raw query string, as a list endpoint reads it (for the fuzzer).
pub fn list_paging(raw_query: &str) -> Result<PageRequest, ApiError> {
    paging(&Params::parse(Some(raw_query)))
}

pub(crate) fn paging(params: &Params) -> Result<PageRequest, ApiError> {
    let limit = page_limit(params)?;
    let offset = params
        .get("offset")?
        .map(|v| unsigned("offset", v))
        .transpose()?;
    let after = match params.get("cursor")? {
        None => None,
        // `offset=0` is the default spelled out (clients and generators send it beside a
        // cursor); only an offset that would move the page conflicts with the cursor.
        Some(_) if offset.is_some_and(|n| n != 0) => {
            return Err(ApiError::InvalidRequest(
                "cursor: cannot be combined with a non-zero offset".into(),
            ));
        }
        Some(cursor) => Some(decode_cursor(cursor)?),
    };
    Ok(PageRequest {
        limit,
        offset: offset.unwrap_or(0),
        after,
    })
}

/// A page's `limit`, as every endpoint that pages reads it.
pub(crate) fn page_limit(params: &Params) -> Result<u32, ApiError> {
    Ok(match params.get("limit")? {
        None => DEFAULT_LIMIT,
        Some(value) => bounded("limit", value, 1, u64::from(MAX_LIMIT))? as u32,
    })
}

const CURSOR_PREFIX: &str = "u:";

/// What a cursor looks like: canonical unpadded base64url of `u:` and a position in uri order
/// (`dT` and one of `o`-`r` spell the prefix). Any such string is a position to page after.
pub(crate) const CURSOR_PATTERN: &str = "^dT(?:o|[o-r][A-Za-z0-9_-](?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-][AQgw]|[A-Za-z0-9_-]{2}[AEIMQUYcgkosw048])?)$";

/// The opaque paging cursor: the last uri of a page, base64url without padding.
pub(crate) fn encode_cursor(last_uri: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{CURSOR_PREFIX}{last_uri}"))
}

/// A search's paging cursor: the offset of the next page, in decimal (the OpenAPI document
/// states its pattern, [`SEARCH_CURSOR_PATTERN`]).
pub(crate) fn encode_search_cursor(offset: u64) -> String {
    offset.to_string()
}

/// What a search cursor looks like: an offset from 0 to the count limit, 10,000.
pub(crate) const SEARCH_CURSOR_PATTERN: &str = "^(0|[1-9][0-9]{0,3}|10000)$";

/// The offset a search cursor gives: within the matches a search counts.
pub(crate) fn decode_search_cursor(cursor: &str) -> Result<u64, ApiError> {
    let invalid = || {
        ApiError::InvalidRequest(format!(
            "cursor: an offset from 0 to {}, as a search gives it",
            svc_catalog::SEARCH_COUNT_LIMIT
        ))
    };
    let canonical = cursor == "0" || (!cursor.starts_with('0') && cursor.len() <= 5);
    if !canonical || !cursor.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    cursor
        .parse::<u64>()
        .ok()
        .filter(|offset| *offset <= svc_catalog::SEARCH_COUNT_LIMIT)
        .ok_or_else(invalid)
}

/// Longer than the cursor of any record's at-uri (DID, NSID and record key at their longest).
pub(crate) const MAX_CURSOR_CHARS: usize = 4_000;

fn decode_cursor(cursor: &str) -> Result<String, ApiError> {
    let invalid = || ApiError::InvalidRequest("cursor: not a cursor given by this service".into());
    if cursor.len() > MAX_CURSOR_CHARS {
        return Err(invalid());
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| invalid())?;
    let position = bytes
        .strip_prefix(CURSOR_PREFIX.as_bytes())
        .ok_or_else(invalid)?;
    // Positions only compare with uris, which are ASCII and never hold a NUL: bytes that
    // are not UTF-8 still mark a place (any byte from 0x80 sorts after every uri's at that
    // point, as U+FFFD's first byte does), and what follows a NUL changes no comparison, so
    // the position ends there (PostgreSQL's text cannot hold a NUL; both engines page alike).
    let position = String::from_utf8_lossy(position);
    let end = position.find('\0').unwrap_or(position.len());
    Ok(position[..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoded_component_decodes_to_itself() {
        for value in [
            "at://did:plc:a/dev.svc.bounty/3k",
            "a b&c=d#e%f",
            "ü<>\"'",
            "",
        ] {
            let encoded = encode_component(value);
            assert!(
                encoded
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b))
            );
            assert_eq!(decode_component(&encoded).as_deref(), Ok(value));
        }
    }

    fn paging_of(query: &str) -> Result<PageRequest, String> {
        paging(&Params::parse(Some(query))).map_err(|e| e.to_string())
    }

    #[test]
    fn limits_and_offsets() {
        assert_eq!(paging_of("").unwrap().limit, 100);
        assert_eq!(paging_of("limit=1000").unwrap().limit, 1000);
        for bad in [
            "limit=0",
            "limit=1001",
            "limit=-1",
            "limit=1.5",
            "limit=",
            "limit=ten",
            "limit=+5",
        ] {
            assert!(paging_of(bad).unwrap_err().starts_with("limit:"), "{bad}");
        }
        assert_eq!(paging_of("offset=7").unwrap().offset, 7);
        for bad in ["offset=-1", "offset=x", "offset=99999999999999999999999"] {
            assert!(paging_of(bad).unwrap_err().starts_with("offset:"), "{bad}");
        }
        assert!(
            paging_of("limit=5&limit=6")
                .unwrap_err()
                .contains("more than once")
        );
    }

    #[test]
    fn values_must_be_percent_encoded_utf8() {
        let params = Params::parse(Some("a=x%20y+z&b=%C3%A9&c=%zz&d=%ff&e=a%00b&f=%4&g&%zz=1"));
        assert_eq!(params.get("a").unwrap(), Some("x y z"));
        assert_eq!(params.get("b").unwrap(), Some("é"));
        assert_eq!(params.get("e").unwrap(), Some("a\0b"));
        assert_eq!(params.get("g").unwrap(), Some(""));
        for name in ["c", "d", "f"] {
            let error = params.get(name).unwrap_err().to_string();
            assert!(error.starts_with(&format!("{name}: ")), "{error}");
        }
        assert!(paging_of("limit=%ff").unwrap_err().starts_with("limit:"));
    }

    #[test]
    fn cursors_round_trip_and_refuse_offset() {
        let cursor = encode_cursor("at://did:plc:a/dev.svc.bounty/1");
        assert_eq!(
            paging_of(&format!("cursor={cursor}"))
                .unwrap()
                .after
                .as_deref(),
            Some("at://did:plc:a/dev.svc.bounty/1")
        );
        assert_eq!(
            paging_of(&format!("cursor={cursor}&offset=0"))
                .unwrap()
                .after
                .as_deref(),
            Some("at://did:plc:a/dev.svc.bounty/1")
        );
        assert!(
            paging_of(&format!("offset=1&cursor={cursor}"))
                .unwrap_err()
                .contains("offset")
        );
        assert!(paging_of("cursor=!!").unwrap_err().starts_with("cursor:"));
    }

    #[test]
    fn a_parameter_the_query_does_not_take_is_named_with_the_nearest() {
        let known = ["source_uri", "limit", "offset", "cursor"];
        let refused = |raw: &str| match Params::parse(Some(raw)).only(&known) {
            Err(ApiError::InvalidRequest(message)) => message,
            other => panic!("{raw}: {other:?}"),
        };
        assert!(
            Params::parse(Some("source_uri=x&limit=3"))
                .only(&known)
                .is_ok()
        );
        assert!(refused("source_url=x").contains("did you mean source_uri?"));
        assert!(refused("limt=3").contains("did you mean limit?"));
        assert!(refused("zzz=1").contains("it takes source_uri, limit, offset, cursor"));
        assert!(refused("%zz=1").contains("\"%zz\""));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
