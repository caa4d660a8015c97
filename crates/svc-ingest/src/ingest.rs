//! Turns events into catalog changes under the ingest rules: out-of-family collections are
//! ignored, records are validated against the lexicons (a failure is counted and logged with
//! the uri and the failing path, never fatal), deletes pass through.

use crate::event::{Action, CommitEvent};
use crate::metrics::IngestMetrics;
use crate::readiness::WriteHealth;
use std::sync::Arc;
use svc_catalog::Json;
use svc_catalog::{Change, QuerySet, Upsert};
use svc_lexicon::Lexicons;

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

    /// Whether events of this collection are filed (the others are ignored unread).
    pub fn wants(&self, collection: &str) -> bool {
        self.lexicons.is_record_collection(collection)
    }

    pub fn prepare(&self, event: CommitEvent) -> Prepared {
        if !self.wants(&event.collection) {
            return Prepared::Ignored;
        }
        let uri = event.uri();
        let record_json = match (event.action, event.record_json) {
            (Action::Delete, _) => {
                return Prepared::Change(Change::Delete {
                    uri,
                    collection: event.collection,
                    rev: event.rev,
                });
            }
            (_, Some(json)) => json,
            (_, None) => return self.invalid(&uri, "record: missing"),
        };
        // The tree borrows from the text, so it lives only until the keys are taken.
        let keys = {
            let record = match Json::parse(&record_json) {
                Ok(record) => record,
                Err(error) => return self.invalid(&uri, &format!("record: not JSON: {error}")),
            };
            if let Err(error) = self.lexicons.validate_json(&event.collection, &record) {
                return self.invalid(&uri, &error.to_string());
            }
            self.queries.index_keys(&event.collection, &record)
        };
        Prepared::Change(Change::Upsert(Upsert {
            keys,
            uri,
            collection: event.collection,
            author: event.did,
            rev: event.rev,
            cid: event.cid,
            record_json,
        }))
    }

    fn invalid(&self, uri: &str, reason: &str) -> Prepared {
        self.metrics.invalid_records.inc();
        tracing::warn!(%uri, "invalid record skipped: {reason}");
        Prepared::Invalid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(collection: &str, record: &str) -> CommitEvent {
        CommitEvent {
            did: "did:plc:a".into(),
            collection: collection.into(),
            rkey: "1".into(),
            action: Action::Create,
            rev: "3a".into(),
            cid: None,
            record_json: Some(record.into()),
            time_us: None,
        }
    }

    #[test]
    fn family_records_are_validated_and_others_ignored() {
        let ingestor = Ingestor::new(Arc::new(QuerySet::embedded()), Arc::default());
        let valid = r#"{"$type":"dev.svc.vocab","name":"colors","world":"open","occurredAt":"2026-01-01T00:00:00Z"}"#;
        assert!(matches!(
            ingestor.prepare(event("dev.svc.vocab", valid)),
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
}
