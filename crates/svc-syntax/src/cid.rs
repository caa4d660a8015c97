//! CIDs as strings. Reading: the CID behind a cid-link, which the atproto data model makes a
//! CIDv1: multibase base32 (`b`), base36 (`k`) or base58btc (`z`), then the version, codec and
//! multihash. A bare base58btc CIDv0 (`Qm...`), which `CID.parse` of the JavaScript
//! `multiformats` also takes, is refused. The lexicon `cid` string format, by contrast, is
//! only a syntax check ([`crate::check_cid`]). Writing: a binary CID in the form the network
//! prints it.

/// Whether `text` is a CIDv1: a known multibase, then version, codec and a multihash whose
/// digest has exactly the length it declares, with nothing after it.
pub fn is_cid(text: &str) -> bool {
    let Some(bytes) = (match text.as_bytes().first() {
        Some(b'b') => base32(&text[1..]),
        Some(b'k') => base_x(&text[1..], BASE36),
        Some(b'z') => base_x(&text[1..], BASE58),
        _ => None,
    }) else {
        return false;
    };
    let Some((version, rest)) = varint(&bytes) else {
        return false;
    };
    // A v0 CID (0x12 first) is written without a multibase prefix; 0x12 leads here only then.
    if version != 1 {
        return false;
    }
    let Some((_codec, rest)) = varint(rest) else {
        return false;
    };
    multihash(rest).is_some_and(|(_, rest)| rest.is_empty())
}

/// The string form of a binary CID v1: multibase `b` + lowercase base32 without padding.
pub fn cid_to_string(cid: &[u8]) -> String {
    let mut out = String::with_capacity(1 + cid.len() * 8 / 5 + 1);
    out.push('b');
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &byte in cid {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(BASE32[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(BASE32[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
}

const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
const BASE58: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const BASE36: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// Multibase base58btc text after its `z`: the bytes, or `None` for an empty text or a
/// character outside the alphabet. Public because did:key and multikey strings use it too.
pub fn decode_base58btc(text: &str) -> Option<Vec<u8>> {
    base_x(text, BASE58)
}

/// Bytes as base58btc, without the multibase `z`; each leading zero byte becomes a `1`.
pub fn encode_base58btc(bytes: &[u8]) -> String {
    let zeros = bytes.iter().take_while(|&&b| b == 0).count();
    let mut digits: Vec<u8> = Vec::with_capacity(bytes.len() * 138 / 100 + 1); // little-endian
    for &byte in &bytes[zeros..] {
        let mut carry = u32::from(byte);
        for digit in digits.iter_mut() {
            carry += u32::from(*digit) << 8;
            *digit = (carry % 58) as u8;
            carry /= 58;
        }
        while carry > 0 {
            digits.push((carry % 58) as u8);
            carry /= 58;
        }
    }
    let mut out = String::with_capacity(zeros + digits.len());
    out.extend(std::iter::repeat_n('1', zeros));
    out.extend(
        digits
            .iter()
            .rev()
            .map(|&d| char::from(BASE58[usize::from(d)])),
    );
    out
}

/// A multihash's code and what follows its digest.
fn multihash(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (code, rest) = varint(bytes)?;
    let (len, rest) = varint(rest)?;
    let len = usize::try_from(len).ok()?;
    (rest.len() >= len).then(|| (code, &rest[len..]))
}

/// An unsigned LEB128 varint of at most 9 bytes (63 bits), as multiformats reads them, and
/// the bytes after it. Public because multicodec key prefixes are varints too.
pub fn varint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().enumerate().take(9) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, &bytes[i + 1..]));
        }
    }
    None
}

/// RFC 4648 base32, lowercase, no padding; leftover bits must be fewer than 5 and zero.
fn base32(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 5 / 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = match c {
            b'a'..=b'z' => c - b'a',
            b'2'..=b'7' => c - b'2' + 26,
            _ => return None,
        };
        buffer = (buffer << 5) | u32::from(v);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
        buffer &= (1 << bits) - 1;
    }
    (bits < 5 && buffer == 0).then_some(out)
}

/// A base-x number (base58btc, base36), each leading zero digit standing for a zero byte.
fn base_x(text: &str, alphabet: &[u8]) -> Option<Vec<u8>> {
    if text.is_empty() {
        return None;
    }
    let base = alphabet.len() as u32;
    let zeros = text.bytes().take_while(|&c| c == alphabet[0]).count();
    let mut number: Vec<u8> = Vec::new(); // big-endian magnitude
    for c in text.bytes().skip(zeros) {
        let mut carry = alphabet.iter().position(|&a| a == c)? as u32;
        for byte in number.iter_mut().rev() {
            carry += u32::from(*byte) * base;
            *byte = carry as u8;
            carry >>= 8;
        }
        while carry > 0 {
            number.insert(0, carry as u8);
            carry >>= 8;
        }
    }
    let mut out = vec![0u8; zeros];
    out.extend(number);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base58btc_round_trips_with_leading_zeros() {
        assert_eq!(encode_base58btc(b"Hello World!"), "2NEpo7TZRRrLZSi2U");
        let bytes = [0, 0, 0x28, 0x7f, 0xb4, 0xcd];
        assert_eq!(encode_base58btc(&bytes), "11233QC4");
        assert_eq!(decode_base58btc("11233QC4").as_deref(), Some(&bytes[..]));
        assert_eq!(encode_base58btc(&[]), "");
        assert_eq!(decode_base58btc("0OIl"), None);
    }
}
