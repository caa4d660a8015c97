//! What a source hands the writer: record changes, where the source stood, account statuses,
//! and what a batch did.

use svc_spec::IndexKeys;
use svc_syntax::{AtUri, Cid, Did, Nsid, Tid, UnixMicros};

/// A record version to store, already validated against its lexicon.
#[derive(Debug, Clone)]
pub struct Upsert {
    pub uri: AtUri,
    pub collection: Nsid,
    /// The repository: the at-uri's authority.
    pub author: Did,
    /// The repository revision of the commit that wrote this version.
    pub rev: Tid,
    pub cid: Option<Cid>,
    /// The keys under which the record matches each query, from
    /// [`svc_spec::IndexSet::index_keys`] of the catalog's own indexes; computed by the
    /// producer, off the writer's thread. (A PostgreSQL bulk load files the record under them
    /// but does not store them: the rules take them from the record again with that set.)
    pub keys: IndexKeys,
    /// The record's JSON text as it will be served.
    pub record_json: String,
    /// Its searchable words, folded ([`svc_spec::IndexSet::search_text`]); computed by the
    /// producer, like the keys.
    pub search: Option<svc_spec::search::SearchText>,
}

#[derive(Debug, Clone)]
pub enum Change {
    Upsert(Upsert),
    Delete {
        uri: AtUri,
        collection: Nsid,
        rev: Tid,
    },
}

impl Change {
    pub fn uri(&self) -> &str {
        match self {
            Change::Upsert(u) => u.uri.as_str(),
            Change::Delete { uri, .. } => uri.as_str(),
        }
    }

    /// The revision of the commit that made the change.
    pub fn rev(&self) -> &Tid {
        match self {
            Change::Upsert(u) => &u.rev,
            Change::Delete { rev, .. } => rev,
        }
    }
}

/// The source name under which the live source (the firehose or Jetstream) stores its cursor.
pub const LIVE_SOURCE: &str = "firehose";

/// Where a source stood after the changes of a batch; stored in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorPosition {
    /// The source's role (`firehose`, `import:<file>`...).
    pub source: String,
    /// The endpoint the cursor belongs to; a cursor is never reused against another.
    pub endpoint: String,
    pub cursor: String,
    /// Time of the last event covered, when the source says.
    pub event_time: Option<UnixMicros>,
}

/// Why the store refused a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A value the store cannot hold (text with a NUL, a malformed value).
    Value,
    /// One of the store's constraints.
    Constraint,
    /// One of the store's limits (an index entry or a string too large).
    Limit,
}

impl Refusal {
    pub const ALL: [Refusal; 3] = [Refusal::Value, Refusal::Constraint, Refusal::Limit];

    /// Its name in metrics and logs.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Value => "value",
            Refusal::Constraint => "constraint",
            Refusal::Limit => "limit",
        }
    }
}

/// What one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplyReport {
    pub applied: u64,
    /// Events older than the stored revision of their uri, ignored.
    pub stale: u64,
    /// Changes the store refused for their content, skipped, by [`Refusal`] (in the order of
    /// `Refusal::ALL`).
    pub refused: [u64; 3],
}

impl ApplyReport {
    pub fn refused(&self, reason: Refusal) -> u64 {
        self.refused[reason as usize]
    }

    pub fn refused_total(&self) -> u64 {
        self.refused.iter().sum()
    }

    pub fn add(&mut self, other: &ApplyReport) {
        self.applied += other.applied;
        self.stale += other.stale;
        for (mine, theirs) in self.refused.iter_mut().zip(other.refused) {
            *mine += theirs;
        }
    }
}

/// What the source says of an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountStatus {
    Active,
    /// Deactivated, suspended, taken down...: its records leave every answer and count.
    Inactive(String),
    /// Its records are removed.
    Deleted,
}

impl AccountStatus {
    /// From an account event of either firehose: `active`, and the `status` it gives when not
    /// active (`deleted`, `deactivated`, `suspended`, `takendown`...).
    pub fn from_event(active: bool, status: Option<&str>) -> AccountStatus {
        match (active, status) {
            (true, _) => AccountStatus::Active,
            (false, Some("deleted")) => AccountStatus::Deleted,
            (false, other) => AccountStatus::Inactive(other.unwrap_or("inactive").to_string()),
        }
    }
}

/// What an operator's takedown names: an account (every record of it, present and future) or
/// one record (its uri, whatever revision it holds now or later).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Account(svc_syntax::Did),
    Record(svc_syntax::AtUri),
}

impl Subject {
    /// An at-uri names a record, a DID an account; anything else is no subject.
    pub fn parse(text: &str) -> Option<Subject> {
        if text.starts_with("at://") {
            svc_syntax::AtUri::new(text).ok().map(Subject::Record)
        } else {
            svc_syntax::Did::new(text).ok().map(Subject::Account)
        }
    }

