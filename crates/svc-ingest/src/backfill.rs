//! `--backfill URL`: every family record already in a PDS (or relay) before the live stream
//! began. Lists the repositories (`listReposByCollection` per family collection where the
//! server has it, as relays do; `listRepos` otherwise) page by page into the catalog's
//! resynchronisation queue, each page in the transaction that stores where the listing stands,
//! so a restart with the same `--backfill` goes on from there (and one after the listing
//! ended lists nothing again). The queue's reader ([`Resync`]) then reads each repository
//! whole from its own PDS, verified, several at once, retrying what fails for a reason a
//! retry could undo until it succeeds. The live stream starts before the backfill, so nothing
//! falls in between, and revisions keep a late backfilled version from overwriting a newer
//! live one.

use crate::peer::{Client, Paging};
use crate::resync::{Resync, reasons};
use serde::Deserialize;
use std::collections::HashSet;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::Ordering;
use std::time::Duration;
use svc_atproto::{AtprotoError, Method, Xrpc};
use svc_catalog::{CatalogError, CatalogWrite, CursorPosition, ResyncRequest, SyncWrites};
use svc_syntax::Did;

/// The source name under which the listing's position is stored.
const SOURCE: &str = "backfill";
/// The stored position of a listing that ended.
const LISTED: &str = "listed";
/// Waits between attempts at a listing page, doubling from the first up to the last.
const FIRST_WAIT: Duration = Duration::from_millis(250);
const MAX_WAIT: Duration = Duration::from_secs(30);
/// How often the backfill looks at the queue while its repositories are read.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    #[error("{url}: {message}")]
    Http { url: String, message: String },
    #[error(transparent)]
    Atproto(#[from] AtprotoError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackfillSummary {
    /// Repositories read.
    pub repositories: u64,
    pub records: u64,
    pub applied: u64,
    pub stale: u64,
    pub invalid: u64,
    /// Repositories refused (a verdict on the data) and skipped.
    pub failed: u64,
    /// Repositories still waiting for a peer that keeps failing; they are read as soon as it
    /// answers.
    pub waiting: u64,
}

#[derive(Deserialize)]
struct RepoPage {
    #[serde(default)]
    repos: Vec<RepoEntry>,
    cursor: Option<String>,
}

#[derive(Deserialize)]
struct RepoEntry {
    did: String,
    active: Option<bool>,
}

/// Where a backfill reads: the server that lists the repositories.
#[derive(Debug, Clone, Copy)]
pub struct BackfillPeers<'a> {
    pub server: &'a str,
}

/// Where the listing stands, as stored: which listing, and the cursor within it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Listing {
    /// `listReposByCollection` of the collection at this index.
    ByCollection(usize, Option<String>),
    /// `listRepos`.
    All(Option<String>),
    Done,
}

impl Listing {
    fn stored(&self) -> String {
        match self {
            Listing::ByCollection(index, cursor) => {
                format!("collection {index} {}", cursor.as_deref().unwrap_or(""))
            }
            Listing::All(cursor) => format!("all {}", cursor.as_deref().unwrap_or("")),
            Listing::Done => LISTED.to_string(),
        }
    }

    fn parse(stored: &str) -> Option<Listing> {
        let cursor = |rest: &str| (!rest.is_empty()).then(|| rest.to_string());
        if stored == LISTED {
            return Some(Listing::Done);
        }
        if let Some(rest) = stored.strip_prefix("collection ") {
            let (index, rest) = rest.split_once(' ')?;
            return Some(Listing::ByCollection(index.parse().ok()?, cursor(rest)));
        }
        stored
            .strip_prefix("all ")
            .map(|rest| Listing::All(cursor(rest)))
    }
}

