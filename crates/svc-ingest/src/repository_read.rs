//! Reading one repository from its own PDS: whole (`com.atproto.sync.getRepo`) and verified
//! against its author's key, or, from a server that does not serve whole repositories (or with
//! verification off), listed record by record (`listRecords`), unverified. Every failure says
//! whether asking again later could undo it.

use crate::event::{Action, CommitEvent};
use crate::peer::{Client, MAX_REPOSITORY_BYTES, Paging};
use crate::read_budget::{BudgetError, Held, ReadBody, ReadBudget};
use crate::repository_verify::{
    MAX_REPOSITORY_RECORD_BYTES, MAX_REPOSITORY_RECORDS, VerifiedRepository, verify_repository,
};
use crate::signing_keys::{KeyCheckError, SigningKeys};
use crate::unverified::{Reason, Unverified};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::time::Duration;
use svc_atproto::{AtprotoError, Method};
use svc_syntax::{AtUri, Did};

/// A repository as it was read.
#[derive(Debug)]
pub(crate) enum RepositoryCopy {
    /// Read whole and verified: exactly the records it proves.
    Whole(Box<VerifiedRepository>),
    /// Listed record by record, unverified: the records listed, at the revision taken first.
    Listed(Vec<CommitEvent>),
}

/// A repository as its peer answered, not yet verified.
pub(crate) enum Fetched {
    /// Its whole export (`getRepo`), in memory or on disk.
    Whole(ReadBody),
    Listed(Vec<CommitEvent>),
}

/// Why a repository could not be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub(crate) struct ReadFailure {
    pub message: String,
    /// Asking again later could succeed.
    pub transient: bool,
    pub retry_after: Option<Duration>,
    /// What it proved not to be, when it was read and refused.
    pub refused: Option<Reason>,
    /// What the peer said of the account itself, when it did.
    pub account: Option<AccountSaid>,
}

/// What a peer says of an account by refusing to serve its repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AccountSaid {
    /// The PDS holds no such repository, or the directory no such DID (or a tombstone).
    Gone,
    /// The PDS holds it but serves it to nobody now: `deactivated`, `takendown`, `suspended`.
    Inactive(&'static str),
}

impl AccountSaid {
    fn of(error: &AtprotoError) -> Option<AccountSaid> {
        match error {
            AtprotoError::Xrpc { error, .. } => match error.as_str() {
                "RepoNotFound" | "RepoDeleted" => Some(AccountSaid::Gone),
                "RepoDeactivated" => Some(AccountSaid::Inactive("deactivated")),
                "RepoTakendown" => Some(AccountSaid::Inactive("takendown")),
                "RepoSuspended" => Some(AccountSaid::Inactive("suspended")),
                _ => None,
            },
            AtprotoError::Status {
                status: 404 | 410, ..
            } => Some(AccountSaid::Gone),
            _ => None,
        }
    }
}

impl From<AtprotoError> for ReadFailure {
    fn from(error: AtprotoError) -> ReadFailure {
        ReadFailure {
            transient: error.is_transient(),
            retry_after: error.retry_after(),
            message: error.to_string(),
            refused: None,
            account: AccountSaid::of(&error),
        }
    }
}

impl From<BudgetError> for ReadFailure {
    fn from(error: BudgetError) -> ReadFailure {
        match error {
            BudgetError::Peer(error) => ReadFailure::from(error),
            // Memory or disk in use now says nothing of the repository: read again later.
            other => ReadFailure {
                message: other.to_string(),
                transient: true,
                retry_after: None,
                refused: None,
                account: None,
            },
        }
    }
}

impl From<KeyCheckError> for ReadFailure {
    fn from(error: KeyCheckError) -> ReadFailure {
        let gone = matches!(error, KeyCheckError::Key { gone: true, .. });
        ReadFailure {
            account: gone.then_some(AccountSaid::Gone),
            ..ReadFailure::from(Unverified::from(error))
        }
    }
}

