//! `svc oauth login | list | logout`: app-password sessions (legacy bearer mode; the stored
//! session holds no DPoP key). Tokens are written to the session file and nowhere else.

use super::{UsageError, http, plc_url, print_json};
use anyhow::Context;
use std::io::IsTerminal;
use svc_atproto::{Login, Resolver, Session, SessionStore, Xrpc};

fn app_password(flag: Option<String>) -> anyhow::Result<String> {
    if let Some(password) = flag.filter(|p| !p.is_empty()) {
        return Ok(password);
    }
    for variable in ["ATPROTO_APP_PASSWORD", "ATPROTO_PASSWORD"] {
        if let Some(password) = std::env::var(variable).ok().filter(|p| !p.is_empty()) {
            return Ok(password);
        }
    }
    if std::io::stdin().is_terminal() {
        let password =
            rpassword::prompt_password("app password: ").context("reading the app password")?;
        if !password.is_empty() {
            return Ok(password);
        }
    }
    Err(
        UsageError("no app password: pass --app-password or set ATPROTO_APP_PASSWORD".into())
            .into(),
    )
}

/// The account a login asks for: what `--handle` names, and what resolving it gave.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Asked {
    /// A handle resolved to its DID (the DID's PDS was asked).
    Resolved { handle: String, did: String },
    /// A handle, sent to `--pds-url` unresolved: only the handle the PDS reports can be checked.
    Handle(String),
    /// A DID, resolved or not: the DID itself is checked.
    Did(String),
}

impl Asked {
    fn parse(identifier: &str) -> anyhow::Result<Asked> {
        if identifier.starts_with("did:") {
            if svc_syntax::check_did(identifier).is_err() {
                return Err(UsageError(format!(
                    "--handle {identifier:?} is neither a handle (like alice.example.com) nor a DID"
                ))
                .into());
            }
            return Ok(Asked::Did(identifier.to_string()));
        }
        if svc_syntax::check_handle(identifier).is_err() {
            return Err(UsageError(format!(
                "--handle {identifier:?} is not a handle (like alice.example.com)"
            ))
            .into());
        }
        Ok(Asked::Handle(identifier.to_string()))
    }

    /// Why the session a PDS created is not the account asked for, if it is not. A PDS
    /// answers createSession with whatever account it likes; storing that answer unchecked
    /// would file another account's tokens under the name the user typed, or replace the
    /// stored session of the DID it names.
    fn mismatch(&self, pds: &str, did: &str, handle: &str) -> Option<String> {
        let answered = format!("the PDS {pds} answered with a session for {handle} ({did})");
        match self {
            Asked::Resolved {
                handle: asked,
                did: resolved,
            } if did != resolved => Some(format!(
                "{answered}, but {asked} is {resolved}: refused, nothing stored"
            )),
            Asked::Handle(asked) if !asked.eq_ignore_ascii_case(handle) => Some(format!(
                "{answered}, not for {asked}: refused, nothing stored"
            )),
            Asked::Did(asked) if did != asked => Some(format!(
                "{answered}, not for {asked}: refused, nothing stored"
            )),
            _ => None,
        }
    }
}

/// Refuses to replace a stored session that nothing shows to be the same account's, and says
/// on stderr when one is replaced.
fn check_replacement(store: &SessionStore, asked: &Asked, session: &Session) -> anyhow::Result<()> {
    let did = &session.did;
    let Some(stored) = store
        .load(did)
        .with_context(|| format!("reading the stored session of {did}"))?
    else {
        return Ok(());
    };
    // Unresolved, the DID is the PDS's word alone: a handle that differs from the stored
    // session's may be another account claiming this DID.
    if matches!(asked, Asked::Handle(_)) && !stored.handle.eq_ignore_ascii_case(&session.handle) {
        anyhow::bail!(
            "the PDS {} answered with a session for {} ({did}), but the session stored for \
             {did} is {}'s: refused, nothing stored (if the handle changed, log in without \
             --pds-url so that it is resolved, or `svc oauth logout --did {did}` first)",
            session.pds_url,
            session.handle,
            stored.handle
        );
    }
    let moved = if stored.pds_url == session.pds_url {
        String::new()
    } else {
        format!(", was at {}", stored.pds_url)
    };
    eprintln!(
        "replacing the stored session of {did} ({}{moved})",
        session.handle
    );
    Ok(())
}

