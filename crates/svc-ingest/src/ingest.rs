//! Turns events into catalog changes under the ingest rules: out-of-family collections are
//! ignored; what a source says of a record (its repository, key, revision, CID and uri) is
//! checked, and records are validated against the lexicons (a failure is counted and logged
//! with the uri and the reason, never fatal); deletes pass the same checks, then through.

use crate::event::{Action, CommitEvent};
use crate::metrics::IngestMetrics;
use crate::readiness::WriteHealth;
use std::sync::Arc;
use std::time::Duration;
use svc_catalog::{Change, Upsert};
use svc_lexicon::Lexicons;
use svc_spec::Json;
use svc_spec::QuerySet;
use svc_syntax::{AtUri, Cid, Did, Nsid, RecordKey, Tid};

/// The longest record uri that is filed. Both engines index the uri, and PostgreSQL's B-tree
/// entries hold at most about 2.7 KB (a longer one fails the whole commit); every DID method
/// the network's relays accept (did:plc, did:web) gives uris far below this.
pub const MAX_RECORD_URI_BYTES: usize = 2048;

/// The largest record text that is filed: 2 MiB, as the network's indexers take a record's
/// JSON, twice the one million bytes the sync protocol allows its DAG-CBOR block (JSON may be
/// larger than the block it was read from; a lens or schema blob can be large). A larger one
/// is refused and counted, on every source.
pub const MAX_RECORD_JSON_BYTES: usize = 2 << 20;

/// A created or updated record's text, when it came and is within [`MAX_RECORD_JSON_BYTES`].
fn within_limit(record_json: Option<String>) -> Result<String, String> {
    match record_json {
        Some(json) if json.len() > MAX_RECORD_JSON_BYTES => Err(format!(
            "record: {} bytes, over the limit of {MAX_RECORD_JSON_BYTES}",
            json.len()
        )),
        Some(json) => Ok(json),
        None => Err("record: missing, not DAG-CBOR, or its block over 1,000,000 bytes".into()),
    }
}

/// How far ahead of this host's clock a time a source gives may be (a rev's, an event's, a
/// Jetstream cursor): clocks drift by seconds, and a relay allows minutes; a time beyond was
/// not made now, and kept as a rev or a cursor it would stand above everything that follows.
pub const CLOCK_TOLERANCE: Duration = Duration::from_secs(600);

/// Whether a time a source gives, in microseconds since the epoch, can be true: not before the
/// epoch, and not beyond now (and the tolerance).
pub fn is_plausible_time(micros: i64) -> bool {
    let latest = svc_syntax::now_unix_micros().saturating_add(CLOCK_TOLERANCE.as_micros() as i64);
    (0..=latest).contains(&micros)
}

/// How much of a refused uri a log line shows: enough to find the record, and a hostile uri
/// does not fill the log.
const LOGGED_URI_BYTES: usize = 256;

/// What became of one event before it reached the catalog.
#[derive(Debug)]
pub enum Prepared {
    Change(Change),
    Invalid,
    Ignored,
}

#[derive(Debug, Clone)]
pub struct Ingestor {
    lexicons: &'static Lexicons,
    queries: Arc<QuerySet>,
    metrics: Arc<IngestMetrics>,
    writes: Arc<WriteHealth>,
}

impl Ingestor {
    pub fn new(queries: Arc<QuerySet>, metrics: Arc<IngestMetrics>) -> Ingestor {
        Ingestor {
            lexicons: Lexicons::embedded(),
            queries,
            metrics,
            writes: Arc::default(),
        }
    }

    /// Whether writes to the catalog succeed, as every source reports it.
    pub fn writes(&self) -> &Arc<WriteHealth> {
        &self.writes
    }

    pub fn metrics(&self) -> &IngestMetrics {
        &self.metrics
    }

    /// The metrics, for another part of ingest to count in.
    pub fn shared_metrics(&self) -> Arc<IngestMetrics> {
        Arc::clone(&self.metrics)
    }

    /// Whether events of this collection are filed (the others are ignored unread).
    pub fn wants(&self, collection: &str) -> bool {
        self.lexicons.is_record_collection(collection)
    }

