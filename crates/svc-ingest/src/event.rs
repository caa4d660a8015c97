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
