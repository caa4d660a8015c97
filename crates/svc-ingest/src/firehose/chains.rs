//! Each repository's place in its chain of commits, as far as svc has followed it: the newest
//! verified revision and the root of the tree it left. A repository is followed from its first
//! family commit; from then on each of its commits is verified, and must name that revision as
//! its `since` and that root as its `prevData`. A commit that does not (one was missed, refused
//! or never sent) desynchronizes the repository: its commits wait while a verified copy of the
//! whole repository is read (see `resync`), which then continues the chain.
//!
//! The chain is kept in memory and each head reached is stored with the cursor that moved
//! past its commit (see `svc_catalog::SyncWrites`), so after a restart the stored heads are
//! loaded and a commit that does not continue one sends its repository to be read whole.

use crate::unverified::{Reason, Unverified};
use std::collections::HashMap;
use std::sync::Mutex;
use svc_repo::dagcbor::CidBytes;
use svc_syntax::{Did, Tid, UnixMicros};

/// Repositories followed at most (about 200 bytes each, with the map's own): past it, one is
/// forgotten for each new one, whose chain then begins again at its next commit.
const MAX_REPOSITORIES: usize = 500_000;

/// How far in the future a revision may be: the clocks of a PDS and of svc differ a little.
const FUTURE_TOLERANCE_US: i64 = 5 * 60 * 1_000_000;

#[derive(Debug)]
struct Head {
    rev: Tid,
    data: CidBytes,
    /// Waiting for a copy of the whole repository; its commits are not applied until then.
    desynchronized: bool,
    /// The newest commit not applied while it waited: a copy older than it must be read again.
    missed: Option<Tid>,
}

/// A verified commit, as its chain sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step<'a> {
    pub did: &'a Did,
    pub rev: &'a Tid,
    /// The root of the tree it leaves.
    pub data: &'a [u8],
    /// The revision and the root it says it follows (`#sync` events say none).
    pub since: Option<&'a Tid>,
    pub prev_data: Option<&'a [u8]>,
}

/// What continuing a chain found.
#[derive(Debug)]
pub(crate) enum Followed {
    /// The commit continues its repository's chain (or begins it).
    Continues,
    /// It does not: the repository is desynchronized now and must be read whole.
    Broke(Unverified),
}

#[derive(Default)]
pub(crate) struct Chains(Mutex<HashMap<Did, Head>>);

impl Chains {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Did, Head>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether svc follows the repository: each of its commits is then verified.
    pub fn follows(&self, repo: &str) -> bool {
        self.lock().contains_key(repo)
    }

    /// Continues the repository's chain with a verified commit. `Err` refuses the commit and
    /// leaves the chain as it was; `Ok(Broke)` refuses it and desynchronizes the repository.
    pub fn follow(&self, commit: Step<'_>) -> Result<Followed, Unverified> {
        let latest = UnixMicros::now().0.saturating_add(FUTURE_TOLERANCE_US);
        if commit.rev.time().0 > latest {
            return Err(Unverified::new(
                Reason::Rev,
                format!("revision {} is in the future", commit.rev),
            ));
        }
        let mut heads = self.lock();
        let Some(head) = heads.get_mut(commit.did.as_str()) else {
            if heads.len() >= MAX_REPOSITORIES
                && let Some(any) = heads.keys().next().cloned()
            {
                heads.remove(&any);
            }
            heads.insert(commit.did.clone(), Head::of(commit));
            return Ok(Followed::Continues);
        };
        if head.desynchronized {
            if head
                .missed
                .as_ref()
                .is_none_or(|missed| commit.rev > missed)
            {
                head.missed = Some(commit.rev.clone());
            }
            return Err(Unverified::new(
                Reason::Desynchronized,
                "the repository waits for resynchronisation",
            ));
        }
        if *commit.rev <= head.rev {
            return Err(Unverified::new(
                Reason::Rev,
                format!("revision {} is not after {}", commit.rev, head.rev),
            ));
        }
        if commit.since != Some(&head.rev) || commit.prev_data != Some(head.data.as_bytes()) {
            head.desynchronized = true;
            let since = commit.since.map_or("none", Tid::as_str);
            return Ok(Followed::Broke(Unverified::new(
                Reason::Chain,
                format!(
                    "since {since} does not continue {} (a commit was missed)",
                    head.rev
                ),
            )));
        }
        *head = Head::of(commit);
        Ok(Followed::Continues)
    }

    /// A `#sync` event: the repository's current commit, verified. Whether the repository must
    /// be read whole, which is when svc follows it and the tree moved elsewhere than its chain.
    pub fn synced(&self, commit: Step<'_>) -> bool {
        let mut heads = self.lock();
        let Some(head) = heads.get_mut(commit.did.as_str()) else {
            return false;
        };
        if head.desynchronized || *commit.rev <= head.rev {
            return false;
        }
        if commit.data == head.data.as_bytes() {
            *head = Head::of(commit);
            return false;
        }
        head.desynchronized = true;
        true
    }

