//! The atproto string formats judged as the protocol's published interop vectors judge them
//! (`tests/interop/`, CC0): every line of a `valid` file is accepted and every line of an
//! `invalid` one refused.

use svc_syntax::{
    SyntaxError, check_at_uri, check_cid, check_datetime, check_did, check_format, check_handle,
    check_language, check_nsid, check_record_key, check_tid, check_uri,
};

/// The values of a vector file: every line but comments (`#` first) and blank lines, kept
/// byte for byte, since leading and trailing spaces are what some vectors test.
fn values(file: &str) -> Vec<String> {
    let path = format!("{}/tests/interop/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.split('\n')
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Checks `valid` files accepted and `invalid` ones refused, and names every value judged
/// otherwise.
fn judged(check: fn(&str) -> Result<(), SyntaxError>, valid: &[&str], invalid: &[&str]) {
    let mut wrong = Vec::new();
    for file in valid {
        let values = values(file);
        assert!(!values.is_empty(), "{file} holds no value");
        for value in values {
            if let Err(error) = check(&value) {
                wrong.push(format!("{file}: {value:?} refused ({error})"));
            }
        }
    }
    for file in invalid {
        let values = values(file);
        assert!(!values.is_empty(), "{file} holds no value");
        for value in values {
            if check(&value).is_ok() {
                wrong.push(format!("{file}: {value:?} accepted"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn dids() {
    judged(
        check_did,
        &["did_syntax_valid.txt"],
        &["did_syntax_invalid.txt"],
    );
}

#[test]
fn handles() {
    judged(
        check_handle,
        &["handle_syntax_valid.txt"],
        &["handle_syntax_invalid.txt"],
    );
}

#[test]
fn at_identifiers() {
    judged(
        |value| check_format("at-identifier", value),
        &["atidentifier_syntax_valid.txt"],
        &["atidentifier_syntax_invalid.txt"],
    );
}

#[test]
fn nsids() {
    judged(
        check_nsid,
        &["nsid_syntax_valid.txt"],
        &["nsid_syntax_invalid.txt"],
    );
}

/// The vectors describe the lexicon `at-uri` format: a record's address, with the length
/// limits of its parts, and no query or fragment.
#[test]
fn at_uris() {
    judged(
        |value| check_at_uri(value).map(|_| ()),
        &["aturi_syntax_valid.txt"],
        &["aturi_syntax_invalid.txt"],
    );
    judged(
        |value| check_format("at-uri", value),
        &["aturi_syntax_valid.txt"],
        &["aturi_syntax_invalid.txt"],
    );
}

#[test]
fn record_keys() {
    judged(
        check_record_key,
        &["recordkey_syntax_valid.txt"],
        &["recordkey_syntax_invalid.txt"],
    );
}

#[test]
fn tids() {
    judged(
        check_tid,
        &["tid_syntax_valid.txt"],
        &["tid_syntax_invalid.txt"],
    );
}

/// A datetime must also name a real instant: the `parse_invalid` values have the shape but
/// not the meaning (month zero, minute 99, a time before year 0).
#[test]
fn datetimes() {
    judged(
        check_datetime,
        &["datetime_syntax_valid.txt"],
        &["datetime_syntax_invalid.txt", "datetime_parse_invalid.txt"],
    );
}

#[test]
fn cids() {
    judged(
        check_cid,
        &["cid_syntax_valid.txt"],
        &["cid_syntax_invalid.txt"],
    );
}

#[test]
fn languages() {
    judged(
        check_language,
        &["language_syntax_valid.txt"],
        &["language_syntax_invalid.txt", "language_parse_invalid.txt"],
    );
}

#[test]
fn uris() {
    judged(
        check_uri,
        &["uri_syntax_valid.txt"],
        &["uri_syntax_invalid.txt"],
    );
}
