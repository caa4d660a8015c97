//! The framing of atproto's event streams (XRPC subscriptions: the repository firehose, a
//! labeler's labels): each binary message is exactly two DAG-CBOR objects, a header `{op, t}`
//! and a body. `op: 1` is a message of type `t`; `op: -1` an error, its body `{error,
//! message}`. Both streams read their messages here.

use svc_repo::dagcbor::{self, Cbor};

/// The longest text of an error or info message kept, in characters: a peer's words go to
/// logs and metrics.
const TEXT_CHARS: usize = 256;

/// One message of an event stream.
#[derive(Debug)]
pub(crate) enum Frame {
    /// The server's error (its name, else `unknown`), and its message.
    Error { error: String, message: String },
    /// A message: its type (`#commit`, `#labels`...; none when the header names none), and
    /// its body.
    Message { kind: Option<String>, body: Cbor },
}

/// Decodes one binary message of an event stream.
pub(crate) fn decode(bytes: &[u8]) -> Result<Frame, String> {
    let (header, rest) = dagcbor::decode(bytes).map_err(|e| format!("header: {e}"))?;
    let (body, rest) = dagcbor::decode(rest).map_err(|e| format!("body: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("{} bytes after the body", rest.len()));
    }
    match header.get("op").and_then(Cbor::as_i64) {
        Some(-1) => {
            let error = text(&body, "error").unwrap_or_else(|| "unknown".into());
            let message = text(&body, "message").unwrap_or_default();
            Ok(Frame::Error { error, message })
        }
        Some(1) => Ok(Frame::Message {
            kind: type_of(header),
            body,
        }),
        Some(op) => Err(format!("header op {op}")),
        None => Err("header without op".into()),
    }
}

/// The header's `t`, taken out of it (a frame per event: no copy).
fn type_of(header: Cbor) -> Option<String> {
    let Cbor::Map(entries) = header else {
        return None;
    };
    entries.into_iter().find_map(|(key, value)| match value {
        Cbor::Text(kind) if key == "t" => Some(kind),
        _ => None,
    })
}

/// A field of a body that is text, cut to [`TEXT_CHARS`].
pub(crate) fn text(body: &Cbor, field: &str) -> Option<String> {
    let value = body.get(field).and_then(Cbor::as_str)?;
    Some(value.chars().take(TEXT_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(header: &[(&str, Cbor)], body: &[(&str, Cbor)]) -> Vec<u8> {
        let map = |entries: &[(&str, Cbor)]| {
            Cbor::Map(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            )
        };
        let mut bytes = dagcbor::encode(&map(header)).expect("header");
        bytes.extend(dagcbor::encode(&map(body)).expect("body"));
        bytes
    }

    fn text_of(value: &str) -> Cbor {
        Cbor::Text(value.to_string())
    }

    #[test]
    fn a_frame_is_a_header_and_a_body_and_nothing_more() {
        let message = frame(
            &[("op", Cbor::Integer(1)), ("t", text_of("#info"))],
            &[("name", text_of("OutdatedCursor"))],
        );
        assert!(matches!(
            decode(&message),
            Ok(Frame::Message { kind: Some(kind), .. }) if kind == "#info"
        ));
        let long = "x".repeat(10_000);
        let error = frame(&[("op", Cbor::Integer(-1))], &[("message", text_of(&long))]);
        let Ok(Frame::Error { error, message }) = decode(&error) else {
            panic!("an error frame")
        };
        assert_eq!(error, "unknown", "an error without its name");
        assert_eq!(message.len(), TEXT_CHARS, "a peer's words are cut");
        let mut trailing = message_bytes();
        trailing.push(0);
        for (bytes, why) in [
            (trailing, "bytes after the body"),
            (frame(&[("op", Cbor::Integer(2))], &[]), "header op 2"),
            (frame(&[("t", text_of("#info"))], &[]), "header without op"),
            (b"\xff".to_vec(), "header:"),
        ] {
            let refused = decode(&bytes).expect_err(why);
            assert!(refused.contains(why), "{refused}");
        }
    }

    fn message_bytes() -> Vec<u8> {
        frame(&[("op", Cbor::Integer(1)), ("t", text_of("#labels"))], &[])
    }
}
