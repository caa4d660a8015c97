//! DAG-CBOR, the subset of CBOR the AT Protocol uses for firehose frames and repository
//! blocks: definite lengths, string map keys, tag 42 for CID links. Decoding, and the
//! canonical encoding whose bytes a block's CID is the hash of. Written here because what is
//! needed is small and the IPLD crates that do it bring a deep tree. Turning values into
//! atproto JSON (`$link`, `$bytes`) belongs to the consumers that want JSON.

use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// A CID in its binary form (without the multibase identity prefix), as blocks are keyed and
/// links written: whatever bytes a block or a link held, unlike `svc_syntax::Cid`, the
/// checked text.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CidBytes(Vec<u8>);

impl CidBytes {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for CidBytes {
    fn from(bytes: Vec<u8>) -> CidBytes {
        CidBytes(bytes)
    }
}

impl From<&[u8]> for CidBytes {
    fn from(bytes: &[u8]) -> CidBytes {
        CidBytes(bytes.to_vec())
    }
}

/// Blocks are found by the bytes of a link as it was read.
impl std::borrow::Borrow<[u8]> for CidBytes {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::Deref for CidBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// Blocks by binary CID, as a CAR carries them.
pub type Blocks = HashMap<CidBytes, Vec<u8>>;

#[derive(Debug, Clone, PartialEq)]
pub enum Cbor {
    Null,
    Bool(bool),
    Integer(i128),
    Float(f64),
    Bytes(Vec<u8>),
    Text(String),
    Array(Vec<Cbor>),
    /// Keys in their encoded order.
    Map(Vec<(String, Cbor)>),
    /// A CID, as its binary form (without the multibase identity prefix).
    Link(CidBytes),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DAG-CBOR: {0}")]
pub struct CborError(pub String);

fn fail<T>(message: impl Into<String>) -> Result<T, CborError> {
    Err(CborError(message.into()))
}

const MAX_DEPTH: usize = 64;

/// Decodes one value from the front of `input`; returns it and the bytes after it.
pub fn decode(input: &[u8]) -> Result<(Cbor, &[u8]), CborError> {
    let mut reader = Reader { input, depth: 0 };
    let value = reader.value()?;
    Ok((value, reader.input))
}

struct Reader<'a> {
    input: &'a [u8],
    depth: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CborError> {
        if self.input.len() < n {
            return fail("unexpected end of input");
        }
        let (head, rest) = self.input.split_at(n);
        self.input = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8, CborError> {
        Ok(self.take(1)?[0])
    }

    /// The argument of an initial byte: the value for ints, the length for strings and
    /// containers. Indefinite lengths are not DAG-CBOR.
    fn argument(&mut self, info: u8) -> Result<u64, CborError> {
        Ok(match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.byte()?),
            25 => u64::from(u16::from_be_bytes(
                self.take(2)?
                    .try_into()
                    .map_err(|_| CborError("short".into()))?,
            )),
            26 => u64::from(u32::from_be_bytes(
                self.take(4)?
                    .try_into()
                    .map_err(|_| CborError("short".into()))?,
            )),
            27 => u64::from_be_bytes(
                self.take(8)?
                    .try_into()
                    .map_err(|_| CborError("short".into()))?,
            ),
            _ => return fail(format!("unsupported additional information {info}")),
        })
    }

    fn length(&mut self, info: u8) -> Result<usize, CborError> {
        let n = self.argument(info)?;
        let n = usize::try_from(n).map_err(|_| CborError("length too large".into()))?;
        if n > self.input.len() {
            // Every element takes at least one byte: a larger count cannot be honest.
            return fail("length beyond the end of input");
        }
        Ok(n)
    }

    fn value(&mut self) -> Result<Cbor, CborError> {
        let initial = self.byte()?;
        let (major, info) = (initial >> 5, initial & 0x1f);
        match major {
            0 => Ok(Cbor::Integer(i128::from(self.argument(info)?))),
            1 => Ok(Cbor::Integer(-1 - i128::from(self.argument(info)?))),
            2 => {
                let n = self.length(info)?;
                Ok(Cbor::Bytes(self.take(n)?.to_vec()))
            }
            3 => self.text(info),
            4 => self.array(info),
            5 => self.map(info),
            6 => self.link(info),
            _ => self.simple(info),
        }
    }

