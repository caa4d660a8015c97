//! Signing keys and signatures as atproto uses them. Two curves: P-256 (`ES256`) and
//! K-256, also called secp256k1 (`ES256K`). A public key travels as a `did:key`, as the
//! `publicKeyMultibase` of a DID document's `Multikey` verification method (both: base58btc
//! multibase of a multicodec varint and the compressed 33-byte SEC1 point), or, in older DID
//! documents, as the multibase of the bare point with the curve named by the method's type.
//!
//! A signature is the 64-byte `r || s` of ECDSA over the SHA-256 of the message, and only its
//! low-S form counts: both forms verify mathematically, so accepting both would let anyone
//! turn one valid signed commit into a second with different bytes.

use std::fmt;

use k256::ecdsa::signature::Verifier as _;

/// The `did:key` method prefix, before the multibase key.
const DID_KEY_PREFIX: &str = "did:key:";

/// One of the two curves atproto signs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Curve {
    /// NIST P-256 (secp256r1), JWT algorithm `ES256`.
    P256,
    /// secp256k1, JWT algorithm `ES256K`.
    K256,
}

impl Curve {
    /// The multicodec code that prefixes this curve's compressed public keys.
    pub fn multicodec(self) -> u64 {
        match self {
            Curve::P256 => 0x1200,
            Curve::K256 => 0xe7,
        }
    }

    /// The JWT `alg` name for ECDSA with SHA-256 on this curve.
    pub fn jwt_alg(self) -> &'static str {
        match self {
            Curve::P256 => "ES256",
            Curve::K256 => "ES256K",
        }
    }

    fn from_multicodec(code: u64) -> Option<Curve> {
        match code {
            0x1200 => Some(Curve::P256),
            0xe7 => Some(Curve::K256),
            _ => None,
        }
    }
}

impl fmt::Display for Curve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Curve::P256 => "P-256",
            Curve::K256 => "K-256 (secp256k1)",
        })
    }
}

/// Why a string is not a public key atproto can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not a did:key (no `did:key:` prefix)")]
    NotDidKey,
    #[error("not base58btc multibase (no leading `z`)")]
    NotMultibase,
    #[error("not base58btc (empty, or a character outside the alphabet)")]
    NotBase58,
    #[error("no multicodec varint before the key")]
    NoMulticodec,
    #[error(
        "unknown multicodec 0x{0:x}: atproto keys are p256-pub (0x1200) or secp256k1-pub (0xe7)"
    )]
    UnknownMulticodec(u64),
    #[error("key is {0} bytes, not a compressed 33-byte SEC1 point")]
    NotCompressed(usize),
    #[error("not a point on the {0} curve")]
    NotOnCurve(Curve),
    #[error("unknown verification method type `{0}`")]
    UnknownMethodType(String),
}

/// Why a signature is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("signature is not 64 bytes but {0} (atproto takes compact r||s, not DER)")]
    NotCompact(usize),
    #[error("signature's r or s is zero or not below the curve order")]
    OutOfRange,
    #[error("high-S signature: atproto accepts only the low-S form")]
    HighS,
    #[error("signature does not verify")]
    DoesNotVerify,
}

/// A public key on one of atproto's two curves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicKey {
    P256(p256::ecdsa::VerifyingKey),
    K256(k256::ecdsa::VerifyingKey),
}

impl PublicKey {
    /// A `did:key:z...` whose multicodec names the curve.
    pub fn from_did_key(did: &str) -> Result<PublicKey, KeyError> {
        let multikey = did
            .strip_prefix(DID_KEY_PREFIX)
            .ok_or(KeyError::NotDidKey)?;
        PublicKey::from_multikey(multikey)
    }

    /// A `Multikey` verification method's `publicKeyMultibase`: `z`, then base58btc of the
    /// multicodec varint and the compressed point.
    pub fn from_multikey(multibase: &str) -> Result<PublicKey, KeyError> {
        let bytes = decode_multibase(multibase)?;
        let (code, point) = svc_syntax::varint(&bytes).ok_or(KeyError::NoMulticodec)?;
        let curve = Curve::from_multicodec(code).ok_or(KeyError::UnknownMulticodec(code))?;
        PublicKey::from_compressed(curve, point)
    }

