//! The lens runtime of `svc verify`, on the panproto crates (0.76): decoding lens and schema
//! blobs, the get/put round trip of one record, the static check, and the corpus reader.
//!
//! Kept in its own crate so that nothing else of svc (the server above all) builds panproto.
//! No IO here: the command line fetches records and prints; this crate judges.

mod blob;
mod corpus;
mod diff;
mod misfit;
mod roundtrip;
mod static_check;

pub use blob::{LensBlob, SchemaBlob, object_hash};
pub use corpus::{CorpusRecord, parse_corpus};
pub use diff::Difference;
pub use misfit::misfits;
pub use panproto_schema::Protocol;
pub use roundtrip::{Roundtrip, Step};
pub use static_check::{PublishedLens, StaticReport, resolve_protocol, static_check};

/// What can stop a verification before it reaches a verdict. Never a falsification: a blob
/// this runtime cannot read says nothing about the lens.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("unparseable lens blob (neither a protolens chain nor a protolens): {0}")]
    LensBlob(String),
    #[error("unparseable {role} schema blob: {message}")]
    SchemaBlob { role: &'static str, message: String },
    #[error("the {role} schema has no entry vertex")]
    NoEntry { role: &'static str },
    #[error("the lens does not instantiate on its source schema: {0}")]
    Instantiate(String),
    #[error("{record}: {step}: {message}")]
    Record {
        record: CorpusPlace,
        step: Step,
        message: String,
    },
    #[error("corpus line {line}: {message}")]
    CorpusLine { line: usize, message: String },
}

/// Where a corpus record came from: its index, and its line in a JSON Lines file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorpusPlace {
    pub index: usize,
    pub line: Option<usize>,
}

impl std::fmt::Display for CorpusPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "corpus record {}", self.index)?;
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}
