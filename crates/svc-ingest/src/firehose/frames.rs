//! `com.atproto.sync.subscribeRepos` frames: a DAG-CBOR header `{op, t}` then a body. Commit
//! ops take their record from the frame's CAR slice, converted to atproto JSON.

use super::{SourceEvent, SourceMessage};
use crate::event::{Action, CommitEvent, account_status, record_json};
use crate::event_stream::{self, Frame};
use svc_repo::car;
use svc_repo::dagcbor::{self, Blocks, Cbor, CidBytes};
use svc_repo::mst::Op;
use svc_repo::sync::{CommitProof, SyncEvent};
use svc_syntax::{Did, Tid};

/// What a message carries to prove what it would apply.
#[derive(Debug, Clone, Default)]
pub enum Proof {
    /// Nothing of it is applied, or its source carries no proofs (Jetstream).
    #[default]
    NotNeeded,
    Carried(Box<CommitProof>),
    /// A commit svc would apply, whose frame lacks what proves it.
    Missing(String),
}

/// An op as the tree sees it; `None` for one that names no action.
fn tree_op(op: &Cbor) -> Option<Op> {
    let key = op.get("path").and_then(Cbor::as_str)?.as_bytes().to_vec();
    let link = |name: &str| op.get(name).and_then(Cbor::as_link).map(CidBytes::from);
    match op.get("action").and_then(Cbor::as_str)? {
        "create" => Some(Op::Create {
            key,
            cid: link("cid")?,
        }),
        "update" => Some(Op::Update {
            key,
            cid: link("cid")?,
            prev: link("prev")?,
        }),
        "delete" => Some(Op::Delete {
            key,
            prev: link("prev")?,
        }),
        _ => None,
    }
}

fn time_of(body: &Cbor) -> Option<i64> {
    body.get("time")
        .and_then(Cbor::as_str)
        .and_then(svc_syntax::datetime_to_unix_micros)
}

/// Decodes one binary websocket message of the repository firehose. Records are converted to
/// JSON only for collections `wanted` says yes to: on a relay, nearly every op is of another
/// family, and is ignored unread. A commit's proof is kept when it touches a wanted collection
/// or its repository is one `followed` says yes to (whose every commit is verified).
pub fn decode_frame(
    bytes: &[u8],
    wanted: impl Fn(&str) -> bool,
    followed: impl Fn(&str) -> bool,
) -> Result<SourceMessage, String> {
    let (kind, body) = match event_stream::decode(bytes)? {
        Frame::Error { error, message } => {
            return Ok(SourceMessage::only(SourceEvent::Error { error, message }));
        }
        Frame::Message { kind, body } => (kind, body),
    };
    let seq = body.get("seq").and_then(Cbor::as_i64);
    let time_us = time_of(&body);
    let did = || {
        body.get("did")
            .and_then(Cbor::as_str)
            .map(str::to_string)
            .ok_or("event without did")
    };
    let mut proof = Proof::NotNeeded;
    let events = match kind.as_deref() {
        Some("#commit") => {
            let (events, commit_proof) = commit_events(&body, time_us, wanted, followed)?;
            proof = commit_proof;
            events
        }
        Some("#account") => vec![account_event(&body, did()?)?],
        Some("#identity") => {
            let did = Did::new(did()?).map_err(|e| format!("identity did: {e}"))?;
            vec![SourceEvent::Identity { did }]
        }
        Some("#sync") => vec![SourceEvent::Sync(Box::new(sync_event(&body)?))],
        Some("#info") => {
            let name = event_stream::text(&body, "name").unwrap_or_else(|| "unknown".into());
            let message = event_stream::text(&body, "message").unwrap_or_default();
            vec![SourceEvent::Info { name, message }]
        }
        // Types of later versions move the cursor and nothing else.
        _ => Vec::new(),
    };
    Ok(SourceMessage {
        events,
        cursor: seq,
        time_us,
        proof,
    })
}

