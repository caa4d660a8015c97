//! Stored sessions: one JSON file per DID (`did, handle, pds_url, access_jwt, refresh_jwt`),
//! mode 0600 in a 0700 directory. Tokens never leave these files except as bearer headers.

use crate::secret_file::read_private;
use crate::{AtprotoError, AtprotoResult};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a session file holds, as a refusal to read one names it: its tokens are as good as a
/// password (log in again if someone else could have read them).
const SESSION_SECRET: &str = "a session's tokens";

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub did: String,
    pub handle: String,
    pub pds_url: String,
    pub access_jwt: String,
    pub refresh_jwt: String,
}

impl std::fmt::Debug for Session {
    // Tokens stay out of any debug output or log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("did", &self.did)
            .field("handle", &self.handle)
            .field("pds_url", &self.pds_url)
            .finish_non_exhaustive()
    }
}

/// What `svc oauth list` prints of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    pub did: String,
    pub handle: String,
    pub pds_url: String,
}

pub struct SessionStore {
    dir: PathBuf,
}

fn store_error(path: &Path, error: impl std::fmt::Display) -> AtprotoError {
    AtprotoError::Store {
        path: path.display().to_string(),
        message: error.to_string(),
    }
}

impl SessionStore {
    /// `$SVC_SESSION_DIR`, else `~/.config/svc/sessions`.
    pub fn from_env() -> SessionStore {
        let dir = std::env::var_os("SVC_SESSION_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let home = std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("."));
                home.join(".config").join("svc").join("sessions")
            });
        SessionStore { dir }
    }

    pub fn at(dir: &Path) -> SessionStore {
        SessionStore {
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self, did: &str) -> AtprotoResult<PathBuf> {
        svc_syntax::check_did(did).map_err(|e| AtprotoError::Invalid(format!("{did}: {e}")))?;
        Ok(self.dir.join(format!("{did}.json")))
    }

    pub fn save(&self, session: &Session) -> AtprotoResult<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| store_error(&self.dir, e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| store_error(&self.dir, e))?;
        }
        let path = self.path(&session.did)?;
        let text = serde_json::to_string_pretty(session).map_err(|e| store_error(&path, e))?;
        // Written to a private temporary file and renamed, so the file is never readable by
        // others nor half-written.
        let temporary = path.with_extension("json.tmp");
        {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut file = options
                .open(&temporary)
                .map_err(|e| store_error(&temporary, e))?;
            std::io::Write::write_all(&mut file, text.as_bytes())
                .map_err(|e| store_error(&temporary, e))?;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| store_error(&temporary, e))?;
        }
        std::fs::rename(&temporary, &path).map_err(|e| store_error(&path, e))
    }

    pub fn load(&self, did: &str) -> AtprotoResult<Option<Session>> {
        let path = self.path(did)?;
        match read_private(&path, SESSION_SECRET) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| store_error(&path, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(store_error(&path, e)),
        }
    }

    /// Every stored session, ordered by DID.
    pub fn list(&self) -> AtprotoResult<Vec<Session>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(store_error(&self.dir, e)),
        };
        let mut sessions = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| store_error(&self.dir, e))?.path();
            if path.extension().is_some_and(|e| e == "json") {
                let text =
                    read_private(&path, SESSION_SECRET).map_err(|e| store_error(&path, e))?;
                if let Ok(session) = serde_json::from_str::<Session>(&text) {
                    sessions.push(session);
                }
            }
        }
        sessions.sort_by(|a, b| a.did.cmp(&b.did));
        Ok(sessions)
    }

    /// Removes the session of a DID; a missing one is not an error. Says whether one existed.
    pub fn remove(&self, did: &str) -> AtprotoResult<bool> {
        let path = self.path(did)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(store_error(&path, e)),
        }
    }
}

impl Session {
    pub fn summary(&self) -> SessionSummary {
        SessionSummary {
            did: self.did.clone(),
            handle: self.handle.clone(),
            pds_url: self.pds_url.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(did: &str) -> Session {
        Session {
            did: did.into(),
            handle: "alice.test".into(),
            pds_url: "http://localhost:1".into(),
            access_jwt: "secret-access".into(),
            refresh_jwt: "secret-refresh".into(),
        }
    }

    #[test]
    fn saves_privately_lists_in_order_and_removes() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::at(&dir.path().join("sessions"));
        store.save(&session("did:plc:bbb")).unwrap();
        store.save(&session("did:plc:aaa")).unwrap();
        let listed: Vec<String> = store.list().unwrap().into_iter().map(|s| s.did).collect();
        assert_eq!(listed, ["did:plc:aaa", "did:plc:bbb"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let file = std::fs::metadata(dir.path().join("sessions/did:plc:aaa.json")).unwrap();
            assert_eq!(file.permissions().mode() & 0o777, 0o600);
            let folder = std::fs::metadata(dir.path().join("sessions")).unwrap();
            assert_eq!(folder.permissions().mode() & 0o777, 0o700);
        }
        assert!(!format!("{:?}", session("did:plc:x")).contains("secret"));
        assert!(store.remove("did:plc:aaa").unwrap());
        assert!(!store.remove("did:plc:aaa").unwrap());
        assert!(store.load("did:plc:aaa").unwrap().is_none());
        assert!(store.remove("not-a-did").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_session_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::at(dir.path());
        store.save(&session("did:plc:aaa")).unwrap();
        let path = dir.path().join("did:plc:aaa.json");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        for error in [
            store.load("did:plc:aaa").unwrap_err().to_string(),
            store.list().unwrap_err().to_string(),
        ] {
            assert!(error.contains("readable by others (mode 0644)"), "{error}");
            assert!(
                error.contains(&format!("chmod 600 {}", path.display())),
                "{error}"
            );
        }
    }
}
