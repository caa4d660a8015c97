//! The published atproto crypto vectors (`tests/interop/crypto/`): signature fixtures on both
//! curves, including the high-S and DER signatures atproto refuses, and did:key encodings of
//! known private keys.

use serde_json::Value;
use svc_repo::crypto::{PublicKey, SignatureError};

fn vectors(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/interop/crypto/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    value
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("{path}: not an array"))
}

fn field<'a>(vector: &'a Value, name: &str) -> &'a str {
    vector[name]
        .as_str()
        .unwrap_or_else(|| panic!("no string `{name}` in {vector}"))
}

/// RFC 4648 base64 with the standard alphabet; the fixtures leave out the padding.
fn base64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let (mut out, mut buffer, mut bits) = (Vec::new(), 0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = ALPHABET
            .iter()
            .position(|&a| a == c)
            .expect("a base64 character");
        buffer = (buffer << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
        buffer &= (1 << bits) - 1;
    }
    out
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn signature_fixtures_give_exactly_their_valid_signature() {
    let fixtures = vectors("signature-fixtures.json");
    assert_eq!(fixtures.len(), 6);
    for fixture in &fixtures {
        let comment = field(fixture, "comment");
        let did = field(fixture, "publicKeyDid");
        let from_did = PublicKey::from_did_key(did).unwrap_or_else(|e| panic!("{comment}: {e}"));
        let from_doc = PublicKey::from_verification_method(
            field(fixture, "didDocSuite"),
            field(fixture, "publicKeyMultibase"),
        )
        .unwrap_or_else(|e| panic!("{comment}: {e}"));
        assert_eq!(from_did, from_doc, "{comment}");
        assert_eq!(from_did.did_key(), did, "{comment}");
        assert_eq!(
            from_did.curve().jwt_alg(),
            field(fixture, "algorithm"),
            "{comment}"
        );

        let message = base64(field(fixture, "messageBase64"));
        let signature = base64(field(fixture, "signatureBase64"));
        let valid = fixture["validSignature"].as_bool().expect("validSignature");
        let tags: Vec<&str> = fixture["tags"]
            .as_array()
            .expect("tags")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for key in [from_did, from_doc] {
            let result = key.verify(&message, &signature);
            assert_eq!(result.is_ok(), valid, "{comment}: {result:?}");
            if tags.contains(&"high-s") {
                assert_eq!(result, Err(SignatureError::HighS), "{comment}");
            }
            if tags.contains(&"der-encoded") {
                let len = signature.len();
                assert_eq!(result, Err(SignatureError::NotCompact(len)), "{comment}");
            }
        }
    }
}

#[test]
fn w3c_k256_did_keys_are_their_private_keys_public_keys() {
    let vectors = vectors("w3c_didkey_K256.json");
    assert_eq!(vectors.len(), 5);
    for vector in &vectors {
        let did = field(vector, "publicDidKey");
        let secret = hex(field(vector, "privateKeyBytesHex"));
        let signer = k256::ecdsa::SigningKey::from_slice(&secret).expect("a K-256 private key");
        let expected = PublicKey::K256(*signer.verifying_key());
        assert_eq!(PublicKey::from_did_key(did), Ok(expected), "{did}");
        assert_eq!(expected.did_key(), did);
    }
}

#[test]
fn w3c_p256_did_keys_are_their_private_keys_public_keys() {
    let vectors = vectors("w3c_didkey_P256.json");
    assert_eq!(vectors.len(), 1);
    for vector in &vectors {
        let did = field(vector, "publicDidKey");
        let secret = svc_syntax::decode_base58btc(field(vector, "privateKeyBytesBase58"))
            .expect("base58btc");
        let signer = p256::ecdsa::SigningKey::from_slice(&secret).expect("a P-256 private key");
        let expected = PublicKey::P256(*signer.verifying_key());
        assert_eq!(PublicKey::from_did_key(did), Ok(expected), "{did}");
        assert_eq!(expected.did_key(), did);
    }
}
