//! Ingestion: events from any source become validated catalog changes, applied in batches with
//! the source's cursor: a JSON Lines import, and the live sources, all through the same
//! [`Ingestor`].

mod backfill;
mod event;
mod event_stream;
pub mod firehose;
mod host_turns;
mod import;
mod ingest;
mod jetstream;
pub mod labelers;
mod metrics;
mod peer;
mod read_budget;
mod readiness;
mod reconnect;
mod repository_apply;
mod repository_read;
mod repository_verify;
pub mod resync;
mod resync_progress;
mod signing_keys;
mod stream_account;
mod unverified;
mod websocket;

pub use backfill::{BackfillError, BackfillPeers, BackfillSummary, run_backfill};
pub use event::{Action, CommitEvent};
pub use import::{
    ImportError, ImportSummary, RepositoryImport, RepositoryImportError, import_file,
    import_repository,
};
pub use ingest::{Ingestor, Prepared};
pub use jetstream::{JetstreamLine, parse_jetstream_line};
pub use metrics::IngestMetrics;
pub use peer::MAX_REPOSITORY_BYTES;
pub use read_budget::DEFAULT_READ_MEMORY_MB;
pub use readiness::{Readiness, WriteHealth};
pub use repository_verify::{VerifiedRepository, verify_repository};
pub use resync::{Resync, ResyncProgress};
pub use signing_keys::{KeyCheckError, SigningKeys};
pub use unverified::{Reason, Unverified};
