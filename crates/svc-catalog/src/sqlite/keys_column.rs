//! The `records.keys` column: the index keys a stored record version was filed under, as
//! JSON `[[qid, key], ...]` (qids, not positions, so the column survives specification edits).

use crate::IndexKeys;
use std::collections::HashMap;

pub(crate) fn encode(qids: &[i64], keys: &IndexKeys) -> String {
    let pairs: Vec<(i64, &str)> = keys
        .iter()
        .map(|(position, key)| (qids[*position], key.as_str()))
        .collect();
    serde_json::to_string(&pairs).unwrap_or_else(|_| "[]".to_string())
}

/// Keys of queries that no longer exist are dropped; a damaged column reads as no keys.
pub(crate) fn decode(text: &str, positions: &HashMap<i64, usize>) -> IndexKeys {
    let pairs: Vec<(i64, String)> = serde_json::from_str(text).unwrap_or_default();
    pairs
        .into_iter()
        .filter_map(|(qid, key)| positions.get(&qid).map(|p| (*p, key)))
        .collect()
}

/// The column with one query's keys replaced (a query added or redefined).
pub(crate) fn replace_query(text: &str, qid: i64, keys: &[String]) -> String {
    let mut pairs: Vec<(i64, String)> = serde_json::from_str(text).unwrap_or_default();
    pairs.retain(|(q, _)| *q != qid);
    pairs.extend(keys.iter().map(|k| (qid, k.clone())));
    serde_json::to_string(&pairs).unwrap_or_else(|_| "[]".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_forgets_dropped_queries() {
        let keys: IndexKeys = [(0, "a".to_string()), (1, "5:x\"y\nz".to_string())].into();
        let text = encode(&[7, 9], &keys);
        let positions = HashMap::from([(7, 0), (9, 1)]);
        assert_eq!(decode(&text, &positions), keys);
        let only_first = HashMap::from([(7, 0)]);
        assert_eq!(decode(&text, &only_first).len(), 1);
        assert!(decode("garbage", &positions).is_empty());
    }
}
