use super::*;
use serde_json::{Value, json};

fn check(collection: &str, record: Value) -> Result<(), String> {
    Lexicons::embedded()
        .validate_record(collection, &record)
        .map_err(|e| e.to_string())
}

fn bounty() -> Value {
    json!({
        "$type": "dev.svc.bounty",
        "requester": "did:plc:alice",
        "wants": {
            "$type": "dev.svc.bounty#wantLens",
            "source": {"uri": "at://did:plc:alice/dev.panproto.schema.schema/3kaaaaaaaaaa2"},
            "target": {"uri": "at://did:plc:bob/dev.panproto.schema.schema/3kaaaaaaaaaa3"}
        },
        "occurredAt": "2026-01-02T03:04:05Z"
    })
}

fn with(mut record: Value, pointer: &str, value: Value) -> Value {
    let (parent, field) = pointer.rsplit_once('/').unwrap();
    let target = record.pointer_mut(parent).unwrap();
    target
        .as_object_mut()
        .unwrap()
        .insert(field.to_string(), value);
    record
}

fn without(mut record: Value, pointer: &str) -> Value {
    let (parent, field) = pointer.rsplit_once('/').unwrap();
    record
        .pointer_mut(parent)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove(field);
    record
}

#[test]
fn every_embedded_document_loads_and_every_kind_is_known() {
    let kinds: Vec<&str> = Lexicons::embedded().record_collections().collect();
    assert_eq!(kinds.len(), 22, "{kinds:?}");
    for kind in [
        "dev.panproto.schema.lens",
        "dev.panproto.schema.schema",
        "dev.svc.bounty",
        "dev.svc.vocab",
        "dev.svc.deliberationVote",
        "dev.svc.encounter",
    ] {
        assert!(Lexicons::embedded().is_record_collection(kind), "{kind}");
    }
    assert!(!Lexicons::embedded().is_record_collection("dev.svc.defs"));
}

#[test]
fn a_valid_record_passes() {
    check("dev.svc.bounty", bounty()).unwrap();
}

#[test]
fn type_must_equal_the_collection() {
    assert_eq!(
        check(
            "dev.svc.bounty",
            with(bounty(), "/$type", json!("dev.svc.adapter"))
        )
        .unwrap_err(),
        "$type: must be dev.svc.bounty, not dev.svc.adapter"
    );
    assert_eq!(
        check("dev.svc.bounty", without(bounty(), "/$type")).unwrap_err(),
        "$type: missing; must be dev.svc.bounty"
    );
    assert_eq!(
        check("dev.svc.bounty", json!([1])).unwrap_err(),
        "record: must be an object"
    );
    assert!(
        check("dev.svc.nothing", bounty())
            .unwrap_err()
            .contains("unknown record kind")
    );
}

#[test]
fn required_fields_are_named_by_path() {
    assert_eq!(
        check("dev.svc.bounty", without(bounty(), "/requester")).unwrap_err(),
        "requester: required field missing"
    );
    assert_eq!(
        check("dev.svc.bounty", without(bounty(), "/wants/source")).unwrap_err(),
        "wants.source: required field missing"
    );
    assert_eq!(
        check("dev.svc.bounty", with(bounty(), "/requester", Value::Null)).unwrap_err(),
        "requester: must not be null"
    );
}

#[test]
fn types_are_checked() {
    assert_eq!(
        check("dev.svc.bounty", with(bounty(), "/requester", json!(5))).unwrap_err(),
        "requester: must be a string"
    );
    assert_eq!(
        check(
            "dev.svc.bounty",
            with(bounty(), "/wants/bidirectional", json!("yes"))
        )
        .unwrap_err(),
        "wants.bidirectional: must be a boolean"
    );
    assert_eq!(
        check("dev.svc.bounty", with(bounty(), "/constraints", json!({}))).unwrap_err(),
        "constraints: must be an array"
    );
    assert_eq!(
        check("dev.svc.bounty", with(bounty(), "/reward", json!("x"))).unwrap_err(),
        "reward: must be an object"
    );
}

