//! The keys that sign the repositories a source's commits come from, read from each author's
//! DID document through the resolver and kept. A key can rotate: an `#identity` event forgets
//! it, and a commit whose signature fails is checked once more against the document read
//! again, so a rotated key never refuses a valid commit while a forged one stays refused.

use std::collections::HashMap;
use std::sync::Mutex;
use svc_atproto::{AtprotoError, Resolver};
use svc_repo::commit::{Commit, CommitError};
use svc_repo::crypto::PublicKey;
use svc_syntax::Did;

/// Keys kept at most: one DID document's worth of memory each (about 100 bytes with the map's
/// own), so the bound is some tens of megabytes whatever a source sends.
const MAX_KEYS: usize = 200_000;

#[derive(Debug, thiserror::Error)]
pub enum KeyCheckError {
    /// The key could not be read: the DID document is unreachable, or names none.
    #[error("signing key of {did}: {source}")]
    Key { did: Did, source: AtprotoError },
    /// The commit is not signed by the key the author's document names, read again.
    #[error("{0} (with the key the DID document names now)")]
    Signature(CommitError),
}

pub struct SigningKeys {
    resolver: Resolver,
    known: Mutex<HashMap<Did, PublicKey>>,
}

impl SigningKeys {
    pub fn new(resolver: Resolver) -> SigningKeys {
        SigningKeys {
            resolver,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The resolver the keys are read with.
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// The author's key: the one kept, else read from its DID document and kept.
    pub async fn key(&self, did: &Did) -> Result<PublicKey, KeyCheckError> {
        if let Some(key) = self.lock().get(did) {
            return Ok(*key);
        }
        self.read(did).await
    }

    /// The key is no longer known: the next commit reads it again (an `#identity` event).
    pub fn forget(&self, did: &Did) {
        self.lock().remove(did);
    }

    /// Whether the commit's author signed it, with the kept key, or else the key read again.
    pub async fn verify(&self, commit: &Commit) -> Result<(), KeyCheckError> {
        let kept = self.key(&commit.did).await?;
        if commit.verify(&kept).is_ok() {
            return Ok(());
        }
        let current = self.read(&commit.did).await?;
        commit.verify(&current).map_err(KeyCheckError::Signature)
    }

    async fn read(&self, did: &Did) -> Result<PublicKey, KeyCheckError> {
        let key = self
            .resolver
            .signing_key(did)
            .await
            .map_err(|source| KeyCheckError::Key {
                did: did.clone(),
                source,
            })?;
        let mut known = self.lock();
        if known.len() >= MAX_KEYS
            && !known.contains_key(did)
            && let Some(any) = known.keys().next().cloned()
        {
            known.remove(&any);
        }
        known.insert(did.clone(), key);
        Ok(key)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Did, PublicKey>> {
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