    /// Desynchronizes a followed repository (its host says it is); whether it was followed
    /// and in step until now.
    pub fn desynchronize(&self, did: &Did) -> bool {
        match self.lock().get_mut(did.as_str()) {
            Some(head) if !head.desynchronized => {
                head.desynchronized = true;
                true
            }
            _ => false,
        }
    }

    /// The repository was read whole at `rev`: its chain continues from there, unless a
    /// newer commit came while it was read (`false`: it must be read again). A chain in step
    /// past `rev` (it was followed on while the copy was owed) stays where it is.
    pub fn resynchronized(&self, did: &Did, rev: Tid, data: CidBytes) -> bool {
        let mut heads = self.lock();
        let head = heads.get(did.as_str());
        if head.is_some_and(|head| !head.desynchronized && head.rev > rev) {
            return true;
        }
        let missed = head.and_then(|head| head.missed.clone());
        if missed.is_some_and(|missed| missed > rev) {
            return false;
        }
        heads.insert(
            did.clone(),
            Head {
                rev,
                data,
                desynchronized: false,
                missed: None,
            },
        );
        true
    }

    /// The repository could not be read whole: its chain begins again at its next commit.
    pub fn forget(&self, did: &Did) {
        self.lock().remove(did.as_str());
    }

    /// The repository is owed a whole read (a commit of it could not be checked now, at
    /// `missed`): its commits wait until the copy is read. Whether it was in step until now.
    pub fn wait_for_copy(&self, did: &Did, missed: Option<&Tid>) -> bool {
        let mut heads = self.lock();
        let in_step = heads
            .get(did.as_str())
            .is_none_or(|head| !head.desynchronized);
        if heads.len() >= MAX_REPOSITORIES
            && !heads.contains_key(did.as_str())
            && let Some(any) = heads.keys().next().cloned()
        {
            heads.remove(&any);
        }
        let head = heads.entry(did.clone()).or_insert_with(|| Head {
            // Never compared while it waits: the copy read replaces it whole.
            rev: missed
                .cloned()
                .unwrap_or_else(|| Tid::from_time(UnixMicros(0), 0)),
            data: CidBytes::default(),
            desynchronized: true,
            missed: None,
        });
        head.desynchronized = true;
        if let Some(missed) = missed
            && head.missed.as_ref().is_none_or(|known| missed > known)
        {
            head.missed = Some(missed.clone());
        }
        in_step
    }

    /// Replaces every chain with the heads stored (at start, or when the source resumes from
    /// the stored cursor, behind what was followed in memory).
    pub fn load(&self, stored: Vec<svc_catalog::RepositoryHead>) {
        let mut heads = self.lock();
        heads.clear();
        for head in stored.into_iter().take(MAX_REPOSITORIES) {
            heads.insert(
                head.did,
                Head {
                    rev: head.rev,
                    data: head.data.into(),
                    desynchronized: false,
                    missed: None,
                },
            );
        }
    }
}

impl Head {
    fn of(commit: Step<'_>) -> Head {
        Head {
            rev: commit.rev.clone(),
            data: CidBytes::from(commit.data),
            desynchronized: false,
            missed: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid(n: i64) -> Tid {
        Tid::from_time(UnixMicros(UnixMicros::now().0 - 1_000_000 + n), 0)
    }

    fn step<'a>(
        did: &'a Did,
        rev: &'a Tid,
        data: &'a [u8],
        since: Option<&'a Tid>,
        prev_data: Option<&'a [u8]>,
    ) -> Step<'a> {
        Step {
            did,
            rev,
            data,
            since,
            prev_data,
        }
    }

    fn continues(outcome: Result<Followed, Unverified>) -> bool {
        matches!(outcome, Ok(Followed::Continues))
    }

    fn reason(outcome: Result<Followed, Unverified>) -> Reason {
        match outcome {
            Ok(Followed::Broke(why)) | Err(why) => why.reason,
            Ok(Followed::Continues) => panic!("continued"),
        }
    }

