//! `svc publish <kind> --record <path|->`: the same lexicon validation as the server, then
//! `com.atproto.repo.createRecord` with the stored session (refreshed once if expired).

use super::{UsageError, print_json};
use crate::cli::PublishArgs;
use anyhow::Context;
use serde_json::Value;
use std::io::Read;
use svc_atproto::{AtprotoError, Session, SessionStore, Xrpc, http_client};
use svc_lexicon::Lexicons;

/// `bounty`, `dev.svc.bounty` and (for vocabularies) `vocabulary` name the same kind.
pub fn collection_of(kind: &str) -> Result<String, UsageError> {
    let lexicons = Lexicons::embedded();
    let name = kind.strip_prefix("dev.svc.").unwrap_or(kind);
    let name = if name == "vocabulary" { "vocab" } else { name };
    let nsid = format!("dev.svc.{name}");
    if lexicons.is_record_collection(&nsid) {
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

fn read_record(source: &str) -> anyhow::Result<Value> {
    let text = if source == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the record from standard input")?;
        text
    } else {
        std::fs::read_to_string(source).with_context(|| format!("reading {source}"))?
    };
    serde_json::from_str(&text).with_context(|| format!("{source}: not JSON"))
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

fn session_for(store: &SessionStore, did: Option<&str>) -> anyhow::Result<Session> {
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
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    ((nanos ^ std::process::id()) & 0x3ff) as u16
}

pub fn publish(args: &PublishArgs) -> anyhow::Result<()> {
    let collection = collection_of(&args.kind)?;
    let record = prepare(&collection, read_record(&args.record)?)?;
    let rkey = match &args.rkey {
        Some(rkey) => {
            svc_syntax::check_record_key(rkey)
                .map_err(|e| UsageError(format!("--rkey {rkey}: {e}")))?;
            rkey.clone()
        }
        None => svc_syntax::TidGenerator::new(clock_id()).next_tid(),
    };
    let store = SessionStore::from_env();
    let mut session = session_for(&store, args.did.as_deref())?;
    let xrpc = Xrpc::new(http_client()?);
    let create = |session: &Session| {
        xrpc.create_record(
            &session.pds_url,
            &session.access_jwt,
            &session.did,
            &collection,
            &rkey,
            &record,
        )
    };
    let created = match create(&session) {
        // An expired (or otherwise refused) access token: refresh once, store, retry.
        Err(AtprotoError::Xrpc { error, .. })
            if error == "ExpiredToken" || error == "InvalidToken" =>
        {
            let tokens = xrpc
                .refresh_session(&session.pds_url, &session.refresh_jwt)
                .context("refreshing the session")?;
            session.access_jwt = tokens.access_jwt;
            session.refresh_jwt = tokens.refresh_jwt;
            store.save(&session)?;
            create(&session)
        }
        other => other,
    }
    .map_err(|e| anyhow::anyhow!("the PDS refused the record: {e}"))?;
    print_json(&created)
}
