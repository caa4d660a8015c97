//! The string formats of the AT Protocol that svc checks: DID, handle, NSID, AT-URI, record key,
//! TID, datetime, CID, language tag and URI. Pure functions, no IO.
//!
//! Each checker returns `Ok(())` or a [`SyntaxError`] naming the format that was expected, so a
//! caller can prefix it with the JSON path or parameter name it was checking.

mod cid;
mod datetime;
mod identifiers;
mod tid;
mod typed;

pub use cid::{cid_to_string, decode_base58btc, encode_base58btc, is_cid, varint};
pub use datetime::{check_datetime, datetime_to_unix_micros, format_unix_micros, now_unix_micros};
pub use identifiers::{
    AtUriParts, at_uri_authority, check_at_uri, check_at_uri_grammar, check_cid, check_did,
    check_handle, check_language, check_nsid, check_record_key, check_uri,
};
pub use tid::{TidGenerator, check_tid};
pub use typed::{
    AtUri, Cid, Did, Handle, Nsid, RecordKey, Tid, UnixMicros, UnixMillis, clock_noise,
};

/// A string that does not have the syntax of the named format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a{article} {format}")]
pub struct SyntaxError {
    /// The format's name as the lexicon spells it (`did`, `at-uri`, `datetime`...).
    pub format: &'static str,
    article: &'static str,
}

impl SyntaxError {
    pub(crate) fn new(format: &'static str) -> Self {
        let article = match format {
            "at-uri" | "at-identifier" | "nsid" => "n",
            _ => "",
        };
        SyntaxError { format, article }
    }
}

/// Checks `value` against a lexicon string format by its lexicon name. Unknown format names
/// are accepted, as the lexicon specification asks of validators meeting a newer format.
pub fn check_format(format: &str, value: &str) -> Result<(), SyntaxError> {
    match format {
        "did" => check_did(value),
        "handle" => check_handle(value),
        "at-identifier" => check_did(value)
            .or_else(|_| check_handle(value))
            .map_err(|_| SyntaxError::new("at-identifier")),
        "nsid" => check_nsid(value),
        "at-uri" => check_at_uri(value).map(|_| ()),
        "record-key" => check_record_key(value),
        "tid" => check_tid(value),
        "datetime" => check_datetime(value),
        "cid" => check_cid(value),
        "language" => check_language(value),
        "uri" => check_uri(value),
        _ => Ok(()),
    }
}