/// Backfills every family collection of every active repository the server lists.
/// `progress(done, total)` follows the repositories. Returns once every listed repository
/// was read or tried for a while; those still failing go on being read afterwards.
pub async fn run_backfill(
    catalog: &dyn CatalogWrite,
    resync: &Resync,
    peers: BackfillPeers<'_>,
    collections: &[String],
    progress: impl Fn(u64, u64),
) -> Result<BackfillSummary, BackfillError> {
    let server = peers.server.trim_end_matches('/');
    resync.set_fallback(server);
    let ingestor_skips = resync.skips();
    ingestor_skips.clear();
    let counts = resync.progress();
    let before = Counts::of(counts);
    let http = svc_atproto::http_client(svc_atproto::REQUEST_TIMEOUT)?;
    let listing = Lister {
        catalog,
        resync,
        client: Client::new(Xrpc::new(http), server),
        collections,
        queued: std::sync::Mutex::new((HashSet::new(), RandomState::new())),
    };
    let listed = listing.run().await?;
    let metrics = resync.ingestor_metrics();
    loop {
        let summary = catalog.resync_summary().await?;
        let now = Counts::of(counts).since(&before);
        let total = now.read + now.refused + summary.waiting;
        metrics.backfill_repos_total.set(total as i64);
        metrics
            .backfill_repos_done
            .set((now.read + now.refused) as i64);
        metrics.backfill_repos_skipped.set(now.refused as i64);
        progress(now.read + now.refused, total.max(listed));
        if summary.fresh == 0 {
            if let Some(skipped) = ingestor_skips.describe() {
                tracing::warn!("backfill: {skipped} (each logged above with its reason)");
            }
            return Ok(BackfillSummary {
                repositories: now.read,
                records: now.records,
                applied: now.applied,
                stale: now.stale,
                invalid: now.invalid,
                failed: now.refused,
                waiting: summary.waiting,
            });
        }
        tokio::time::sleep(PROGRESS_EVERY).await;
    }
}

/// The reader's counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    read: u64,
    refused: u64,
    records: u64,
    applied: u64,
    stale: u64,
    invalid: u64,
}

impl Counts {
    fn of(progress: &crate::ResyncProgress) -> Counts {
        Counts {
            read: progress.read.load(Ordering::Relaxed),
            refused: progress.refused.load(Ordering::Relaxed),
            records: progress.records.load(Ordering::Relaxed),
            applied: progress.applied.load(Ordering::Relaxed),
            stale: progress.stale.load(Ordering::Relaxed),
            invalid: progress.invalid.load(Ordering::Relaxed),
        }
    }

    fn since(&self, before: &Counts) -> Counts {
        Counts {
            read: self.read - before.read,
            refused: self.refused - before.refused,
            records: self.records - before.records,
            applied: self.applied - before.applied,
            stale: self.stale - before.stale,
            invalid: self.invalid - before.invalid,
        }
    }
}

/// Lists the server's repositories into the queue.
struct Lister<'a> {
    catalog: &'a dyn CatalogWrite,
    resync: &'a Resync,
    client: Client,
    collections: &'a [String],
    /// Hashes of the DIDs queued by this listing, so that one listed under several
    /// collections is read once (up to [`MAX_REMEMBERED`]; past it, at worst read again).
    queued: std::sync::Mutex<(HashSet<u64>, RandomState)>,
}

/// DIDs a listing remembers having queued at most (8 bytes each, with the set's own).
const MAX_REMEMBERED: usize = 1_000_000;

