//! The static check: without running records, does the lens derive the published target
//! schema from the published source schema, do the records' `objectHash`es match their blobs,
//! and do both schemas satisfy the protocol they name?
//!
//! panproto's `check_applicability` rejects id-based lenses on the very schema they were built
//! for, so applicability is judged by the derived target instead.

use crate::VerifyError;
use crate::blob::{LensBlob, SchemaBlob, object_hash};
use panproto_schema::{Protocol, canonical_digest, validate};
use serde_json::Value;

/// A schema against the protocol its record names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ProtocolVerdict {
    Valid,
    Invalid(Vec<String>),
    /// The protocol is not known here (and no `--protocol` file supplied it).
    Unknown(String),
}

/// The protocol a schema names: panproto's open default for the empty name, `supplied` when
/// its name matches, else `None`.
pub fn resolve_protocol(name: &str, supplied: Option<&Protocol>) -> Option<Protocol> {
    if name.is_empty() {
        return Some(Protocol::default());
    }
    supplied.filter(|p| p.name == name).cloned()
}

fn protocol_verdict(schema: &SchemaBlob, supplied: Option<&Protocol>) -> ProtocolVerdict {
    let Some(protocol) = resolve_protocol(&schema.protocol, supplied) else {
        return ProtocolVerdict::Unknown(schema.protocol.clone());
    };
    let errors = validate(&schema.schema, &protocol);
    if errors.is_empty() {
        ProtocolVerdict::Valid
    } else {
        ProtocolVerdict::Invalid(errors.iter().map(ToString::to_string).collect())
    }
}

#[derive(Debug, Clone)]
pub struct StaticReport {
    /// Why the check is falsified; empty when nothing is.
    pub failures: Vec<String>,
    /// Why it cannot conclude (protocols not known here).
    pub unknowns: Vec<String>,
}

impl StaticReport {
    pub fn result(&self) -> &'static str {
        if !self.failures.is_empty() {
            "falsified"
        } else if !self.unknowns.is_empty() {
            "inconclusive"
        } else {
            "holds"
        }
    }
}

/// The published records, each with its `blob`: lens, source schema, target schema.
pub struct PublishedLens<'a> {
    pub lens: &'a Value,
    pub source: &'a Value,
    pub target: &'a Value,
}

pub fn static_check(
    records: PublishedLens<'_>,
    supplied: Option<&Protocol>,
) -> Result<StaticReport, VerifyError> {
    let lens = LensBlob::from_record(records.lens)?;
    let source = SchemaBlob::decode(records.source, "source")?;
    let target = SchemaBlob::decode(records.target, "target")?;
    let mut report = StaticReport {
        failures: Vec::new(),
        unknowns: Vec::new(),
    };
    for (role, record) in [
        ("lens", records.lens),
        ("source schema", records.source),
        ("target schema", records.target),
    ] {
        let Some(stated) = record.get("objectHash").and_then(Value::as_str) else {
            continue;
        };
        let actual = object_hash(record.get("blob").unwrap_or(&Value::Null));
        if !stated.eq_ignore_ascii_case(&actual) {
            report.failures.push(format!(
                "the {role} record's objectHash is {stated}, its blob hashes to {actual}"
            ));
        }
    }
    for (role, schema) in [("source", &source), ("target", &target)] {
        match protocol_verdict(schema, supplied) {
            ProtocolVerdict::Valid => {}
            ProtocolVerdict::Invalid(errors) => report.failures.push(format!(
                "the {role} schema is not valid under protocol {:?}: {}",
                schema.protocol,
                errors.join("; ")
            )),
            ProtocolVerdict::Unknown(name) => report.unknowns.push(format!(
                "the {role} schema names protocol {name:?}, not known here (pass --protocol FILE)"
            )),
        }
    }
    let protocol = resolve_protocol(&source.protocol, supplied).unwrap_or_default();
    let derived = lens.instantiate(&source.schema, &protocol)?.tgt_schema;
    let (derived, published) = (canonical_digest(&derived), canonical_digest(&target.schema));
    if derived != published {
        report.failures.push(format!(
            "the lens derives a target schema with digest {}, the published target schema's is {}",
            blake3::Hash::from(derived).to_hex(),
            blake3::Hash::from(published).to_hex()
        ));
    }
    Ok(report)
}
