//! The bodies of the fuzz targets (`fuzz/`), one function each: arbitrary bytes into a parser
//! that faces the network or a user's file. Each must return, never panic, and hold the
//! invariants it asserts. `cargo test` replays every committed corpus file through them on
//! stable Rust (`tests/corpora.rs`), so a regression fails CI without a fuzzer.

/// A target's body: arbitrary bytes in; returns, or panics on a bug.
pub type Target = fn(&[u8]);

/// Every target by the name of its folder under `fuzz/corpus/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("syntax", syntax),
    ("lexicon", lexicon),
    ("firehose_frame", firehose_frame),
    ("jetstream_line", jetstream_line),
    ("corpus", corpus),
    ("list_paging", list_paging),
    ("writer", writer),
    ("repository", repository),
];

mod writer;
pub use writer::{WriterBench, writer};

/// A repository as CAR bytes (`getRepo`, a `#commit` event's slice): its header and blocks,
/// each block's CID, DAG-CBOR and commit. Whatever decodes encodes canonically and decodes
/// again.
pub fn repository(data: &[u8]) {
    use svc_repo::dagcbor::{check_block, decode_block, encode};
    let Ok((_roots, blocks)) = svc_repo::car::read(data) else {
        return;
    };
    for (cid, block) in &blocks {
        let _ = check_block(cid, block);
        if let Ok(value) = decode_block(block)
            && let Ok(canonical) = encode(&value)
        {
            assert!(decode_block(&canonical).is_ok(), "{value:?}");
        }
        let _ = svc_repo::commit::Commit::decode(block);
    }
    // Read as a whole repository: blocks, commit and the tree walked whole.
    if let Ok(snapshot) = svc_repo::snapshot::Snapshot::read(data) {
        let _ = snapshot.records(|_| true);
    }
}

/// The atproto string formats: DID, handle, NSID, TID, record key, AT-URI, datetime.
pub fn syntax(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = svc_syntax::check_did(text);
    let _ = svc_syntax::check_handle(text);
    let _ = svc_syntax::check_nsid(text);
    let _ = svc_syntax::check_tid(text);
    let _ = svc_syntax::check_record_key(text);
    let _ = svc_syntax::check_at_uri_grammar(text);
    if let Ok(uri) = svc_syntax::check_at_uri(text) {
        // The parts put back together are the uri.
        let mut joined = format!("at://{}", uri.authority);
        for part in [uri.collection, uri.rkey].into_iter().flatten() {
            joined.push('/');
            joined.push_str(part);
        }
        assert_eq!(joined, text);
    }
    if svc_syntax::check_datetime(text).is_ok() {
        assert!(
            svc_syntax::datetime_to_unix_micros(text).is_some(),
            "{text:?}"
        );
    }
}

/// Arbitrary JSON against every record kind of the lexicon. The ingest path's borrowed tree
/// must read any text exactly as `serde_json::Value` does, and be refused where it is.
pub fn lexicon(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let value = serde_json::from_str::<serde_json::Value>(text);
    let tree = svc_json::Json::parse(text);
    assert_eq!(value.is_ok(), tree.is_ok(), "{text:?}");
    let (Ok(value), Ok(tree)) = (value, tree) else {
        return;
    };
    assert_eq!(tree, svc_json::Json::from_value(&value), "{text:?}");
    let lexicons = svc_lexicon::Lexicons::embedded();
    for collection in lexicons.record_collections() {
        let _ = lexicons.validate_json(collection, &tree);
    }
}

/// One ingestor for every run: building the query set each time would be most of the work.
fn ingestor() -> &'static svc_ingest::Ingestor {
    static INGESTOR: std::sync::OnceLock<svc_ingest::Ingestor> = std::sync::OnceLock::new();
    INGESTOR.get_or_init(|| {
        svc_ingest::Ingestor::new(
            std::sync::Arc::new(svc_spec::QuerySet::embedded()),
            std::sync::Arc::default(),
        )
    })
}

/// What a source says passes the ingest checks before it can reach the catalog: a change has
/// a TID for its rev, and a stored account status is a short word.
fn check_ingested(event: svc_ingest::CommitEvent) {
    let rev = event.rev.clone();
    if let svc_ingest::Prepared::Change(_) = ingestor().prepare(event) {
        assert!(svc_syntax::check_tid(&rev).is_ok(), "{rev:?}");
    }
}

fn check_account_status(status: &svc_catalog::AccountStatus) {
    if let svc_catalog::AccountStatus::Inactive(status) = status {
        assert!(
            status.len() <= 16 && status.bytes().all(|b| b.is_ascii_lowercase()),
            "{status:?}"
        );
    }
}

/// A repository-firehose frame: DAG-CBOR header and body, and the CAR slice in it.
pub fn firehose_frame(data: &[u8]) {
    // Every commit's proof kept and checked, as for a followed repository; every #sync too.
    if let Ok(message) = svc_ingest::firehose::decode_frame(data, |_| true, |_| true) {
        if let svc_ingest::firehose::Proof::Carried(proof) = &message.proof {
            let _ = proof.check();
        }
        for event in &message.events {
            if let svc_ingest::firehose::SourceEvent::Sync(sync) = event {
                let _ = sync.check();
            }
        }
    }
    let Ok(message) = svc_ingest::firehose::decode_frame(
        data,
        |collection| collection.starts_with("dev.svc."),
        |_| false,
    ) else {
        return;
    };
    for event in message.events {
        match event {
            svc_ingest::firehose::SourceEvent::Commit(commit) => check_ingested(commit),
            svc_ingest::firehose::SourceEvent::Account { status, .. } => {
                check_account_status(&status)
            }
            _ => {}
        }
    }
}

/// A Jetstream event, which is also the line format of `--import`.
pub fn jetstream_line(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match svc_ingest::parse_jetstream_line(text) {
        Ok(svc_ingest::JetstreamLine::Commit(commit)) => check_ingested(commit),
        Ok(svc_ingest::JetstreamLine::Account { status, .. }) => check_account_status(&status),
        _ => {}
    }
}

/// A verification corpus file (JSON array or JSON Lines).
pub fn corpus(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(records) = svc_verify::parse_corpus(text) {
        for (index, record) in records.iter().enumerate() {
            assert_eq!(record.place.index, index);
        }
    }
}

/// The paging parameters of a list request: limit, offset, cursor (and percent-decoding).
pub fn list_paging(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(page) = svc_server::list_paging(text) {
        assert!((1..=1000).contains(&page.limit));
    }
}