/// The events of a commit's ops, and what proves them when one of them is wanted.
fn commit_events(
    body: &Cbor,
    time_us: Option<i64>,
    wanted: impl Fn(&str) -> bool,
    followed: impl Fn(&str) -> bool,
) -> Result<(Vec<SourceEvent>, Proof), String> {
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
    let (roots, blocks) = match body.get("blocks") {
        Some(Cbor::Bytes(bytes)) => car::read(bytes).map_err(|e| e.to_string())?,
        _ => Default::default(),
    };
    let commit = Commit {
        repo,
        rev,
        blocks: &blocks,
        time_us,
    };
    let events: Vec<SourceEvent> = ops
        .iter()
        .filter_map(|op| commit.op_event(op, &wanted))
        .collect();
    let touches_wanted = events
        .iter()
        .any(|event| matches!(event, SourceEvent::Commit(c) if wanted(&c.collection)));
    let proof = match touches_wanted || followed(repo) {
        false => Proof::NotNeeded,
        true => match commit_proof(body, repo, rev, roots, blocks, ops) {
            Ok(proof) => Proof::Carried(Box::new(proof)),
            Err(missing) => Proof::Missing(missing),
        },
    };
    Ok((events, proof))
}

/// The proof of a commit, or what the frame lacks for one.
fn commit_proof(
    body: &Cbor,
    repo: &str,
    rev: &str,
    roots: Vec<CidBytes>,
    blocks: Blocks,
    ops: &[Cbor],
) -> Result<CommitProof, String> {
    Ok(CommitProof {
        repo: Did::new(repo).map_err(|e| format!("repo: {e}"))?,
        rev: Tid::new(rev).map_err(|e| format!("rev: {e}"))?,
        since: match body.get("since") {
            Some(Cbor::Text(since)) => {
                Some(Tid::new(since.as_str()).map_err(|e| format!("since: {e}"))?)
            }
            _ => None,
        },
        commit: body
            .get("commit")
            .and_then(Cbor::as_link)
            .ok_or("no commit link")?
            .into(),
        roots,
        blocks,
        ops: ops.iter().filter_map(tree_op).collect(),
        prev_data: body
            .get("prevData")
            .and_then(Cbor::as_link)
            .map(CidBytes::from),
    })
}

/// An `#account` event: the account's status at the host that sent it.
fn account_event(body: &Cbor, did: String) -> Result<SourceEvent, String> {
    let active = body.get("active").and_then(Cbor::as_bool).unwrap_or(true);
    let status = account_status(active, body.get("status").and_then(Cbor::as_str));
    // The did is stored with the status, so it is checked as a commit's repo is.
    let did = Did::new(did).map_err(|e| format!("account did: {e}"))?;
    Ok(SourceEvent::Account { did, status })
}

/// A `#sync` event: the repository's signed commit alone in a CAR slice.
fn sync_event(body: &Cbor) -> Result<SyncEvent, String> {
    let text = |name: &str| {
        body.get(name)
            .and_then(Cbor::as_str)
            .ok_or_else(|| format!("sync without {name}"))
    };
    let Some(Cbor::Bytes(bytes)) = body.get("blocks") else {
        return Err("sync without blocks".into());
    };
    let (roots, blocks) = car::read(bytes).map_err(|e| e.to_string())?;
    Ok(SyncEvent {
        repo: Did::new(text("did")?).map_err(|e| format!("sync did: {e}"))?,
        rev: Tid::new(text("rev")?).map_err(|e| format!("sync rev: {e}"))?,
        roots,
        blocks,
    })
}

