//! CAR v1 files, as a `#commit` frame's `blocks` carries a slice of a repository and
//! `com.atproto.sync.getRepo` a whole one: a DAG-CBOR header naming the roots, then blocks of
//! `varint(length) CID data`. Only CIDv1 appears in atproto repositories.

use crate::crypto::push_varint;
use crate::dagcbor::{Blocks, Cbor, CborError, CidBytes, decode_block, encode};
use std::collections::HashMap;

/// The varint at the front of `input`, read as multiformats reads them
/// ([`svc_syntax::varint`]); `input` moves past it.
fn varint(input: &mut &[u8]) -> Result<u64, CborError> {
    let (value, rest) = svc_syntax::varint(input)
        .ok_or_else(|| CborError("CAR: a varint truncated or over 9 bytes".into()))?;
    *input = rest;
    Ok(value)
}

/// The length of the CIDv1 at the front of `input`.
fn cid_length(input: &[u8]) -> Result<usize, CborError> {
    let mut rest = input;
    let version = varint(&mut rest)?;
    if version != 1 {
        return Err(CborError(format!(
            "CAR: CID version {version} is not supported"
        )));
    }
    let _codec = varint(&mut rest)?;
    let _hash = varint(&mut rest)?;
    let digest = usize::try_from(varint(&mut rest)?)
        .map_err(|_| CborError("CAR: digest too long".into()))?;
    if rest.len() < digest {
        return Err(CborError("CAR: truncated CID".into()));
    }
    Ok(input.len() - rest.len() + digest)
}

/// Every block of a CAR slice, by binary CID.
pub fn blocks(car: &[u8]) -> Result<Blocks, CborError> {
    Ok(read(car)?.1)
}

/// The roots a CAR's header names (binary CIDs), and every block by binary CID.
pub fn read(car: &[u8]) -> Result<(Vec<CidBytes>, Blocks), CborError> {
    read_at_most(car, usize::MAX)
}

/// [`read`], refusing a CAR of more than `max_blocks` blocks before holding more.
pub fn read_at_most(car: &[u8], max_blocks: usize) -> Result<(Vec<CidBytes>, Blocks), CborError> {
    let mut rest = car;
    let header = usize::try_from(varint(&mut rest)?)
        .map_err(|_| CborError("CAR: header too long".into()))?;
    if rest.len() < header {
        return Err(CborError("CAR: truncated header".into()));
    }
    let roots = roots(&rest[..header])?;
    rest = &rest[header..];
    let mut found = HashMap::new();
    while !rest.is_empty() {
        let length = usize::try_from(varint(&mut rest)?)
            .map_err(|_| CborError("CAR: block too long".into()))?;
        if rest.len() < length {
            return Err(CborError("CAR: truncated block".into()));
        }
        let (block, after) = rest.split_at(length);
        if found.len() >= max_blocks {
            return Err(CborError(format!(
                "CAR: more than {max_blocks} blocks, the most read of one"
            )));
        }
        let cid = cid_length(block)?;
        found.insert(CidBytes::from(&block[..cid]), block[cid..].to_vec());
        rest = after;
    }
    Ok((roots, found))
}

/// The `roots` of a CAR header (`{version: 1, roots: [link...]}`); none when it names none.
fn roots(header: &[u8]) -> Result<Vec<CidBytes>, CborError> {
    let header = decode_block(header)?;
    let links = header
        .get("roots")
        .and_then(Cbor::as_array)
        .unwrap_or_default();
    links
        .iter()
        .map(|link| {
            link.as_link()
                .map(CidBytes::from)
                .ok_or_else(|| CborError("CAR: a root is not a link".into()))
        })
        .collect()
}

/// A CAR v1 naming `roots`, of `blocks` (CID, data) in the order given: a reader that streams
/// a repository wants the commit first, then what it links to.
pub fn write<'a>(
    roots: &[CidBytes],
    blocks: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<Vec<u8>, CborError> {
    let header = encode(&Cbor::Map(vec![
        ("version".into(), Cbor::Integer(1)),
        (
            "roots".into(),
            Cbor::Array(roots.iter().cloned().map(Cbor::Link).collect()),
        ),
    ]))?;
    let mut out = Vec::new();
    push_varint(&mut out, header.len() as u64);
    out.extend_from_slice(&header);
    for (cid, data) in blocks {
        push_varint(&mut out, (cid.len() + data.len()) as u64);
        out.extend_from_slice(cid);
        out.extend_from_slice(data);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_blocks_by_cid() {
        let cid = [0x01, 0x71, 0x12, 0x02, 0xaa, 0xbb];
        let data = [0xa0];
        let mut car = vec![0x01, 0xa0]; // header: an empty map
        car.push((cid.len() + data.len()) as u8);
        car.extend_from_slice(&cid);
        car.extend_from_slice(&data);
        let blocks = blocks(&car).unwrap();
        assert_eq!(blocks.get(&cid[..]), Some(&vec![0xa0]));
        assert!(super::blocks(&car[..car.len() - 1]).is_err());
    }

    #[test]
    fn what_is_written_reads_back() {
        let root = crate::dagcbor::cid_of(&[0xa0]);
        // Long enough that its length needs two varint bytes.
        let big = vec![0x41; 300];
        let other = crate::dagcbor::cid_of(&big);
        let car = write(
            std::slice::from_ref(&root),
            [(&root[..], &[0xa0][..]), (&other[..], &big[..])],
        )
        .unwrap();
        let (roots, blocks) = read(&car).unwrap();
        assert_eq!(roots, std::slice::from_ref(&root));
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[&root], [0xa0]);
        assert_eq!(blocks[&other], big);
    }
}
