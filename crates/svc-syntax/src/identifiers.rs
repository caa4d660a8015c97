use crate::SyntaxError;

/// `did:<method>:<identifier>`; no per-method rule (so `did:plc:alice` is a DID).
pub fn check_did(value: &str) -> Result<(), SyntaxError> {
    let err = || SyntaxError::new("did");
    if value.len() > 2048 {
        return Err(err());
    }
    let rest = value.strip_prefix("did:").ok_or_else(err)?;
    let (method, identifier) = rest.split_once(':').ok_or_else(err)?;
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_lowercase()) {
        return Err(err());
    }
    let identifier_ok = !identifier.is_empty()
        && identifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'%' | b'-'))
        && !identifier.ends_with([':', '%']);
    if identifier_ok { Ok(()) } else { Err(err()) }
}

/// A domain name of at least two labels whose last label does not start with a digit.
pub fn check_handle(value: &str) -> Result<(), SyntaxError> {
    if value.len() > 253 {
        return Err(SyntaxError::new("handle"));
    }
    handle_shape(value)
}

/// A handle's grammar, whatever its total length.
fn handle_shape(value: &str) -> Result<(), SyntaxError> {
    let err = || SyntaxError::new("handle");
    let (_, tld) = value.rsplit_once('.').ok_or_else(err)?;
    if !value.split('.').all(dns_label) {
        return Err(err());
    }
    match tld.bytes().next() {
        Some(first) if first.is_ascii_alphabetic() => Ok(()),
        _ => Err(err()),
    }
}

/// One label of a domain name: 1-63 ASCII letters, digits or hyphens, no hyphen at either end.
fn dns_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

/// Reversed domain authority plus a name segment: `dev.svc.bounty`.
pub fn check_nsid(value: &str) -> Result<(), SyntaxError> {
    if value.len() > 317 {
        return Err(SyntaxError::new("nsid"));
    }
    nsid_shape(value)
}

/// An NSID's grammar, whatever its total length.
fn nsid_shape(value: &str) -> Result<(), SyntaxError> {
    let err = || SyntaxError::new("nsid");
    // At least two authority segments before the name.
    let (authority, name) = value.rsplit_once('.').ok_or_else(err)?;
    if !authority.contains('.') || !authority.split('.').all(dns_label) {
        return Err(err());
    }
    if authority.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
        return Err(err());
    }
    let name_ok = name.len() <= 63
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && name.bytes().all(|b| b.is_ascii_alphanumeric());
    if name_ok { Ok(()) } else { Err(err()) }
}

/// 1-512 characters of `[A-Za-z0-9._:~-]`, never `.` or `..`.
pub fn check_record_key(value: &str) -> Result<(), SyntaxError> {
    let ok = !value.is_empty()
        && value.len() <= 512
        && value != "."
        && value != ".."
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'~' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(SyntaxError::new("record-key"))
    }
}

/// The parts of an AT-URI: `at://<authority>[/<collection>[/<rkey>]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtUriParts<'a> {
    /// A DID or a handle.
    pub authority: &'a str,
    pub collection: Option<&'a str>,
    pub rkey: Option<&'a str>,
}

/// The atproto AT-URI syntax: a DID or handle authority, then optionally an NSID collection and
/// a record key. Query strings and fragments are not part of a record's address and are refused.
pub fn check_at_uri(value: &str) -> Result<AtUriParts<'_>, SyntaxError> {
    if value.len() > 8192 {
        return Err(SyntaxError::new("at-uri"));
    }
    at_uri_parts(value, true)
}

/// The AT-URI grammar without the total-length limits of its handle (253) and NSID (317):
/// exactly what a regular expression can state, for query parameters an API document
/// describes by pattern. Such a value can name no stored record, so it finds nothing.
pub fn check_at_uri_grammar(value: &str) -> Result<AtUriParts<'_>, SyntaxError> {
    at_uri_parts(value, false)
}

/// The authority of an AT-URI checked when it was stored, without checking it again: what
/// follows `at://`, up to the next `/`. `None` when `value` does not begin with `at://`.
pub fn at_uri_authority(value: &str) -> Option<&str> {
    let rest = value.strip_prefix("at://")?;
    // Nearly every authority is a did:plc, whose identifier is 24 characters long: its end is
    // known without a search.
    const PLC_LEN: usize = "did:plc:".len() + 24;
    if rest.starts_with("did:plc:") && rest.as_bytes().get(PLC_LEN) == Some(&b'/') {
        return Some(&rest[..PLC_LEN]);
    }
    let end = rest.bytes().position(|b| b == b'/').unwrap_or(rest.len());
    Some(&rest[..end])
}

