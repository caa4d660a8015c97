//! `svc publish <kind> --record <path|->`: the same lexicon validation as the server, then
//! `com.atproto.repo.createRecord` with the stored session.

use super::record::{collection_of, create, known_kinds, new_rkey, prepare, session_for};
use super::{UsageError, print_json};
use crate::cli::PublishArgs;
use anyhow::Context;
use serde_json::Value;
use std::io::Read;
use svc_atproto::SessionStore;
use svc_lexicon::Lexicons;

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

pub async fn publish(args: &PublishArgs) -> anyhow::Result<()> {
    let lexicons = Lexicons::embedded();
    let collection = collection_of(&known_kinds(lexicons), &args.kind)?;
    let record = prepare(lexicons, &collection, read_record(&args.record)?)?;
    let rkey = match &args.rkey {
        Some(rkey) => svc_syntax::RecordKey::new(rkey.as_str())
            .map_err(|e| UsageError(format!("--rkey {rkey}: {e}")))?,
        None => new_rkey(),
    };
    let store = SessionStore::from_env();
    let session = session_for(&store, args.did.as_deref())?;
    print_json(&create(&store, session, &collection, &rkey, &record).await?)
}