    fn text(&mut self, info: u8) -> Result<Cbor, CborError> {
        let n = self.length(info)?;
        let text = std::str::from_utf8(self.take(n)?)
            .map_err(|_| CborError("text is not UTF-8".into()))?;
        Ok(Cbor::Text(text.to_string()))
    }

    fn array(&mut self, info: u8) -> Result<Cbor, CborError> {
        let n = self.length(info)?;
        self.nested(|r| {
            // A declared length is only a claim: grow as elements actually decode.
            let mut items = Vec::with_capacity(n.min(256));
            for _ in 0..n {
                items.push(r.value()?);
            }
            Ok(Cbor::Array(items))
        })
    }

    fn map(&mut self, info: u8) -> Result<Cbor, CborError> {
        let n = self.length(info)?;
        self.nested(|r| {
            let mut entries = Vec::with_capacity(n.min(256));
            for _ in 0..n {
                let Cbor::Text(key) = r.value()? else {
                    return fail("map key is not a string");
                };
                entries.push((key, r.value()?));
            }
            Ok(Cbor::Map(entries))
        })
    }

    /// A tag, of which DAG-CBOR has one: 42, a CID link.
    fn link(&mut self, info: u8) -> Result<Cbor, CborError> {
        let tag = self.argument(info)?;
        if tag != 42 {
            return fail(format!("unsupported tag {tag}"));
        }
        // Through `nested`, so a chain of tags cannot exhaust the stack.
        match self.nested(Self::value)? {
            Cbor::Bytes(bytes) if bytes.first() == Some(&0) => {
                Ok(Cbor::Link(CidBytes::from(&bytes[1..])))
            }
            _ => fail("tag 42 must hold bytes starting with 0x00"),
        }
    }

    /// Major type 7: the simple values and floats DAG-CBOR allows.
    fn simple(&mut self, info: u8) -> Result<Cbor, CborError> {
        match info {
            20 => Ok(Cbor::Bool(false)),
            21 => Ok(Cbor::Bool(true)),
            22 => Ok(Cbor::Null),
            27 => {
                let bits = self.argument(27)?;
                Ok(Cbor::Float(f64::from_bits(bits)))
            }
            _ => fail(format!("unsupported simple value {info}")),
        }
    }

    fn nested(
        &mut self,
        inner: impl FnOnce(&mut Self) -> Result<Cbor, CborError>,
    ) -> Result<Cbor, CborError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return fail("nested too deeply");
        }
        let value = inner(self);
        self.depth -= 1;
        value
    }
}