    pub fn prepare(&self, event: CommitEvent) -> Prepared {
        if !self.wants(&event.collection) {
            return Prepared::Ignored;
        }
        let raw_uri = event.uri();
        let fields = match SourceFields::check(&event, &raw_uri) {
            Ok(fields) => fields,
            Err(reason) => return self.invalid(&raw_uri, &reason),
        };
        let uri = fields.uri.as_str();
        if matches!(event.action, Action::Delete) {
            return Prepared::Change(Change::Delete {
                uri: fields.uri,
                collection: fields.collection,
                rev: fields.rev,
            });
        }
        let filed = within_limit(event.record_json)
            .and_then(|text| Ok((self.filed_under(&fields.collection, uri, &text)?, text)));
        let ((keys, search), record_json) = match filed {
            Ok(filed) => filed,
            Err(reason) => return self.invalid(uri, &reason),
        };
        Prepared::Change(Change::Upsert(Upsert {
            keys,
            search,
            uri: fields.uri,
            collection: fields.collection,
            author: fields.did,
            rev: fields.rev,
            cid: fields.cid,
            record_json,
        }))
    }

    /// A record's keys and searchable words, once its text parses and is valid; the tree
    /// borrows from the text, so it lives only until they are taken.
    fn filed_under(
        &self,
        collection: &Nsid,
        uri: &str,
        text: &str,
    ) -> Result<(svc_spec::IndexKeys, Option<svc_spec::search::SearchText>), String> {
        let record = Json::parse(text).map_err(|error| format!("record: not JSON: {error}"))?;
        self.lexicons
            .validate_json(collection, &record)
            .map_err(|error| error.to_string())?;
        Ok(self
            .queries
            .indexes()
            .keys_and_words(collection, uri, &record))
    }

    fn invalid(&self, uri: &str, reason: &str) -> Prepared {
        self.metrics.invalid_records.inc();
        let uri = shortened(uri, LOGGED_URI_BYTES);
        tracing::warn!(%uri, "invalid record skipped: {reason}");
        Prepared::Invalid
    }
}

/// What the source says of the record besides its body, checked and typed. The rev orders
/// every version of a uri (the catalog keeps the greatest), so one that is not a TID (`~~~`
/// sorts above them all) or is a TID of a time to come would pin the record against every
/// later change; the others are stored and indexed as they come. Jetstream and the firehose
/// check the repository and the key as they parse, but the backfill takes them from a server's
/// listing: this is where every source passes.
struct SourceFields {
    uri: AtUri,
    did: Did,
    collection: Nsid,
    rev: Tid,
    cid: Option<Cid>,
}

impl SourceFields {
    fn check(event: &CommitEvent, uri: &str) -> Result<SourceFields, String> {
        if uri.len() > MAX_RECORD_URI_BYTES {
            return Err(format!(
                "uri: {} bytes, longer than {MAX_RECORD_URI_BYTES}",
                uri.len()
            ));
        }
        let did = Did::new(event.did.as_str()).map_err(|e| format!("repository: {e}"))?;
        let collection =
            Nsid::new(event.collection.as_str()).map_err(|e| format!("collection: {e}"))?;
        let rkey = RecordKey::new(event.rkey.as_str()).map_err(|e| format!("record key: {e}"))?;
        let rev = Tid::new(event.rev.as_str()).map_err(|e| format!("rev: {e}"))?;
        if !is_plausible_time(rev.time().0) {
            return Err(format!("rev: {rev} is a time in the future"));
        }
        let cid = match &event.cid {
            Some(cid) => Some(Cid::new(cid.as_str()).map_err(|e| format!("cid: {e}"))?),
            None => None,
        };
        Ok(SourceFields {
            uri: AtUri::of_record(&did, &collection, &rkey),
            did,
            collection,
            rev,
            cid,
        })
    }
}

