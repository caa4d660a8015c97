//! The Jetstream v1 event shape (also the JSON Lines import format):
//! `{"did","time_us","kind":"commit","commit":{"rev","operation","collection","rkey","record","cid"}}`.

pub(crate) mod events;

use crate::event::{Action, CommitEvent, account_status};
use serde::Deserialize;
use serde_json::value::RawValue;
// Strings are borrowed from the line unless written with an escape, which JSON allows anywhere.
use std::borrow::Cow;

#[derive(Debug, Deserialize)]
struct AccountBody<'a> {
    active: Option<bool>,
    #[serde(borrow)]
    status: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    account: Option<AccountBody<'a>>,
    #[serde(borrow)]
    did: Option<Cow<'a, str>>,
    time_us: Option<i64>,
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    commit: Option<Commit<'a>>,
}

#[derive(Debug, Deserialize)]
struct Commit<'a> {
    #[serde(borrow)]
    rev: Option<Cow<'a, str>>,
    #[serde(borrow)]
    operation: Option<Cow<'a, str>>,
    #[serde(borrow)]
    collection: Option<Cow<'a, str>>,
    #[serde(borrow)]
    rkey: Option<Cow<'a, str>>,
    #[serde(borrow)]
    record: Option<&'a RawValue>,
    cid: Option<String>,
}

/// What one line of Jetstream JSON holds.
#[derive(Debug)]
pub enum JetstreamLine {
    Commit(CommitEvent),
    /// An account's status changed.
    Account {
        did: svc_syntax::Did,
        status: svc_catalog::AccountStatus,
        time_us: Option<i64>,
    },
    /// An identity, account or other non-commit event, with its kind and time.
    Other {
        kind: String,
        time_us: Option<i64>,
    },
}