impl Cbor {
    /// A signed map's entries without its `sig`: what the signature covers (a commit's, a
    /// label's).
    pub fn unsigned(entries: &[(String, Cbor)]) -> Cbor {
        Cbor::Map(
            entries
                .iter()
                .filter(|(key, _)| key != "sig")
                .cloned()
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&Cbor> {
        match self {
            Cbor::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Cbor::Text(text) => Some(text),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Cbor::Integer(n) => i64::try_from(*n).ok(),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Cbor::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Cbor::Bytes(bytes) => Some(bytes),
            _ => None,
        }
    }

    pub fn as_link(&self) -> Option<&[u8]> {
        match self {
            Cbor::Link(cid) => Some(cid),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Cbor]> {
        match self {
            Cbor::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// Decodes a whole block: one value and nothing after it, since trailing bytes would give
/// one value two hashes.
pub fn decode_block(input: &[u8]) -> Result<Cbor, CborError> {
    let (value, rest) = decode(input)?;
    if !rest.is_empty() {
        return fail(format!("{} bytes after the value", rest.len()));
    }
    Ok(value)
}

/// The canonical DAG-CBOR encoding of `value`, the one form whose hash is its CID: shortest
/// argument encodings, map keys ordered length-first then bytewise, floats in 64 bits.
/// Refuses what has no canonical form: duplicate map keys, non-finite floats, integers
/// beyond 64 bits.
pub fn encode(value: &Cbor) -> Result<Vec<u8>, CborError> {
    let mut out = Vec::new();
    encode_into(value, &mut out, 0)?;
    Ok(out)
}

fn head(out: &mut Vec<u8>, major: u8, n: u64) {
    let major = major << 5;
    // The casts are exact: each arm bounds `n` to the width it writes.
    match n {
        0..=23 => out.push(major | n as u8),
        24..=0xff => out.extend([major | 24, n as u8]),
        0x100..=0xffff => {
            out.push(major | 25);
            out.extend((n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(major | 26);
            out.extend((n as u32).to_be_bytes());
        }
        _ => {
            out.push(major | 27);
            out.extend(n.to_be_bytes());
        }
    }
}

fn head_len(out: &mut Vec<u8>, major: u8, len: usize) -> Result<(), CborError> {
    let n = u64::try_from(len).map_err(|_| CborError("length too large".into()))?;
    head(out, major, n);
    Ok(())
}

/// DAG-CBOR's key order: shorter keys first, equal lengths bytewise.
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

fn encode_into(value: &Cbor, out: &mut Vec<u8>, depth: usize) -> Result<(), CborError> {
    if depth > MAX_DEPTH {
        return fail("nested too deeply");
    }
    match value {
        Cbor::Null => out.push(0xf6),
        Cbor::Bool(false) => out.push(0xf4),
        Cbor::Bool(true) => out.push(0xf5),
        Cbor::Integer(n) if *n >= 0 => {
            let n = u64::try_from(*n).map_err(|_| CborError(format!("integer {n} too large")))?;
            head(out, 0, n);
        }
        Cbor::Integer(n) => {
            let n =
                u64::try_from(-1 - *n).map_err(|_| CborError(format!("integer {n} too small")))?;
            head(out, 1, n);
        }
        Cbor::Float(f) if f.is_finite() => {
            out.push(0xfb);
            out.extend(f.to_bits().to_be_bytes());
        }
        Cbor::Float(f) => return fail(format!("float {f} has no DAG-CBOR form")),
        Cbor::Bytes(bytes) => {
            head_len(out, 2, bytes.len())?;
            out.extend_from_slice(bytes);
        }
        Cbor::Text(text) => {
            head_len(out, 3, text.len())?;
            out.extend_from_slice(text.as_bytes());
        }
        Cbor::Array(items) => {
            head_len(out, 4, items.len())?;
            for item in items {
                encode_into(item, out, depth + 1)?;
            }
        }
        Cbor::Map(entries) => {
            let mut sorted: Vec<&(String, Cbor)> = entries.iter().collect();
            sorted.sort_by(|a, b| key_order(&a.0, &b.0));
            if let Some(pair) = sorted.windows(2).find(|pair| pair[0].0 == pair[1].0) {
                return fail(format!("map key {:?} appears twice", pair[0].0));
            }
            head_len(out, 5, sorted.len())?;
            for (key, value) in sorted {
                head_len(out, 3, key.len())?;
                out.extend_from_slice(key.as_bytes());
                encode_into(value, out, depth + 1)?;
            }
        }
        Cbor::Link(cid) => {
            head(out, 6, 42);
            // The identity multibase prefix, which the binary CID in a link carries.
            head_len(out, 2, cid.len() + 1)?;
            out.push(0x00);
            out.extend_from_slice(cid);
        }
    }
    Ok(())
}

/// The prefix of every CID this crate makes: version 1, codec dag-cbor (0x71), multihash
/// sha2-256 (0x12) of 32 bytes.
const CID_PREFIX: [u8; 4] = [0x01, 0x71, 0x12, 0x20];

/// The binary CIDv1 of a DAG-CBOR block: dag-cbor codec, sha2-256 multihash.
pub fn cid_of(block: &[u8]) -> CidBytes {
    let mut cid = CID_PREFIX.to_vec();
    cid.extend_from_slice(&Sha256::digest(block));
    CidBytes(cid)
}

/// Why a block is not the one its CID names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("block {cid}: the CID is not a CIDv1 with a sha2-256 multihash")]
    UnsupportedCid { cid: String },
    #[error("block {cid}: its bytes hash to {actual}")]
    HashMismatch { cid: String, actual: String },
}

/// Checks that `block` hashes to `cid`. Blocks arrive keyed by the CID their sender claims,
/// so the claim is what must be checked before a block is believed. Any codec is taken (a
/// record is dag-cbor, a blob raw), but only sha2-256, the one hash atproto uses.
pub fn check_block(cid: &[u8], block: &[u8]) -> Result<(), BlockError> {
    let unsupported = || BlockError::UnsupportedCid {
        cid: svc_syntax::cid_to_string(cid),
    };
    // Version 1, a one-byte codec (0x55 raw, 0x71 dag-cbor), sha2-256, 32 bytes.
    let [0x01, codec, 0x12, 0x20, digest @ ..] = cid else {
        return Err(unsupported());
    };
    if codec & 0x80 != 0 || digest.len() != 32 {
        return Err(unsupported());
    }
    let actual = Sha256::digest(block);
    if actual[..] != *digest {
        let mut actual_cid = vec![0x01, *codec, 0x12, 0x20];
        actual_cid.extend_from_slice(&actual);
        return Err(BlockError::HashMismatch {
            cid: svc_syntax::cid_to_string(cid),
            actual: svc_syntax::cid_to_string(&actual_cid),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_shapes_of_the_data_model() {
        // {"a": 1, "b": [true, null, -2], "c": h'0102', "d": "hé"}
        let bytes = [
            0xa4, 0x61, b'a', 0x01, 0x61, b'b', 0x83, 0xf5, 0xf6, 0x21, 0x61, b'c', 0x42, 1, 2,
            0x61, b'd', 0x63, b'h', 0xc3, 0xa9,
        ];
        let value = decode_block(&bytes).unwrap();
        assert_eq!(
            value,
            Cbor::Map(vec![
                ("a".into(), Cbor::Integer(1)),
                (
                    "b".into(),
                    Cbor::Array(vec![Cbor::Bool(true), Cbor::Null, Cbor::Integer(-2)])
                ),
                ("c".into(), Cbor::Bytes(vec![1, 2])),
                ("d".into(), Cbor::Text("hé".into())),
            ])
        );
        assert_eq!(encode(&value).unwrap(), bytes, "already canonical");
    }

    #[test]
    fn decodes_links_and_leaves_the_rest() {
        // tag 42 of h'00 01 71 12 02 aa bb', then a trailing 0x01
        let bytes = [
            0xd8, 0x2a, 0x47, 0x00, 0x01, 0x71, 0x12, 0x02, 0xaa, 0xbb, 0x01,
        ];
        let (value, rest) = decode(&bytes).unwrap();
        assert_eq!(
            value,
            Cbor::Link(vec![0x01, 0x71, 0x12, 0x02, 0xaa, 0xbb].into())
        );
        assert_eq!(rest, &[0x01]);
        assert_eq!(encode(&value).unwrap(), &bytes[..bytes.len() - 1]);
        assert!(decode_block(&bytes).is_err(), "a trailing byte");
    }

    #[test]
    fn refuses_what_dag_cbor_does_not_allow() {
        assert!(decode(&[0x9f]).is_err(), "indefinite array");
        assert!(decode(&[0xa1, 0x01, 0x01]).is_err(), "integer map key");
        assert!(decode(&[0xc1, 0x00]).is_err(), "tag other than 42");
        assert!(decode(&[0x62, b'a']).is_err(), "truncated");
        assert!(
            decode(&[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err(),
            "huge length"
        );
        let deep: Vec<u8> = std::iter::repeat_n(0x81, 100).chain([0x00]).collect();
        assert!(decode(&deep).is_err(), "too deep");
        let tags: Vec<u8> = std::iter::repeat_n([0xd8, 0x2a], 100_000)
            .flatten()
            .collect();
        assert!(
            decode(&tags).is_err(),
            "a chain of tags is too deep, not a stack overflow"
        );
        let claim = [0x9a, 0x00, 0x10, 0x00, 0x00, 0x00];
        assert!(decode(&claim).is_err(), "a length claim beyond the input");
    }

    #[test]
    fn encodes_map_keys_length_first_then_bytewise() {
        let value = Cbor::Map(vec![
            ("bb".into(), Cbor::Integer(1)),
            ("a".into(), Cbor::Integer(2)),
            ("ab".into(), Cbor::Integer(3)),
            ("c".into(), Cbor::Integer(4)),
        ]);
        let bytes = encode(&value).unwrap();
        let Cbor::Map(entries) = decode_block(&bytes).unwrap() else {
            panic!("not a map")
        };
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "c", "ab", "bb"]);
        let twice = Cbor::Map(vec![("a".into(), Cbor::Null), ("a".into(), Cbor::Null)]);
        assert!(encode(&twice).is_err());
    }

    #[test]
    fn encodes_integers_in_their_shortest_form() {
        let cases: [(i128, &[u8]); 10] = [
            (0, &[0x00]),
            (23, &[0x17]),
            (24, &[0x18, 24]),
            (255, &[0x18, 0xff]),
            (256, &[0x19, 0x01, 0x00]),
            (65_536, &[0x1a, 0, 1, 0, 0]),
            (1 << 32, &[0x1b, 0, 0, 0, 1, 0, 0, 0, 0]),
            (-1, &[0x20]),
            (-25, &[0x38, 24]),
            (
                -(1 << 64),
                &[0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            ),
        ];
        for (n, bytes) in cases {
            assert_eq!(encode(&Cbor::Integer(n)).unwrap(), bytes, "{n}");
            assert_eq!(decode_block(bytes).unwrap(), Cbor::Integer(n));
        }
        assert!(encode(&Cbor::Integer(1 << 64)).is_err());
        assert!(encode(&Cbor::Integer(-(1 << 64) - 1)).is_err());
    }

    #[test]
    fn round_trips_the_values_repository_blocks_hold() {
        let cid = CidBytes::from(vec![0x01, 0x71, 0x12, 0x20, 7, 7, 7]);
        let value = Cbor::Map(vec![
            ("l".into(), Cbor::Link(cid.clone())),
            (
                "e".into(),
                Cbor::Array(vec![Cbor::Map(vec![
                    ("p".into(), Cbor::Integer(0)),
                    ("k".into(), Cbor::Bytes(b"app.bsky.feed.post/3k".to_vec())),
                    ("v".into(), Cbor::Link(cid)),
                    ("t".into(), Cbor::Null),
                ])]),
            ),
            ("text".into(), Cbor::Text("x".repeat(300))),
            ("ok".into(), Cbor::Bool(false)),
            ("big".into(), Cbor::Bytes(vec![0; 70_000])),
            ("f".into(), Cbor::Float(1.5)),
        ]);
        let bytes = encode(&value).unwrap();
        let again = decode_block(&bytes).unwrap();
        assert_eq!(encode(&again).unwrap(), bytes);
        // Decoding keeps the canonical order, so values compare by their encodings.
        for key in ["l", "e", "text", "ok", "big", "f"] {
            let (Some(before), Some(after)) = (value.get(key), again.get(key)) else {
                panic!("{key} lost")
            };
            assert_eq!(encode(before).unwrap(), encode(after).unwrap(), "{key}");
        }
        assert!(encode(&Cbor::Float(f64::NAN)).is_err());
        let deep = (0..100).fold(Cbor::Null, |inner, _| Cbor::Array(vec![inner]));
        assert!(encode(&deep).is_err(), "too deep");
    }

    #[test]
    fn a_block_hashes_to_its_cid() {
        // The empty MST node, whose CID every empty repository shares.
        let empty = Cbor::Map(vec![
            ("e".into(), Cbor::Array(vec![])),
            ("l".into(), Cbor::Null),
        ]);
        let bytes = encode(&empty).unwrap();
        assert_eq!(bytes, [0xa2, 0x61, b'e', 0x80, 0x61, b'l', 0xf6]);
        let cid = cid_of(&bytes);
        assert_eq!(
            svc_syntax::cid_to_string(&cid),
            "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
        );
        assert_eq!(check_block(&cid, &bytes), Ok(()));
        let error = check_block(&cid, &[0xa0]).unwrap_err();
        assert!(
            matches!(&error, BlockError::HashMismatch { cid: named, .. } if named.starts_with("bafyrei")),
            "{error}"
        );
        assert!(matches!(
            check_block(&cid[..10], &bytes),
            Err(BlockError::UnsupportedCid { .. })
        ));
    }
}