impl From<Unverified> for ReadFailure {
    fn from(error: Unverified) -> ReadFailure {
        ReadFailure {
            message: format!("{error} ({})", error.reason.label()),
            transient: error.transient,
            retry_after: error.retry_after,
            refused: (!error.transient).then_some(error.reason),
            account: None,
        }
    }
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

/// Where a repository is read: its own PDS, which its DID document names, or the server the
/// operator backfills from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pds {
    pub url: String,
    pub named_by_operator: bool,
}

/// What reading repositories works with.
pub(crate) struct RepositoryReader {
    pub keys: std::sync::Arc<SigningKeys>,
    /// A client of the servers DID documents name, connecting only where `reach` allows (its
    /// XRPC settings; the server is chosen per repository).
    pub client: Client,
    /// A client of the server the operator names.
    pub operator_client: Client,
    pub reach: svc_atproto::Reach,
    /// Whole repositories are verified; `false`: every repository is listed, unverified.
    pub verify: bool,
    /// The memory whole repositories are read and verified in, shared by every read.
    pub budget: ReadBudget,
    /// The collections read.
    pub collections: Vec<String>,
}

impl RepositoryReader {
    /// The repository's own PDS, from its DID document; `fallback` (the server that listed
    /// it) when the document cannot be read or names none.
    pub async fn pds(&self, did: &Did, fallback: Option<&str>) -> Result<Pds, ReadFailure> {
        let failure = match self.keys.locate(did).await {
            Ok(located) => match located.pds {
                Some(url) => {
                    self.reach.check(&url).map_err(ReadFailure::from)?;
                    return Ok(Pds {
                        url,
                        named_by_operator: false,
                    });
                }
                None => ReadFailure {
                    message: format!("{did} names no PDS (#atproto_pds)"),
                    transient: false,
                    retry_after: None,
                    refused: None,
                    account: None,
                },
            },
            Err(error) => ReadFailure::from(error),
        };
        match fallback {
            Some(server) => {
                tracing::warn!(%did, "no PDS from the DID document ({failure}); asking {server}");
                Ok(Pds {
                    url: server.to_string(),
                    named_by_operator: true,
                })
            }
            None => Err(failure),
        }
    }

    /// Reads the repository from `pds`: what the peer is asked, and all the time it may take
    /// (the copy is verified apart, by [`RepositoryReader::copy`], when memory allows).
    pub async fn fetch(&self, did: &Did, pds: &Pds) -> Result<Fetched, ReadFailure> {
        let client = match pds.named_by_operator {
            true => self.operator_client.at(&pds.url),
            false => self.client.at(&pds.url),
        };
        let pds = &pds.url;
        if self.verify {
            if let Some(whole) = self.fetch_whole(&client, did).await? {
                return Ok(Fetched::Whole(whole));
            }
            tracing::warn!(
                %did,
                "{pds} does not serve whole repositories; its records are listed, unverified"
            );
        }
        self.list(&client, did).await.map(Fetched::Listed)
    }

    /// The repository's whole answer, in memory or on disk as the budget allows; `None` when
    /// the server does not serve whole repositories.
    async fn fetch_whole(
        &self,
        client: &Client,
        did: &Did,
    ) -> Result<Option<ReadBody>, ReadFailure> {
        let whole = Client {
            xrpc: client.xrpc.clone().with_answer_limit(MAX_REPOSITORY_BYTES),
            base: client.base.clone(),
        };
        let Some(chunks) = whole.get_chunks(Method::GET_REPO, &[("did", did)]).await? else {
            return Ok(None);
        };
        Ok(Some(self.budget.read(chunks).await?))
    }

    /// The copy fetched, a whole one verified once memory for it is had, with that memory:
    /// held until the copy is applied.
    pub async fn copy(
        &self,
        did: &Did,
        fetched: Fetched,
    ) -> Result<(RepositoryCopy, Held), ReadFailure> {
        match fetched {
            Fetched::Listed(records) => Ok((RepositoryCopy::Listed(records), self.budget.none())),
            Fetched::Whole(body) => {
                let (car, held) = self.budget.whole(body).await?;
                let wanted = |collection: &str| self.collections.iter().any(|c| c == collection);
                let repository =
                    verify_repository(Some(&self.keys), car, Some(did), wanted).await?;
                Ok((RepositoryCopy::Whole(Box::new(repository)), held))
            }
        }
    }

