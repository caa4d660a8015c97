use svc_catalog::AccountStatus;
use svc_repo::dagcbor::Cbor;

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

/// The most bytes a record's block may hold: the sync protocol's hard limit. A larger block
/// reaches validation as a missing record: refused and counted, never decoded.
pub const MAX_RECORD_BLOCK_BYTES: usize = 1_000_000;

/// Whether a record's block is within [`MAX_RECORD_BLOCK_BYTES`].
pub fn block_within_limit(block: &[u8]) -> bool {
    block.len() <= MAX_RECORD_BLOCK_BYTES
}

/// The atproto JSON form of a record: links as `{"$link": cid}`, bytes as `{"$bytes": base64}`.
/// Floats have no place in the data model; they come out as JSON numbers, and lexicon
/// validation refuses them.
pub fn record_json(value: &Cbor) -> serde_json::Value {
    use base64::Engine;
    use serde_json::Value;
    match value {
        Cbor::Null => Value::Null,
        Cbor::Bool(b) => Value::Bool(*b),
        Cbor::Integer(n) => i64::try_from(*n)
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(*n as f64)),
        Cbor::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Cbor::Bytes(bytes) => serde_json::json!({
            "$bytes": base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)
        }),
        Cbor::Text(text) => Value::String(text.clone()),
        Cbor::Array(items) => Value::Array(items.iter().map(record_json).collect()),
        Cbor::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), record_json(v)))
                .collect(),
        ),
        Cbor::Link(cid) => serde_json::json!({ "$link": svc_syntax::cid_to_string(cid) }),
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

/// Whether an account status speaks of the emitting host's copy of the repository rather than
/// of the account (a relay that lost the chain, or drops its events for a while): the
/// account's records stay as they are, and its repository is read whole again.
pub fn host_lost_sync(status: &AccountStatus) -> bool {
    matches!(status, AccountStatus::Inactive(s) if s == "desynchronized" || s == "throttled")
}

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
