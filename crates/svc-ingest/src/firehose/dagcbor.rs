//! A decoder for DAG-CBOR, the subset of CBOR the AT Protocol uses for firehose frames and
//! repository blocks: definite lengths, string map keys, tag 42 for CID links. Written here
//! because the decoding it needs is small and the IPLD crates that do it bring a deep tree;
//! turning the result into atproto JSON (`$link`, `$bytes`) is the other half of the job.

use base64::Engine;

#[derive(Debug, Clone, PartialEq)]
pub enum Cbor {
    Null,
    Bool(bool),
    Integer(i128),
    Float(f64),
    Bytes(Vec<u8>),
    Text(String),
    Array(Vec<Cbor>),
    /// Keys in their encoded order.
    Map(Vec<(String, Cbor)>),
    /// A CID, as its binary form (without the multibase identity prefix).
    Link(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DAG-CBOR: {0}")]
pub struct CborError(pub String);

fn fail<T>(message: impl Into<String>) -> Result<T, CborError> {
    Err(CborError(message.into()))
}

const MAX_DEPTH: usize = 64;

/// Decodes one value from the front of `input`; returns it and the bytes after it.
pub fn decode(input: &[u8]) -> Result<(Cbor, &[u8]), CborError> {
    let mut reader = Reader { input, depth: 0 };
    let value = reader.value()?;
    Ok((value, reader.input))
}

struct Reader<'a> {
    input: &'a [u8],
    depth: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CborError> {
        if self.input.len() < n {
            return fail("unexpected end of input");
        }
        let (head, rest) = self.input.split_at(n);
        self.input = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8, CborError> {
        Ok(self.take(1)?[0])
    }

    /// The argument of an initial byte: the value for ints, the length for strings and
    /// containers. Indefinite lengths are not DAG-CBOR.
    fn argument(&mut self, info: u8) -> Result<u64, CborError> {
        Ok(match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.byte()?),
            25 => u64::from(u16::from_be_bytes(
                self.take(2)?
                    .try_into()
                    .map_err(|_| CborError("short".into()))?,
            )),
            26 => u64::from(u32::from_be_bytes(
                self.take(4)?
                    .try_into()
                    .map_err(|_| CborError("short".into()))?,
            )),
            27 => u64::from_be_bytes(
                self.take(8)?
                    .try_into()
                    .map_err(|_| CborError("short".into()))?,
            ),
            _ => return fail(format!("unsupported additional information {info}")),
        })
    }

    fn length(&mut self, info: u8) -> Result<usize, CborError> {
        let n = self.argument(info)?;
        let n = usize::try_from(n).map_err(|_| CborError("length too large".into()))?;
        if n > self.input.len() {
            // Every element takes at least one byte: a larger count cannot be honest.
            return fail("length beyond the end of input");
        }
        Ok(n)
    }

    fn value(&mut self) -> Result<Cbor, CborError> {
        let initial = self.byte()?;
        let (major, info) = (initial >> 5, initial & 0x1f);
        match major {
            0 => Ok(Cbor::Integer(i128::from(self.argument(info)?))),
            1 => Ok(Cbor::Integer(-1 - i128::from(self.argument(info)?))),
            2 => {
                let n = self.length(info)?;
                Ok(Cbor::Bytes(self.take(n)?.to_vec()))
            }
            3 => self.text(info),
            4 => self.array(info),
            5 => self.map(info),
            6 => self.link(info),
            _ => self.simple(info),
        }
    }

    fn text(&mut self, info: u8) -> Result<Cbor, CborError> {
        let n = self.length(info)?;
        let text = std::str::from_utf8(self.take(n)?)
            .map_err(|_| CborError("text is not UTF-8".into()))?;
        Ok(Cbor::Text(text.to_string()))
    }

    fn array(&mut self, info: u8) -> Result<Cbor, CborError> {
        let n = self.length(info)?;
        self.nested(|r| {
            // A declared length is only a claim: grow as elements actually decode.
            let mut items = Vec::with_capacity(n.min(256));
            for _ in 0..n {
                items.push(r.value()?);
            }
            Ok(Cbor::Array(items))
        })
    }

    fn map(&mut self, info: u8) -> Result<Cbor, CborError> {
        let n = self.length(info)?;
        self.nested(|r| {
            let mut entries = Vec::with_capacity(n.min(256));
            for _ in 0..n {
                let Cbor::Text(key) = r.value()? else {
                    return fail("map key is not a string");
                };
                entries.push((key, r.value()?));
            }
            Ok(Cbor::Map(entries))
        })
    }

