//! A plan written in the open transaction on PostgreSQL: the records, their index entries and
//! counts, the search text and the status rows. Each kind of write is one statement over
//! arrays (`unnest`), so a commit costs a handful of round trips, whatever its size.

use super::link::Link;
use crate::CatalogResult;
use crate::engine::{Plan, RecordWrite, repository_range};
use crate::runtime::now_ms;

impl Link {
    async fn write_records(&mut self, plan: &Plan<'_>) -> CatalogResult<()> {
        let now = now_ms();
        let mut text: [Vec<&str>; 3] = Default::default();
        let (mut cids, mut records, mut row_keys) = (Vec::new(), Vec::new(), Vec::new());
        let (mut keyed, mut keys): (Vec<&str>, Vec<String>) = Default::default();
        for write in &plan.records {
            match write {
                RecordWrite::Row(row) => {
                    for (column, value) in text.iter_mut().zip([row.uri, row.collection, row.rev]) {
                        column.push(value);
                    }
                    cids.push(row.cid);
                    records.push(row.record);
                    row_keys.push(self.ids.encode(row.keys));
                }
                RecordWrite::Keys { uri, keys: k } => {
                    keyed.push(uri);
                    keys.push(self.ids.encode(k));
                }
            }
        }
        if !row_keys.is_empty() {
            self.execute(
                "INSERT INTO records (uri, collection, rev, cid, record, keys, indexed_at) \
                 SELECT u.uri, u.collection, u.rev, u.cid, u.record, u.keys, $7 \
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) \
                   AS u(uri, collection, rev, cid, record, keys) \
                 ON CONFLICT (uri) DO UPDATE SET collection = excluded.collection, \
                   rev = excluded.rev, cid = excluded.cid, record = excluded.record, keys = excluded.keys, \
                   indexed_at = excluded.indexed_at",
                &[&text[0], &text[1], &text[2], &cids, &records, &row_keys, &now],
            )
            .await?;
        }
        if !keyed.is_empty() {
            self.execute(
                "UPDATE records r SET keys = u.keys FROM unnest($1::text[], $2::text[]) AS u(uri, keys) \
                 WHERE r.uri = u.uri",
                &[&keyed, &keys],
            )
            .await?;
        }
        Ok(())
    }

    async fn write_index(&mut self, plan: &Plan<'_>) -> CatalogResult<()> {
        let mut filed: [(Vec<i64>, Vec<&str>, Vec<&str>); 2] = Default::default();
        for ((query, key, uri), file) in &plan.index {
            let (qids, keys, uris) = &mut filed[usize::from(*file)];
            qids.push(self.ids.qid(query)?);
            keys.push(key);
            uris.push(uri);
        }
        let [(gone_q, gone_k, gone_u), (new_q, new_k, new_u)] = &filed;
        if !gone_q.is_empty() {
            self.execute(
                "DELETE FROM query_keys q USING unnest($1::bigint[], $2::text[], $3::text[]) AS d(qid, key, uri) \
                 JOIN query_counts c ON c.qid = d.qid AND c.key = d.key \
                 WHERE q.kid = c.kid AND q.uri = d.uri",
                &[gone_q, gone_k, gone_u],
            )
            .await?;
        }
        if !new_q.is_empty() {
            self.execute(
                "INSERT INTO query_keys (kid, uri, rid) \
                 SELECT c.kid, d.uri, r.id FROM unnest($1::bigint[], $2::text[], $3::text[]) AS d(qid, key, uri) \
                 JOIN query_counts c ON c.qid = d.qid AND c.key = d.key \
                 JOIN records r ON r.uri = d.uri ON CONFLICT DO NOTHING",
                &[new_q, new_k, new_u],
            )
            .await?;
        }
        Ok(())
    }

    /// The changed keys' counts, the count rows first: an index entry names its key by the
    /// number its count row carries, so a key's row is written before its first entry (by
    /// `write_key_counts`) and goes, with its last entry, after them (by `drop_empty_keys`).
    async fn write_key_counts<'p>(
        &mut self,
        plan: &'p Plan<'_>,
    ) -> CatalogResult<(Vec<i64>, Vec<&'p str>)> {
        let (mut qids, mut keys, mut deltas) = (Vec::new(), Vec::new(), Vec::new());
        for ((query, key), delta) in plan.query_counts.iter().filter(|(_, d)| **d != 0) {
            qids.push(self.ids.qid(query)?);
            keys.push(key.as_str());
            deltas.push(*delta);
        }
        if !qids.is_empty() {
            self.execute(
                "INSERT INTO query_counts (qid, key, n) SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[]) \
                 ON CONFLICT (qid, key) DO UPDATE SET n = query_counts.n + excluded.n",
                &[&qids, &keys, &deltas],
            )
            .await?;
        }
        Ok((qids, keys))
    }

    async fn drop_empty_keys(&mut self, qids: &[i64], keys: &[&str]) -> CatalogResult<()> {
        if !qids.is_empty() {
            self.execute(
                "DELETE FROM query_counts q USING unnest($1::bigint[], $2::text[]) AS d(qid, key) \
                 WHERE q.qid = d.qid AND q.key = d.key AND q.n <= 0",
                &[&qids, &keys],
            )
            .await?;
        }
        Ok(())
    }

    async fn write_kind_counts(&mut self, plan: &Plan<'_>) -> CatalogResult<()> {
        let (kinds, deltas): (Vec<&str>, Vec<i64>) = plan
            .kind_counts
            .iter()
            .filter(|(_, d)| **d != 0)
            .map(|(k, d)| (k.as_str(), *d))
            .unzip();
        if !kinds.is_empty() {
            self.execute(
                "INSERT INTO kind_counts (collection, n) SELECT * FROM unnest($1::text[], $2::bigint[]) \
                 ON CONFLICT (collection) DO UPDATE SET n = kind_counts.n + excluded.n",
                &[&kinds, &deltas],
            )
            .await?;
            self.execute(
                "DELETE FROM kind_counts WHERE collection = ANY($1) AND n <= 0",
                &[&kinds],
            )
            .await?;
        }
        Ok(())
    }

    pub(super) async fn write(&mut self, plan: &Plan<'_>) -> CatalogResult<()> {
        self.write_records(plan).await?;
        self.write_search(plan).await?;
        if let Some(did) = &plan.remove_repository {
            let (from, to) = repository_range(did);
            self.remove_search_range(&from, &to).await?;
            self.execute(
                "DELETE FROM records WHERE uri >= $1 AND uri < $2",
                &[&from, &to],
            )
            .await?;
        }
        let (qids, keys) = self.write_key_counts(plan).await?;
        self.write_index(plan).await?;
        self.drop_empty_keys(&qids, &keys).await?;
        self.write_kind_counts(plan).await?;
        self.write_status(plan).await
    }
}
