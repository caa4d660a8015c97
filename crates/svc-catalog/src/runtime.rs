//! Threads of the catalog's own (the writer, the change-log follower, a background step):
//! async storage driven from a plain thread, and the time stored beside rows.

use crate::{CatalogError, CatalogResult};

/// A runtime for a thread of the catalog's own (the writer, the change-log follower, a
/// background step): async storage driven from a plain thread.
pub(crate) fn thread_runtime() -> CatalogResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CatalogError::Storage(format!("starting a runtime: {e}")))
}

/// The time stored beside rows, milliseconds since the epoch.
pub(crate) fn now_ms() -> i64 {
    svc_syntax::UnixMillis::now().0
}
