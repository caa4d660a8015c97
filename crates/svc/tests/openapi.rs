//! `/openapi.json` against what the server sends where schemathesis cannot look: the change
//! stream, which does not end. Every event a subscriber gets (a record entering, changing and
//! leaving an answer, a notice, an error) is checked against the event schema the document
//! declares for `GET /v1/changes`, read as the Server-Sent Events format reads it.

use svc_testkit as common;

use common::replay::Replay;
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

const AUTHOR: &str = "did:plc:jetstream";

/// A Jetstream commit of a vocabulary in `world`, named after its time (none for a delete).
fn commit(time_us: i64, rkey: &str, operation: &str, world: &str) -> (i64, String) {
    let mut commit = json!({"rev": tid(time_us), "operation": operation,
        "collection": "dev.svc.vocab", "rkey": rkey});
    if operation != "delete" {
        commit["record"] = json!({"$type": "dev.svc.vocab", "name": format!("at {time_us}"), "world": world,
            "occurredAt": NOW});
        commit["cid"] = json!(CID);
    }
    let line = json!({"did": AUTHOR, "time_us": time_us, "kind": "commit", "commit": commit});
    (time_us, line.to_string())
}

/// The events of the stream at `path` as the Server-Sent Events format reads them: `data`
/// (its lines joined), `event` (`message` unless named) and `id` when the event has one;
/// comments are no events.
fn events(server: &Server, path: &str) -> mpsc::Receiver<Value> {
    let response = common::stream::open(server, path);
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut data, mut event) = (Vec::new(), json!({"event": "message"}));
        for line in BufReader::new(response).lines() {
            let Ok(line) = line else { return };
            if line.is_empty() && !data.is_empty() {
                event["data"] = json!(data.join("\n"));
                data.clear();
                let done = std::mem::replace(&mut event, json!({"event": "message"}));
                if sender.send(done).is_err() {
                    return;
                }
            } else if let Some((field, value)) = line.split_once(':') {
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "data" => data.push(value.to_string()),
                    "id" | "event" => event[field] = json!(value),
                    _ => {}
                }
            }
        }
    });
    receiver
}

fn next(events: &mpsc::Receiver<Value>, what: &str) -> Value {
    events
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("no event within 10 s: {what}"))
}

/// Checks `value` against `schema`, its `$ref`s read in `document`: the keywords the
/// document's schemas of the stream use. Any other keyword fails the check rather than pass
/// unchecked.
fn check(document: &Value, schema: &Value, value: &Value) -> Result<(), String> {
    let rules = schema
        .as_object()
        .ok_or_else(|| format!("not a schema: {schema}"))?;
    for (keyword, rule) in rules {
        check_keyword(document, rules, keyword, rule, value)?;
    }
    Ok(())
}

fn check_keyword(
    document: &Value,
    rules: &serde_json::Map<String, Value>,
    keyword: &str,
    rule: &Value,
    value: &Value,
) -> Result<(), String> {
    let fail = |why: &str| Err(format!("{value} {why} ({keyword}: {rule})"));
    let holds = |schema: &Value| check(document, schema, value).is_ok();
    match keyword {
        "$ref" => {
            let name = rule
                .as_str()
                .and_then(|r| r.strip_prefix("#/components/schemas/"));
            let schema = &document["components"]["schemas"][name.unwrap_or_default()];
            check(document, schema, value)
        }
        "type" if !of_type(value, rule.as_str().unwrap_or_default()) => fail("is not of the type"),
        "required" => match rule.as_array().into_iter().flatten().find(|name| {
            value.is_object() && name.as_str().is_none_or(|name| value.get(name).is_none())
        }) {
            Some(_) => fail("lacks a member required"),
            None => Ok(()),
        },
        "properties" => {
            let members = rule.as_object().into_iter().flatten();
            for (name, schema) in members.filter(|(name, _)| value.get(name).is_some()) {
                check(document, schema, &value[name])?;
            }
            Ok(())
        }
        "additionalProperties" if *rule == json!(false) => {
            let declared = &rules["properties"];
            match value
                .as_object()
                .into_iter()
                .flatten()
                .find(|(n, _)| declared.get(n).is_none())
            {
                Some((name, _)) => fail(&format!("has {name}, undeclared")),
                None => Ok(()),
            }
        }
        "enum" if !rule.as_array().is_some_and(|values| values.contains(value)) => {
            fail("is not one of")
        }
        "const" if rule != value => fail("is not"),
        "oneOf" => match rule
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| holds(s))
            .count()
        {
            1 => Ok(()),
            n => fail(&format!("matches {n} of")),
        },
        "if" => match holds(rule) {
            true => check(document, &rules["then"], value),
            false => check(document, &rules["else"], value),
        },
        "not" if holds(rule) => fail("matches what it must not"),
        "minimum"
            if value
                .as_f64()
                .zip(rule.as_f64())
                .is_some_and(|(v, min)| v < min) =>
        {
            fail("is below")
        }
        "maximum"
            if value
                .as_f64()
                .zip(rule.as_f64())
                .is_some_and(|(v, max)| v > max) =>
        {
            fail("is above")
        }
        "pattern" if rule != "^[0-9]+$" => fail("has a pattern this check does not know"),
        "pattern"
            if !value
                .as_str()
                .is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())) =>
        {
            fail("does not match")
        }
        "contentMediaType" if rule != "application/json" => fail("is of a type not known here"),
        "contentMediaType" => {
            let text = value.as_str().unwrap_or_default();
            let parsed: Value =
                serde_json::from_str(text).map_err(|e| format!("{value} is not JSON ({e})"))?;
            check(document, &rules["contentSchema"], &parsed)
        }
        "type" | "enum" | "const" | "not" | "minimum" | "maximum" | "pattern" => Ok(()),
        "then" | "else" | "contentSchema" | "format" | "description" => Ok(()),
        _ => fail("has a keyword this check does not know"),
    }
}