    #[test]
    fn a_chain_continues_only_from_its_last_commit() {
        let chains = Chains::default();
        let did = Did::new("did:plc:z72i7hdynmk6r22z27h6tvur").unwrap();
        let (one, two, three) = (tid(1), tid(2), tid(3));
        assert!(!chains.follows(&did));
        assert!(continues(chains.follow(step(&did, &one, b"a", None, None))));
        assert!(chains.follows(&did));
        assert!(continues(chains.follow(step(
            &did,
            &two,
            b"b",
            Some(&one),
            Some(b"a")
        ))));
        // Replayed: refused, the chain unchanged.
        assert_eq!(
            reason(chains.follow(step(&did, &two, b"b", Some(&one), Some(b"a")))),
            Reason::Rev
        );
        // A commit after a missed one: the repository is desynchronized, and stays so.
        assert_eq!(
            reason(chains.follow(step(&did, &three, b"c", Some(&tid(0)), Some(b"b")))),
            Reason::Chain
        );
        let four = tid(4);
        assert_eq!(
            reason(chains.follow(step(&did, &four, b"d", Some(&three), Some(b"c")))),
            Reason::Desynchronized
        );
        // Read whole before `four`, it must be read again; at `four`, it continues from there.
        assert!(!chains.resynchronized(&did, three.clone(), b"c".to_vec().into()));
        assert!(chains.resynchronized(&did, four.clone(), b"d".to_vec().into()));
        let five = tid(5);
        assert!(continues(chains.follow(step(
            &did,
            &five,
            b"e",
            Some(&four),
            Some(b"d")
        ))));
    }

    #[test]
    fn a_repository_owed_a_copy_waits_for_one_at_least_as_new_as_its_commits() {
        let chains = Chains::default();
        let did = Did::new("did:plc:z72i7hdynmk6r22z27h6tvur").unwrap();
        let (one, two, three) = (tid(1), tid(2), tid(3));
        // Never followed: its key could not be read for `two`.
        assert!(chains.wait_for_copy(&did, Some(&two)));
        assert!(!chains.wait_for_copy(&did, Some(&one)), "already waiting");
        assert_eq!(
            reason(chains.follow(step(&did, &three, b"c", Some(&two), Some(b"b")))),
            Reason::Desynchronized
        );
        assert!(!chains.resynchronized(&did, two.clone(), b"b".to_vec().into()));
        assert!(chains.resynchronized(&did, three.clone(), b"c".to_vec().into()));
        // Followed on past a copy owed since before a restart: the chain stays in step.
        let four = tid(4);
        assert!(continues(chains.follow(step(
            &did,
            &four,
            b"d",
            Some(&three),
            Some(b"c")
        ))));
        assert!(chains.resynchronized(&did, two, b"b".to_vec().into()));
        let five = tid(5);
        assert!(continues(chains.follow(step(
            &did,
            &five,
            b"e",
            Some(&four),
            Some(b"d")
        ))));
    }

    #[test]
    fn stored_heads_continue_their_chains() {
        let chains = Chains::default();
        let did = Did::new("did:plc:z72i7hdynmk6r22z27h6tvur").unwrap();
        let (one, two) = (tid(1), tid(2));
        chains.load(vec![svc_catalog::RepositoryHead {
            did: did.clone(),
            rev: one.clone(),
            data: b"a".to_vec(),
        }]);
        assert!(chains.follows(&did));
        assert_eq!(
            reason(chains.follow(step(&did, &two, b"b", Some(&tid(0)), Some(b"z")))),
            Reason::Chain
        );
    }

    #[test]
    fn another_prev_data_or_a_future_revision_is_refused() {
        let chains = Chains::default();
        let did = Did::new("did:plc:z72i7hdynmk6r22z27h6tvur").unwrap();
        let (one, two) = (tid(1), tid(2));
        assert!(continues(chains.follow(step(&did, &one, b"a", None, None))));
        assert_eq!(
            reason(chains.follow(step(&did, &two, b"b", Some(&one), Some(b"x")))),
            Reason::Chain
        );
        let future = Tid::from_time(UnixMicros(UnixMicros::now().0 + 3_600_000_000), 0);
        let other = Did::new("did:plc:ewvi7nxzyoun6zhxrhs64oiz").unwrap();
        assert_eq!(
            reason(chains.follow(step(&other, &future, b"a", None, None))),
            Reason::Rev
        );
    }

    #[test]
    fn a_sync_event_resynchronizes_only_a_tree_that_moved() {
        let chains = Chains::default();
        let did = Did::new("did:plc:z72i7hdynmk6r22z27h6tvur").unwrap();
        let (one, two, three) = (tid(1), tid(2), tid(3));
        assert!(
            !chains.synced(step(&did, &one, b"a", None, None)),
            "not followed"
        );
        assert!(continues(chains.follow(step(&did, &one, b"a", None, None))));
        assert!(
            !chains.synced(step(&did, &two, b"a", None, None)),
            "same tree"
        );
        assert!(
            chains.synced(step(&did, &three, b"z", None, None)),
            "another tree"
        );
        assert!(!chains.desynchronize(&did), "already waiting");
    }
}