fn at_uri_parts(value: &str, part_limits: bool) -> Result<AtUriParts<'_>, SyntaxError> {
    let err = || SyntaxError::new("at-uri");
    let rest = value.strip_prefix("at://").ok_or_else(err)?;
    let mut parts = rest.split('/');
    let authority = parts.next().ok_or_else(err)?;
    let handle = if part_limits {
        check_handle
    } else {
        handle_shape
    };
    if check_did(authority).is_err() && handle(authority).is_err() {
        return Err(err());
    }
    let collection = parts.next();
    if let Some(nsid) = collection {
        let nsid_ok = if part_limits { check_nsid } else { nsid_shape };
        nsid_ok(nsid).map_err(|_| err())?;
    }
    let rkey = parts.next();
    if let Some(key) = rkey {
        check_record_key(key).map_err(|_| err())?;
    }
    if parts.next().is_some() {
        return Err(err());
    }
    Ok(AtUriParts {
        authority,
        collection,
        rkey,
    })
}

/// The lexicon `cid` format is a syntax check only: 8-256 characters of `[A-Za-z0-9+=]`, but
/// not a CIDv0 (`Qm` and base58btc), which this version of atproto does not use.
pub fn check_cid(value: &str) -> Result<(), SyntaxError> {
    let ok = (8..=256).contains(&value.len())
        && !value.starts_with("Qm")
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'=');
    if ok {
        Ok(())
    } else {
        Err(SyntaxError::new("cid"))
    }
}

/// A BCP 47 tag, checked for shape: a 2-3 lowercase letter primary language (or `i` for
/// grandfathered tags, `x` or `X` for private use), then subtags of 1-8 letters or digits; no
/// variant and no extension singleton twice, in any case (RFC 5646 §4.1).
pub fn check_language(value: &str) -> Result<(), SyntaxError> {
    let err = || SyntaxError::new("language");
    let mut subtags = value.split('-');
    let primary = subtags.next().ok_or_else(err)?;
    let private_use = matches!(primary, "x" | "X");
    let primary_ok = primary == "i"
        || private_use
        || ((2..=3).contains(&primary.len()) && primary.bytes().all(|b| b.is_ascii_lowercase()));
    if !primary_ok {
        return Err(err());
    }
    // Variants stand before the first singleton, extensions after it, and everything after
    // `x` is private use, where repeats mean nothing.
    let (mut seen, mut in_extensions, mut checking) = (Vec::new(), false, !private_use);
    for subtag in subtags {
        if subtag.is_empty()
            || subtag.len() > 8
            || !subtag.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return Err(err());
        }
        if !checking {
            continue;
        }
        let singleton = subtag.len() == 1;
        if singleton && subtag.eq_ignore_ascii_case("x") {
            checking = false;
            continue;
        }
        in_extensions |= singleton;
        let variant = !in_extensions
            && (subtag.len() >= 5 || (subtag.len() == 4 && subtag.as_bytes()[0].is_ascii_digit()));
        if singleton || variant {
            let folded = subtag.to_ascii_lowercase();
            if seen.contains(&folded) {
                return Err(err());
            }
            seen.push(folded);
        }
    }
    Ok(())
}