    /// The `publicKeyMultibase` of the older `EcdsaSecp256r1VerificationKey2019` and
    /// `EcdsaSecp256k1VerificationKey2019` methods: the bare compressed point, with the curve
    /// known only from the method's type.
    pub fn from_legacy_multibase(multibase: &str, curve: Curve) -> Result<PublicKey, KeyError> {
        PublicKey::from_compressed(curve, &decode_multibase(multibase)?)
    }

    /// A DID document verification method's `type` and `publicKeyMultibase`, in whichever of
    /// the three forms atproto DID documents have used.
    pub fn from_verification_method(
        method_type: &str,
        multibase: &str,
    ) -> Result<PublicKey, KeyError> {
        match method_type {
            "Multikey" => PublicKey::from_multikey(multibase),
            "EcdsaSecp256r1VerificationKey2019" => {
                PublicKey::from_legacy_multibase(multibase, Curve::P256)
            }
            "EcdsaSecp256k1VerificationKey2019" => {
                PublicKey::from_legacy_multibase(multibase, Curve::K256)
            }
            other => Err(KeyError::UnknownMethodType(other.to_owned())),
        }
    }

    /// A compressed SEC1 point (`02` or `03`, then x). Uncompressed points are refused because
    /// atproto writes keys compressed, so one key has one did:key.
    pub fn from_compressed(curve: Curve, point: &[u8]) -> Result<PublicKey, KeyError> {
        if point.len() != 33 {
            return Err(KeyError::NotCompressed(point.len()));
        }
        let not_on_curve = |_| KeyError::NotOnCurve(curve);
        Ok(match curve {
            Curve::P256 => PublicKey::P256(
                p256::ecdsa::VerifyingKey::from_sec1_bytes(point).map_err(not_on_curve)?,
            ),
            Curve::K256 => PublicKey::K256(
                k256::ecdsa::VerifyingKey::from_sec1_bytes(point).map_err(not_on_curve)?,
            ),
        })
    }

    pub fn curve(&self) -> Curve {
        match self {
            PublicKey::P256(_) => Curve::P256,
            PublicKey::K256(_) => Curve::K256,
        }
    }

    /// The compressed SEC1 point.
    pub fn compressed(&self) -> [u8; 33] {
        let encoded = match self {
            PublicKey::P256(key) => key.to_encoded_point(true).as_bytes().to_vec(),
            PublicKey::K256(key) => key.to_encoded_point(true).as_bytes().to_vec(),
        };
        let mut out = [0u8; 33];
        out.copy_from_slice(&encoded);
        out
    }

    /// The `Multikey` `publicKeyMultibase` form: `z` + base58btc(multicodec || point).
    pub fn multikey(&self) -> String {
        let mut bytes = Vec::with_capacity(2 + 33);
        push_varint(&mut bytes, self.curve().multicodec());
        bytes.extend_from_slice(&self.compressed());
        format!("z{}", svc_syntax::encode_base58btc(&bytes))
    }

    /// The `did:key:z...` form.
    pub fn did_key(&self) -> String {
        format!("{DID_KEY_PREFIX}{}", self.multikey())
    }

    /// Whether `signature`, compact `r || s` in low-S form, signs the SHA-256 of `message`
    /// with this key.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), SignatureError> {
        if signature.len() != 64 {
            return Err(SignatureError::NotCompact(signature.len()));
        }
        match self {
            PublicKey::P256(key) => {
                let signature = p256::ecdsa::Signature::from_slice(signature)
                    .map_err(|_| SignatureError::OutOfRange)?;
                if signature.normalize_s().is_some() {
                    return Err(SignatureError::HighS);
                }
                key.verify(message, &signature)
            }
            PublicKey::K256(key) => {
                let signature = k256::ecdsa::Signature::from_slice(signature)
                    .map_err(|_| SignatureError::OutOfRange)?;
                // k256 refuses high S itself, but then only as a failed verification.
                if signature.normalize_s().is_some() {
                    return Err(SignatureError::HighS);
                }
                key.verify(message, &signature)
            }
        }
        .map_err(|_| SignatureError::DoesNotVerify)
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.did_key())
    }
}

fn decode_multibase(multibase: &str) -> Result<Vec<u8>, KeyError> {
    let text = multibase.strip_prefix('z').ok_or(KeyError::NotMultibase)?;
    svc_syntax::decode_base58btc(text).ok_or(KeyError::NotBase58)
}

/// Unsigned LEB128, the multicodec prefix's encoding.
fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}
