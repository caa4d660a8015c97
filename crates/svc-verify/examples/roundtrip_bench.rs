//! Round-trip speed, on demand: `cargo run --release -p svc-verify --example roundtrip_bench
//! [RECORDS]` (default 10,000). Prints the time to instantiate each fixture lens and to
//! check and round-trip a corpus of RECORDS records through it, as `svc verify` does,
//! lens instantiation excluded.

use serde_json::{Value, json};
use std::time::Instant;
use svc_verify::{CorpusPlace, LensBlob, Protocol, Roundtrip, SchemaBlob};

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn main() {
    let records: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("RECORDS is a number"))
        .unwrap_or(10_000);
    let cases = [
        (
            "iso rename_sort (1 field)",
            "lens-record.json",
            "source-schema-record.json",
            "target-schema-record.json",
        ),
        (
            "lossy drop createdAt (2 fields)",
            "lossy-lens-record.json",
            "lossy-source-schema-record.json",
            "lossy-target-schema-record.json",
        ),
    ];
    println!("records: {records}");
    for (name, lens, source, target) in cases {
        let started = Instant::now();
        let blob = LensBlob::decode(&fixture(lens)["blob"]).expect("lens blob");
        let source = SchemaBlob::decode(&fixture(source), "source").expect("source");
        let target = SchemaBlob::decode(&fixture(target), "target").expect("target");
        let roundtrip =
            Roundtrip::new(&blob, &source, &target, &Protocol::default()).expect("instantiates");
        let instantiate = started.elapsed();
        let corpus: Vec<Value> = (0..records)
            .map(|i| json!({"text": format!("record {i}: some text"), "createdAt": "2026-01-01T00:00:00.000Z"}))
            .map(|mut record| {
                if !name.starts_with("lossy") {
                    record.as_object_mut().map(|o| o.remove("createdAt"));
                }
                record
            })
            .collect();
        let started = Instant::now();
        for (index, record) in corpus.iter().enumerate() {
            // What `svc verify` does per record: the fit check, then the round trip.
            assert!(roundtrip.misfits(record).is_empty());
            let place = CorpusPlace { index, line: None };
            let outcome = roundtrip.check(place, record).expect("no step fails");
            assert!(outcome.is_none(), "{name}: record {index} falsified");
        }
        let elapsed = started.elapsed();
        println!(
            "{name}: instantiate {:.2} ms; {records} round trips {:.1} ms ({:.2} us/record)",
            instantiate.as_secs_f64() * 1e3,
            elapsed.as_secs_f64() * 1e3,
            elapsed.as_secs_f64() * 1e6 / records.max(1) as f64
        );
    }
}