impl Lister<'_> {
    /// Lists from where the stored position says; how many repositories it listed now.
    async fn run(&self) -> Result<u64, BackfillError> {
        let Some(mut listing) = self.start().await? else {
            return Ok(0);
        };
        let mut listed = 0;
        let mut paging = Paging::from(self.describe(&listing), cursor_of(&listing));
        loop {
            let Some(page) = self.page(&listing, paging.cursor()).await? else {
                listing = match listing {
                    Listing::ByCollection(0, None) => Listing::All(None),
                    Listing::ByCollection(..) | Listing::All(_) | Listing::Done => {
                        return Err(BackfillError::Http {
                            url: self.client.base.clone(),
                            message: "neither listReposByCollection nor listRepos is available"
                                .into(),
                        });
                    }
                };
                paging = Paging::new(self.describe(&listing));
                continue;
            };
            let count = page.repos.len();
            let dids = page
                .repos
                .into_iter()
                .filter(|repo| repo.active != Some(false))
                .filter_map(|repo| Did::new(repo.did).ok());
            let more = paging.next(page.cursor, count);
            let next = self.after(&listing, more, paging.cursor());
            listed += self.queue(dids.collect(), &next).await?;
            if next == Listing::Done {
                tracing::info!(listed, "backfill: the listing ended");
                return Ok(listed);
            }
            if !more {
                paging = Paging::new(self.describe(&next));
            }
            listing = next;
        }
    }

    /// Where the listing starts: where the stored position says for this server, else at the
    /// first collection; `None` when this server was listed whole before.
    async fn start(&self) -> Result<Option<Listing>, BackfillError> {
        let stored = self.catalog.cursor(SOURCE.to_string()).await?;
        let resumed = stored
            .filter(|stored| stored.endpoint == self.client.base)
            .and_then(|stored| Listing::parse(&stored.cursor));
        Ok(match resumed {
            Some(Listing::Done) => {
                tracing::info!(server = %self.client.base, "backfill: this server was listed before; reading what it listed");
                None
            }
            Some(listing) => {
                tracing::info!(server = %self.client.base, at = %listing.stored(), "backfill: resuming the listing");
                Some(listing)
            }
            None => Some(Listing::ByCollection(0, None)),
        })
    }

    /// Where the listing goes after a page of `listing`: on with `cursor` while `more`, else
    /// to the next collection, else done.
    fn after(&self, listing: &Listing, more: bool, cursor: Option<&str>) -> Listing {
        match (listing, more) {
            (Listing::ByCollection(index, _), true) => {
                Listing::ByCollection(*index, cursor.map(str::to_string))
            }
            (Listing::ByCollection(index, _), false) if index + 1 < self.collections.len() => {
                Listing::ByCollection(index + 1, None)
            }
            (Listing::All(_), true) => Listing::All(cursor.map(str::to_string)),
            _ => Listing::Done,
        }
    }

    fn describe(&self, listing: &Listing) -> String {
        match listing {
            Listing::ByCollection(index, _) => format!(
                "listReposByCollection {} at {}",
                self.collections.get(*index).map_or("?", String::as_str),
                self.client.base
            ),
            _ => format!("listRepos at {}", self.client.base),
        }
    }

    /// One page of the listing, asked until the server answers (a failure a retry could
    /// undo is waited out); `None` when the server lacks the method.
    async fn page(
        &self,
        listing: &Listing,
        cursor: Option<&str>,
    ) -> Result<Option<RepoPage>, BackfillError> {
        let (method, collection) = match listing {
            Listing::ByCollection(index, _) => (
                Method::LIST_REPOS_BY_COLLECTION,
                self.collections.get(*index).map(String::as_str),
            ),
            _ => (Method::LIST_REPOS, None),
        };
        let mut query = vec![("limit", "1000")];
        if let Some(collection) = collection {
            query.push(("collection", collection));
        }
        if let Some(cursor) = cursor {
            query.push(("cursor", cursor));
        }
        let mut wait = FIRST_WAIT;
        loop {
            match self.client.get::<RepoPage>(method, &query).await {
                Ok(page) => return Ok(page),
                Err(error) if error.is_transient() => {
                    tracing::warn!("backfill: {error}; asking again");
                    tokio::time::sleep(wait.max(error.retry_after().unwrap_or_default())).await;
                    wait = (wait * 2).min(MAX_WAIT);
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Queues a page's repositories with the listing's new position, in one transaction.
    async fn queue(&self, dids: Vec<Did>, next: &Listing) -> Result<u64, BackfillError> {
        let dids = self.not_queued_yet(dids);
        let count = dids.len() as u64;
        let queued = dids
            .into_iter()
            .map(|did| ResyncRequest {
                did,
                reason: reasons::BACKFILL.into(),
            })
            .collect();
        let position = CursorPosition {
            source: SOURCE.to_string(),
            endpoint: self.client.base.clone(),
            cursor: next.stored(),
            event_time: None,
        };
        let sync = SyncWrites {
            queued,
            ..SyncWrites::default()
        };
        self.catalog
            .apply_synced(Vec::new(), Some(position), sync)
            .await?;
        self.resync.wake();
        Ok(count)
    }
}

impl Lister<'_> {
    fn not_queued_yet(&self, dids: Vec<Did>) -> Vec<Did> {
        let mut queued = self.queued.lock().unwrap_or_else(|p| p.into_inner());
        let (seen, hasher) = &mut *queued;
        dids.into_iter()
            .filter(|did| {
                let hash = hasher.hash_one(did.as_str());
                seen.len() >= MAX_REMEMBERED || seen.insert(hash)
            })
            .collect()
    }
}

fn cursor_of(listing: &Listing) -> Option<String> {
    match listing {
        Listing::ByCollection(_, cursor) | Listing::All(cursor) => cursor.clone(),
        Listing::Done => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_a_listing_stands_is_stored_and_read_back() {
        for listing in [
            Listing::ByCollection(0, None),
            Listing::ByCollection(3, Some("did:plc:x y".into())),
            Listing::All(None),
            Listing::All(Some("abc".into())),
            Listing::Done,
        ] {
            assert_eq!(Listing::parse(&listing.stored()), Some(listing));
        }
        assert_eq!(Listing::parse("nonsense"), None);
        assert_eq!(Listing::parse("collection x y"), None);
    }
}
