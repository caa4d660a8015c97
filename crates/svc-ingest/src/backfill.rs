//! `--backfill URL`: every family record already in a PDS (or relay) before the live stream
//! began. Lists repositories (`listReposByCollection` per family collection where the server
//! has it, as relays do; `listRepos` otherwise), takes each repository's current revision, then
//! pages `com.atproto.repo.listRecords` per family collection and applies the records under
//! the normal ingest rules. The live stream starts before the backfill, so nothing falls in
//! between, and revisions keep a late backfilled version from overwriting a newer live one.

use crate::event::{Action, CommitEvent};
use crate::ingest::{Ingestor, Prepared};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeSet;
use svc_atproto::{AtprotoError, Resolver, Xrpc};
use svc_catalog::{ApplyReport, Catalog, CatalogError, Change};

const SOURCE: &str = "backfill";

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
    pub repositories: u64,
    pub records: u64,
    pub applied: u64,
    pub stale: u64,
    pub invalid: u64,
    /// Repositories that could not be read and were skipped.
    pub failed: u64,
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
    rev: Option<String>,
    active: Option<bool>,
}

#[derive(Deserialize)]
struct RecordPage {
    #[serde(default)]
    records: Vec<RecordEntry>,
    cursor: Option<String>,
}

#[derive(Deserialize)]
struct RecordEntry {
    uri: String,
    cid: Option<String>,
    value: serde_json::Value,
}

#[derive(Deserialize)]
struct LatestCommit {
    rev: String,
}

/// One server's XRPC methods, as the backfill asks them.
struct Client {
    xrpc: Xrpc,
    base: String,
}

