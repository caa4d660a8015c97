//! An account event of the live stream, as the catalog stores it and as the queue follows it
//! up.

use crate::resync::reasons::{DELETED, REACTIVATED};
use svc_catalog::AccountStatus;

/// What a stream's account event stores, and why the repository is then queued to be read
/// whole: an account hidden before and `active` now is read again when the source's commits
/// are verified (for what changed meanwhile). An event is the word of whoever sent it (a relay
/// signs nothing of it), so `deleted` only hides the records until the account's own PDS or
/// DID document confirms it.
pub struct FromStream {
    pub stored: AccountStatus,
    confirm: Option<&'static str>,
}

impl FromStream {
    pub fn of(status: AccountStatus) -> FromStream {
        match status {
            AccountStatus::Deleted => FromStream {
                stored: AccountStatus::Inactive("deleted".into()),
                confirm: Some(DELETED),
            },
            stored => FromStream {
                stored,
                confirm: None,
            },
        }
    }

    /// Why the repository is read whole after the status is stored, if it is.
    pub fn read_again(&self, was_hidden: bool, verified: bool) -> Option<&'static str> {
        let reactivated = was_hidden && verified && self.stored == AccountStatus::Active;
        self.confirm.or(reactivated.then_some(REACTIVATED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_s_deletion_hides_and_a_reactivation_after_it_reads_again() {
        let deleted = FromStream::of(AccountStatus::Deleted);
        assert_eq!(deleted.stored, AccountStatus::Inactive("deleted".into()));
        assert_eq!(deleted.read_again(false, false), Some(DELETED));
        let active = FromStream::of(AccountStatus::Active);
        assert_eq!(active.read_again(true, true), Some(REACTIVATED));
        // A new account, or a source whose commits are not verified, is not read again.
        assert_eq!(active.read_again(false, true), None);
        assert_eq!(active.read_again(true, false), None);
        let suspended = FromStream::of(AccountStatus::Inactive("suspended".into()));
        assert_eq!(suspended.read_again(true, true), None);
    }
}
