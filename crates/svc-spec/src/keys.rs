//! Index keys: at write time, each query extracts from a record the keys under which the record
//! matches; a request looks its bound parameters up as one key. `matches` is the same filter
//! evaluated directly, the reference the index is tested against.

use crate::index::{Bound, Condition, Index, Test, strings_at};
use std::borrow::Cow;
use svc_json::Json;

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
fn keys_of_tuples(choices: &[Vec<Option<Cow<str>>>]) -> Vec<String> {
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

fn guard_holds(condition: &Condition, record: &Json) -> bool {
    match &condition.test {
        Test::Equals {
            bound: Bound::Const(constant),
            fold_case,
        } => strings_at(&condition.path, record).any(|s| fold(s, *fold_case) == *constant),
        Test::Equals {
            bound: Bound::Param(_),
            ..
        } => true,
        Test::OneOf { values, or_absent } => {
            let found = condition.path.values(record);
            if found.is_empty() {
                *or_absent
            } else {
                found
                    .iter()
                    .filter_map(|v| v.as_str())
                    .any(|s| values.iter().any(|v| v == s))
            }
        }
        Test::Present => condition.path.values(record).iter().any(|v| match v {
            Json::Null => false,
            Json::String(s) => !s.is_empty(),
            Json::Object(map) => !map.is_empty(),
            Json::Array(elements) => !elements.is_empty(),
            _ => true,
        }),
    }
}

impl Index {
    /// The keys under which `record` (of this query's kind) matches, sorted and distinct.
    pub fn index_keys(&self, record: &Json) -> Vec<String> {
        if !self.conditions.iter().all(|c| guard_holds(c, record)) {
            return Vec::new();
        }
        let mut choices: Vec<Vec<Option<Cow<str>>>> = Vec::with_capacity(self.params().len());
        for (index, (param, &condition)) in
            self.params().iter().zip(&self.param_conditions).enumerate()
        {
            let condition = &self.conditions[condition];
            let fold_case = self.folds_case(index);
            let mut values: Vec<Option<Cow<str>>> = strings_at(&condition.path, record)
                .map(|s| Some(fold(s, fold_case)))
                .collect();
            values.sort();
            values.dedup();
            if !param.required {
                values.insert(0, None);
            }
            if values.is_empty() {
                return Vec::new();
            }
            choices.push(values);
        }
        let mut keys = keys_of_tuples(&choices);
        keys.sort();
        keys.dedup();
        keys
    }

    /// Evaluates the filter on one record directly, with bound parameter values.
    pub fn matches(&self, record: &Json, args: &[Option<&str>]) -> bool {
        self.conditions
            .iter()
            .all(|condition| match &condition.test {
                Test::Equals {
                    bound: Bound::Param(i),
                    fold_case,
                } => match args.get(*i).copied().flatten() {
                    None => true,
                    Some(wanted) => {
                        let wanted = fold(wanted, *fold_case);
                        strings_at(&condition.path, record).any(|s| fold(s, *fold_case) == wanted)
                    }
                },
                _ => guard_holds(condition, record),
            })
    }
}
