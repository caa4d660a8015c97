//! Text a JSON answer carries between quotes as it is: printable ASCII without `"` or `\\`.
//! One check of a stored uri or revision stands for both its UTF-8 check and its escaping
//! check (checking them apart was a fifth of an uncached page's instructions).

/// `bytes` as text, when it is printable ASCII other than `"` and `\`: text JSON carries
/// between quotes as it is (checking the UTF-8 and the escaping apart was a fifth of an
/// uncached page's instructions).
pub(crate) fn plain_ascii(bytes: &[u8]) -> Option<&str> {
    if !all_plain(bytes) {
        return None;
    }
    // SAFETY: every byte is below 0x80, and ASCII is valid UTF-8.
    Some(unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// Sixteen bytes at a time, the last sixteen overlapping the ones before, so that no byte is
/// checked alone: uris are 60-70 bytes, revisions 13 (a byte loop, even vectorized by the
/// compiler, spent most of its time on the tails).
#[cfg(target_arch = "x86_64")]
fn all_plain(bytes: &[u8]) -> bool {
    // SAFETY: SSE2 is part of every x86_64 processor.
    unsafe { all_plain_sse2(bytes) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn all_plain_sse2(bytes: &[u8]) -> bool {
    use std::arch::x86_64::{_mm_movemask_epi8, _mm_or_si128, _mm_setzero_si128};
    let mut found = _mm_setzero_si128();
    match bytes.last_chunk::<16>() {
        Some(last) => {
            let (chunks, _) = bytes.as_chunks::<16>();
            for chunk in chunks {
                found = _mm_or_si128(found, outside_plain(chunk));
            }
            found = _mm_or_si128(found, outside_plain(last));
        }
        None => {
            // Under sixteen bytes (a revision is 13): the first eight and the last eight,
            // overlapping; under eight, padded with a plain byte.
            let mut sixteen = [b'a'; 16];
            match (bytes.first_chunk::<8>(), bytes.last_chunk::<8>()) {
                (Some(first), Some(last)) => {
                    sixteen[..8].copy_from_slice(first);
                    sixteen[8..].copy_from_slice(last);
                }
                _ => sixteen[..bytes.len()].copy_from_slice(bytes),
            }
            found = outside_plain(&sixteen);
        }
    }
    _mm_movemask_epi8(found) == 0
}

/// The bytes of `chunk` that are not printable ASCII, or are `"` or `\\`, as all ones.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn outside_plain(chunk: &[u8; 16]) -> std::arch::x86_64::__m128i {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_or_si128, _mm_set1_epi8,
    };
    // SAFETY: an unaligned load of exactly the sixteen bytes of `chunk`.
    let v = unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) };
    // Compared as signed bytes, 0x80 and above are below 0x20 too.
    let control_or_high = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
    let delete = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
    let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
    let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
    _mm_or_si128(
        _mm_or_si128(control_or_high, delete),
        _mm_or_si128(quote, backslash),
    )
}

#[cfg(not(target_arch = "x86_64"))]
fn all_plain(bytes: &[u8]) -> bool {
    // No early exit: the compiler turns the loop into vector instructions.
    let mut outside = 0u8;
    for &byte in bytes {
        outside |= u8::from(!(0x20..0x7f).contains(&byte) | (byte == b'"') | (byte == b'\\'));
    }
    outside == 0
}

#[cfg(test)]
mod tests {
    use super::plain_ascii;

    #[test]
    fn only_printable_ascii_without_quotes_or_backslashes_is_plain() {
        let uri = "at://did:plc:z72i7hdynmk6r22z27h6tvur/dev.svc.bounty/3lqlhxw5rslq4";
        for plain in [
            "",
            "a",
            "3lqlhxw5rwuq4",
            uri,
            &uri[..16],
            &uri[..17],
            &uri[..32],
            " ~",
        ] {
            assert_eq!(plain_ascii(plain.as_bytes()), Some(plain), "{plain:?}");
        }
        for length in [1, 13, 15, 16, 17, 31, 32, 33, 66] {
            for position in [0, length / 2, length - 1] {
                for bad in [b'"', b'\\', 0x00, 0x1f, 0x7f, 0x80, 0xc3, 0xff] {
                    let mut text = uri.as_bytes()[..length].to_vec();
                    text[position] = bad;
                    assert_eq!(
                        plain_ascii(&text),
                        None,
                        "{bad:#x} at {position} of {length}"
                    );
                }
            }
        }
    }
}
