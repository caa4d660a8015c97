//! DAG-CBOR, the encoding of repository blocks.
