//! `com.atproto.sync.subscribeRepos` frames: a DAG-CBOR header `{op, t}` then a body. Commit
//! ops take their record from the frame's CAR slice, converted to atproto JSON.

use super::car;
use super::dagcbor::{self, Cbor};
use super::{SourceEvent, SourceMessage};
use crate::event::{Action, CommitEvent, account_status};
use std::collections::HashMap;

fn time_of(body: &Cbor) -> Option<i64> {
    body.get("time")
        .and_then(Cbor::as_str)
        .and_then(svc_syntax::datetime_to_unix_micros)
}

/// Decodes one binary websocket message of the repository firehose. Records are converted to
/// JSON only for collections `wanted` says yes to: on a relay, nearly every op is of another
/// family, and is ignored unread.
pub fn decode_frame(bytes: &[u8], wanted: impl Fn(&str) -> bool) -> Result<SourceMessage, String> {
    let (header, rest) = dagcbor::decode(bytes).map_err(|e| format!("header: {e}"))?;
    let (body, _) = dagcbor::decode(rest).map_err(|e| format!("body: {e}"))?;
    let op = header
        .get("op")
        .and_then(Cbor::as_i64)
        .ok_or("header without op")?;
    if op == -1 {
        let error = body
            .get("error")
            .and_then(Cbor::as_str)
            .unwrap_or("unknown");
        let message = body.get("message").and_then(Cbor::as_str).unwrap_or("");
        return Ok(SourceMessage::only(SourceEvent::Error {
            error: error.into(),
            message: message.into(),
        }));
    }
    let seq = body.get("seq").and_then(Cbor::as_i64);
    let time_us = time_of(&body);
    let did = || {
        body.get("did")
            .and_then(Cbor::as_str)
            .map(str::to_string)
            .ok_or("event without did")
    };
    let events = match header.get("t").and_then(Cbor::as_str) {
        Some("#commit") => commit_events(&body, time_us, wanted)?,
        Some("#account") => {
            let active = body.get("active").and_then(Cbor::as_bool).unwrap_or(true);
            let status = account_status(active, body.get("status").and_then(Cbor::as_str));
            // The did is stored with the status, so it is checked as a commit's repo is.
            let did = svc_syntax::Did::new(did()?).map_err(|e| format!("account did: {e}"))?;
            vec![SourceEvent::Account { did, status }]
        }
        Some("#identity") => vec![SourceEvent::Identity { did: did()? }],
        Some("#info") => {
            let name = body.get("name").and_then(Cbor::as_str).unwrap_or("unknown");
            let message = body.get("message").and_then(Cbor::as_str).unwrap_or("");
            vec![SourceEvent::Info {
                name: name.into(),
                message: message.into(),
            }]
        }
        // #sync and types of later versions move the cursor and nothing else.
        _ => Vec::new(),
    };
    Ok(SourceMessage {
        events,
        cursor: seq,
        time_us,
    })
}

fn commit_events(
    body: &Cbor,
    time_us: Option<i64>,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<SourceEvent>, String> {
    let repo = body
        .get("repo")
        .and_then(Cbor::as_str)
        .ok_or("commit without repo")?;
    svc_syntax::check_did(repo).map_err(|e| format!("commit repo: {e}"))?;
    let rev = body
        .get("rev")
        .and_then(Cbor::as_str)
        .ok_or("commit without rev")?;
    let Some(Cbor::Array(ops)) = body.get("ops") else {
        return Err("commit without ops".into());
    };
    let blocks = match body.get("blocks") {
        Some(Cbor::Bytes(bytes)) => car::blocks(bytes).map_err(|e| e.to_string())?,
        _ => Default::default(),
    };
    let commit = Commit {
        repo,
        rev,
        blocks: &blocks,
        time_us,
    };
    Ok(ops
        .iter()
        .filter_map(|op| commit.op_event(op, &wanted))
        .collect())
}

/// What every op of one commit shares.
struct Commit<'a> {
    repo: &'a str,
    rev: &'a str,
    /// The CAR slice's blocks by CID.
    blocks: &'a HashMap<Vec<u8>, Vec<u8>>,
    time_us: Option<i64>,
}