#[test]
fn formats_are_checked() {
    let cases = [
        (
            "/wants/source/uri",
            json!("https://x.test"),
            "wants.source.uri: not an at-uri",
        ),
        ("/requester", json!("alice"), "requester: not a did"),
        (
            "/occurredAt",
            json!("2026-01-02"),
            "occurredAt: not a datetime",
        ),
        (
            "/reward",
            json!({"externalRef": "not a uri"}),
            "reward.externalRef: not a uri",
        ),
        (
            "/wants/source/language",
            json!(5),
            "wants.source.language: must be a string",
        ),
    ];
    for (pointer, value, expected) in cases {
        assert_eq!(
            check("dev.svc.bounty", with(bounty(), pointer, value)).unwrap_err(),
            expected
        );
    }
    let vote = json!({
        "$type": "dev.svc.deliberationVote",
        "subject": {"uri": "at://did:plc:a/dev.svc.deliberation/1", "cid": "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"},
        "stance": "agree",
        "createdAt": "2026-01-02T03:04:05Z"
    });
    check("dev.svc.deliberationVote", vote.clone()).unwrap();
    assert_eq!(
        check(
            "dev.svc.deliberationVote",
            with(vote, "/subject/uri", json!("at://nope"))
        )
        .unwrap_err(),
        "subject.uri: not an at-uri"
    );
}

#[test]
fn nsid_handle_and_language_formats() {
    let encounter = json!({
        "$type": "dev.svc.encounter",
        "lens": {"uri": "at://did:plc:a/dev.panproto.schema.lens/1"},
        "sourceSchema": {"uri": "at://alice.test/dev.panproto.schema.schema/1", "language": "en-US"},
        "use": {"action": "translate"},
        "kind": "invocation-log",
        "visibility": "public-detailed",
        "occurredAt": "2026-01-02T03:04:05.5+01:00"
    });
    check("dev.svc.encounter", encounter.clone()).unwrap();
    assert_eq!(
        check(
            "dev.svc.encounter",
            with(encounter, "/holder", json!("did:x"))
        )
        .unwrap_err(),
        "holder: not a did"
    );
    let syntax = |format: &str, value: &str| svc_syntax::check_format(format, value).is_ok();
    assert!(syntax("nsid", "dev.svc.bounty") && !syntax("nsid", "bounty"));
    assert!(syntax("handle", "alice.test") && !syntax("handle", "alice"));
    assert!(syntax("language", "en") && !syntax("language", "english"));
    assert!(
        syntax(
            "cid",
            "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
        ) && !syntax("cid", "x")
    );
}

#[test]
fn closed_enums_refuse_unknown_values_and_open_ones_accept_them() {
    assert_eq!(
        check("dev.svc.bounty", with(bounty(), "/constraints", json!([{"$type": "dev.svc.bounty#constraintPerformance", "metric": "ms", "threshold": 5, "cmp": "approx"}]))).unwrap_err(),
        "constraints[0].cmp: must be one of lt, le, eq, ge, gt"
    );
    check(
        "dev.svc.bounty",
        with(bounty(), "/status", json!("someday")),
    )
    .unwrap();
}

#[test]
fn string_lengths_count_bytes_and_graphemes() {
    let adapter = |framework: &str| {
        json!({
            "$type": "dev.svc.adapter",
            "framework": framework,
            "versionRange": ">=1",
            "invocationProtocol": {"kind": "subprocess"},
            "isolation": {"kind": "process"},
            "author": "did:plc:a",
            "occurredAt": "2026-01-02T03:04:05Z"
        })
    };
    check("dev.svc.adapter", adapter(&"a".repeat(128))).unwrap();
    assert_eq!(
        check("dev.svc.adapter", adapter(&"a".repeat(129))).unwrap_err(),
        "framework: longer than 128 bytes"
    );
    // 64 characters of two bytes each: 128 bytes, fits; one more does not.
    check("dev.svc.adapter", adapter(&"é".repeat(64))).unwrap();
    assert!(check("dev.svc.adapter", adapter(&"é".repeat(65))).is_err());
    // reward.summary is limited to 1000 graphemes: a family emoji is one grapheme of 25 bytes.
    let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}\u{200D}\u{1F466}";
    check(
        "dev.svc.bounty",
        with(bounty(), "/reward", json!({"summary": family.repeat(1000)})),
    )
    .unwrap();
    assert_eq!(
        check(
            "dev.svc.bounty",
            with(bounty(), "/reward", json!({"summary": family.repeat(1001)}))
        )
        .unwrap_err(),
        "reward.summary: longer than 1000 graphemes"
    );
}