fn of_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        _ => false,
    }
}

/// A record entering, changing in and leaving an answer, a deletion, records loaded in bulk
/// (a gap: `OutdatedCursor`) and a cursor from the future (`FutureCursor`): every event is one
/// the document declares, and a message it does not declare fails the same check.
#[test]
fn the_change_stream_sends_the_events_its_document_declares() {
    let base = now_us() - 1_000_000;
    // An hour old: loaded in bulk, which the stream reports as a gap.
    let replay = Replay::start(vec![commit(
        base - 3_600_000_000,
        "3kaaaaaaaaa21",
        "create",
        "open",
    )]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::following(dir.path().join("catalog.db"), &replay.url);
    let world = "/v1/vocabularies/by-world?world=open";
    server.wait_for(world, Duration::from_secs(10), |b| b["total"] == 1);
    let (_, document) = server.get("/openapi.json");
    let response = &document["paths"]["/v1/changes"]["get"]["responses"]["200"];
    let schema = &response["content"]["text/event-stream"]["itemSchema"];
    let open = events(
        &server,
        "/v1/changes?query=vocabulariesWithWorld&world=open",
    );
    let steps = [
        (commit(base, "3kaaaaaaaaa22", "create", "open"), "enter"),
        (
            commit(base + 1, "3kaaaaaaaaa22", "update", "open"),
            "update",
        ),
        (
            commit(base + 2, "3kaaaaaaaaa22", "update", "hierarchy-closed"),
            "leave",
        ),
        (commit(base + 3, "3kaaaaaaaaa21", "delete", ""), "leave"),
    ];
    let mut seen = Vec::new();
    for (published, op) in steps {
        replay.publish(vec![published]);
        let event = next(&open, op);
        let message: Value = serde_json::from_str(event["data"].as_str().unwrap()).unwrap();
        assert_eq!(message["op"], op, "{event}");
        seen.push(event);
    }
    let all = events(&server, "/v1/changes?cursor=0");
    let outdated = next(&all, "a gap");
    assert!(
        outdated["data"]
            .as_str()
            .unwrap()
            .contains("OutdatedCursor"),
        "{outdated}"
    );
    seen.push(outdated);
    let future = events(&server, "/v1/changes?cursor=999999999");
    seen.push(next(&future, "an error"));
    for event in &seen {
        assert_eq!(check(&document, schema, event), Ok(()), "{event}");
    }
    // Messages the stream does not send fail the same check.
    for wrong in [
        json!({"data": "{\"seq\":1,\"time\":\"2026-11-01T12:00:00Z\",\"op\":\"enter\",\"uri\":\"at://a\"}"}),
        json!({"data": "{\"error\":\"Nonsense\",\"message\":\"\"}"}),
        json!({"data": "not JSON"}),
        json!({"data": "{\"info\":\"OutdatedCursor\",\"oldest\":1}", "id": "x"}),
    ] {
        assert!(check(&document, schema, &wrong).is_err(), "{wrong}");
    }
}
