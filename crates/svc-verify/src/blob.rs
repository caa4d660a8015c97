//! Lens and schema blobs as records carry them, and their `objectHash`.

use crate::VerifyError;
use panproto_lens::{Lens, Protolens, ProtolensChain};
use panproto_schema::{Protocol, Schema};
use serde_json::Value;

/// A lens record's `blob`: a chain of protolenses (`{"steps": [...]}`) or a single one.
#[derive(Debug, Clone)]
pub enum LensBlob {
    Chain(ProtolensChain),
    Single(Box<Protolens>),
}

impl LensBlob {
    /// Decodes the blob. A blob written by a newer panproto may hold variants this one does
    /// not know: that is an error here, never a verdict on the lens.
    pub fn decode(blob: &Value) -> Result<LensBlob, VerifyError> {
        let decoded = if blob.get("steps").is_some() {
            serde_json::from_value(blob.clone()).map(LensBlob::Chain)
        } else {
            serde_json::from_value(blob.clone()).map(|step| LensBlob::Single(Box::new(step)))
        };
        decoded.map_err(|e| VerifyError::LensBlob(e.to_string()))
    }

    /// The `blob` of a lens record.
    pub fn from_record(record: &Value) -> Result<LensBlob, VerifyError> {
        LensBlob::decode(record.get("blob").unwrap_or(&Value::Null))
    }

    /// The lens at a source schema.
    pub fn instantiate(&self, source: &Schema, protocol: &Protocol) -> Result<Lens, VerifyError> {
        match self {
            LensBlob::Chain(chain) => chain.instantiate(source, protocol),
            LensBlob::Single(step) => step.instantiate(source, protocol),
        }
        .map_err(|e| VerifyError::Instantiate(e.to_string()))
    }
}

/// A schema record's `blob`, decoded, with the protocol the record names.
#[derive(Debug, Clone)]
pub struct SchemaBlob {
    pub schema: Schema,
    /// The record's `protocol` field, else the blob's own; empty means panproto's open default.
    pub protocol: String,
}

impl SchemaBlob {
    /// `role` (`source`, `target`) names the schema in errors.
    pub fn decode(record: &Value, role: &'static str) -> Result<SchemaBlob, VerifyError> {
        let blob = record.get("blob").ok_or_else(|| VerifyError::SchemaBlob {
            role,
            message: "the record has no blob".into(),
        })?;
        let schema: Schema =
            serde_json::from_value(blob.clone()).map_err(|e| VerifyError::SchemaBlob {
                role,
                message: e.to_string(),
            })?;
        let protocol = record
            .get("protocol")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| schema.protocol.clone());
        Ok(SchemaBlob { schema, protocol })
    }

    /// The vertex a record of this schema is parsed at.
    pub fn entry(&self, role: &'static str) -> Result<String, VerifyError> {
        panproto_schema::primary_entry(&self.schema)
            .map(|name| name.to_string())
            .ok_or(VerifyError::NoEntry { role })
    }
}

/// The `objectHash` a record states for its blob: lower-case hex blake3 of the blob's compact
/// JSON with every object's keys sorted.
pub fn object_hash(blob: &Value) -> String {
    let mut text = String::new();
    write_sorted(blob, &mut text);
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

fn write_sorted(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_sorted(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}
