//! Account status: an inactive account's records stay stored, with their keys column, but
//! leave `query_keys` and the counts; reactivation files them again; deletion removes them.

use super::{Pending, Writer, now_ms};
use crate::{AccountStatus, CatalogError, CatalogResult, IndexKeys};
use rusqlite::{Transaction, params};

/// The uri range of one repository: `at://<did>/` up to (not including) `at://<did>0`.
fn repository_range(did: &str) -> (String, String) {
    (format!("at://{did}/"), format!("at://{did}0"))
}

/// The DID of an at-uri (its authority).
pub(crate) fn did_of(uri: &str) -> &str {
    let rest = uri.strip_prefix("at://").unwrap_or(uri);
    rest.split('/').next().unwrap_or(rest)
}

impl Writer {
    pub(super) fn set_account(&mut self, did: &str, status: &AccountStatus) -> CatalogResult<()> {
        if self.bulk.is_some() {
            return Err(CatalogError::Storage(
                "an account change cannot join a bulk load".into(),
            ));
        }
        let was_inactive = self.inactive.contains(did);
        let tx = self.conn.transaction()?;
        let mut pending = Pending::default();
        match status {
            AccountStatus::Inactive(reason) => {
                if !was_inactive {
                    file_repository(&tx, &self.positions, did, false, &mut pending)?;
                }
                tx.execute(
                    "INSERT OR REPLACE INTO inactive_accounts (did, status, updated_at) VALUES (?1, ?2, ?3)",
                    params![did, reason, now_ms()],
                )?;
            }
            AccountStatus::Active => {
                if was_inactive {
                    file_repository(&tx, &self.positions, did, true, &mut pending)?;
                }
                tx.execute("DELETE FROM inactive_accounts WHERE did = ?1", [did])?;
            }
            AccountStatus::Deleted => {
                if !was_inactive {
                    file_repository(&tx, &self.positions, did, false, &mut pending)?;
                }
                let (from, to) = repository_range(did);
                tx.execute(
                    "DELETE FROM records WHERE uri >= ?1 AND uri < ?2",
                    params![from, to],
                )?;
                // The account stays on record as deleted: a late event for it (a backfill page
                // read before the deletion) is stored out of sight, not served.
                tx.execute(
                    "INSERT OR REPLACE INTO inactive_accounts (did, status, updated_at) VALUES (?1, 'deleted', ?2)",
                    params![did, now_ms()],
                )?;
            }
        }
        super::write_keys(&tx, &self.shared, &mut pending)?;
        super::flush_counts(&tx, &self.shared, &pending)?;
        tx.commit()?;
        match status {
            AccountStatus::Active => {
                self.inactive.remove(did);
            }
            AccountStatus::Inactive(_) | AccountStatus::Deleted => {
                self.inactive.insert(did.to_string());
            }
        }
        self.publish(&pending);
        Ok(())
    }
}

/// Files every live record of a repository under its keys (`file = true`) or takes them all
/// out of the index (`false`), with the counts.
fn file_repository(
    tx: &Transaction<'_>,
    positions: &std::collections::HashMap<i64, usize>,
    did: &str,
    file: bool,
    pending: &mut Pending,
) -> CatalogResult<()> {
    let (from, to) = repository_range(did);
    let mut rows: Vec<(i64, String, String, String)> = Vec::new();
    {
        let mut scan = tx.prepare(
            "SELECT rowid, uri, collection, keys FROM records WHERE uri >= ?1 AND uri < ?2 AND record IS NOT NULL",
        )?;
        let mut found = scan.query(params![from, to])?;
        while let Some(row) = found.next()? {
            rows.push((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?));
        }
    }
    let empty = IndexKeys::new();
    for (rowid, uri, collection, keys) in rows {
        let keys = super::keys_column::decode(&keys, positions);
        if file {
            super::update_keys(&uri, rowid, &empty, &keys, pending);
            *pending.kind_counts.entry(collection).or_default() += 1;
        } else {
            super::update_keys(&uri, rowid, &keys, &empty, pending);
            *pending.kind_counts.entry(collection).or_default() -= 1;
        }
    }
    Ok(())
}
