//! The keys that sign the repositories a source's commits come from, read from each author's
//! DID document through the resolver and kept. A key can rotate: an `#identity` event forgets
//! it, and a commit whose signature fails is checked once more against the document read
//! again, so a rotated key never refuses a valid commit while a forged one stays refused.
//!
//! The directory is asked politely: every caller wanting the same DID's document at once
//! shares one request, at most [`READS_AT_ONCE`] documents are read at a time, a document
//! that could not be read just now is not asked for again for [`FAILURE_KEPT`] (the callers
//! hear the same failure, and keep what they owe until later), and a host that failed for a
//! reason a retry could undo (the directory down, rate-limiting) is asked nothing for
//! [`FAILURE_KEPT`], or for as long as it asked (`Retry-After`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svc_atproto::{AtprotoError, Resolver};
use svc_repo::commit::{Commit, CommitError};
use svc_repo::crypto::PublicKey;
use svc_syntax::Did;
use tokio::sync::{OnceCell, Semaphore};

/// Keys kept at most: one DID document's worth of memory each (about 100 bytes with the map's
/// own), so the bound is some tens of megabytes whatever a source sends.
const MAX_KEYS: usize = 200_000;
/// Documents read from the directory (or did:web hosts) at once.
const READS_AT_ONCE: usize = 16;
/// How long a failure to read a document stands for every caller before it is asked again.
const FAILURE_KEPT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, thiserror::Error)]
pub enum KeyCheckError {
    /// The key could not be read: the DID document is unreachable, or names none.
    #[error("signing key of {did}: {message}")]
    Key {
        did: Did,
        message: String,
        /// Asking again later could succeed (see [`AtprotoError::is_transient`]).
        transient: bool,
        retry_after: Option<Duration>,
        /// The directory (or the `did:web` host) holds no such DID, or its tombstone.
        gone: bool,
    },
    /// The commit is not signed by the key the author's document names, read again.
    #[error("{0} (with the key the DID document names now)")]
    Signature(CommitError),
}

impl KeyCheckError {
    fn reading(did: &Did, error: &AtprotoError) -> KeyCheckError {
        KeyCheckError::Key {
            did: did.clone(),
            message: error.to_string(),
            transient: error.is_transient(),
            retry_after: error.retry_after(),
            gone: matches!(
                error,
                AtprotoError::Status {
                    status: 404 | 410,
                    ..
                }
            ),
        }
    }

    /// Whether asking again later could succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            KeyCheckError::Key {
                transient: true,
                ..
            }
        )
    }
}

/// What one read of a DID document found: its PDS, and its key (or why it names none).
#[derive(Debug, Clone)]
pub struct Located {
    pub pds: Option<String>,
    pub key: Result<PublicKey, KeyCheckError>,
}

type Reading = Arc<OnceCell<Result<Located, KeyCheckError>>>;

#[derive(Default)]
struct Known {
    keys: HashMap<Did, PublicKey>,
    /// Reads under way, shared by whoever asks meanwhile.
    reading: HashMap<Did, Reading>,
    /// Recent failures, by when they stop standing.
    failed: HashMap<Did, (Instant, KeyCheckError)>,
    /// Hosts that failed for a reason a retry could undo, until when they are left alone.
    resting: HashMap<String, (Instant, String)>,
}

pub struct SigningKeys {
    resolver: Resolver,
    known: Mutex<Known>,
    reads: Semaphore,
}

impl SigningKeys {
    pub fn new(resolver: Resolver) -> SigningKeys {
        SigningKeys {
            resolver,
            known: Mutex::new(Known::default()),
            reads: Semaphore::new(READS_AT_ONCE),
        }
    }

    /// The resolver the keys are read with.
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// The author's key: the one kept, else read from its DID document and kept.
    pub async fn key(&self, did: &Did) -> Result<PublicKey, KeyCheckError> {
        if let Some(key) = self.lock().keys.get(did) {
            return Ok(*key);
        }
        self.read(did).await?.key
    }

