//! `--backfill URL`: every family record already in a PDS (or relay) before the live stream
//! began. Lists repositories (`listReposByCollection` per family collection where the server
//! has it, as relays do; `listRepos` otherwise), takes each repository's current revision, then
//! pages `com.atproto.repo.listRecords` per family collection and applies the records under
//! the normal ingest rules. The live stream starts before the backfill, so nothing falls in
//! between, and revisions keep a late backfilled version from overwriting a newer live one.
//!
//! Any account can name any server as its PDS, so every peer here is hostile until it answers
//! well: each request has a time limit and a size limit (`svc_atproto`), a listing ends when
//! its server repeats a cursor, a repository that cannot be read is skipped and named, and a
//! peer that made several repositories fail is asked nothing more.

use crate::event::{Action, CommitEvent};
use crate::ingest::{Ingestor, Prepared};
use crate::signing_keys::SigningKeys;
use crate::verification::{Unverified, verify_repository};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::BuildHasher;
use svc_atproto::{AtprotoError, Method, Resolver, Xrpc};
use svc_catalog::{ApplyReport, CatalogError, CatalogWrite, Change};
use svc_syntax::{AtUri, Did};

const SOURCE: &str = "backfill";
/// A peer whose own failures (no answer in time, an answer too large or not understood, a
/// server error through every retry) skipped this many repositories is asked nothing more in
/// this backfill: each such failure may cost minutes, and one server can name itself the PDS
/// of any number of accounts.
const PEER_FAILURES_BEFORE_GIVING_UP: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    #[error("{url}: {message}")]
    Http { url: String, message: String },
    #[error(transparent)]
    Atproto(#[from] AtprotoError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("{did}: the repository does not verify ({}): {error}", error.reason.label())]
    Unverified { did: Did, error: Unverified },
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
    /// Kept as text until its turn: a page of generic trees can take many times its text.
    value: Box<RawValue>,
}

#[derive(Deserialize)]
struct LatestCommit {
    rev: String,
}

/// Where a listing stands. It ends at a page with no cursor, at an empty page, and at a cursor
/// its server gave before: a server repeating itself would otherwise be asked forever.
struct Paging {
    /// What is listed, for the warnings.
    listing: String,
    cursor: Option<String>,
    /// Hashes of the cursors given so far: a page's worth of memory would be the cursor itself.
    seen: HashSet<u64>,
    hasher: RandomState,
}

impl Paging {
    fn new(listing: String) -> Paging {
        Paging {
            listing,
            cursor: None,
            seen: HashSet::new(),
            hasher: RandomState::new(),
        }
    }

    fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// Takes the cursor of a page of `items` items; `false` when the listing ends there.
    fn next(&mut self, cursor: Option<String>, items: usize) -> bool {
        let Some(cursor) = cursor else {
            return false;
        };
        let shown: String = cursor.chars().take(64).collect();
        if items == 0 {
            tracing::warn!(
                cursor = ?shown,
                "backfill: {}: an empty page names a further cursor; the listing ends here",
                self.listing
            );
            return false;
        }
        if !self.seen.insert(self.hasher.hash_one(&cursor)) {
            tracing::warn!(
                cursor = ?shown,
                "backfill: {}: the server gave this cursor before; the listing ends here",
                self.listing
            );
            return false;
        }
        self.cursor = Some(cursor);
        true
    }
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