/// What every op of one commit shares.
struct Commit<'a> {
    repo: &'a str,
    rev: &'a str,
    /// The CAR slice's blocks by CID.
    blocks: &'a Blocks,
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
        let text = match (action, &cid) {
            (Action::Delete, _) => None,
            _ if !wanted(collection) => None,
            // A record missing from the slice (a `tooBig` commit) or over the block limit
            // reaches validation as invalid rather than being dropped unseen.
            (_, Some(cid)) => self
                .blocks
                .get(cid)
                .filter(|block| crate::event::block_within_limit(block))
                .and_then(|block| dagcbor::decode(block).ok())
                .map(|(record, _)| record_json(&record).to_string()),
            (_, None) => None,
        };
        Some(SourceEvent::Commit(CommitEvent {
            did: self.repo.to_string(),
            collection: collection.to_string(),
            rkey: rkey.to_string(),
            action,
            rev: self.rev.to_string(),
            cid: cid.as_deref().map(svc_syntax::cid_to_string),
            record_json: text,
            time_us: self.time_us,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use svc_catalog::AccountStatus;

    fn text(text: &str) -> Cbor {
        Cbor::Text(text.into())
    }

    fn frame(kind: &str, body: Vec<(&str, Cbor)>) -> Vec<u8> {
        let header = Cbor::Map(vec![
            ("op".into(), Cbor::Integer(1)),
            ("t".into(), text(kind)),
        ]);
        let body = Cbor::Map(body.into_iter().map(|(k, v)| (k.into(), v)).collect());
        let mut out = dagcbor::encode(&header).unwrap();
        out.extend(dagcbor::encode(&body).unwrap());
        out
    }

    fn account(did: &str, status: &str) -> Vec<u8> {
        frame(
            "#account",
            vec![
                ("seq", Cbor::Integer(7)),
                ("did", text(did)),
                ("time", text("2024-01-02T03:04:05Z")),
                ("active", Cbor::Bool(false)),
                ("status", text(status)),
            ],
        )
    }

    #[test]
    fn account_events_keep_known_statuses_and_bound_the_others() {
        let message =
            decode_frame(&account("did:plc:a", "suspended"), |_| true, |_| false).unwrap();
        assert_eq!(message.cursor, Some(7));
        assert_eq!(message.time_us, Some(1_704_164_645_000_000));
        let [SourceEvent::Account { did, status }] = message.events.as_slice() else {
            panic!("{message:?}")
        };
        assert_eq!(did, "did:plc:a");
        assert_eq!(status, &AccountStatus::Inactive("suspended".into()));
        let long = format!("take\0down{}", "x".repeat(10_000));
        let message = decode_frame(&account("did:plc:a", &long), |_| true, |_| false).unwrap();
        let [SourceEvent::Account { status, .. }] = message.events.as_slice() else {
            panic!("{message:?}")
        };
        assert_eq!(status, &AccountStatus::Inactive("unknown".into()));
    }

    #[test]
    fn an_account_event_of_no_did_is_malformed() {
        let error =
            decode_frame(&account("alice\0", "suspended"), |_| true, |_| false).unwrap_err();
        assert_eq!(error, "account did: not a did");
    }

    #[test]
    fn records_come_out_as_atproto_json() {
        let record = Cbor::Map(vec![
            ("a".into(), Cbor::Integer(1)),
            (
                "b".into(),
                Cbor::Array(vec![Cbor::Bool(true), Cbor::Null, Cbor::Integer(-2)]),
            ),
            ("c".into(), Cbor::Bytes(vec![1, 2])),
            ("d".into(), text("hé")),
            ("e".into(), Cbor::Link(vec![0x01, 0x71].into())),
        ]);
        assert_eq!(
            record_json(&record),
            serde_json::json!({
                "a": 1, "b": [true, null, -2], "c": {"$bytes": "AQI"}, "d": "hé",
                "e": {"$link": "bafyq"}
            })
        );
    }
}

#[cfg(test)]
mod block_limit_tests {
    use super::*;
    use svc_repo::author::{Repository, SigningKey, Write};
    use svc_repo::crypto::Curve;
    use svc_syntax::UnixMicros;

    /// The record of a lens whose blob's one string is `bytes` long.
    fn lens(bytes: usize) -> Cbor {
        Cbor::Map(vec![
            (
                "$type".into(),
                Cbor::Text("dev.panproto.schema.lens".into()),
            ),
            (
                "blob".into(),
                Cbor::Map(vec![("pad".into(), Cbor::Text("x".repeat(bytes)))]),
            ),
        ])
    }

    #[test]
    fn a_record_block_past_the_sync_limit_comes_out_unread() {
        let did = Did::new("did:plc:blocklimit").expect("a DID");
        let key = SigningKey::from_seed(Curve::K256, b"block limit");
        let mut repo = Repository::new(did, key);
        let writes =
            [("small", 999_000), ("large", 1_000_100)].map(|(rkey, bytes)| Write::Create {
                collection: "dev.panproto.schema.lens".into(),
                rkey: rkey.into(),
                record: lens(bytes),
            });
        let commit = repo.commit(&writes).expect("a commit");
        let frame = commit.frame(1, UnixMicros::now());
        let message = decode_frame(&frame, |_| true, |_| false).expect("a frame");
        let read: Vec<(String, bool)> = message
            .events
            .iter()
            .filter_map(|event| match event {
                SourceEvent::Commit(commit) => {
                    Some((commit.rkey.clone(), commit.record_json.is_some()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            read,
            [("small".to_string(), true), ("large".to_string(), false)]
        );
    }
}