pub async fn login(
    identifier: &str,
    password: Option<String>,
    pds_url: Option<String>,
) -> anyhow::Result<()> {
    let identifier = identifier.trim_start_matches('@');
    let mut asked = Asked::parse(identifier)?;
    let password = app_password(password)?;
    let http = http()?;
    let pds = match pds_url {
        Some(url) => {
            super::warn_if_plain_http("--pds-url", &url);
            url
        }
        None => {
            let located = Resolver::new(http.clone(), &plc_url())
                .locate(identifier)
                .await?;
            if let Asked::Handle(handle) = asked {
                asked = Asked::Resolved {
                    handle,
                    did: located.did.into(),
                };
            }
            located.pds
        }
    };
    let pds = pds.trim_end_matches('/').to_string();
    let tokens = Xrpc::new(http)
        .create_session(
            &pds,
            Login {
                identifier,
                password: &password,
            },
        )
        .await
        .map_err(|e| match e.xrpc_error() {
            Some(_) => anyhow::anyhow!("login failed: {e}"),
            None => anyhow::Error::from(e),
        })?;
    if let Some(refusal) = asked.mismatch(&pds, &tokens.did, &tokens.handle) {
        anyhow::bail!(refusal);
    }
    let session = Session {
        did: tokens.did,
        handle: tokens.handle,
        pds_url: pds,
        access_jwt: tokens.access_jwt,
        refresh_jwt: tokens.refresh_jwt,
    };
    let store = SessionStore::from_env();
    check_replacement(&store, &asked, &session)?;
    store.save(&session)?;
    print_json(&session.summary())
}

pub fn list() -> anyhow::Result<()> {
    let sessions: Vec<_> = SessionStore::from_env()
        .list()?
        .iter()
        .map(Session::summary)
        .collect();
    print_json(&sessions)
}

pub fn logout(did: &str) -> anyhow::Result<()> {
    if svc_syntax::check_did(did).is_err() {
        return Err(UsageError(format!("--did {did} is not a DID")).into());
    }
    let removed = SessionStore::from_env().remove(did)?;
    print_json(&serde_json::json!({"did": did, "removed": removed}))
}

#[cfg(test)]
mod tests {
    use super::Asked;

    const PDS: &str = "https://pds.example";

    #[test]
    fn a_resolved_handle_needs_its_own_did() {
        let asked = Asked::Resolved {
            handle: "mallory.test".into(),
            did: "did:plc:mallory".into(),
        };
        assert_eq!(
            asked.mismatch(PDS, "did:plc:mallory", "whatever.test"),
            None
        );
        let refusal = asked
            .mismatch(PDS, "did:plc:alice", "alice.test")
            .expect("another account's session");
        assert_eq!(
            refusal,
            "the PDS https://pds.example answered with a session for alice.test \
             (did:plc:alice), but mallory.test is did:plc:mallory: refused, nothing stored"
        );
    }

    #[test]
    fn an_unresolved_handle_needs_the_handle_the_pds_reports() {
        let asked = Asked::Handle("Mallory.Test".into());
        assert_eq!(asked.mismatch(PDS, "did:plc:m", "mallory.test"), None);
        let refusal = asked
            .mismatch(PDS, "did:plc:alice", "alice.test")
            .expect("another account's session");
        assert!(refusal.contains("alice.test (did:plc:alice)"), "{refusal}");
        assert!(refusal.contains("not for Mallory.Test"), "{refusal}");
    }

    #[test]
    fn a_did_needs_itself() {
        let asked = Asked::Did("did:plc:alice".into());
        assert_eq!(asked.mismatch(PDS, "did:plc:alice", "alice.test"), None);
        let refusal = asked
            .mismatch(PDS, "did:plc:bob", "alice.test")
            .expect("another account's session");
        assert!(
            refusal.contains("(did:plc:bob), not for did:plc:alice"),
            "{refusal}"
        );
    }

    #[test]
    fn the_identifier_is_a_handle_or_a_did() {
        assert_eq!(
            Asked::parse("alice.test").ok(),
            Some(Asked::Handle("alice.test".into()))
        );
        assert_eq!(
            Asked::parse("did:plc:alice").ok(),
            Some(Asked::Did("did:plc:alice".into()))
        );
        for bad in ["not a handle", "did:", "did:plc:"] {
            assert!(Asked::parse(bad).is_err(), "{bad}");
        }
    }
}