    /// The DID or the at-uri, as the takedown is stored under it.
    pub fn as_str(&self) -> &str {
        match self {
            Subject::Account(did) => did.as_str(),
            Subject::Record(uri) => uri.as_str(),
        }
    }
}

/// A takedown in force: the reference it was given, when it was applied, and by whom
/// (`operator`, or a labeler's DID, as [`TakedownSource::as_str`] writes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takedown {
    pub reference: Option<String>,
    pub applied_at: svc_syntax::UnixMillis,
    pub source: String,
}

impl Takedown {
    /// Whether the operator applied it (through the admin methods).
    pub fn by_operator(&self) -> bool {
        self.source == TakedownSource::Operator.as_str()
    }
}

/// What stands on a subject: the takedowns held on it (the operator's first), and whether the
/// operator keeps it shown whatever labelers say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Standing {
    pub takedowns: Vec<Takedown>,
    pub kept_shown: bool,
}

impl Standing {
    /// The stored rows of a subject, each a takedown or the operator's keeping it shown.
    pub fn of_rows(rows: impl IntoIterator<Item = Takedown>) -> Standing {
        let mut standing = Standing::default();
        for row in rows {
            if row.source == TakedownSource::OperatorKeepsShown.as_str() {
                standing.kept_shown = true;
            } else {
                standing.takedowns.push(row);
            }
        }
        standing
    }

    /// The takedown that hides the subject (the operator's if there is one), or none while
    /// nothing holds it down or the operator keeps it shown.
    pub fn in_force(&self) -> Option<&Takedown> {
        self.takedowns.first().filter(|_| !self.kept_shown)
    }

    /// The operator's own takedown, if the operator holds the subject down.
    pub fn by_operator(&self) -> Option<&Takedown> {
        self.takedowns
            .iter()
            .find(|takedown| takedown.by_operator())
    }
}

/// Who applied a takedown: the operator (through the admin methods), or a labeler whose
/// `!takedown` label is in force.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TakedownSource {
    Operator,
    Labeler(svc_syntax::Did),
    /// Not a takedown: the operator's word that the subject stays shown whatever labelers say.
    OperatorKeepsShown,
}

impl TakedownSource {
    /// How the source is stored: `operator`, the labeler's DID, or `operator-shows`.
    pub fn as_str(&self) -> &str {
        match self {
            TakedownSource::Operator => "operator",
            TakedownSource::Labeler(did) => did.as_str(),
            TakedownSource::OperatorKeepsShown => "operator-shows",
        }
    }
}

/// The source under which a labeler's cursor is stored.
pub fn labeler_cursor_source(labeler: &svc_syntax::Did) -> String {
    format!("labeler:{labeler}")
}

/// The label value that takes its subject down, from a labeler svc follows.
pub const TAKEDOWN_LABEL: &str = "!takedown";

/// A label a labeler stated, its signature already checked: a value on an account or a
/// record, or its negation, perhaps with an expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub subject: Subject,
    pub val: String,
    pub neg: bool,
    /// When the labeler created it: of two statements of one value, the later holds.
    pub cts: svc_syntax::UnixMicros,
    pub exp: Option<svc_syntax::UnixMillis>,
}

/// Labels read from one labeler, with where its stream stands after them.
#[derive(Debug, Clone)]
pub struct LabelBatch {
    pub labeler: svc_syntax::Did,
    pub labels: Vec<Label>,
    pub cursor: CursorPosition,
}

/// What became of a batch of labels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LabelReport {
    /// Stored, or negated what was stored.
    pub applied: u64,
    /// Older than what the catalog holds for the same subject, labeler and value.
    pub stale: u64,
    /// New labels on subjects the catalog does not hold, past the labeler's allowance.
    pub over_allowance: u64,
}

/// A label in force, as answers show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelView {
    /// The subject it applies to (a DID or an at-uri).
    pub subject: String,
    /// The labeler's DID.
    pub src: String,
    pub val: String,
    pub cts: String,
}

/// The most matches a search counts: `total` is exact up to it, and a lower bound past it.
pub const SEARCH_COUNT_LIMIT: u64 = svc_spec::search::COUNT_LIMIT;

/// The most matches a search ranks by relevance: ranking reads each match (a few microseconds
/// apiece, and each term's every match once more for its weight), so a query that matches
/// more lists them newest first, at the cost of reading only its page.
pub const SEARCH_RANKED_AT_MOST: u64 = 2_000;

/// One page of a search.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub query: svc_spec::search::SearchQuery,
    /// Only records of this collection, when given.
    pub kind: Option<String>,
    pub offset: u64,
    pub limit: u32,
    /// How long the search may run: one that would run longer is stopped, an error.
    pub deadline: std::time::Duration,
}
