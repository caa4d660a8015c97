//! Signing keys (`did:key`, multikey) and signatures.
