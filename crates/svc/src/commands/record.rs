//! A record on its way to a repository, the same way for `publish`, `encounter record` and
//! `verify --publish`: kind to collection, lexicon validation with `$type`, a TID record key,
//! and `createRecord` with the stored session (refreshed once if its token expired).

use super::UsageError;
use anyhow::Context;
use serde_json::Value;
use svc_atproto::{AtprotoError, CreatedRecord, Session, SessionStore, Xrpc};
use svc_lexicon::Lexicons;
use svc_syntax::{Nsid, RecordKey};

/// `bounty`, `dev.svc.bounty` and (for vocabularies) `vocabulary` name the same kind.
pub fn collection_of(kind: &str) -> Result<Nsid, UsageError> {
    let lexicons = Lexicons::embedded();
    let name = kind.strip_prefix("dev.svc.").unwrap_or(kind);
    let name = if name == "vocabulary" { "vocab" } else { name };
    let nsid = format!("dev.svc.{name}");
    if lexicons.is_record_collection(&nsid)
        && let Ok(nsid) = Nsid::new(nsid)
    {
        return Ok(nsid);
    }
    let known: Vec<&str> = lexicons
        .record_collections()
        .map(|c| c.trim_start_matches("dev.svc."))
        .collect();
    Err(UsageError(format!(
        "unknown record kind {kind:?}; known kinds: {}",
        known.join(", ")
    )))
}

/// Adds `$type` and validates; the error names the failing path.
pub fn prepare(collection: &str, mut record: Value) -> anyhow::Result<Value> {
    let Some(object) = record.as_object_mut() else {
        anyhow::bail!("invalid record: record: must be a JSON object");
    };
    match object.get("$type").and_then(Value::as_str) {
        Some(declared) if declared != collection => {
            anyhow::bail!("invalid record: $type: is {declared}, not {collection}")
        }
        _ => {
            object.insert("$type".into(), Value::String(collection.to_string()));
        }
    }
    Lexicons::embedded()
        .validate_record(collection, &record)
        .map_err(|e| anyhow::anyhow!("invalid record: {e} (nothing was sent)"))?;
    Ok(record)
}

pub fn session_for(store: &SessionStore, did: Option<&str>) -> anyhow::Result<Session> {
    match did {
        Some(did) => store
            .load(did)?
            .with_context(|| format!("no stored session for {did}; run `svc oauth login` first")),
        None => store.list()?.into_iter().next().context(
            "no stored session; run `svc oauth login --handle ... --app-password ...` first",
        ),
    }
}

/// A TID clock id that differs between processes.
fn clock_id() -> u16 {
    ((svc_syntax::clock_noise() ^ std::process::id()) & 0x3ff) as u16
}

/// A new record key: a TID, with a clock id that differs between processes.
pub fn new_rkey() -> RecordKey {
    let tid = svc_syntax::TidGenerator::new(clock_id()).next_tid();
    RecordKey::new(tid).expect("a TID is a record key")
}

/// Publishes a prepared record into the session's repository.
pub async fn create(
    store: &SessionStore,
    mut session: Session,
    collection: &Nsid,
    rkey: &RecordKey,
    record: &Value,
) -> anyhow::Result<CreatedRecord> {
    let xrpc = Xrpc::new(super::http()?);
    match xrpc.create_record(&session, collection, rkey, record).await {
        // An expired (or otherwise refused) access token: refresh once, store, retry.
        Err(AtprotoError::Xrpc { error, .. })
            if error == "ExpiredToken" || error == "InvalidToken" =>
        {
            let tokens = xrpc
                .refresh_session(&session)
                .await
                .context("refreshing the session")?;
            session.access_jwt = tokens.access_jwt;
            session.refresh_jwt = tokens.refresh_jwt;
            store.save(&session)?;
            xrpc.create_record(&session, collection, rkey, record).await
        }
        other => other,
    }
    .map_err(|e| anyhow::anyhow!("the PDS refused the record: {e}"))
}
