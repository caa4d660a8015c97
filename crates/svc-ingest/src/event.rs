use svc_catalog::AccountStatus;

/// What a commit did to one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Create,
    Update,
    Delete,
}

impl Action {
    /// The action an operation name (`create`, `update`, `delete`) stands for.
    pub fn from_operation(name: &str) -> Option<Action> {
        match name {
            "create" => Some(Action::Create),
            "update" => Some(Action::Update),
            "delete" => Some(Action::Delete),
            _ => None,
        }
    }
}

/// One record operation from any source, in atproto JSON form.
#[derive(Debug, Clone)]
pub struct CommitEvent {
    pub did: String,
    pub collection: String,
    pub rkey: String,
    pub action: Action,
    pub rev: String,
    pub cid: Option<String>,
    /// The record's JSON text (absent for deletes).
    pub record_json: Option<String>,
    /// When the source saw the event, microseconds since the epoch.
    pub time_us: Option<i64>,
}

impl CommitEvent {
    pub fn uri(&self) -> String {
        format!("at://{}/{}/{}", self.did, self.collection, self.rkey)
    }
}

/// The account statuses `com.atproto.sync.subscribeRepos#account` defines.
const KNOWN_ACCOUNT_STATUSES: [&str; 6] = [
    "takendown",
    "suspended",
    "deleted",
    "deactivated",
    "desynchronized",
    "throttled",
];

/// An account event's status as it is stored. The status is a source's free string, and the
/// catalog stores it, so one a later protocol version adds, or one a hostile source makes up
/// (NUL characters, which PostgreSQL's text refuses; kilobytes), is stored as "unknown": the
/// account is as inactive as the event says, and the stored status stays short and printable.
pub fn account_status(active: bool, status: Option<&str>) -> AccountStatus {
    let status = status.map(|status| {
        if KNOWN_ACCOUNT_STATUSES.contains(&status) {
            status
        } else {
            "unknown"
        }
    });
    AccountStatus::from_event(active, status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_account_statuses_are_kept_and_others_bounded() {
        assert_eq!(
            account_status(false, Some("takendown")),
            AccountStatus::Inactive("takendown".into())
        );
        assert_eq!(
            account_status(false, Some("deleted")),
            AccountStatus::Deleted
        );
        let long = "x".repeat(10_000);
        for hostile in ["take\0down", long.as_str(), ""] {
            assert_eq!(
                account_status(false, Some(hostile)),
                AccountStatus::Inactive("unknown".into())
            );
        }
        assert_eq!(
            account_status(true, Some("take\0down")),
            AccountStatus::Active
        );
        assert_eq!(
            account_status(false, None),
            AccountStatus::from_event(false, None)
        );
    }
}