/// Parses one Jetstream event; the error says what is wrong with the line.
pub fn parse_jetstream_line(text: &str) -> Result<JetstreamLine, String> {
    let line: Line<'_> =
        serde_json::from_str(text).map_err(|e| format!("not a JSON event: {e}"))?;
    let kind = line.kind.ok_or("missing kind")?;
    if kind == "account" {
        let did = line.did.ok_or("missing did")?;
        let did = svc_syntax::Did::new(did).map_err(|e| format!("did: {e}"))?;
        let account = line.account.ok_or("missing account")?;
        let status = account_status(account.active.unwrap_or(true), account.status.as_deref());
        return Ok(JetstreamLine::Account {
            did,
            status,
            time_us: line.time_us,
        });
    }
    if kind != "commit" {
        return Ok(JetstreamLine::Other {
            kind: kind.to_string(),
            time_us: line.time_us,
        });
    }
    let did = line.did.ok_or("missing did")?;
    svc_syntax::check_did(&did).map_err(|e| format!("did: {e}"))?;
    let commit = line.commit.ok_or("missing commit")?;
    let collection = commit.collection.ok_or("missing commit.collection")?;
    let rkey = commit.rkey.ok_or("missing commit.rkey")?;
    let rev = commit.rev.ok_or("missing commit.rev")?;
    svc_syntax::check_nsid(&collection).map_err(|e| format!("commit.collection: {e}"))?;
    svc_syntax::check_record_key(&rkey).map_err(|e| format!("commit.rkey: {e}"))?;
    let operation = commit.operation.ok_or("missing commit.operation")?;
    let action = Action::from_operation(&operation)
        .ok_or_else(|| format!("commit.operation: unknown operation {operation}"))?;
    let record_json = match (action, commit.record) {
        (Action::Delete, _) => None,
        (_, Some(raw)) => Some(raw.get().to_string()),
        (_, None) => return Err("missing commit.record".into()),
    };
    Ok(JetstreamLine::Commit(CommitEvent {
        did: did.into_owned(),
        collection: collection.into_owned(),
        rkey: rkey.into_owned(),
        action,
        rev: rev.into_owned(),
        cid: commit.cid,
        record_json,
        time_us: line.time_us,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commits_and_skips_other_kinds() {
        let line = r#"{"did":"did:plc:a","time_us":5,"kind":"commit","commit":{"rev":"3kaaaaaaaaaa2","operation":"create","collection":"dev.svc.bounty","rkey":"1","record":{"$type":"dev.svc.bounty","x":[1]},"cid":"bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"}}"#;
        let JetstreamLine::Commit(event) = parse_jetstream_line(line).unwrap() else {
            panic!("commit")
        };
        assert_eq!(event.uri(), "at://did:plc:a/dev.svc.bounty/1");
        assert_eq!(
            event.record_json.as_deref(),
            Some(r#"{"$type":"dev.svc.bounty","x":[1]}"#)
        );
        assert_eq!(event.time_us, Some(5));
        let identity = r#"{"did":"did:plc:a","time_us":6,"kind":"identity","identity":{}}"#;
        assert!(matches!(
            parse_jetstream_line(identity).unwrap(),
            JetstreamLine::Other { .. }
        ));
        let delete = r#"{"did":"did:plc:a","time_us":7,"kind":"commit","commit":{"rev":"3kaaaaaaaaab2","operation":"delete","collection":"dev.svc.bounty","rkey":"1"}}"#;
        let JetstreamLine::Commit(event) = parse_jetstream_line(delete).unwrap() else {
            panic!("commit")
        };
        assert_eq!(event.action, Action::Delete);
        // Any string may be written with escapes, as JSON allows.
        let escaped = r#"{"did":"did:plc:\u0061","time_us":8,"kind":"comm\u0069t","commit":{"rev":"3kaaaaaaaaab3","operation":"d\u0065lete","collection":"dev.svc.bounty","rkey":"1"}}"#;
        let JetstreamLine::Commit(event) = parse_jetstream_line(escaped).unwrap() else {
            panic!("commit")
        };
        assert_eq!(
            (event.did.as_str(), event.action),
            ("did:plc:a", Action::Delete)
        );
    }

    #[test]
    fn account_events_carry_the_status() {
        let line = r#"{"did":"did:plc:a","time_us":9,"kind":"account","account":{"active":false,"did":"did:plc:a","seq":3,"status":"deactivated"}}"#;
        let JetstreamLine::Account {
            did,
            status,
            time_us,
        } = parse_jetstream_line(line).unwrap()
        else {
            panic!("account")
        };
        assert_eq!((did.as_str(), time_us), ("did:plc:a", Some(9)));
        assert_eq!(
            status,
            svc_catalog::AccountStatus::Inactive("deactivated".into())
        );
        let hostile = format!(
            r#"{{"did":"did:plc:a","time_us":10,"kind":"account","account":{{"active":false,"status":"take\u0000down{}"}}}}"#,
            "x".repeat(10_000)
        );
        assert!(matches!(
            parse_jetstream_line(&hostile).unwrap(),
            JetstreamLine::Account {
                status: svc_catalog::AccountStatus::Inactive(status),
                ..
            } if status == "unknown"
        ));
        let active = r#"{"did":"did:plc:a","time_us":10,"kind":"account","account":{"active":true,"did":"did:plc:a","seq":4}}"#;
        assert!(matches!(
            parse_jetstream_line(active).unwrap(),
            JetstreamLine::Account {
                status: svc_catalog::AccountStatus::Active,
                ..
            }
        ));
    }

    #[test]
    fn malformed_lines_say_what_is_wrong() {
        assert!(
            parse_jetstream_line("{")
                .unwrap_err()
                .starts_with("not a JSON event")
        );
        assert_eq!(
            parse_jetstream_line(r#"{"kind":"commit","did":"did:plc:a"}"#).unwrap_err(),
            "missing commit"
        );
        let bad_op = r#"{"did":"did:plc:a","kind":"commit","commit":{"rev":"3kaaaaaaaaaa2","operation":"merge","collection":"dev.svc.bounty","rkey":"1"}}"#;
        assert_eq!(
            parse_jetstream_line(bad_op).unwrap_err(),
            "commit.operation: unknown operation merge"
        );
        let bad_did = r#"{"did":"alice","kind":"commit","commit":{}}"#;
        assert_eq!(parse_jetstream_line(bad_did).unwrap_err(), "did: not a did");
    }
}
