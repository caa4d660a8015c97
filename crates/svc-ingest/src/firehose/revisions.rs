//! The newest revision seen of each repository on the firehose: a verified commit whose
//! revision is not after it (a frame replayed, or one out of order) is not applied. The store
//! keeps each record's own revision too; this refuses the whole commit, and says so.

use std::collections::HashMap;
use std::sync::Mutex;
use svc_syntax::{Did, Tid};

/// Repositories remembered at most (a DID and a TID, about 100 bytes each with the map's own):
/// past it, one is forgotten for each new one, which then only loses this check.
const MAX_REPOSITORIES: usize = 500_000;

#[derive(Default)]
pub(super) struct Revisions(Mutex<HashMap<Did, Tid>>);

impl Revisions {
    /// Records `rev` as the repository's newest; the newest before it when `rev` is not after.
    pub fn advance(&self, repo: &Did, rev: &Tid) -> Result<(), Tid> {
        let mut newest = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(seen) = newest.get(repo) {
            if rev <= seen {
                return Err(seen.clone());
            }
        } else if newest.len() >= MAX_REPOSITORIES
            && let Some(any) = newest.keys().next().cloned()
        {
            newest.remove(&any);
        }
        newest.insert(repo.clone(), rev.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_later_revision_advances() {
        let revisions = Revisions::default();
        let repo = Did::new("did:plc:z72i7hdynmk6r22z27h6tvur").unwrap();
        let (early, late) = (
            Tid::new("3lqlhxw5rslq4").unwrap(),
            Tid::new("3lqlhxw5rslq5").unwrap(),
        );
        assert_eq!(revisions.advance(&repo, &early), Ok(()));
        assert_eq!(revisions.advance(&repo, &late), Ok(()));
        assert_eq!(revisions.advance(&repo, &early), Err(late.clone()));
        assert_eq!(revisions.advance(&repo, &late), Err(late));
    }
}
