//! The Merkle Search Tree of a repository.