/// `text` cut to at most `limit` bytes on a character boundary, marked when cut.
fn shortened(text: &str, limit: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= limit {
        return text.into();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = r#"{"$type":"dev.svc.vocab","name":"colors","world":"open","occurredAt":"2026-01-01T00:00:00Z"}"#;

    fn event(collection: &str, record: &str) -> CommitEvent {
        CommitEvent {
            did: "did:plc:a".into(),
            collection: collection.into(),
            rkey: "1".into(),
            action: Action::Create,
            rev: "3kaaaaaaaaaa2".into(),
            cid: None,
            record_json: Some(record.into()),
            time_us: None,
        }
    }

    fn ingestor() -> Ingestor {
        Ingestor::new(Arc::new(QuerySet::embedded()), Arc::default())
    }

    #[test]
    fn family_records_are_validated_and_others_ignored() {
        let ingestor = ingestor();
        assert!(matches!(
            ingestor.prepare(event("dev.svc.vocab", VALID)),
            Prepared::Change(Change::Upsert(_))
        ));
        assert!(matches!(
            ingestor.prepare(event("app.bsky.feed.post", "{}")),
            Prepared::Ignored
        ));
        let invalid = r#"{"$type":"dev.svc.vocab","name":"colors","world":"closed","occurredAt":"2026-01-01T00:00:00Z"}"#;
        assert!(matches!(
            ingestor.prepare(event("dev.svc.vocab", invalid)),
            Prepared::Invalid
        ));
        assert!(matches!(
            ingestor.prepare(event("dev.svc.vocab", "{nope")),
            Prepared::Invalid
        ));
        assert_eq!(ingestor.metrics().invalid_records.get(), 2);
    }

    #[test]
    fn a_rev_that_is_no_tid_makes_creates_and_deletes_invalid() {
        let ingestor = ingestor();
        for rev in [
            "~~~",
            "",
            "3kb0000000001",
            "3kaaaaaaaaaa22",
            "zzzzzzzzzzzzz",
        ] {
            for action in [Action::Create, Action::Update, Action::Delete] {
                let mut event = event("dev.svc.vocab", VALID);
                event.rev = rev.into();
                event.action = action;
                assert!(
                    matches!(ingestor.prepare(event), Prepared::Invalid),
                    "{rev:?} {action:?}"
                );
            }
        }
        assert_eq!(ingestor.metrics().invalid_records.get(), 15);
        let mut delete = event("dev.svc.vocab", VALID);
        delete.action = Action::Delete;
        assert!(matches!(
            ingestor.prepare(delete),
            Prepared::Change(Change::Delete { .. })
        ));
        // A TID, but of a time to come: it too would stand above every real change.
        for rev in ["bzzzzzzzzzz22", "jzzzzzzzzzzzz"] {
            let mut event = event("dev.svc.vocab", VALID);
            event.rev = rev.into();
            assert!(
                matches!(ingestor.prepare(event), Prepared::Invalid),
                "{rev}"
            );
        }
        let generator = svc_syntax::TidGenerator::new(1);
        let mut now = event("dev.svc.vocab", VALID);
        now.rev = generator.next_tid();
        assert!(matches!(
            ingestor.prepare(now),
            Prepared::Change(Change::Upsert(_))
        ));
        // Out of the family nothing is read, the rev neither.
        let mut foreign = event("app.bsky.feed.post", "{}");
        foreign.rev = "~~~".into();
        assert!(matches!(ingestor.prepare(foreign), Prepared::Ignored));
    }

    #[test]
    fn lens_and_schema_records_are_filed_and_an_oversized_blob_refused() {
        let ingestor = ingestor();
        let schema = r#"{"$type":"dev.panproto.schema.schema","protocol":"atproto","objectHash":"ab","createdAt":"2026-01-01T00:00:00Z","blob":{"entries":["post"],"nsids":{"post":"app.example.post"}}}"#;
        let Prepared::Change(Change::Upsert(upsert)) =
            ingestor.prepare(event("dev.panproto.schema.schema", schema))
        else {
            panic!("a schema record is filed");
        };
        let search = upsert.search.expect("a schema is searched by its name");
        assert!(search.name.contains("example"), "{search:?}");
        let lens = r#"{"$type":"dev.panproto.schema.lens","sourceSchema":"at://did:plc:a/dev.panproto.schema.schema/s","targetSchema":"at://did:plc:a/dev.panproto.schema.schema/t","objectHash":"ab","createdAt":"2026-01-01T00:00:00Z","blob":{"steps":[]}}"#;
        assert!(matches!(
            ingestor.prepare(event("dev.panproto.schema.lens", lens)),
            Prepared::Change(Change::Upsert(_))
        ));
        let padding = "x".repeat(MAX_RECORD_JSON_BYTES);
        let huge = lens.replace(r#""steps":[]"#, &format!(r#""steps":[],"pad":"{padding}""#));
        assert!(matches!(
            ingestor.prepare(event("dev.panproto.schema.lens", &huge)),
            Prepared::Invalid
        ));
        let no_source = lens.replace("sourceSchema", "source");
        assert!(matches!(
            ingestor.prepare(event("dev.panproto.schema.lens", &no_source)),
            Prepared::Invalid
        ));
        assert_eq!(ingestor.metrics().invalid_records.get(), 2);
    }

    #[test]
    fn a_uri_longer_than_the_engines_index_is_invalid() {
        let ingestor = ingestor();
        let with_did = |did: String| CommitEvent {
            did,
            ..event("dev.svc.vocab", VALID)
        };
        let overhead = event("dev.svc.vocab", VALID).uri().len() - "did:plc:a".len();
        let longest = format!(
            "did:web:{}",
            "a".repeat(MAX_RECORD_URI_BYTES - overhead - "did:web:".len())
        );
        let at_limit = with_did(longest.clone());
        assert_eq!(at_limit.uri().len(), MAX_RECORD_URI_BYTES);
        assert!(matches!(
            ingestor.prepare(at_limit),
            Prepared::Change(Change::Upsert(_))
        ));
        for action in [Action::Create, Action::Delete] {
            let mut over = with_did(format!("{longest}a"));
            over.action = action;
            assert!(matches!(ingestor.prepare(over), Prepared::Invalid));
        }
        assert_eq!(ingestor.metrics().invalid_records.get(), 2);
    }

    #[test]
    fn repository_key_and_cid_as_a_listing_gives_them_are_checked() {
        let ingestor = ingestor();
        let cases: [fn(&mut CommitEvent); 4] = [
            |e| e.did = "alice\0".into(),
            |e| e.rkey = "..".into(),
            |e| e.cid = Some("bafy\0rei".into()),
            |e| e.cid = Some("b".repeat(10_000)),
        ];
        for change in cases {
            let mut event = event("dev.svc.vocab", VALID);
            change(&mut event);
            assert!(matches!(ingestor.prepare(event), Prepared::Invalid));
        }
        let mut good = event("dev.svc.vocab", VALID);
        good.cid = Some("bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm".into());
        assert!(matches!(
            ingestor.prepare(good),
            Prepared::Change(Change::Upsert(_))
        ));
        assert_eq!(ingestor.metrics().invalid_records.get(), 4);
    }

    #[test]
    fn a_tid_holds_its_time_above_the_clock_id() {
        let micros = |tid: &str| Tid::new(tid).unwrap().time().0;
        assert_eq!(micros("2222222222222"), 0);
        assert_eq!(micros("3jzfcijpj2z2a"), 1_688_137_381_887_007);
        assert_eq!(micros("bzzzzzzzzzz22"), (1 << 53) - 1);
        assert!(is_plausible_time(svc_syntax::now_unix_micros()));
        assert!(!is_plausible_time(-1));
        assert!(!is_plausible_time(i64::MAX));
        let ahead = CLOCK_TOLERANCE.as_micros() as i64;
        assert!(is_plausible_time(
            svc_syntax::now_unix_micros() + ahead - 1_000_000
        ));
        assert!(!is_plausible_time(
            svc_syntax::now_unix_micros() + ahead + 1_000_000
        ));
    }

    #[test]
    fn a_long_uri_is_logged_cut_on_a_character_boundary() {
        assert_eq!(shortened("at://x", 256), "at://x");
        let long = format!("at://{}", "é".repeat(200));
        assert_eq!(shortened(&long, 10), "at://éé... (405 bytes)");
    }
}
