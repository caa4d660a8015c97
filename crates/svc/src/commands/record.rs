//! A record on its way to a repository, the same way for `publish`, `encounter record` and
//! `verify --publish`: kind to collection, lexicon validation with `$type`, a TID record key,
//! and `createRecord` with the stored session (refreshed once if its token expired).

use super::UsageError;
use anyhow::Context;
use serde_json::Value;
use svc_atproto::{AtprotoError, CreatedRecord, Session, SessionStore, Xrpc};
use svc_lexicon::Lexicons;
use svc_spec::Kinds;
use svc_syntax::{Nsid, RecordKey};

/// The record kinds this build knows: its lexicons' record collections, as the kinds table
/// describes them.
pub fn known_kinds(lexicons: &Lexicons) -> Kinds {
    let collections: Vec<String> = lexicons.record_collections().map(str::to_string).collect();
    Kinds::embedded(&collections)
}

/// The collection a kind's name means: `bounty`, `dev.svc.bounty`, or an alias the kinds
/// table gives (`vocabulary`).
pub fn collection_of(kinds: &Kinds, kind: &str) -> Result<Nsid, UsageError> {
    if let Some(nsid) = kinds.named(kind).and_then(|nsid| Nsid::new(nsid).ok()) {
        return Ok(nsid);
    }
    let known: Vec<&str> = kinds
        .nsids()
        .map(|nsid| nsid.rsplit('.').next().unwrap_or(nsid))
        .collect();
    Err(UsageError(format!(
        "unknown record kind {kind:?}; known kinds: {}",
        known.join(", ")
    )))
}

/// Adds `$type` and validates against `lexicons`; the error names the failing path.
pub fn prepare(lexicons: &Lexicons, collection: &str, mut record: Value) -> anyhow::Result<Value> {
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
    lexicons
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use svc_spec::{EMBEDDED_KINDS, QuerySet};

    #[test]
    fn the_kinds_table_describes_kinds_the_lexicons_define_by_queries_the_spec_has() {
        let collections: Vec<String> = Lexicons::embedded()
            .record_collections()
            .map(str::to_string)
            .collect();
        let kinds = Kinds::load(EMBEDDED_KINDS, &collections).expect("the kinds table");
        kinds
            .check_queries(&QuerySet::embedded())
            .expect("the lists name queries");
        assert_eq!(kinds.nsids().count(), collections.len());
    }

    /// A kind added by its lexicon and an entry of the kinds table is published by its name or
    /// alias, its records checked against its lexicon before anything is sent.
    #[test]
    fn a_made_up_kind_is_published_by_its_name_and_alias() {
        let lexicon = r#"{"lexicon": 1, "id": "dev.svc.madeUp", "defs": {"main": {
            "type": "record", "key": "tid", "record": {"type": "object",
            "required": ["name"], "properties": {"name": {"type": "string", "maxLength": 8}}}}}}"#;
        let documents = Lexicons::embedded_documents().iter().copied();
        let lexicons = Lexicons::from_documents(documents.chain([lexicon])).expect("lexicons");
        let mut table: Value = serde_json::from_str(EMBEDDED_KINDS).expect("the kinds table");
        table["kinds"]["dev.svc.madeUp"] = json!({"aliases": ["thing"]});
        let collections: Vec<String> = lexicons.record_collections().map(str::to_string).collect();
        let kinds = Kinds::load(&table.to_string(), &collections).expect("the kinds");
        for name in ["madeUp", "thing", "dev.svc.madeUp"] {
            let nsid = collection_of(&kinds, name).expect(name);
            assert_eq!(nsid.as_str(), "dev.svc.madeUp");
        }
        let record = prepare(&lexicons, "dev.svc.madeUp", json!({"name": "widget"}));
        assert_eq!(record.expect("valid")["$type"], "dev.svc.madeUp");
        let refused = prepare(&lexicons, "dev.svc.madeUp", json!({"name": "far too long"}));
        assert!(refused.expect_err("too long").to_string().contains("name"));
        let unknown = collection_of(&kinds, "gadget").expect_err("unknown");
        assert!(unknown.0.contains("madeUp"), "{}", unknown.0);
    }
}
