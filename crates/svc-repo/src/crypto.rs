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
    #[error("multicodec varint is not minimally encoded")]
    NonMinimalVarint,
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
        // A padded varint would give one key a second did:key.
        let mut minimal = Vec::with_capacity(2);
        push_varint(&mut minimal, code);
        if bytes.len() - point.len() != minimal.len() {
            return Err(KeyError::NonMinimalVarint);
        }
        PublicKey::from_compressed(curve, point)
    }

    /// The `publicKeyMultibase` of the older `EcdsaSecp256r1VerificationKey2019` and
    /// `EcdsaSecp256k1VerificationKey2019` methods: the bare point, with the curve known only
    /// from the method's type. The PLC directory writes it uncompressed (65 bytes, `0x04`
    /// first), other documents compressed; both name one key.
    pub fn from_legacy_multibase(multibase: &str, curve: Curve) -> Result<PublicKey, KeyError> {
        let point = decode_multibase(multibase)?;
        if point.len() == 65 && point.first() == Some(&0x04) {
            return PublicKey::from_sec1(curve, &point);
        }
        PublicKey::from_compressed(curve, &point)
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
        PublicKey::from_sec1(curve, point)
    }

    /// A SEC1 point of either form, checked to be on the curve.
    fn from_sec1(curve: Curve, point: &[u8]) -> Result<PublicKey, KeyError> {
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

/// Unsigned LEB128, the multicodec prefix's encoding (and a CAR's lengths).
pub(crate) fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::signature::Signer as _;

    const MESSAGE: &[u8] = b"a commit's bytes";

    fn k256_signer() -> k256::ecdsa::SigningKey {
        k256::ecdsa::SigningKey::from_slice(&[7u8; 32]).expect("a scalar below the order")
    }

    fn p256_signer() -> p256::ecdsa::SigningKey {
        p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).expect("a scalar below the order")
    }

    /// A key and a low-S signature of MESSAGE on each curve; P-256 signers may give high S, so
    /// theirs is normalised first.
    fn signed() -> [(PublicKey, Vec<u8>); 2] {
        let k = k256_signer();
        let k_sig: k256::ecdsa::Signature = k.sign(MESSAGE);
        let p = p256_signer();
        let p_sig: p256::ecdsa::Signature = p.sign(MESSAGE);
        let p_sig = p_sig.normalize_s().unwrap_or(p_sig);
        [
            (PublicKey::K256(*k.verifying_key()), k_sig.to_vec()),
            (PublicKey::P256(*p.verifying_key()), p_sig.to_vec()),
        ]
    }

    /// The same signature with s replaced by n - s: still valid ECDSA, refused by atproto.
    fn high_s(key: &PublicKey, signature: &[u8]) -> Vec<u8> {
        match key {
            PublicKey::K256(_) => {
                let sig = k256::ecdsa::Signature::from_slice(signature).expect("64 bytes");
                k256::ecdsa::Signature::from_scalars(sig.r(), -sig.s())
                    .expect("n - s is in range")
                    .to_vec()
            }
            PublicKey::P256(_) => {
                let sig = p256::ecdsa::Signature::from_slice(signature).expect("64 bytes");
                p256::ecdsa::Signature::from_scalars(sig.r(), -sig.s())
                    .expect("n - s is in range")
                    .to_vec()
            }
        }
    }

    #[test]
    fn low_s_signature_verifies_and_other_message_does_not() {
        for (key, signature) in signed() {
            assert_eq!(key.verify(MESSAGE, &signature), Ok(()), "{}", key.curve());
            assert_eq!(
                key.verify(b"another message", &signature),
                Err(SignatureError::DoesNotVerify)
            );
        }
    }

    #[test]
    fn high_s_signature_is_refused() {
        for (key, signature) in signed() {
            let high = high_s(&key, &signature);
            assert_ne!(high, signature);
            assert_eq!(
                key.verify(MESSAGE, &high),
                Err(SignatureError::HighS),
                "{}",
                key.curve()
            );
        }
        // The P-256 library alone would accept it: the refusal is ours, and needed.
        let p = p256_signer();
        let (key, signature) = (PublicKey::P256(*p.verifying_key()), &signed()[1].1);
        let high = high_s(&key, signature);
        let high = p256::ecdsa::Signature::from_slice(&high).expect("64 bytes");
        assert!(p.verifying_key().verify(MESSAGE, &high).is_ok());
    }

    #[test]
    fn der_signature_is_refused() {
        let k_der = k256::ecdsa::Signature::from_slice(&signed()[0].1)
            .expect("64 bytes")
            .to_der();
        let p_der = p256::ecdsa::Signature::from_slice(&signed()[1].1)
            .expect("64 bytes")
            .to_der();
        for (key, der) in [
            (signed()[0].0, k_der.as_bytes().to_vec()),
            (signed()[1].0, p_der.as_bytes().to_vec()),
        ] {
            assert_eq!(
                key.verify(MESSAGE, &der),
                Err(SignatureError::NotCompact(der.len()))
            );
        }
    }

    #[test]
    fn zero_scalars_are_refused() {
        for (key, _) in signed() {
            assert_eq!(
                key.verify(MESSAGE, &[0; 64]),
                Err(SignatureError::OutOfRange)
            );
        }
    }

    #[test]
    fn keys_round_trip_through_did_key_and_multikey() {
        for (key, _) in signed() {
            let did = key.did_key();
            assert_eq!(PublicKey::from_did_key(&did), Ok(key));
            assert_eq!(PublicKey::from_multikey(&key.multikey()), Ok(key));
            assert_eq!(
                PublicKey::from_verification_method("Multikey", &key.multikey()),
                Ok(key)
            );
            let bare = format!("z{}", svc_syntax::encode_base58btc(&key.compressed()));
            assert_eq!(
                PublicKey::from_legacy_multibase(&bare, key.curve()),
                Ok(key)
            );
            assert_eq!(key.to_string(), did);
        }
        let [(k, _), (p, _)] = signed();
        assert!(k.did_key().starts_with("did:key:zQ3s"));
        assert!(p.did_key().starts_with("did:key:zDna"));
    }

    #[test]
    fn malformed_keys_are_refused_by_name() {
        let [(k, _), _] = signed();
        let multikey = k.multikey();
        assert_eq!(PublicKey::from_did_key(&multikey), Err(KeyError::NotDidKey));
        assert_eq!(
            PublicKey::from_multikey(&multikey[1..]),
            Err(KeyError::NotMultibase)
        );
        assert_eq!(PublicKey::from_multikey("z0OIl"), Err(KeyError::NotBase58));
        assert_eq!(PublicKey::from_multikey("z"), Err(KeyError::NotBase58));

        let mut ed25519 = vec![0xed, 0x01];
        ed25519.extend([1u8; 32]);
        let ed25519 = format!("z{}", svc_syntax::encode_base58btc(&ed25519));
        assert_eq!(
            PublicKey::from_multikey(&ed25519),
            Err(KeyError::UnknownMulticodec(0xed))
        );
        assert!(
            KeyError::UnknownMulticodec(0xed)
                .to_string()
                .contains("0xed")
        );

        let mut padded = vec![0xe7, 0x81, 0x00];
        padded.extend(k.compressed());
        let padded = format!("z{}", svc_syntax::encode_base58btc(&padded));
        assert_eq!(
            PublicKey::from_multikey(&padded),
            Err(KeyError::NonMinimalVarint)
        );

        let uncompressed = k256_signer().verifying_key().to_encoded_point(false);
        assert_eq!(
            PublicKey::from_compressed(Curve::K256, uncompressed.as_bytes()),
            Err(KeyError::NotCompressed(65))
        );
        // The legacy method form names the same key uncompressed, as the PLC directory writes it.
        let legacy = format!("z{}", svc_syntax::encode_base58btc(uncompressed.as_bytes()));
        assert_eq!(
            PublicKey::from_legacy_multibase(&legacy, Curve::K256),
            Ok(PublicKey::K256(*k256_signer().verifying_key()))
        );
        // x = 5 has no y on secp256k1 and x = 1 none on P-256.
        let mut point = [0u8; 33];
        point[0] = 0x02;
        point[32] = 5;
        assert_eq!(
            PublicKey::from_compressed(Curve::K256, &point),
            Err(KeyError::NotOnCurve(Curve::K256))
        );
        point[32] = 1;
        assert_eq!(
            PublicKey::from_compressed(Curve::P256, &point),
            Err(KeyError::NotOnCurve(Curve::P256))
        );
        assert_eq!(
            PublicKey::from_verification_method("JsonWebKey2020", &multikey),
            Err(KeyError::UnknownMethodType("JsonWebKey2020".into()))
        );
    }
}