    /// The author's PDS and key, read from its DID document now (and the key kept).
    pub async fn locate(&self, did: &Did) -> Result<Located, KeyCheckError> {
        self.read(did).await
    }

    /// The key is no longer known: the next commit reads it again (an `#identity` event).
    pub fn forget(&self, did: &Did) {
        let mut known = self.lock();
        known.keys.remove(did);
        known.failed.remove(did);
    }

    /// Whether the commit's author signed it, with the kept key, or else the key read again.
    pub async fn verify(&self, commit: &Commit) -> Result<(), KeyCheckError> {
        let kept = self.key(&commit.did).await?;
        if commit.verify(&kept).is_ok() {
            return Ok(());
        }
        let current = self.read(&commit.did).await?.key?;
        commit.verify(&current).map_err(KeyCheckError::Signature)
    }

    /// [`SigningKeys::verify`], waiting at most `wait` for a key to be read: the live
    /// source checks commits in the stream's order, and one author's slow host must not hold
    /// up the others. A read that takes longer goes on in the background (its key is kept, or
    /// its failure remembered), and meanwhile its host is left alone; the caller hears a
    /// transient failure and owes the repository a whole read.
    pub async fn verify_within(
        self: &Arc<Self>,
        commit: &Commit,
        wait: Duration,
    ) -> Result<(), KeyCheckError> {
        let kept = self.lock().keys.get(&commit.did).copied();
        let kept = match kept {
            Some(key) => key,
            None => self.read_within(&commit.did, wait).await?.key?,
        };
        if commit.verify(&kept).is_ok() {
            return Ok(());
        }
        let current = self.read_within(&commit.did, wait).await?.key?;
        commit.verify(&current).map_err(KeyCheckError::Signature)
    }

