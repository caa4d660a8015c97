//! The `records.keys` column: the index keys a stored record version was filed under, as
//! JSON `[[qid, key], ...]`. A qid is this database's number for a query's identity, never
//! reused, so the column survives specification edits: keys of a query redefined or dropped
//! since read as none. On PostgreSQL a bulk load leaves it NULL: the keys are then taken from
//! the record (`StoredKeys::InRecord`).

use crate::{CatalogError, CatalogResult};
use std::collections::HashMap;
use svc_spec::{IndexKeys, QueryId};

#[derive(Debug, Clone, Default)]
pub(crate) struct QueryIds {
    qids: HashMap<QueryId, i64>,
    ids: HashMap<i64, QueryId>,
}

impl QueryIds {
    pub fn insert(&mut self, query: QueryId, qid: i64) {
        self.ids.insert(qid, query.clone());
        self.qids.insert(query, qid);
    }

    pub fn remove(&mut self, query: &QueryId) {
        if let Some(qid) = self.qids.remove(query) {
            self.ids.remove(&qid);
        }
    }

    pub fn qid(&self, query: &QueryId) -> CatalogResult<i64> {
        self.qids
            .get(query)
            .copied()
            .ok_or_else(|| CatalogError::UnknownQuery(query.to_string()))
    }

    pub fn encode(&self, keys: &IndexKeys) -> String {
        let pairs: Vec<(i64, &str)> = keys
            .iter()
            .filter_map(|(query, key)| Some((*self.qids.get(query)?, key.as_str())))
            .collect();
        serde_json::to_string(&pairs).unwrap_or_else(|_| "[]".to_string())
    }

    /// Keys of queries no longer known are dropped; a damaged column reads as no keys.
    pub fn decode(&self, text: &str) -> IndexKeys {
        let pairs: Vec<(i64, String)> = serde_json::from_str(text).unwrap_or_default();
        pairs
            .into_iter()
            .filter_map(|(qid, key)| Some((self.ids.get(&qid)?.clone(), key)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_forgets_dropped_queries() {
        let (a, b) = (QueryId::new("a"), QueryId::new("b"));
        let mut ids = QueryIds::default();
        ids.insert(a.clone(), 7);
        ids.insert(b.clone(), 9);
        let keys: IndexKeys = [
            (a.clone(), "k".to_string()),
            (b.clone(), "5:x\"y\nz".to_string()),
        ]
        .into();
        let text = ids.encode(&keys);
        assert_eq!(ids.decode(&text), keys);
        ids.remove(&b);
        assert_eq!(ids.decode(&text).len(), 1);
        assert!(ids.decode("garbage").is_empty());
    }
}