    /// The answer's bytes, or `None` when this server does not have the method.
    async fn get_bytes(
        &self,
        method: Method,
        query: &[(&str, &str)],
    ) -> Result<Option<Vec<u8>>, BackfillError> {
        let mut retry = Retry::new();
        loop {
            match self.xrpc.query_bytes(&self.base, method, query).await {
                Ok(answer) => return Ok(Some(answer)),
                Err(error) if lacks_method(&error) => return Ok(None),
                Err(error) if is_transient(&error) && retry.again().await => {
                    tracing::warn!("backfill: {error}; asking again");
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// The answer, or `None` when this server does not have the method (a PDS asked a
    /// relay's method): the caller tries another way. Decoded straight from the bytes.
    async fn get<T: DeserializeOwned>(
        &self,
        method: Method,
        query: &[(&str, &str)],
    ) -> Result<Option<T>, BackfillError> {
        let Some(body) = self.get_bytes(method, query).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&body).map(Some).map_err(|e| {
            BackfillError::Atproto(AtprotoError::Invalid(format!(
                "{}/xrpc/{}: unexpected answer: {e}",
                self.base, method.0
            )))
        })
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

/// Whether a repository failed for its peer's sake (the peer is down, slow, or answers what
/// no PDS would) rather than its own (taken down, not found: an error answer).
fn is_the_peers_fault(error: &BackfillError) -> bool {
    match error {
        BackfillError::Atproto(AtprotoError::Xrpc { status, .. }) => {
            *status >= 500 || *status == 429
        }
        BackfillError::Atproto(_) | BackfillError::Http { .. } => true,
        // Its server sent a repository its author did not sign.
        BackfillError::Unverified { .. } => true,
        BackfillError::Catalog(_) => false,
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
    catalog: &dyn CatalogWrite,
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

/// Where a backfill reads: the server that lists the repositories, and the PLC directory that
/// names each repository's own PDS.
#[derive(Debug, Clone, Copy)]
pub struct BackfillPeers<'a> {
    pub server: &'a str,
    pub plc_directory: &'a str,
    /// Each repository is read whole (`getRepo`) and verified before its records apply; a
    /// server that does not serve whole repositories is listed (`listRecords`), unverified.
    /// `false`: every repository is listed.
    pub verify: bool,
}

/// Backfills every family collection of every active repository the server lists.
/// `progress(done, total)` follows the repositories.
pub async fn run_backfill(
    catalog: &dyn CatalogWrite,
    ingestor: &Ingestor,
    peers: BackfillPeers<'_>,
    collections: &[String],
    progress: impl Fn(u64, u64),
) -> Result<BackfillSummary, BackfillError> {
    let (keys, client) = clients(peers)?;
    let resolver = keys.resolver();
    let skips = ingestor.writes().backfill_skips();
    skips.clear();
    let repos = list_repositories(&client, collections).await?;
    let metrics = ingestor.metrics();
    metrics.backfill_repos_total.set(repos.len() as i64);
    metrics.backfill_repos_done.set(0);
    metrics.backfill_repos_skipped.set(0);
    let mut summary = BackfillSummary::default();
    let context = Backfill {
        catalog,
        ingestor,
        collections,
        keys: peers.verify.then_some(&keys),
    };
    let mut failures = PeerFailures::default();
    for (done, (did, rev)) in repos.iter().enumerate() {
        let own = own_client(resolver, &mut failures, &client, did).await;
        let peer = own.as_ref().unwrap_or(&client);
        let outcome = match failures.given_up(&peer.base) {
            Some(error) => Err(error),
            None => backfill_repository(&context, peer, did, rev.as_deref(), &mut summary).await,
        };
        // One repository that cannot be read (gone, taken down, a server error, a hostile
        // peer) is logged, named and skipped: nothing but storage failure stops ingestion.
        match outcome {
            Ok(()) => summary.repositories += 1,
            Err(BackfillError::Catalog(error)) => return Err(BackfillError::Catalog(error)),
            Err(error) => {
                if is_the_peers_fault(&error) {
                    failures.failed(&peer.base);
                }
                summary.failed += 1;
                skips.skipped(did);
                metrics.backfill_repos_skipped.set(summary.failed as i64);
                tracing::warn!(%did, "backfill skipped a repository: {error}");
            }
        }
        metrics.backfill_repos_done.set(done as i64 + 1);
        progress(done as u64 + 1, repos.len() as u64);
    }
    metrics.count(SOURCE, "invalid", summary.invalid);
    if let Some(skipped) = skips.describe() {
        tracing::warn!("backfill: {skipped} (each logged above with its reason)");
    }
    Ok(summary)
}

/// The signing keys (with the DID resolver they are read with), and the client of the server
/// that lists the repositories.
fn clients(peers: BackfillPeers<'_>) -> Result<(SigningKeys, Client), BackfillError> {
    let http = svc_atproto::http_client(svc_atproto::REQUEST_TIMEOUT)?;
    let resolver = SigningKeys::new(Resolver::new(http.clone(), peers.plc_directory));
    let client = Client {
        xrpc: Xrpc::new(http),
        base: peers.server.trim_end_matches('/').to_string(),
    };
    Ok((resolver, client))
}

/// A client of the repository's own PDS, or `None` to ask `client`. Records are read from the
/// repository's own PDS (a relay lists repositories but does not serve their records); the
/// given server when the DID document cannot be read.
async fn own_client(
    resolver: &Resolver,
    peers: &mut PeerFailures,
    client: &Client,
    did: &Did,
) -> Option<Client> {
    match own_pds(resolver, peers, did).await {
        Ok(host) => Some(client.at(host)),
        Err(error) => {
            tracing::warn!(
                %did,
                "backfill: no PDS from the DID document ({error}); asking {}",
                client.base
            );
            None
        }
    }
}

/// Failures of each peer that were its own, in one backfill. A peer is an origin (scheme,
/// host, port), so that one server is not made many by naming it with many paths.
#[derive(Default)]
struct PeerFailures(HashMap<String, u32>);

impl PeerFailures {
    fn peer(url: &str) -> String {
        svc_atproto::Url::parse(url)
            .map(|url| url.origin().ascii_serialization())
            .unwrap_or_else(|_| url.to_string())
    }

    /// The error standing for a peer given up on, or `None` while it may be asked.
    fn given_up(&self, url: &str) -> Option<BackfillError> {
        let failures = self.0.get(&Self::peer(url)).copied().unwrap_or(0);
        (failures >= PEER_FAILURES_BEFORE_GIVING_UP).then(|| BackfillError::Http {
            url: url.to_string(),
            message: format!("not asked: it failed {failures} times already"),
        })
    }

    fn failed(&mut self, url: &str) {
        let failures = self.0.entry(Self::peer(url)).or_default();
        // Counted only up to the limit: the map holds one number per peer whatever it does.
        *failures = (*failures + 1).min(PEER_FAILURES_BEFORE_GIVING_UP);
    }
}

/// The PDS a DID's document names. A did:web document comes from a host the account chose,
/// so that host is given up on as a PDS is; the PLC directory is the operator's, always asked.
async fn own_pds(
    resolver: &Resolver,
    peers: &mut PeerFailures,
    did: &Did,
) -> Result<String, BackfillError> {
    let chosen = did
        .starts_with("did:web:")
        .then(|| resolver.document_url(did).ok())
        .flatten();
    if let Some(error) = chosen.as_deref().and_then(|url| peers.given_up(url)) {
        return Err(error);
    }
    let error = match resolver.pds_of(did).await {
        Ok(pds) => return Ok(pds),
        Err(error) => BackfillError::Atproto(error),
    };
    if let Some(url) = chosen
        && matches!(
            error,
            BackfillError::Atproto(AtprotoError::Http { .. } | AtprotoError::TooLarge { .. })
        )
    {
        peers.failed(&url);
    }
    Err(error)
}

/// What every repository of one backfill shares.
struct Backfill<'a> {
    catalog: &'a dyn CatalogWrite,
    ingestor: &'a Ingestor,
    collections: &'a [String],
    /// What repositories read whole are verified with, when they are.
    keys: Option<&'a SigningKeys>,
}

/// Reads one repository's family records from `client`, its PDS.
async fn backfill_repository(
    context: &Backfill<'_>,
    client: &Client,
    did: &Did,
    rev: Option<&str>,
    summary: &mut BackfillSummary,
) -> Result<(), BackfillError> {
    if let Some(keys) = context.keys {
        if read_whole(context, keys, client, did, summary).await? {
            return Ok(());
        }
        tracing::warn!(
            %did,
            "backfill: {} does not serve whole repositories; its records are listed, unverified",
            client.base
        );
    }
    // The revision is taken before listing: every listed record is at most that new.
    let rev = match rev {
        Some(rev) => rev.to_string(),
        None => match client
            .get::<LatestCommit>(Method::GET_LATEST_COMMIT, &[("did", did)])
            .await?
        {
            Some(latest) => latest.rev,
            None => return Ok(()),
        },
    };
    for collection in context.collections {
        backfill_collection(context, client, did, collection, &rev, summary).await?;
    }
    Ok(())
}

/// Reads a repository whole from `client` and applies the family records it proves, once
/// its author's signature and its tree verify; `false` when the server does not serve whole
/// repositories. A repository that does not verify is refused whole.
async fn read_whole(
    context: &Backfill<'_>,
    keys: &SigningKeys,
    client: &Client,
    did: &Did,
    summary: &mut BackfillSummary,
) -> Result<bool, BackfillError> {
    let whole = Client {
        xrpc: (client.xrpc.clone()).with_answer_limit(crate::firehose::MAX_REPOSITORY_BYTES),
        base: client.base.clone(),
    };
    let Some(car) = whole.get_bytes(Method::GET_REPO, &[("did", did)]).await? else {
        return Ok(false);
    };
    let ingestor = context.ingestor;
    let repository = verify_repository(Some(keys), &car, Some(did), |c| {
        context.collections.iter().any(|wanted| wanted == c)
    })
    .await
    .map_err(|error| {
        ingestor.metrics().count_unverified(error.reason);
        BackfillError::Unverified {
            did: did.clone(),
            error,
        }
    })?;
    drop(car);
    let mut changes = Vec::new();
    for record in repository.records {
        summary.records += 1;
        match ingestor.prepare(record) {
            Prepared::Change(change) => changes.push(change),
            Prepared::Invalid => summary.invalid += 1,
            Prepared::Ignored => {}
        }
    }
    ingestor.metrics().verified.inc();
    for chunk in changes.chunks(1000) {
        let report = apply_until_written(context.catalog, ingestor, chunk.to_vec()).await;
        summary.applied += report.applied;
        summary.stale += report.stale;
        ingestor.metrics().count_report(SOURCE, &report);
    }
    Ok(true)
}

/// Pages through one collection of a repository, applying each page's records.
async fn backfill_collection(
    context: &Backfill<'_>,
    client: &Client,
    did: &Did,
    collection: &str,
    rev: &str,
    summary: &mut BackfillSummary,
) -> Result<(), BackfillError> {
    let mut paging = Paging::new(format!("listRecords {did} {collection} at {}", client.base));
    loop {
        let mut query = vec![
            ("repo", did.as_str()),
            ("collection", collection),
            ("limit", "100"),
        ];
        if let Some(c) = paging.cursor() {
            query.push(("cursor", c));
        }
        let Some(page) = client
            .get::<RecordPage>(Method::LIST_RECORDS, &query)
            .await?
        else {
            break;
        };
        let changes = page_changes(context.ingestor, did, collection, rev, &page, summary);
        if !changes.is_empty() {
            let report = apply_until_written(context.catalog, context.ingestor, changes).await;
            summary.applied += report.applied;
            summary.stale += report.stale;
            context.ingestor.metrics().count_report(SOURCE, &report);
        }
        if !paging.next(page.cursor, page.records.len()) {
            break;
        }
    }
    Ok(())
}

/// The record key of a listed record's uri, when the uri is one of the repository and
/// collection that were asked for: a server answering for another repository, or with
/// another collection's records, is not believed.
fn asked_for(uri: &str, did: &Did, collection: &str) -> Option<String> {
    let parsed = AtUri::new(uri).ok();
    let parts = parsed.as_ref().and_then(AtUri::record_parts);
    match parts {
        Some((from, of, rkey)) if from == *did && of.as_str() == collection => Some(rkey.into()),
        _ => {
            tracing::warn!(
                %did,
                %collection,
                uri = %uri.chars().take(300).collect::<String>(),
                "backfill: a listed record is not of the repository and collection asked for"
            );
            None
        }
    }
}

/// The changes a page of records makes, counting the records and the invalid ones.
fn page_changes(
    ingestor: &Ingestor,
    did: &Did,
    collection: &str,
    rev: &str,
    page: &RecordPage,
    summary: &mut BackfillSummary,
) -> Vec<Change> {
    let mut changes = Vec::with_capacity(page.records.len());
    for record in &page.records {
        summary.records += 1;
        let Some(rkey) = asked_for(&record.uri, did, collection) else {
            summary.invalid += 1;
            continue;
        };
        // Stored in the form it always was: compact, with sorted keys.
        let Ok(value) = serde_json::from_str::<serde_json::Value>(record.value.get()) else {
            summary.invalid += 1;
            continue;
        };
        let event = CommitEvent {
            did: did.to_string(),
            collection: collection.to_string(),
            rkey,
            action: Action::Create,
            rev: rev.to_string(),
            cid: record.cid.clone(),
            record_json: Some(value.to_string()),
            time_us: None,
        };
        match ingestor.prepare(event) {
            Prepared::Change(change) => changes.push(change),
            Prepared::Invalid => summary.invalid += 1,
            Prepared::Ignored => {}
        }
    }
    changes
}

/// DIDs (with their revision when the listing gives it) of the active repositories, each
/// once. An entry that is no DID is left out.
async fn list_repositories(
    client: &Client,
    collections: &[String],
) -> Result<Vec<(Did, Option<String>)>, BackfillError> {
    if let Some(by_collection) = list_by_collection(client, collections).await? {
        return Ok(by_collection.into_iter().map(|did| (did, None)).collect());
    }
    list_all_repositories(client).await
}

/// The DIDs a relay lists for the collections; `None` when the server is no relay (it lacks
/// `listReposByCollection`).
async fn list_by_collection(
    client: &Client,
    collections: &[String],
) -> Result<Option<BTreeSet<Did>>, BackfillError> {
    let mut by_collection: BTreeSet<Did> = BTreeSet::new();
    for collection in collections {
        let mut paging = Paging::new(format!(
            "listReposByCollection {collection} at {}",
            client.base
        ));
        loop {
            let mut query = vec![("collection", collection.as_str()), ("limit", "1000")];
            if let Some(c) = paging.cursor() {
                query.push(("cursor", c));
            }
            let Some(page) = client
                .get::<RepoPage>(Method::LIST_REPOS_BY_COLLECTION, &query)
                .await?
            else {
                return Ok(None);
            };
            let listed = page.repos.len();
            by_collection.extend(page.repos.into_iter().filter_map(|r| Did::new(r.did).ok()));
            if !paging.next(page.cursor, listed) {
                break;
            }
        }
    }
    Ok(Some(by_collection))
}

/// Every active repository `listRepos` names, with its revision.
async fn list_all_repositories(
    client: &Client,
) -> Result<Vec<(Did, Option<String>)>, BackfillError> {
    let mut repos = Vec::new();
    let mut listed: HashSet<Did> = HashSet::new();
    let mut paging = Paging::new(format!("listRepos at {}", client.base));
    loop {
        let mut query = vec![("limit", "1000")];
        if let Some(c) = paging.cursor() {
            query.push(("cursor", c));
        }
        let Some(page) = client.get::<RepoPage>(Method::LIST_REPOS, &query).await? else {
            return Err(BackfillError::Http {
                url: client.base.clone(),
                message: "neither listReposByCollection nor listRepos is available".into(),
            });
        };
        let count = page.repos.len();
        for repo in page.repos {
            let Ok(did) = Did::new(repo.did) else {
                continue;
            };
            if repo.active != Some(false) && listed.insert(did.clone()) {
                repos.push((did, repo.rev));
            }
        }
        if !paging.next(page.cursor, count) {
            break;
        }
    }
    Ok(repos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_ends_at_a_repeated_cursor_or_an_empty_page() {
        let mut paging = Paging::new("test".into());
        assert!(paging.next(Some("a".into()), 10));
        assert_eq!(paging.cursor(), Some("a"));
        assert!(paging.next(Some("b".into()), 10));
        // The same cursor again, or one given before: the server would be asked forever.
        assert!(!paging.next(Some("b".into()), 10));
        assert!(!paging.next(Some("a".into()), 10));
        let mut paging = Paging::new("test".into());
        assert!(!paging.next(Some("a".into()), 0));
        assert!(!paging.next(None, 10));
    }

    #[test]
    fn a_peer_is_given_up_on_after_its_own_failures_whatever_path_names_it() {
        let mut peers = PeerFailures::default();
        for n in 0..PEER_FAILURES_BEFORE_GIVING_UP {
            assert!(peers.given_up("https://pds.example").is_none());
            peers.failed(&format!("https://pds.example/path{n}"));
        }
        let error = peers
            .given_up("https://pds.example/other")
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("https://pds.example/other: not asked: it failed 3 times already")
        );
        assert!(peers.given_up("https://pds.example:8443").is_none());
        let transient = AtprotoError::Xrpc {
            url: String::new(),
            status: 502,
            error: String::new(),
            message: String::new(),
        };
        assert!(is_the_peers_fault(&BackfillError::Atproto(transient)));
        let taken_down = AtprotoError::Xrpc {
            url: String::new(),
            status: 400,
            error: "RepoTakendown".into(),
            message: String::new(),
        };
        assert!(!is_the_peers_fault(&BackfillError::Atproto(taken_down)));
    }
}