    /// A tag, of which DAG-CBOR has one: 42, a CID link.
    fn link(&mut self, info: u8) -> Result<Cbor, CborError> {
        let tag = self.argument(info)?;
        if tag != 42 {
            return fail(format!("unsupported tag {tag}"));
        }
        // Through `nested`, so a chain of tags cannot exhaust the stack.
        match self.nested(Self::value)? {
            Cbor::Bytes(bytes) if bytes.first() == Some(&0) => Ok(Cbor::Link(bytes[1..].to_vec())),
            _ => fail("tag 42 must hold bytes starting with 0x00"),
        }
    }

    /// Major type 7: the simple values and floats DAG-CBOR allows.
    fn simple(&mut self, info: u8) -> Result<Cbor, CborError> {
        match info {
            20 => Ok(Cbor::Bool(false)),
            21 => Ok(Cbor::Bool(true)),
            22 => Ok(Cbor::Null),
            27 => {
                let bits = self.argument(27)?;
                Ok(Cbor::Float(f64::from_bits(bits)))
            }
            _ => fail(format!("unsupported simple value {info}")),
        }
    }

    fn nested(
        &mut self,
        inner: impl FnOnce(&mut Self) -> Result<Cbor, CborError>,
    ) -> Result<Cbor, CborError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return fail("nested too deeply");
        }
        let value = inner(self);
        self.depth -= 1;
        value
    }
}

impl Cbor {
    pub fn get(&self, key: &str) -> Option<&Cbor> {
        match self {
            Cbor::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Cbor::Text(text) => Some(text),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Cbor::Integer(n) => i64::try_from(*n).ok(),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Cbor::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The atproto JSON form: links as `{"$link": cid}`, bytes as `{"$bytes": base64}`.
    /// Floats have no place in the data model; they come out as JSON numbers, and lexicon
    /// validation refuses them.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Cbor::Null => Value::Null,
            Cbor::Bool(b) => Value::Bool(*b),
            Cbor::Integer(n) => i64::try_from(*n)
                .map(Value::from)
                .unwrap_or_else(|_| Value::from(*n as f64)),
            Cbor::Float(f) => serde_json::Number::from_f64(*f)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            Cbor::Bytes(bytes) => serde_json::json!({
                "$bytes": base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)
            }),
            Cbor::Text(text) => Value::String(text.clone()),
            Cbor::Array(items) => Value::Array(items.iter().map(Cbor::to_json).collect()),
            Cbor::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
            Cbor::Link(cid) => serde_json::json!({ "$link": svc_syntax::cid_to_string(cid) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_shapes_of_the_data_model() {
        // {"a": 1, "b": [true, null, -2], "c": h'0102', "d": "hé"}
        let bytes = [
            0xa4, 0x61, b'a', 0x01, 0x61, b'b', 0x83, 0xf5, 0xf6, 0x21, 0x61, b'c', 0x42, 1, 2,
            0x61, b'd', 0x63, b'h', 0xc3, 0xa9,
        ];
        let (value, rest) = decode(&bytes).unwrap();
        assert!(rest.is_empty());
        assert_eq!(
            value.to_json(),
            serde_json::json!({"a": 1, "b": [true, null, -2], "c": {"$bytes": "AQI"}, "d": "hé"})
        );
    }

    #[test]
    fn decodes_links_and_leaves_the_rest() {
        // tag 42 of h'00 01 71 12 02 aa bb', then a trailing 0x01
        let bytes = [
            0xd8, 0x2a, 0x47, 0x00, 0x01, 0x71, 0x12, 0x02, 0xaa, 0xbb, 0x01,
        ];
        let (value, rest) = decode(&bytes).unwrap();
        assert_eq!(value, Cbor::Link(vec![0x01, 0x71, 0x12, 0x02, 0xaa, 0xbb]));
        assert_eq!(rest, &[0x01]);
        assert_eq!(svc_syntax::cid_to_string(&[0x01, 0x71]), "bafyq");
    }

    #[test]
    fn refuses_what_dag_cbor_does_not_allow() {
        assert!(decode(&[0x9f]).is_err(), "indefinite array");
        assert!(decode(&[0xa1, 0x01, 0x01]).is_err(), "integer map key");
        assert!(decode(&[0xc1, 0x00]).is_err(), "tag other than 42");
        assert!(decode(&[0x62, b'a']).is_err(), "truncated");
        assert!(
            decode(&[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err(),
            "huge length"
        );
        let deep: Vec<u8> = std::iter::repeat_n(0x81, 100).chain([0x00]).collect();
        assert!(decode(&deep).is_err(), "too deep");
        let tags: Vec<u8> = std::iter::repeat_n([0xd8, 0x2a], 100_000)
            .flatten()
            .collect();
        assert!(
            decode(&tags).is_err(),
            "a chain of tags is too deep, not a stack overflow"
        );
        let claim = [0x9a, 0x00, 0x10, 0x00, 0x00, 0x00];
        assert!(decode(&claim).is_err(), "a length claim beyond the input");
    }
}