/// A URI with a scheme and something after the colon, without whitespace.
pub fn check_uri(value: &str) -> Result<(), SyntaxError> {
    let err = || SyntaxError::new("uri");
    if value.len() > 8192 {
        return Err(err());
    }
    let (scheme, rest) = value.split_once(':').ok_or_else(err)?;
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-'));
    let rest_ok = !rest.is_empty() && !rest.chars().any(char::is_whitespace);
    if scheme_ok && rest_ok {
        Ok(())
    } else {
        Err(err())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_uris_authority_is_read_without_parsing_the_rest() {
        let authority = at_uri_authority;
        assert_eq!(
            authority("at://did:plc:a/dev.svc.bounty/3l"),
            Some("did:plc:a")
        );
        let plc = "did:plc:z72i7hdynmk6r22z27h6tvur";
        assert_eq!(
            authority(&format!("at://{plc}/dev.svc.bounty/3l")),
            Some(plc)
        );
        assert_eq!(authority(&format!("at://{plc}")), Some(plc));
        assert_eq!(
            authority(&format!("at://{plc}x/c/r")),
            Some(&*format!("{plc}x"))
        );
        assert_eq!(
            authority("at://did:web:example.com/c/r"),
            Some("did:web:example.com")
        );
        assert_eq!(authority("at://did:plc:a"), Some("did:plc:a"));
        assert_eq!(authority("at://"), Some(""));
        assert_eq!(authority("did:plc:a/dev.svc.bounty/3l"), None);
        assert_eq!(authority(""), None);
    }

    #[test]
    fn dids() {
        for ok in [
            "did:plc:alice",
            "did:web:example.com",
            "did:plc:z72i7hdynmk6r22z27h6tvur",
            "did:web:localhost%3A8080",
        ] {
            assert!(check_did(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "did:",
            "did:plc",
            "did:plc:",
            "did:PLC:x",
            "plc:x",
            "did:plc:a b",
            "did:plc:x:",
            "did:plc:x%",
        ] {
            assert!(check_did(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn handles() {
        for ok in [
            "alice.test",
            "a.b.example.com",
            "xn--ls8h.test",
            "a-b.c0.io",
        ] {
            assert!(check_handle(ok).is_ok(), "{ok}");
        }
        for bad in [
            "alice", "alice.", ".test", "-a.test", "a-.test", "a.1com", "a_b.test", "a..b",
        ] {
            assert!(check_handle(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn nsids() {
        for ok in [
            "dev.svc.bounty",
            "com.atproto.repo.getRecord",
            "dev.svc.deliberationVote",
        ] {
            assert!(check_nsid(ok).is_ok(), "{ok}");
        }
        for bad in [
            "dev.svc",
            "dev..bounty",
            "dev.svc.1bounty",
            "dev.svc.bo-unty",
            "1dev.svc.x",
            "dev.svc.b#x",
        ] {
            assert!(check_nsid(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn at_uris() {
        let parsed = check_at_uri("at://did:plc:x/dev.svc.bounty/1").unwrap();
        assert_eq!(parsed.authority, "did:plc:x");
        assert_eq!(parsed.collection, Some("dev.svc.bounty"));
        assert_eq!(parsed.rkey, Some("1"));
        for ok in [
            "at://alice.test/dev.svc.bounty/3kabc",
            "at://did:plc:x",
            "at://did:plc:x/dev.svc.bounty",
        ] {
            assert!(check_at_uri(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "https://x.test/a",
            "at://",
            "at://nothandle/dev.svc.bounty/1",
            "at://did:plc:x/notnsid/1",
            "at://did:plc:x/dev.svc.bounty/a b",
            "at://did:plc:x/dev.svc.bounty/1/extra",
            "at://did:plc:x/dev.svc.bounty/",
        ] {
            assert!(check_at_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn record_keys() {
        assert!(check_record_key("3jzfcijpj2z2a").is_ok());
        assert!(check_record_key("self").is_ok());
        for bad in ["", ".", "..", "a/b", "a b"] {
            assert!(check_record_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cids_languages_uris() {
        assert!(check_cid("bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm").is_ok());
        assert!(check_cid("short").is_err());
        assert!(check_cid("bafy reie5737gdxlw5i64").is_err());
        for ok in ["en", "en-US", "zh-Hant-TW", "i-klingon", "x-private"] {
            assert!(check_language(ok).is_ok(), "{ok}");
        }
        for bad in ["", "english", "e", "en-", "en_US"] {
            assert!(check_language(bad).is_err(), "{bad}");
        }
        for ok in ["https://example.com/x", "at://did:plc:x", "urn:isbn:1"] {
            assert!(check_uri(ok).is_ok(), "{ok}");
        }
        for bad in ["", "nocolon", ":x", "https://a b", "1http://x"] {
            assert!(check_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn error_names_the_format() {
        assert_eq!(check_at_uri("x").unwrap_err().to_string(), "not an at-uri");
        assert_eq!(check_did("x").unwrap_err().to_string(), "not a did");
    }
}
