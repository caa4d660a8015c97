//! `com.atproto.label.subscribeLabels` frames: a DAG-CBOR header `{op, t}` then a body
//! (`#labels`: `{seq, labels}`; `#info`: `{name, message}`; `op = -1`: `{error, message}`),
//! and each label checked: its fields, its labeler, and its signature over the DAG-CBOR of
//! the label without `sig`.

use crate::event_stream::{self, Frame};
use svc_catalog::{Label, Subject};
use svc_repo::crypto::PublicKey;
use svc_repo::dagcbor::{self, Cbor};
use svc_syntax::{Did, UnixMicros, UnixMillis};

/// The longest label value atproto allows, in bytes.
pub(crate) const MAX_VALUE_BYTES: usize = 128;

/// One message of a labeler's stream.
#[derive(Debug)]
pub(crate) enum LabelerMessage {
    Labels {
        seq: i64,
        labels: Vec<Cbor>,
    },
    Info {
        name: String,
        message: String,
    },
    Error {
        error: String,
        message: String,
    },
    /// A message type this version does not know: skipped.
    Unknown(String),
}

/// Decodes one binary message of the stream.
pub(crate) fn decode_message(bytes: &[u8]) -> Result<LabelerMessage, String> {
    let (kind, body) = match event_stream::decode(bytes)? {
        Frame::Error { error, message } => return Ok(LabelerMessage::Error { error, message }),
        Frame::Message { kind, body } => (kind, body),
    };
    match kind.as_deref() {
        Some("#labels") => {
            let seq = body.get("seq").and_then(Cbor::as_i64).ok_or("no seq")?;
            let labels = body
                .get("labels")
                .and_then(Cbor::as_array)
                .ok_or("no labels")?
                .to_vec();
            Ok(LabelerMessage::Labels { seq, labels })
        }
        Some("#info") => Ok(LabelerMessage::Info {
            name: event_stream::text(&body, "name").unwrap_or_default(),
            message: event_stream::text(&body, "message").unwrap_or_default(),
        }),
        Some(other) => Ok(LabelerMessage::Unknown(other.chars().take(64).collect())),
        None => Err("header without a type".into()),
    }
}

/// Why a label was refused: its metrics outcome and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub outcome: &'static str,
    pub reason: String,
}

fn refused(outcome: &'static str, reason: impl Into<String>) -> Refused {
    Refused {
        outcome,
        reason: reason.into(),
    }
}