impl Client {
    /// The same client, for another server.
    fn at(&self, base: String) -> Client {
        Client {
            xrpc: self.xrpc.clone(),
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// The answer, or `None` when this server does not have the method (a PDS asked a
    /// relay's method): the caller tries another way.
    async fn get<T: DeserializeOwned>(
        &self,
        method: &str,
        query: &[(&str, &str)],
    ) -> Result<Option<T>, BackfillError> {
        let mut retry = Retry::new();
        loop {
            match self.xrpc.query(&self.base, method, query).await {
                Ok(answer) => return Ok(Some(answer)),
                Err(error) if lacks_method(&error) => return Ok(None),
                Err(error) if is_transient(&error) && retry.again().await => {
                    tracing::warn!("backfill: {error}; asking again");
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
}

/// A server restarting, overloaded or briefly unreachable: worth asking again. Anything else
/// (a record gone, a bad request) will not change.
fn is_transient(error: &AtprotoError) -> bool {
    match error {
        AtprotoError::Http { .. } => true,
        AtprotoError::Xrpc { status, .. } => *status >= 500 || *status == 429,
        _ => false,
    }
}

/// Waits between attempts, doubling from 250 ms to 5 s: for a server, two minutes in all (long
/// enough for it to restart, short enough that a server gone for good is skipped); for the
/// catalog, for as long as it fails.
struct Retry {
    wait: std::time::Duration,
    deadline: Option<std::time::Instant>,
}

impl Retry {
    const FIRST_WAIT: std::time::Duration = std::time::Duration::from_millis(250);
    const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
    const GIVE_UP_AFTER: std::time::Duration = std::time::Duration::from_secs(120);

    fn new() -> Retry {
        Retry {
            wait: Self::FIRST_WAIT,
            deadline: Some(std::time::Instant::now() + Self::GIVE_UP_AFTER),
        }
    }

    fn forever() -> Retry {
        Retry {
            wait: Self::FIRST_WAIT,
            deadline: None,
        }
    }

    /// Sleeps before the next attempt; `false` when it is time to give up.
    async fn again(&mut self) -> bool {
        if self
            .deadline
            .is_some_and(|deadline| std::time::Instant::now() + self.wait > deadline)
        {
            return false;
        }
        tokio::time::sleep(self.wait).await;
        self.wait = (self.wait * 2).min(Self::MAX_WAIT);
        true
    }
}

/// Applies a page of changes, waiting out a failing catalog (a full disk) for as long as it
/// fails: the changes carry no cursor, so applying them again is harmless.
async fn apply_until_written(
    catalog: &dyn Catalog,
    ingestor: &Ingestor,
    changes: Vec<Change>,
) -> ApplyReport {
    let mut retry = Retry::forever();
    loop {
        match catalog.apply(changes.clone(), None).await {
            Ok(report) => {
                ingestor.writes().succeeded();
                return report;
            }
            Err(error) => {
                tracing::error!("backfill: writing to the catalog failed; retrying: {error}");
                ingestor.writes().failed(error.to_string());
                retry.again().await;
            }
        }
    }
}

/// A PDS answers a method it does not have with 501 or 404, MethodNotImplemented, or "No
/// service configured" when it would proxy it.
fn lacks_method(error: &AtprotoError) -> bool {
    match error {
        AtprotoError::Xrpc {
            status,
            error,
            message,
            ..
        } => {
            matches!(status, 404 | 501)
                || error == "MethodNotImplemented"
                || message.contains("No service configured")
        }
        _ => false,
    }
}

/// Backfills every family collection of every active repository of the server at `url`.
/// `progress(done, total)` follows the repositories.
pub async fn run_backfill(
    catalog: &dyn Catalog,
    ingestor: &Ingestor,
    url: &str,
    plc_url: &str,
    collections: &[String],
    progress: impl Fn(u64, u64),
) -> Result<BackfillSummary, BackfillError> {
    let http = svc_atproto::http_client(std::time::Duration::from_secs(60))?;
    let resolver = Resolver::new(http.clone(), plc_url);
    let client = Client {
        xrpc: Xrpc::new(http),
        base: url.trim_end_matches('/').to_string(),
    };
    let repos = list_repositories(&client, collections).await?;
    let metrics = ingestor.metrics();
    metrics.backfill_repos_total.set(repos.len() as i64);
    metrics.backfill_repos_done.set(0);
    let mut summary = BackfillSummary::default();
    let context = Backfill {
        catalog,
        ingestor,
        client: &client,
        resolver: &resolver,
        collections,
    };
    for (done, (did, rev)) in repos.iter().enumerate() {
        // One repository that cannot be read (gone, taken down, a server error) is logged and
        // skipped: nothing but storage failure stops ingestion.
        match backfill_repository(&context, did, rev.as_deref(), &mut summary).await {
            Ok(()) => summary.repositories += 1,
            Err(BackfillError::Catalog(error)) => return Err(BackfillError::Catalog(error)),
            Err(error) => {
                summary.failed += 1;
                tracing::warn!(%did, "backfill skipped a repository: {error}");
            }
        }
        metrics.backfill_repos_done.set(done as i64 + 1);
        progress(done as u64 + 1, repos.len() as u64);
    }
    metrics.count(SOURCE, "invalid", summary.invalid);
    Ok(summary)
}

/// What every repository of one backfill shares.
struct Backfill<'a> {
    catalog: &'a dyn Catalog,
    ingestor: &'a Ingestor,
    client: &'a Client,
    resolver: &'a Resolver,
    collections: &'a [String],
}

async fn backfill_repository(
    context: &Backfill<'_>,
    did: &str,
    rev: Option<&str>,
    summary: &mut BackfillSummary,
) -> Result<(), BackfillError> {
    let Backfill {
        catalog,
        ingestor,
        client,
        resolver,
        collections,
    } = *context;
    let metrics = ingestor.metrics();
    // Records are read from the repository's own PDS (a relay lists repositories but does not
    // serve their records); the given server when the DID document cannot be read.
    let own = resolver.pds_of(did).await.ok().map(|host| client.at(host));
    let client = own.as_ref().unwrap_or(client);
    // The revision is taken before listing: every listed record is at most that new.
    let rev = match rev {
        Some(rev) => rev.to_string(),
        None => match client
            .get::<LatestCommit>("com.atproto.sync.getLatestCommit", &[("did", did)])
            .await?
        {
            Some(latest) => latest.rev,
            None => return Ok(()),
        },
    };
    for collection in collections {
        let mut cursor: Option<String> = None;
        loop {
            let mut query = vec![
                ("repo", did),
                ("collection", collection.as_str()),
                ("limit", "100"),
            ];
            if let Some(c) = &cursor {
                query.push(("cursor", c));
            }
            let Some(page) = client
                .get::<RecordPage>("com.atproto.repo.listRecords", &query)
                .await?
            else {
                break;
            };
            let mut changes = Vec::with_capacity(page.records.len());
            for record in &page.records {
                summary.records += 1;
                let Some(rkey) = record.uri.rsplit('/').next() else {
                    continue;
                };
                let event = CommitEvent {
                    did: did.to_string(),
                    collection: collection.clone(),
                    rkey: rkey.to_string(),
                    action: Action::Create,
                    rev: rev.clone(),
                    cid: record.cid.clone(),
                    record_json: Some(record.value.to_string()),
                    time_us: None,
                };
                match ingestor.prepare(event) {
                    Prepared::Change(change) => changes.push(change),
                    Prepared::Invalid => summary.invalid += 1,
                    Prepared::Ignored => {}
                }
            }
            if !changes.is_empty() {
                let report = apply_until_written(catalog, ingestor, changes).await;
                summary.applied += report.applied;
                summary.stale += report.stale;
                metrics.count_report(SOURCE, &report);
            }
            match page.cursor {
                Some(next) if !page.records.is_empty() => cursor = Some(next),
                _ => break,
            }
        }
    }
    Ok(())
}

/// DIDs (with their revision when the listing gives it) of the active repositories.
async fn list_repositories(
    client: &Client,
    collections: &[String],
) -> Result<Vec<(String, Option<String>)>, BackfillError> {
    let mut by_collection: BTreeSet<String> = BTreeSet::new();
    let mut relay = true;
    'collections: for collection in collections {
        let mut cursor: Option<String> = None;
        loop {
            let mut query = vec![("collection", collection.as_str()), ("limit", "1000")];
            if let Some(c) = &cursor {
                query.push(("cursor", c));
            }
            match client
                .get::<RepoPage>("com.atproto.sync.listReposByCollection", &query)
                .await?
            {
                None => {
                    relay = false;
                    break 'collections;
                }
                Some(page) => {
                    by_collection.extend(page.repos.into_iter().map(|r| r.did));
                    match page.cursor {
                        Some(next) => cursor = Some(next),
                        None => break,
                    }
                }
            }
        }
    }
    if relay {
        return Ok(by_collection.into_iter().map(|did| (did, None)).collect());
    }
    let mut repos = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", "1000")];
        if let Some(c) = &cursor {
            query.push(("cursor", c));
        }
        let Some(page) = client
            .get::<RepoPage>("com.atproto.sync.listRepos", &query)
            .await?
        else {
            return Err(BackfillError::Http {
                url: client.base.clone(),
                message: "neither listReposByCollection nor listRepos is available".into(),
            });
        };
        let empty = page.repos.is_empty();
        repos.extend(
            page.repos
                .into_iter()
                .filter(|r| r.active != Some(false))
                .map(|r| (r.did, r.rev)),
        );
        match page.cursor {
            Some(next) if !empty => cursor = Some(next),
            _ => break,
        }
    }
    Ok(repos)
}
