//! The lens runtime on the probe's real lens and schema records.

use serde_json::{Value, json};
use svc_verify::{
    CorpusPlace, LensBlob, Protocol, PublishedLens, Roundtrip, SchemaBlob, VerifyError, misfits,
    object_hash, static_check,
};

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn schema(record: &str, role: &'static str) -> SchemaBlob {
    SchemaBlob::decode(&fixture(record), role).unwrap()
}

fn roundtrip(lens: &str, source: &str, target: &str) -> Roundtrip {
    let lens = LensBlob::decode(&fixture(lens)["blob"]).unwrap();
    Roundtrip::new(
        &lens,
        &schema(source, "source"),
        &schema(target, "target"),
        &Protocol::default(),
    )
    .unwrap()
}

fn iso() -> Roundtrip {
    roundtrip(
        "lens-record.json",
        "source-schema-record.json",
        "target-schema-record.json",
    )
}

fn place(index: usize) -> CorpusPlace {
    CorpusPlace { index, line: None }
}

#[test]
fn the_iso_lens_round_trips_records_of_its_schema() {
    let lens = iso();
    for (i, record) in [json!({"text": ""}), json!({"text": "hello, world"})]
        .iter()
        .enumerate()
    {
        assert_eq!(lens.check(place(i), record).unwrap(), None, "{record}");
    }
}

#[test]
fn an_array_in_a_string_field_does_not_come_back() {
    let record = json!({"text": ["a", "b"]});
    let difference = iso().check(place(3), &record).unwrap().expect("falsified");
    assert!(difference.path.starts_with("$.text"), "{difference}");
    assert_eq!(
        misfits(
            &schema("source-schema-record.json", "source").schema,
            "post:body",
            &record
        ),
        vec!["$.text: a JSON array where the schema declares a string".to_string()]
    );
}

#[test]
fn undeclared_keys_are_misfits() {
    let source = schema("source-schema-record.json", "source");
    let found = misfits(
        &source.schema,
        "post:body",
        &json!({"text": "a", "mood": "x"}),
    );
    assert_eq!(found, vec!["$.mood: a key the schema does not declare"]);
    assert!(misfits(&source.schema, "post:body", &json!({"text": "a"})).is_empty());
}

/// A rename over a two-field record: the view read back from JSON numbers its nodes afresh,
/// and only re-aligning them onto the view `get` made keeps the two values apart.
#[test]
fn a_rename_on_a_two_field_record_holds() {
    let lens = LensBlob::decode(&fixture("rename-key-chain.json")).unwrap();
    let source = schema("lossy-source-schema-record.json", "source");
    let derived = lens
        .instantiate(&source.schema, &Protocol::default())
        .unwrap()
        .tgt_schema;
    let target = SchemaBlob {
        schema: derived,
        protocol: String::new(),
    };
    let roundtrip = Roundtrip::new(&lens, &source, &target, &Protocol::default()).unwrap();
    for i in 0..50 {
        let record = json!({"text": format!("text {i}"), "createdAt": format!("2026-01-0{}T00:00:00Z", i % 9 + 1)});
        assert_eq!(
            roundtrip.check(place(i), &record).unwrap(),
            None,
            "{record}"
        );
    }
}

#[test]
fn the_lossy_lens_holds_because_its_complement_restores_the_field() {
    let lens = roundtrip(
        "lossy-lens-record.json",
        "lossy-source-schema-record.json",
        "lossy-target-schema-record.json",
    );
    let record = json!({"text": "hi", "createdAt": "2026-01-01T00:00:00.000Z"});
    assert_eq!(lens.check(place(0), &record).unwrap(), None);
}

#[test]
fn blobs_that_do_not_decode_are_errors() {
    for blob in [
        json!({"steps": [{"name": "x"}]}),
        json!({"name": "x", "source": {"name": "id", "precondition": "Unconstrained", "transform": {"TransformFromTheFuture": {}}}}),
        json!("not a lens"),
    ] {
        let error = LensBlob::decode(&blob).unwrap_err();
        assert!(matches!(error, VerifyError::LensBlob(_)), "{error}");
        assert!(error.to_string().starts_with("unparseable lens blob"));
    }
    let error = SchemaBlob::decode(&json!({"blob": {"vertices": 3}}), "target").unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("unparseable target schema blob")
    );
}

#[test]
fn object_hashes_are_blake3_of_sorted_compact_json() {
    for name in [
        "lens-record.json",
        "source-schema-record.json",
        "target-schema-record.json",
        "lossy-lens-record.json",
    ] {
        let record = fixture(name);
        assert_eq!(
            object_hash(&record["blob"]),
            record["objectHash"].as_str().unwrap(),
            "{name}"
        );
    }
}

fn check(lens: &Value, source: &Value, target: &Value) -> svc_verify::StaticReport {
    static_check(
        PublishedLens {
            lens,
            source,
            target,
        },
        None,
    )
    .unwrap()
}

#[test]
fn the_static_check_holds_for_the_fixtures() {
    let report = check(
        &fixture("lens-record.json"),
        &fixture("source-schema-record.json"),
        &fixture("target-schema-record.json"),
    );
    assert_eq!(report.result(), "holds", "{report:?}");
}

#[test]
fn the_static_check_fails_on_another_target_or_a_wrong_hash() {
    let lens = fixture("lens-record.json");
    let source = fixture("source-schema-record.json");
    let other_target = fixture("lossy-target-schema-record.json");
    let report = check(&lens, &source, &other_target);
    assert_eq!(report.result(), "falsified");
    assert!(
        report.failures[0].contains("derives a target schema"),
        "{report:?}"
    );

    let mut tampered = lens.clone();
    tampered["objectHash"] = json!("00".repeat(32));
    let report = check(&tampered, &source, &fixture("target-schema-record.json"));
    assert_eq!(report.result(), "falsified");
    assert!(report.failures[0].contains("objectHash"), "{report:?}");
}

#[test]
fn an_unknown_protocol_is_inconclusive_unless_supplied() {
    let lens = fixture("lens-record.json");
    let mut source = fixture("source-schema-record.json");
    source["protocol"] = json!("atproto-next");
    let target = fixture("target-schema-record.json");
    assert_eq!(check(&lens, &source, &target).result(), "inconclusive");
    let supplied = Protocol {
        name: "atproto-next".into(),
        ..Protocol::default()
    };
    let report = static_check(
        PublishedLens {
            lens: &lens,
            source: &source,
            target: &target,
        },
        Some(&supplied),
    )
    .unwrap();
    assert_eq!(report.result(), "holds", "{report:?}");
}
