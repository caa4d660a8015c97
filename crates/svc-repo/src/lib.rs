//! AT Protocol repositories, checked rather than believed: the signing keys a DID document
//! names and commit signatures (`crypto`), DAG-CBOR (`dagcbor`), and the Merkle Search Tree
//! with Sync 1.1 commit proofs (`mst`, `sync`) and whole repositories (`snapshot`). Pure
//! functions over bytes, no IO. With the `author` feature, repositories written too
//! (`author`): real signed commits and their firehose frames, for tests and benchmarks.

#[cfg(feature = "author")]
pub mod author;
pub mod car;
pub mod commit;
pub mod crypto;
pub mod dagcbor;
pub mod mst;
pub mod snapshot;
pub mod sync;
