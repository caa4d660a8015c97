//! A key's place in the tree (its height, and what it shares with the key before it), and
//! keys and CIDs as errors name them.

use sha2::{Digest, Sha256};

/// The height of `key` in the tree: leading zero bits of its SHA-256, counted in 2-bit
/// chunks.
pub fn key_height(key: &[u8]) -> u32 {
    let mut zeros = 0;
    for byte in Sha256::digest(key) {
        zeros += byte.leading_zeros();
        if byte != 0 {
            break;
        }
    }
    zeros / 2
}

/// The number of leading bytes `a` and `b` share: how much of a key prefix compression
/// takes from the entry before it.
pub fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

pub(super) fn key_text(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

pub(super) fn cid_text(cid: &[u8]) -> String {
    svc_syntax::cid_to_string(cid)
}