#[test]
fn array_lengths_are_checked() {
    let dependency = json!({"$type": "dev.svc.bounty#constraintDependency", "bounty": "at://did:plc:a/dev.svc.bounty/1"});
    check(
        "dev.svc.bounty",
        with(
            bounty(),
            "/constraints",
            json!(vec![dependency.clone(); 64]),
        ),
    )
    .unwrap();
    assert_eq!(
        check(
            "dev.svc.bounty",
            with(bounty(), "/constraints", json!(vec![dependency; 65]))
        )
        .unwrap_err(),
        "constraints: must not have more than 64 elements"
    );
    let recommendation = json!({
        "$type": "dev.svc.recommendation",
        "issuingCommunity": "at://did:plc:a/dev.svc.community/1",
        "conditions": [],
        "lensPath": [],
        "occurredAt": "2026-01-02T03:04:05Z"
    });
    assert_eq!(
        check("dev.svc.recommendation", recommendation).unwrap_err(),
        "lensPath: must have at least 1 elements"
    );
}

#[test]
fn integer_ranges_and_floats() {
    let vote = json!({
        "$type": "dev.svc.deliberationVote",
        "subject": {"uri": "at://did:plc:a/dev.svc.deliberation/1", "cid": {"$link": "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"}},
        "stance": "agree",
        "createdAt": "2026-01-02T03:04:05Z"
    });
    check(
        "dev.svc.deliberationVote",
        with(vote.clone(), "/weight", json!(1000)),
    )
    .unwrap();
    assert_eq!(
        check(
            "dev.svc.deliberationVote",
            with(vote.clone(), "/weight", json!(1001))
        )
        .unwrap_err(),
        "weight: must be at most 1000"
    );
    assert_eq!(
        check(
            "dev.svc.deliberationVote",
            with(vote.clone(), "/weight", json!(-1))
        )
        .unwrap_err(),
        "weight: must be at least 0"
    );
    assert_eq!(
        check(
            "dev.svc.deliberationVote",
            with(vote.clone(), "/weight", json!(1.5))
        )
        .unwrap_err(),
        "weight: must be an integer (the data model has no floats)"
    );
    assert_eq!(
        check(
            "dev.svc.deliberationVote",
            with(vote, "/extra", json!({"deep": [1, 2.5]}))
        )
        .unwrap_err(),
        "extra.deep[1]: floating-point numbers are not allowed"
    );
}

#[test]
fn cid_links_accept_both_forms() {
    let base = json!({
        "$type": "dev.svc.belief",
        "subject": {"uri": "at://did:plc:a/dev.svc.bounty/1", "cid": "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"},
        "occurredAt": "2026-01-02T03:04:05Z"
    });
    check("dev.svc.belief", base.clone()).unwrap();
    check(
        "dev.svc.belief",
        with(
            base.clone(),
            "/subject/cid",
            json!({"$link": "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"}),
        ),
    )
    .unwrap();
    assert_eq!(
        check(
            "dev.svc.belief",
            with(base.clone(), "/subject/cid", json!({"$link": "no"}))
        )
        .unwrap_err(),
        "subject.cid: not a cid"
    );
    assert_eq!(
        check("dev.svc.belief", with(base, "/subject/cid", json!(12))).unwrap_err(),
        "subject.cid: must be a cid-link"
    );
}

#[test]
fn refs_and_unions_follow_type() {
    // A union member is validated against the definition its $type names.
    assert_eq!(
        check(
            "dev.svc.bounty",
            with(
                bounty(),
                "/wants",
                json!({"$type": "dev.svc.bounty#wantAdapter"})
            )
        )
        .unwrap_err(),
        "wants.framework: required field missing"
    );
    check(
        "dev.svc.bounty",
        with(
            bounty(),
            "/wants",
            json!({"$type": "dev.svc.bounty#wantAdapter", "framework": "serde"}),
        ),
    )
    .unwrap();
    // Unions are open: an unknown member type is accepted as long as it is typed.
    check(
        "dev.svc.bounty",
        with(
            bounty(),
            "/wants",
            json!({"$type": "dev.example.other#thing"}),
        ),
    )
    .unwrap();
    assert_eq!(
        check(
            "dev.svc.bounty",
            with(bounty(), "/wants", json!({"source": {}}))
        )
        .unwrap_err(),
        "wants.$type: required field missing"
    );
    assert_eq!(
        check("dev.svc.bounty", with(bounty(), "/wants", json!("lens"))).unwrap_err(),
        "wants: must be an object with a $type"
    );
    // A ref into dev.svc.defs is followed (tool requires name and version).
    let verification = json!({
        "$type": "dev.svc.verification",
        "lens": {"uri": "at://did:plc:a/dev.panproto.schema.lens/1"},
        "kind": "roundtrip-test",
        "verifier": "did:plc:v",
        "tool": {"name": "svc"},
        "property": {"$type": "dev.svc.defs#lpRoundtrip", "domain": "all"},
        "result": "holds",
        "occurredAt": "2026-01-02T03:04:05Z"
    });
    assert_eq!(
        check("dev.svc.verification", verification).unwrap_err(),
        "tool.version: required field missing"
    );
}

