//! Index keys: at write time, each query extracts from a record the keys under which the record
//! matches; a request looks its bound parameters up as one key. `matches` is the same filter
//! evaluated directly, the reference the index is tested against.

use std::borrow::Cow;

/// More keys than this from one record for one query means a pathological record (the
/// lexicons bound every array well below it); its extra keys are not indexed.
const MAX_KEYS_PER_RECORD: usize = 4096;

/// The longest key stored as it is. Record strings and at-uris may be kilobytes long, and a
/// PostgreSQL B-tree entry holds at most about 2.7 KB; a longer key is stored as its digest.
pub const MAX_PLAIN_KEY_BYTES: usize = 512;

/// What starts a digest key; a plain key starts with a digit or `-`, or is empty, so no
/// plain key is ever taken for a digest.
const DIGEST_MARK: char = '#';

/// Which way keys are drawn and written; part of every query's fingerprint, so that a
/// catalog filed the older way rebuilds its keys at start.
pub(crate) const KEY_FORMAT: u32 = 2;

/// Encodes parameter values as one key: each present value as `<byte length>:<value>`, each
/// absent optional one as `-`. Length prefixes keep any two different tuples apart. A key
/// longer than [`MAX_PLAIN_KEY_BYTES`] or holding a NUL (which PostgreSQL's text cannot hold)
/// becomes `#` and the hex SHA-256 of it: keys are only ever compared for equality, so both
/// engines store, find and count every value the record grammar allows, alike.
pub fn encode_key(parts: &[Option<&str>]) -> String {
    storable(plain_key(parts))
}

/// What every plain key whose first value is `first` begins with (an index's keys read in
/// order from it are those of one first value). A key whose whole is over
/// [`MAX_PLAIN_KEY_BYTES`] is a digest and begins with no prefix.
pub fn key_prefix(first: &str) -> String {
    plain_key(&[Some(first)])
}

/// The first text past every key that begins with `prefix` (made of whole values, as
/// [`key_prefix`] makes it), so that such keys are read as one range: each value is written
/// as `<length>:<value>` or `-`, so what follows whole values is a digit or `-`, both below `:`.
pub fn prefix_end(prefix: &str) -> String {
    format!("{prefix}:")
}

/// The values of a plain key, in order (`None` for an absent one); `None` for a digest key,
/// whose values cannot be read back, or for text that is no key.
pub fn decode_key(key: &str) -> Option<Vec<Option<&str>>> {
    let mut parts = Vec::new();
    let mut rest = key;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('-') {
            parts.push(None);
            rest = after;
            continue;
        }
        let (length, after) = rest.split_once(':')?;
        if length.is_empty() || !length.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let length: usize = length.parse().ok()?;
        let value = after.get(..length)?;
        parts.push(Some(value));
        rest = &after[length..];
    }
    Some(parts)
}

fn storable(key: String) -> String {
    if key.len() <= MAX_PLAIN_KEY_BYTES && !key.as_bytes().contains(&0) {
        return key;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let mut out = String::with_capacity(1 + 2 * digest.len());
    out.push(DIGEST_MARK);
    for byte in digest {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 15)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn plain_key(parts: &[Option<&str>]) -> String {
    let room = parts.iter().map(|p| p.map_or(1, |v| v.len() + 4)).sum();
    let mut key = String::with_capacity(room);
    for part in parts {
        match part {
            Some(value) => {
                push_decimal(&mut key, value.len());
                key.push(':');
                key.push_str(value);
            }
            None => key.push('-'),
        }
    }
    key
}

/// Appends `n` in decimal. Every key of every record passes here; through the formatter
/// (`write!`) the import's reader took about a sixth longer over the keys.
fn push_decimal(out: &mut String, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[start..].iter().map(|d| char::from(*d)));
}

/// The value as compared: ASCII letters lowered where the parameter folds case. Borrowed
/// where nothing changes, as for most values.
pub(crate) fn fold(value: &str, fold_case: bool) -> Cow<'_, str> {
    if fold_case && value.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(value.to_ascii_lowercase())
    } else {
        Cow::Borrowed(value)
    }
}

/// The key of every tuple of one value per parameter (the last parameter's turning fastest),
/// the first `MAX_KEYS_PER_RECORD` of them; no parameters: one empty tuple, whose key is "".
pub(crate) fn keys_of_tuples(choices: &[Vec<Option<Cow<str>>>]) -> Vec<String> {
    let mut keys = Vec::new();
    let mut chosen = vec![0; choices.len()];
    let mut tuple: Vec<Option<&str>> = Vec::with_capacity(choices.len());
    while keys.len() < MAX_KEYS_PER_RECORD {
        tuple.clear();
        tuple.extend(
            choices
                .iter()
                .zip(&chosen)
                .map(|(values, &at)| values[at].as_deref()),
        );
        keys.push(encode_key(&tuple));
        let Some(turned) = (0..choices.len())
            .rev()
            .find(|&p| chosen[p] + 1 < choices[p].len())
        else {
            break;
        };
        chosen[turned] += 1;
        chosen[turned + 1..].fill(0);
    }
    keys
}

#[cfg(test)]
mod decoding {
    use super::*;

    #[test]
    fn plain_keys_read_back_as_their_values_and_digests_do_not() {
        let parts = [Some("at://a/b/1"), None, Some("x:y:1"), Some("")];
        let key = encode_key(&parts);
        assert_eq!(decode_key(&key), Some(parts.to_vec()));
        assert!(key.starts_with(&key_prefix("at://a/b/1")));
        assert!(!key.starts_with(&key_prefix("at://a/b/")));
        let long = "a".repeat(600);
        assert_eq!(decode_key(&encode_key(&[Some(&long)])), None);
        assert_eq!(decode_key("12:short"), None);
        assert_eq!(decode_key("x:1"), None);
        assert_eq!(decode_key(""), Some(vec![]));
    }
}
