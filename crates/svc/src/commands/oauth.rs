//! `svc oauth login | list | logout`: app-password sessions (legacy bearer mode; the stored
//! session holds no DPoP key). Tokens are written to the session file and nowhere else.

use super::{UsageError, http, plc_url, print_json};
use anyhow::Context;
use std::io::IsTerminal;
use svc_atproto::{Resolver, Session, SessionStore, Xrpc};

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

pub async fn login(
    handle: &str,
    password: Option<String>,
    pds_url: Option<String>,
) -> anyhow::Result<()> {
    let handle = handle.trim_start_matches('@');
    if svc_syntax::check_handle(handle).is_err() {
        return Err(UsageError(format!(
            "--handle {handle:?} is not a handle (like alice.example.com)"
        ))
        .into());
    }
    let password = app_password(password)?;
    let http = http()?;
    let pds = match pds_url {
        Some(url) => {
            super::warn_if_plain_http("--pds-url", &url);
            url
        }
        None => {
            Resolver::new(http.clone(), &plc_url())
                .locate(handle)
                .await?
                .1
        }
    };
    let tokens = Xrpc::new(http)
        .create_session(&pds, handle, &password)
        .await
        .map_err(|e| match e.xrpc_error() {
            Some(_) => anyhow::anyhow!("login failed: {e}"),
            None => anyhow::Error::from(e),
        })?;
    let session = Session {
        did: tokens.did,
        handle: tokens.handle,
        pds_url: pds.trim_end_matches('/').to_string(),
        access_jwt: tokens.access_jwt,
        refresh_jwt: tokens.refresh_jwt,
    };
    SessionStore::from_env().save(&session)?;
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
