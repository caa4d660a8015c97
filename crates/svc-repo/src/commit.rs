//! A repository's signed commit (`{did, version: 3, data, rev, prev, sig}`), the root block of
//! every repository and of every `#commit` event's slice. Its signature covers the canonical
//! DAG-CBOR of the same map without `sig`.

use crate::crypto::{PublicKey, SignatureError};
use crate::dagcbor::{Cbor, CborError, CidBytes, decode_block, encode};
use svc_syntax::{Did, Tid};

/// The repository format version svc reads.
pub const VERSION: i128 = 3;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    #[error(transparent)]
    Cbor(#[from] CborError),
    #[error("commit: {0}")]
    Field(String),
    #[error("commit: version {0}, not {VERSION}")]
    Version(i128),
    #[error("commit signature: {0}")]
    Signature(#[from] SignatureError),
}

/// A decoded commit, with the bytes its signature covers.
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    pub did: Did,
    /// The root of the repository's tree (a binary CID).
    pub data: CidBytes,
    pub rev: Tid,
    /// The commit before it, when the writer names one (virtually never, in version 3).
    pub prev: Option<CidBytes>,
    pub sig: Vec<u8>,
    unsigned: Vec<u8>,
}

impl Commit {
    /// Reads a commit block; every field must be there with its type.
    pub fn decode(block: &[u8]) -> Result<Commit, CommitError> {
        let value = decode_block(block)?;
        let Cbor::Map(entries) = &value else {
            return Err(CommitError::Field("not a map".into()));
        };
        let field = |name: &str| {
            value
                .get(name)
                .ok_or_else(|| CommitError::Field(format!("no {name}")))
        };
        let text = |name: &str| {
            field(name)?
                .as_str()
                .ok_or_else(|| CommitError::Field(format!("{name} is not text")))
        };
        match field("version")? {
            Cbor::Integer(VERSION) => {}
            Cbor::Integer(other) => return Err(CommitError::Version(*other)),
            _ => return Err(CommitError::Field("version is not an integer".into())),
        }
        let invalid = |name: &'static str| {
            move |e: svc_syntax::SyntaxError| CommitError::Field(format!("{name}: {e}"))
        };
        let prev = match field("prev")? {
            Cbor::Null => None,
            Cbor::Link(cid) => Some(cid.clone()),
            _ => return Err(CommitError::Field("prev is neither null nor a link".into())),
        };
        let unsigned = Cbor::unsigned(entries);
        Ok(Commit {
            did: Did::new(text("did")?).map_err(invalid("did"))?,
            data: field("data")?
                .as_link()
                .ok_or_else(|| CommitError::Field("data is not a link".into()))?
                .into(),
            rev: Tid::new(text("rev")?).map_err(invalid("rev"))?,
            prev,
            sig: field("sig")?
                .as_bytes()
                .ok_or_else(|| CommitError::Field("sig is not bytes".into()))?
                .to_vec(),
            unsigned: encode(&unsigned)?,
        })
    }

    /// Whether `key` signed this commit.
    pub fn verify(&self, key: &PublicKey) -> Result<(), CommitError> {
        Ok(key.verify(&self.unsigned, &self.sig)?)
    }
}