impl Commit<'_> {
    /// The event of one op; `None` for an op that names no record or no action.
    fn op_event(&self, op: &Cbor, wanted: &impl Fn(&str) -> bool) -> Option<SourceEvent> {
        let (collection, rkey) = op
            .get("path")
            .and_then(Cbor::as_str)
            .and_then(|p| p.split_once('/'))?;
        // An op path that is not `<nsid>/<record key>` cannot name a record.
        if svc_syntax::check_nsid(collection).is_err()
            || svc_syntax::check_record_key(rkey).is_err()
        {
            return None;
        }
        let action = op
            .get("action")
            .and_then(Cbor::as_str)
            .and_then(Action::from_operation)?;
        let cid = match op.get("cid") {
            Some(Cbor::Link(cid)) => Some(cid.clone()),
            _ => None,
        };
        let record_json = match (action, &cid) {
            (Action::Delete, _) => None,
            _ if !wanted(collection) => None,
            // A record missing from the slice (a `tooBig` commit) reaches validation as
            // invalid rather than being dropped unseen.
            (_, Some(cid)) => self
                .blocks
                .get(cid)
                .and_then(|block| dagcbor::decode(block).ok())
                .map(|(record, _)| record.to_json().to_string()),
            (_, None) => None,
        };
        Some(SourceEvent::Commit(CommitEvent {
            did: self.repo.to_string(),
            collection: collection.to_string(),
            rkey: rkey.to_string(),
            action,
            rev: self.rev.to_string(),
            cid: cid.as_deref().map(svc_syntax::cid_to_string),
            record_json,
            time_us: self.time_us,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use svc_catalog::AccountStatus;

    /// DAG-CBOR of the few shapes a frame's header and body need.
    enum Value<'a> {
        Int(i64),
        Text(&'a str),
        Bool(bool),
        Map(Vec<(&'a str, Value<'a>)>),
    }

    fn head(out: &mut Vec<u8>, major: u8, n: u64) {
        let major = major << 5;
        match n {
            0..=23 => out.push(major | n as u8),
            24..=0xff => out.extend([major | 24, n as u8]),
            0x100..=0xffff => {
                out.push(major | 25);
                out.extend((n as u16).to_be_bytes());
            }
            _ => {
                out.push(major | 27);
                out.extend(n.to_be_bytes());
            }
        }
    }

    fn encode(value: &Value, out: &mut Vec<u8>) {
        match value {
            Value::Int(n) if *n >= 0 => head(out, 0, *n as u64),
            Value::Int(n) => head(out, 1, (-1 - *n) as u64),
            Value::Text(text) => {
                head(out, 3, text.len() as u64);
                out.extend(text.as_bytes());
            }
            Value::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
            Value::Map(entries) => {
                head(out, 5, entries.len() as u64);
                for (key, value) in entries {
                    encode(&Value::Text(key), out);
                    encode(value, out);
                }
            }
        }
    }

    fn frame(kind: &str, body: Vec<(&str, Value)>) -> Vec<u8> {
        let mut out = Vec::new();
        encode(
            &Value::Map(vec![("op", Value::Int(1)), ("t", Value::Text(kind))]),
            &mut out,
        );
        encode(&Value::Map(body), &mut out);
        out
    }

    fn account(did: &str, status: &str) -> Vec<u8> {
        frame(
            "#account",
            vec![
                ("seq", Value::Int(7)),
                ("did", Value::Text(did)),
                ("time", Value::Text("2024-01-02T03:04:05Z")),
                ("active", Value::Bool(false)),
                ("status", Value::Text(status)),
            ],
        )
    }

    #[test]
    fn account_events_keep_known_statuses_and_bound_the_others() {
        let message = decode_frame(&account("did:plc:a", "suspended"), |_| true).unwrap();
        assert_eq!(message.cursor, Some(7));
        assert_eq!(message.time_us, Some(1_704_164_645_000_000));
        let [SourceEvent::Account { did, status }] = message.events.as_slice() else {
            panic!("{message:?}")
        };
        assert_eq!(did, "did:plc:a");
        assert_eq!(status, &AccountStatus::Inactive("suspended".into()));
        let long = format!("take\0down{}", "x".repeat(10_000));
        let message = decode_frame(&account("did:plc:a", &long), |_| true).unwrap();
        let [SourceEvent::Account { status, .. }] = message.events.as_slice() else {
            panic!("{message:?}")
        };
        assert_eq!(status, &AccountStatus::Inactive("unknown".into()));
    }

    #[test]
    fn an_account_event_of_no_did_is_malformed() {
        let error = decode_frame(&account("alice\0", "suspended"), |_| true).unwrap_err();
        assert_eq!(error, "account did: not a did");
    }
}