/// A label of `labeler`'s stream, its fields checked and its signature verified with `key`.
pub(crate) fn check_label(label: &Cbor, labeler: &Did, key: &PublicKey) -> Result<Label, Refused> {
    let Cbor::Map(fields) = label else {
        return Err(refused("malformed", "not a map"));
    };
    let field = |name: &str| label.get(name);
    let string = |name: &str| field(name).and_then(Cbor::as_str);
    let src = string("src").ok_or_else(|| refused("malformed", "no src"))?;
    if src != labeler.as_str() {
        let shown: String = src.chars().take(64).collect();
        return Err(refused(
            "foreign",
            format!("src {shown} is another labeler"),
        ));
    }
    let val = string("val").ok_or_else(|| refused("malformed", "no val"))?;
    if val.len() > MAX_VALUE_BYTES || val.is_empty() {
        return Err(refused("oversized", format!("val of {} bytes", val.len())));
    }
    let uri = string("uri").ok_or_else(|| refused("malformed", "no uri"))?;
    let subject = Subject::parse(uri).ok_or_else(|| {
        let shown: String = uri.chars().take(64).collect();
        refused(
            "malformed",
            format!("uri {shown:?} is neither a DID nor an at-uri"),
        )
    })?;
    if matches!(&subject, Subject::Record(at) if at.rkey().is_none()) {
        return Err(refused("malformed", "uri names no record"));
    }
    let time = |name: &str| string(name).and_then(svc_syntax::datetime_to_unix_micros);
    let cts = time("cts").ok_or_else(|| refused("malformed", "cts is not a datetime"))?;
    let exp = match field("exp") {
        None => None,
        Some(_) => Some(time("exp").ok_or_else(|| refused("malformed", "exp is not a datetime"))?),
    };
    let neg = match field("neg") {
        None => false,
        Some(value) => value
            .as_bool()
            .ok_or_else(|| refused("malformed", "neg is not a boolean"))?,
    };
    let sig = field("sig")
        .and_then(Cbor::as_bytes)
        .ok_or_else(|| refused("malformed", "no sig"))?;
    let unsigned = Cbor::unsigned(fields);
    let signed = dagcbor::encode(&unsigned).map_err(|e| refused("malformed", e.to_string()))?;
    key.verify(&signed, sig)
        .map_err(|e| refused("signature", e.to_string()))?;
    Ok(Label {
        subject,
        val: val.to_string(),
        neg,
        cts: UnixMicros(cts),
        exp: exp.map(|micros| UnixMillis(micros.div_euclid(1000))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use svc_repo::author::SigningKey;
    use svc_repo::crypto::Curve;

    fn map(fields: &[(&str, Cbor)]) -> Cbor {
        Cbor::Map(
            fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    fn signed(keys: &SigningKey, fields: &[(&str, Cbor)]) -> Cbor {
        let unsigned = map(fields);
        let bytes = dagcbor::encode(&unsigned).expect("encode");
        let mut all = fields.to_vec();
        all.push(("sig", Cbor::Bytes(keys.sign(&bytes).to_vec())));
        map(&all)
    }

    fn text(value: &str) -> Cbor {
        Cbor::Text(value.to_string())
    }

    const LABELER: &str = "did:plc:labeler";

    fn fields(uri: &str, val: &str) -> Vec<(&'static str, Cbor)> {
        vec![
            ("ver", Cbor::Integer(1)),
            ("src", text(LABELER)),
            ("uri", text(uri)),
            ("val", text(val)),
            ("neg", Cbor::Bool(false)),
            ("cts", text("2026-11-29T02:54:12.973Z")),
        ]
    }

    #[test]
    fn a_signed_label_is_read_and_every_damage_is_refused_by_name() {
        let keys = SigningKey::from_seed(Curve::K256, b"the labeler's key");
        let labeler = Did::new(LABELER).expect("did");
        let uri = "at://did:plc:a/dev.svc.bounty/1";
        let label = check_label(
            &signed(&keys, &fields(uri, "spam")),
            &labeler,
            &keys.public(),
        );
        let label = label.expect("a good label");
        assert_eq!((label.subject.as_str(), label.val.as_str()), (uri, "spam"));
        let cts = svc_syntax::format_unix_micros(label.cts.0);
        assert_eq!(cts, "2026-11-29T02:54:12.973Z");

        let outcome = |label: Cbor| {
            check_label(&label, &labeler, &keys.public())
                .expect_err("refused")
                .outcome
        };
        let mut forged = signed(&keys, &fields(uri, "spam"));
        if let Cbor::Map(entries) = &mut forged
            && let Some((_, Cbor::Bytes(sig))) = entries.iter_mut().find(|(k, _)| k == "sig")
        {
            sig[31] ^= 1;
        }
        assert_eq!(outcome(forged), "signature");
        let other = SigningKey::from_seed(Curve::K256, b"another key");
        assert_eq!(outcome(signed(&other, &fields(uri, "spam"))), "signature");
        let mut foreign = fields(uri, "spam");
        foreign[1] = ("src", text("did:plc:other"));
        assert_eq!(outcome(signed(&keys, &foreign)), "foreign");
        let long = "x".repeat(MAX_VALUE_BYTES + 1);
        assert_eq!(outcome(signed(&keys, &fields(uri, &long))), "oversized");
        for bad in ["https://example.com", "at://did:plc:a", "did:nope", ""] {
            assert_eq!(
                outcome(signed(&keys, &fields(bad, "spam"))),
                "malformed",
                "{bad}"
            );
        }
        let mut undated = fields(uri, "spam");
        undated[5] = ("cts", text("yesterday"));
        assert_eq!(outcome(signed(&keys, &undated)), "malformed");
        assert_eq!(outcome(text("not a label")), "malformed");
    }

    #[test]
    fn frames_say_labels_info_and_errors_and_garbage_is_an_error() {
        let frame = |header: Cbor, body: Cbor| {
            let mut bytes = dagcbor::encode(&header).expect("header");
            bytes.extend(dagcbor::encode(&body).expect("body"));
            bytes
        };
        let labels = frame(
            map(&[("op", Cbor::Integer(1)), ("t", text("#labels"))]),
            map(&[("seq", Cbor::Integer(9)), ("labels", Cbor::Array(vec![]))]),
        );
        assert!(matches!(
            decode_message(&labels),
            Ok(LabelerMessage::Labels { seq: 9, .. })
        ));
        let error = frame(
            map(&[("op", Cbor::Integer(-1))]),
            map(&[("error", text("FutureCursor"))]),
        );
        assert!(matches!(
            decode_message(&error),
            Ok(LabelerMessage::Error { error, .. }) if error == "FutureCursor"
        ));
        let unknown = frame(
            map(&[("op", Cbor::Integer(1)), ("t", text("#new"))]),
            map(&[]),
        );
        assert!(matches!(
            decode_message(&unknown),
            Ok(LabelerMessage::Unknown(_))
        ));
        for garbage in [&b""[..], b"\xff\xff", &labels[..labels.len() - 1]] {
            assert!(decode_message(garbage).is_err());
        }
        let mut trailing = labels.clone();
        trailing.push(0);
        assert!(decode_message(&trailing).is_err());
    }
}
