//! One server's XRPC methods as the backfill and the resynchronisation ask them, and a listing
//! that cannot be made to loop. Any account can name any server as its PDS, so every peer is
//! hostile until it answers well: each request has a time limit and a size limit
//! (`svc_atproto`), and a listing ends when its server repeats a cursor.

use serde::de::DeserializeOwned;
use std::collections::HashSet;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use svc_atproto::{AtprotoError, BodyChunks, Method, Xrpc};

/// The most a whole repository read may be. Family records live in repositories of every
/// size; a larger one is not read.
pub const MAX_REPOSITORY_BYTES: usize = 256 << 20;

/// One server's XRPC methods.
#[derive(Clone)]
pub(crate) struct Client {
    pub xrpc: Xrpc,
    pub base: String,
}

impl Client {
    pub fn new(xrpc: Xrpc, base: &str) -> Client {
        Client {
            xrpc,
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// The same client, for another server.
    pub fn at(&self, base: &str) -> Client {
        Client::new(self.xrpc.clone(), base)
    }

    /// The answer's bytes, or `None` when this server does not have the method.
    pub async fn get_bytes(
        &self,
        method: Method,
        query: &[(&str, &str)],
    ) -> Result<Option<Vec<u8>>, AtprotoError> {
        match self.xrpc.query_bytes(&self.base, method, query).await {
            Ok(answer) => Ok(Some(answer)),
            Err(error) if lacks_method(&error) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The answer's body as it comes, or `None` when this server does not have the method.
    pub async fn get_chunks(
        &self,
        method: Method,
        query: &[(&str, &str)],
    ) -> Result<Option<BodyChunks>, AtprotoError> {
        match self.xrpc.query_chunks(&self.base, method, query).await {
            Ok(chunks) => Ok(Some(chunks)),
            Err(error) if lacks_method(&error) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The answer, or `None` when this server does not have the method (a PDS asked a
    /// relay's method): the caller tries another way. Decoded straight from the bytes.
    pub async fn get<T: DeserializeOwned>(
        &self,
        method: Method,
        query: &[(&str, &str)],
    ) -> Result<Option<T>, AtprotoError> {
        let Some(body) = self.get_bytes(method, query).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&body).map(Some).map_err(|e| {
            AtprotoError::Invalid(format!(
                "{}/xrpc/{}: unexpected answer: {e}",
                self.base, method.0
            ))
        })
    }
}

/// A PDS answers a method it does not have with 501 or 404, MethodNotImplemented, or "No
/// service configured" when it would proxy it.
fn lacks_method(error: &AtprotoError) -> bool {
    match error {
        AtprotoError::Xrpc {
            status,
            error,
            message,
            ..
        } => {
            matches!(status, 404 | 501)
                || error == "MethodNotImplemented"
                || message.contains("No service configured")
        }
        _ => false,
    }
}

/// The host a URL names (scheme, host, port), so that one server is not made many by naming
/// it with many paths.
pub(crate) fn origin(url: &str) -> String {
    svc_atproto::Url::parse(url)
        .map(|url| url.origin().ascii_serialization())
        .unwrap_or_else(|_| url.to_string())
}

/// Where a listing stands. It ends at a page with no cursor, at an empty page, and at a cursor
/// its server gave before: a server repeating itself would otherwise be asked forever.
pub(crate) struct Paging {
    /// What is listed, for the warnings.
    listing: String,
    cursor: Option<String>,
    /// Hashes of the cursors given so far: a page's worth of memory would be the cursor itself.
    seen: HashSet<u64>,
    hasher: RandomState,
}

impl Paging {
    pub fn new(listing: String) -> Paging {
        Paging::from(listing, None)
    }

    /// A listing that resumes after `cursor`.
    pub fn from(listing: String, cursor: Option<String>) -> Paging {
        Paging {
            listing,
            cursor,
            seen: HashSet::new(),
            hasher: RandomState::new(),
        }
    }

    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// Takes the cursor of a page of `items` items; `false` when the listing ends there.
    pub fn next(&mut self, cursor: Option<String>, items: usize) -> bool {
        let Some(cursor) = cursor else {
            return false;
        };
        let shown: String = cursor.chars().take(64).collect();
        if items == 0 {
            tracing::warn!(
                cursor = ?shown,
                "backfill: {}: an empty page names a further cursor; the listing ends here",
                self.listing
            );
            return false;
        }
        if !self.seen.insert(self.hasher.hash_one(&cursor)) {
            tracing::warn!(
                cursor = ?shown,
                "backfill: {}: the server gave this cursor before; the listing ends here",
                self.listing
            );
            return false;
        }
        self.cursor = Some(cursor);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_ends_at_a_repeated_cursor_or_an_empty_page() {
        let mut paging = Paging::new("test".into());
        assert!(paging.next(Some("a".into()), 10));
        assert_eq!(paging.cursor(), Some("a"));
        assert!(paging.next(Some("b".into()), 10));
        // The same cursor again, or one given before: the server would be asked forever.
        assert!(!paging.next(Some("b".into()), 10));
        assert!(!paging.next(Some("a".into()), 10));
        let mut paging = Paging::new("test".into());
        assert!(!paging.next(Some("a".into()), 0));
        assert!(!paging.next(None, 10));
    }

    #[test]
    fn one_host_is_one_origin_whatever_path_names_it() {
        assert_eq!(origin("https://pds.example/path1"), "https://pds.example");
        assert_eq!(origin("https://pds.example/other"), "https://pds.example");
        assert_ne!(origin("https://pds.example:8443"), "https://pds.example");
    }
}