#[test]
fn unresolved_references_are_refused_at_load() {
    let doc = r##"{"lexicon":1,"id":"dev.x.thing","defs":{"main":{"type":"record","key":"tid","record":{"type":"object","properties":{"a":{"type":"ref","ref":"#missing"}}}}}}"##;
    let err = Lexicons::from_documents([doc]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "lexicon dev.x.thing: reference to unknown definition dev.x.thing#missing"
    );
}

// The cases below were found by the differential test against @atproto/lexicon
// (scripts/lexdiff/run); each failed before its fix.

#[test]
fn unknown_fields_must_hold_an_object() {
    let correction = |value: Value| {
        json!({
            "$type": "dev.svc.correction",
            "encounter": {"uri": "at://did:plc:a/dev.svc.encounter/3lqpshb3uttvz"},
            "path": "/name",
            "originalValue": value,
            "reason": "user-mistake",
            "visibility": "public-detailed",
            "occurredAt": "2026-01-02T03:04:05Z"
        })
    };
    check(
        "dev.svc.correction",
        correction(json!({"given": ["Mary Ann"]})),
    )
    .unwrap();
    for value in [json!("Mary Ann"), json!(5), json!(true), json!(["a"])] {
        assert_eq!(
            check("dev.svc.correction", correction(value)).unwrap_err(),
            "originalValue: must be an object"
        );
    }
}

#[test]
fn cid_links_must_decode_as_cids() {
    let belief = |cid: Value| {
        json!({
            "$type": "dev.svc.belief",
            "subject": {"uri": "at://did:plc:a/dev.svc.bounty/1", "cid": cid},
            "occurredAt": "2026-01-02T03:04:05Z"
        })
    };
    let good = "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm";
    for cid in [
        good,
        "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
    ] {
        check("dev.svc.belief", belief(json!({ "$link": cid }))).unwrap();
        check("dev.svc.belief", belief(json!(cid))).unwrap();
    }
    // A CIDv0 is a CID, but not one a cid-link may hold (the data model's links are CIDv1);
    // the interop vectors refuse it as a `cid` string too.
    let v0 = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG";
    assert_eq!(
        check("dev.svc.belief", belief(json!({ "$link": v0 }))).unwrap_err(),
        "subject.cid: not a cid"
    );
    // All of these pass the `cid` string format's syntax check, none is a CID.
    let truncated = &good[..good.len() - 1];
    let upper = good.to_uppercase();
    let longer = format!("{good}a");
    for cid in [
        "abcdefgh",
        truncated,
        &upper,
        &longer,
        "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbd",
    ] {
        assert_eq!(
            check("dev.svc.belief", belief(json!({ "$link": cid }))).unwrap_err(),
            "subject.cid: not a cid",
            "{cid}"
        );
        assert_eq!(
            check("dev.svc.belief", belief(json!(cid))).unwrap_err(),
            "subject.cid: not a cid",
            "{cid}"
        );
    }
}

#[test]
fn a_union_type_must_name_a_definition() {
    for declared in [
        "blob",
        "#wantLens",
        "dev.svc.bounty#wantLens#main",
        "dev.svc.bounty#",
        "",
    ] {
        assert_eq!(
            check(
                "dev.svc.bounty",
                with(bounty(), "/wants/$type", json!(declared))
            )
            .unwrap_err(),
            "wants.$type: not a definition reference (nsid or nsid#name)",
            "{declared}"
        );
    }
    check(
        "dev.svc.bounty",
        with(bounty(), "/wants/$type", json!("dev.svc.bounty#wantLens")),
    )
    .unwrap();
}

#[test]
fn integers_beyond_64_bits_are_named_as_such() {
    let vote = json!({
        "$type": "dev.svc.deliberationVote",
        "subject": {"uri": "at://did:plc:a/dev.svc.deliberation/1", "cid": "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"},
        "stance": "agree",
        "createdAt": "2026-01-02T03:04:05Z"
    });
    let big: Value = serde_json::from_str("9223372036854775808").unwrap();
    assert_eq!(
        check("dev.svc.deliberationVote", with(vote, "/weight", big)).unwrap_err(),
        "weight: must be an integer between -2^63 and 2^63-1"
    );
}