    /// Reads the document on a task of its own, waiting for it at most `wait`.
    pub(crate) async fn read_within(
        self: &Arc<Self>,
        did: &Did,
        wait: Duration,
    ) -> Result<Located, KeyCheckError> {
        let keys = Arc::clone(self);
        let owned = did.clone();
        let reading = tokio::spawn(async move { keys.read(&owned).await });
        match tokio::time::timeout(wait, reading).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(stopped)) => Err(KeyCheckError::Key {
                did: did.clone(),
                message: format!("the read of its DID document stopped: {stopped}"),
                transient: true,
                retry_after: None,
                gone: false,
            }),
            Err(_) => {
                let message = format!("its DID document did not come within {wait:?}");
                let mut known = self.lock();
                // Until the read under way ends, or the longest it may take.
                if let Some(host) = self.host_of(did)
                    && (known.resting.len() < MAX_KEYS || known.resting.contains_key(&host))
                {
                    let until = Instant::now() + svc_atproto::REQUEST_TIMEOUT;
                    known.resting.insert(host, (until, message.clone()));
                }
                Err(KeyCheckError::Key {
                    did: did.clone(),
                    message,
                    transient: true,
                    retry_after: None,
                    gone: false,
                })
            }
        }
    }

    /// Reads the document, or joins the read under way, or hears the failure that stands.
    async fn read(&self, did: &Did) -> Result<Located, KeyCheckError> {
        let reading = {
            let mut known = self.lock();
            if let Some((until, error)) = known.failed.get(did) {
                if Instant::now() < *until {
                    return Err(error.clone());
                }
                known.failed.remove(did);
            }
            if let Some(error) = self.resting(&mut known, did) {
                return Err(error);
            }
            Arc::clone(known.reading.entry(did.clone()).or_default())
        };
        let outcome = reading.get_or_init(|| self.read_now(did)).await.clone();
        let mut known = self.lock();
        if known
            .reading
            .get(did)
            .is_some_and(|under_way| Arc::ptr_eq(under_way, &reading))
        {
            known.reading.remove(did);
        }
        outcome
    }

    /// The failure standing for the host of `did`'s document while it is left alone.
    fn resting(&self, known: &mut Known, did: &Did) -> Option<KeyCheckError> {
        let host = self.host_of(did)?;
        let (until, message) = known.resting.get(&host)?;
        if Instant::now() >= *until {
            known.resting.remove(&host);
            return None;
        }
        Some(KeyCheckError::Key {
            did: did.clone(),
            message: format!("{host} failed just now, not asked again yet: {message}"),
            transient: true,
            retry_after: Some(until.saturating_duration_since(Instant::now())),
            gone: false,
        })
    }

    /// The host (scheme, host, port) `did`'s document is read from.
    fn host_of(&self, did: &Did) -> Option<String> {
        let url = self.resolver.document_url(did).ok()?;
        let url = svc_atproto::Url::parse(&url).ok()?;
        Some(url.origin().ascii_serialization())
    }

    async fn read_now(&self, did: &Did) -> Result<Located, KeyCheckError> {
        let started = Instant::now();
        let outcome = match self.reads.acquire().await {
            Ok(_slot) => self.resolver.key_and_pds(did).await,
            Err(_) => Err(AtprotoError::Invalid("the key reader is closed".into())),
        };
        let located = outcome
            .map(|(key, pds)| Located {
                pds,
                key: key.map_err(|error| KeyCheckError::reading(did, &error)),
            })
            .map_err(|error| KeyCheckError::reading(did, &error));
        let mut known = self.lock();
        if located.is_ok()
            && let Some(host) = self.host_of(did)
        {
            // The host answers: whatever rest it was given while it did not is over.
            known.resting.remove(&host);
        }
        match &located {
            Ok(Located { key: Ok(key), .. }) => {
                if known.keys.len() >= MAX_KEYS
                    && !known.keys.contains_key(did)
                    && let Some(any) = known.keys.keys().next().cloned()
                {
                    known.keys.remove(&any);
                }
                known.keys.insert(did.clone(), *key);
            }
            Ok(_) => {}
            Err(error) => {
                if let KeyCheckError::Key {
                    transient: true,
                    retry_after,
                    message,
                    ..
                } = error
                    && let Some(host) = self.host_of(did)
                    && (known.resting.len() < MAX_KEYS || known.resting.contains_key(&host))
                {
                    // A host that took long to fail is left alone as long.
                    let rest = FAILURE_KEPT
                        .max(retry_after.unwrap_or_default())
                        .max(started.elapsed());
                    known
                        .resting
                        .insert(host, (Instant::now() + rest, message.clone()));
                }
                if known.failed.len() >= MAX_KEYS {
                    let now = Instant::now();
                    known.failed.retain(|_, (until, _)| *until > now);
                }
                if known.failed.len() < MAX_KEYS {
                    let until = Instant::now() + FAILURE_KEPT;
                    known.failed.insert(did.clone(), (until, error.clone()));
                }
            }
        }
        located
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host that accepts connections and never answers.
    async fn hanging_host() -> (tokio::net::TcpListener, u16) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        (listener, port)
    }

    #[tokio::test]
    async fn a_hanging_host_costs_one_short_wait_and_then_is_left_alone() {
        svc_atproto::install_crypto();
        let (_listener, port) = hanging_host().await;
        let http = svc_atproto::http_client(svc_atproto::REQUEST_TIMEOUT).unwrap();
        let keys = Arc::new(SigningKeys::new(Resolver::new(http, "http://127.0.0.1:1")));
        let first = Did::new(format!("did:web:127.0.0.1%3A{port}")).unwrap();
        let wait = Duration::from_millis(300);
        let started = Instant::now();
        let error = keys.read_within(&first, wait).await.unwrap_err();
        let took = started.elapsed();
        assert!(error.is_transient(), "{error}");
        assert!(took >= wait && took < wait * 3, "{took:?}");
        // Asked again while its host is left alone, the answer comes at once.
        let again = Instant::now();
        let error = keys.read_within(&first, wait).await.unwrap_err();
        assert!(again.elapsed() < wait / 2, "{:?}", again.elapsed());
        assert!(error.is_transient(), "{error}");
        assert!(error.to_string().contains("not asked again yet"), "{error}");
    }
}
