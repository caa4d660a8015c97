//! `svc admin`: an operator's takedowns on a running `svc serve` (started with
//! `--admin-password-file`), through the same admin methods the network's tools call.

use super::UsageError;
use super::orchestrator::answer_json;
use crate::cli::{AdminAccessArgs, AdminCommand};
use anyhow::Context;
use serde_json::{Value, json};
use svc_syntax::{AtUri, Did};

pub async fn run(command: &AdminCommand) -> anyhow::Result<()> {
    let answer = match command {
        AdminCommand::Takedown {
            subject,
            reference,
            access,
        } => {
            let mut takedown = json!({"applied": true});
            if let Some(reference) = reference {
                takedown["ref"] = json!(reference);
            }
            update(access, subject, takedown).await?
        }
        AdminCommand::Restore { subject, access } => {
            update(access, subject, json!({"applied": false})).await?
        }
        AdminCommand::Status { subject, access } => status(access, subject).await?,
    };
    super::print_json(&answer)
}

async fn update(access: &AdminAccessArgs, subject: &str, takedown: Value) -> anyhow::Result<Value> {
    let (subject, _) = subject_of(subject)?;
    let url = method_url(access, "updateSubjectStatus", &[])?;
    let body = json!({"subject": subject, "takedown": takedown});
    let sent = super::http()?
        .post(url.clone())
        .basic_auth("admin", Some(password(access)?))
        .json(&body)
        .send()
        .await;
    answer_json(&access.url, &url, sent).await
}

async fn status(access: &AdminAccessArgs, subject: &str) -> anyhow::Result<Value> {
    let (_, param) = subject_of(subject)?;
    let url = method_url(access, "getSubjectStatus", &[param])?;
    let sent = super::http()?
        .get(url.clone())
        .basic_auth("admin", Some(password(access)?))
        .send()
        .await;
    answer_json(&access.url, &url, sent).await
}

/// The subject as the admin methods name it, and the parameter `getSubjectStatus` takes: a
/// DID is an account, an at-uri a record.
fn subject_of(text: &str) -> Result<(Value, (&'static str, String)), UsageError> {
    let neither = |why: String| {
        UsageError(format!(
            "{text:?} is neither an account's DID (did:plc:...) nor a record's at-uri \
             (at://did/collection/rkey): {why}"
        ))
    };
    if text.starts_with("did:") {
        let did = Did::new(text).map_err(|e| neither(e.to_string()))?;
        let subject = json!({"$type": "com.atproto.admin.defs#repoRef", "did": did.as_str()});
        return Ok((subject, ("did", did.to_string())));
    }
    let uri = AtUri::new(text).map_err(|e| neither(e.to_string()))?;
    if uri.record_parts().is_none() {
        return Err(neither(
            "an at-uri of a whole repository or collection names no one record".into(),
        ));
    }
    let subject = json!({"$type": "com.atproto.repo.strongRef", "uri": uri.as_str()});
    Ok((subject, ("uri", uri.to_string())))
}

fn method_url(
    access: &AdminAccessArgs,
    method: &str,
    params: &[(&str, String)],
) -> Result<svc_atproto::Url, UsageError> {
    let base = access.url.trim_end_matches('/');
    svc_atproto::Url::parse_with_params(&format!("{base}/xrpc/com.atproto.admin.{method}"), params)
        .map_err(|e| UsageError(format!("--url {}: {e}", access.url)))
}

/// The password: `--password-file`'s one line, else `SVC_ADMIN_PASSWORD`.
fn password(access: &AdminAccessArgs) -> anyhow::Result<String> {
    if let Some(path) = &access.password_file {
        let text = svc_atproto::secret_file::read_private(path, "the admin password")
            .with_context(|| format!("--password-file {}", path.display()))?;
        return Ok(text.trim_end_matches(['\n', '\r']).to_string());
    }
    match std::env::var("SVC_ADMIN_PASSWORD") {
        Ok(password) if !password.is_empty() => Ok(password),
        _ => Err(UsageError(
            "the admin password: give --password-file FILE or set SVC_ADMIN_PASSWORD".into(),
        )
        .into()),
    }
}
