//! An author's signing key, on either of atproto's curves.

use super::AuthorError;
use crate::crypto::{Curve, PublicKey};
use sha2::{Digest, Sha256};
use std::fmt;

/// A private key on one of atproto's two curves, signing as atproto asks: ECDSA over SHA-256,
/// deterministic (RFC 6979), compact `r || s` in low-S form.
#[derive(Clone)]
pub enum SigningKey {
    P256(p256::ecdsa::SigningKey),
    K256(k256::ecdsa::SigningKey),
}

impl SigningKey {
    /// The key of a 32-byte secret scalar.
    pub fn from_secret(curve: Curve, secret: &[u8; 32]) -> Result<SigningKey, AuthorError> {
        let invalid = |_| AuthorError::Secret(curve);
        Ok(match curve {
            Curve::P256 => {
                SigningKey::P256(p256::ecdsa::SigningKey::from_slice(secret).map_err(invalid)?)
            }
            Curve::K256 => {
                SigningKey::K256(k256::ecdsa::SigningKey::from_slice(secret).map_err(invalid)?)
            }
        })
    }

    /// The key a seed names, always the same: the secret is a SHA-256 of the seed, so tests
    /// and benchmarks get many distinct real keys with no source of randomness.
    pub fn from_seed(curve: Curve, seed: &[u8]) -> SigningKey {
        let mut attempt = 0u32;
        loop {
            let mut hash = Sha256::new();
            hash.update(b"svc-repo author key\0");
            hash.update(seed);
            hash.update(attempt.to_be_bytes());
            let secret: [u8; 32] = hash.finalize().into();
            // A hash that is zero or not below the order (odds near 2^-128) is hashed again.
            if let Ok(key) = SigningKey::from_secret(curve, &secret) {
                return key;
            }
            attempt = attempt.wrapping_add(1);
        }
    }

    pub fn curve(&self) -> Curve {
        self.public().curve()
    }

    pub fn public(&self) -> PublicKey {
        match self {
            SigningKey::P256(key) => PublicKey::P256(*key.verifying_key()),
            SigningKey::K256(key) => PublicKey::K256(*key.verifying_key()),
        }
    }

    /// The compact low-S signature of the SHA-256 of `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        use k256::ecdsa::signature::Signer as _;
        let bytes = match self {
            SigningKey::P256(key) => {
                let signature: p256::ecdsa::Signature = key.sign(message);
                // P-256 signers give either S; atproto takes only the low one.
                signature.normalize_s().unwrap_or(signature).to_bytes()
            }
            SigningKey::K256(key) => {
                let signature: k256::ecdsa::Signature = key.sign(message);
                signature.normalize_s().unwrap_or(signature).to_bytes()
            }
        };
        let mut out = [0u8; 64];
        out.copy_from_slice(&bytes);
        out
    }
}

/// Shows the public key only: a secret has no place in a log.
impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SigningKey")
            .field(&self.public().did_key())
            .finish()
    }
}