    /// Every record of the collections, listed page by page.
    async fn list(&self, client: &Client, did: &Did) -> Result<Vec<CommitEvent>, ReadFailure> {
        // The revision is taken before listing: every listed record is at most that new.
        let Some(latest) = client
            .get::<LatestCommit>(Method::GET_LATEST_COMMIT, &[("did", did)])
            .await?
        else {
            return Ok(Vec::new());
        };
        let mut records = Vec::new();
        for collection in &self.collections {
            list_collection(client, did, collection, &latest.rev, &mut records).await?;
        }
        Ok(records)
    }
}

/// Pages through one collection of a repository.
async fn list_collection(
    client: &Client,
    did: &Did,
    collection: &str,
    rev: &str,
    records: &mut Vec<CommitEvent>,
) -> Result<(), ReadFailure> {
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
            return Ok(());
        };
        for record in &page.records {
            records.extend(listed_record(record, did, collection, rev));
        }
        let bytes: usize = records
            .iter()
            .filter_map(|record| record.record_json.as_ref())
            .map(String::len)
            .sum();
        if records.len() > MAX_REPOSITORY_RECORDS || bytes > MAX_REPOSITORY_RECORD_BYTES {
            return Err(ReadFailure {
                message: format!(
                    "{}: over {MAX_REPOSITORY_RECORDS} records or {} MiB listed for {did}; refused",
                    client.base,
                    MAX_REPOSITORY_RECORD_BYTES >> 20
                ),
                transient: false,
                retry_after: None,
                refused: None,
                account: None,
            });
        }
        if !paging.next(page.cursor, page.records.len()) {
            return Ok(());
        }
    }
}

/// A listed record as a create at `rev`. A record of another repository or collection than
/// the one asked for is not believed; one whose value is not JSON reaches validation as
/// invalid.
fn listed_record(
    record: &RecordEntry,
    did: &Did,
    collection: &str,
    rev: &str,
) -> Option<CommitEvent> {
    let rkey = asked_for(&record.uri, did, collection)?;
    // Stored in the form it always was: compact, with sorted keys.
    let value = serde_json::from_str::<serde_json::Value>(record.value.get()).ok();
    Some(CommitEvent {
        did: did.to_string(),
        collection: collection.to_string(),
        rkey,
        action: Action::Create,
        rev: rev.to_string(),
        cid: record.cid.clone(),
        record_json: value.map(|value| value.to_string()),
        time_us: None,
    })
}

/// The record key of a listed record's uri, when the uri is one of the repository and
/// collection that were asked for.
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
                "a listed record is not of the repository and collection asked for"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_say_whether_a_retry_could_undo_them() {
        let unavailable = AtprotoError::Status {
            url: "http://plc.test/did:plc:a".into(),
            status: 503,
            message: "503 Service Unavailable".into(),
            retry_after: Some(Duration::from_secs(3)),
        };
        let failure = ReadFailure::from(unavailable);
        assert!(failure.transient);
        assert_eq!(failure.retry_after, Some(Duration::from_secs(3)));
        let gone = AtprotoError::Status {
            url: "http://plc.test/did:plc:a".into(),
            status: 404,
            message: "404 Not Found".into(),
            retry_after: None,
        };
        assert!(!ReadFailure::from(gone).transient);
        let taken_down = AtprotoError::Xrpc {
            url: String::new(),
            status: 400,
            error: "RepoTakendown".into(),
            message: String::new(),
            retry_after: None,
        };
        assert!(!ReadFailure::from(taken_down).transient);
        let forged = ReadFailure::from(Unverified::new(Reason::Signature, "bad signature"));
        assert_eq!(
            (forged.transient, forged.refused),
            (false, Some(Reason::Signature))
        );
    }
}
