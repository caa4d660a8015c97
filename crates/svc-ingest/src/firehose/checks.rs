//! The ordered check pipeline of a live source's verified commits: each message's commit is
//! checked (proof and signature, by the [`Verifier`]) on a task of its own, many at once, and
//! the messages leave in the stream's order, each with what its check found. [`Checks::judge`]
//! then places a checked commit in its repository's chain, or takes the commits out of a
//! message that cannot be verified.

use super::verifier::{Checked, Verifier};
use super::{Proof, SourceEvent, SourceMessage};
use crate::metrics::IngestMetrics;
use crate::unverified::{Reason, Unverified};
use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use svc_syntax::{Did, Tid};

/// Commits being checked at once (proof and signature, on every core), ahead of the one the
/// stream applies next.
const MAX_CHECKING: usize = 256;

/// What checking a message's commit found: nothing to check, or the commit checked, or why
/// not, with the repository and revision it claims.
pub(super) type Verdict = Option<Result<Checked, (Option<(Did, Tid)>, Unverified)>>;

type Checking = Pin<Box<dyn Future<Output = (SourceMessage, Verdict)> + Send>>;

/// Messages whose commits are being checked, in the stream's order: each leaves once it and
/// every one before it are checked.
pub(super) struct Checks<'a> {
    /// What commits are checked with; `None` when the source's commits are not verified.
    verifier: Option<&'a Arc<Verifier>>,
    waiting: FuturesOrdered<Checking>,
}

impl<'a> Checks<'a> {
    pub fn new(verifier: Option<&'a Arc<Verifier>>) -> Checks<'a> {
        Checks {
            verifier,
            waiting: FuturesOrdered::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Starts checking a message's commit; returns a message that may be taken now: this one
    /// when it has nothing to check and none waits before it, else the oldest once
    /// [`MAX_CHECKING`] wait.
    pub async fn admit(&mut self, mut message: SourceMessage) -> Option<(SourceMessage, Verdict)> {
        let verdict: Checking = match (self.verifier, std::mem::take(&mut message.proof)) {
            (Some(verifier), Proof::Carried(proof)) => {
                let verifier = Arc::clone(verifier);
                let checking = tokio::spawn(async move {
                    let claimed = Some((proof.repo.clone(), proof.rev.clone()));
                    verifier.check(&proof).await.map_err(|why| (claimed, why))
                });
                Box::pin(async move {
                    let verdict = checking.await.unwrap_or_else(|error| {
                        Err((
                            None,
                            Unverified::new(Reason::Proof, format!("the check failed: {error}")),
                        ))
                    });
                    (message, Some(verdict))
                })
            }
            (Some(_), Proof::Missing(what)) => {
                let refused = Err((None, Unverified::new(Reason::Proof, what)));
                Box::pin(std::future::ready((message, Some(refused))))
            }
            (_, _) if self.waiting.is_empty() => return Some((message, None)),
            (_, _) => Box::pin(std::future::ready((message, None))),
        };
        self.waiting.push_back(verdict);
        if self.waiting.len() >= MAX_CHECKING {
            return self.next().await;
        }
        None
    }

    /// The oldest message once it is checked; `None` when none waits. Cancel-safe: a message
    /// is handed over only when this resolves.
    pub async fn next(&mut self) -> Option<(SourceMessage, Verdict)> {
        self.waiting.next().await
    }

    /// Places a checked commit in its repository's chain, or takes the commit events out of a
    /// message whose commit cannot be verified: counted by reason and logged (a passing fault
    /// owes the repository a whole read instead); the message's cursor moves on either way.
    pub fn judge(&self, message: &mut SourceMessage, verdict: Verdict, metrics: &IngestMetrics) {
        let (Some(verifier), Some(verdict)) = (self.verifier, verdict) else {
            return;
        };
        let outcome = verdict.and_then(|checked| {
            let claimed = Some((checked.did.clone(), checked.rev.clone()));
            verifier.follow(&checked).map_err(|why| (claimed, why))
        });
        match outcome {
            Ok(()) => {
                metrics.verified.inc();
                return;
            }
            Err((Some((did, rev)), why)) if why.transient => {
                // Not a verdict: the repository is owed a whole read, stored with this batch.
                if verifier.owe(&did, &rev) {
                    tracing::warn!(%did, %rev, "commit held back, its repository will be read whole: {why}");
                }
            }
            Err((claimed, why)) => {
                metrics.count_unverified(why.reason);
                let (did, rev) = claimed.map_or_else(
                    || ("?".to_string(), "?".to_string()),
                    |(did, rev)| (did.to_string(), rev.to_string()),
                );
                tracing::warn!(%did, %rev, reason = why.reason.label(), "commit not applied: {why}");
            }
        }
        message
            .events
            .retain(|event| !matches!(event, SourceEvent::Commit(_)));
    }
}
