//! The operator's takedowns through the network's own admin methods,
//! `com.atproto.admin.updateSubjectStatus` and `com.atproto.admin.getSubjectStatus`, as the
//! reference PDS and AppView take them: HTTP Basic, user `admin`, the operator's password.
//! Without a password configured the methods are not there (a JSON 404). The right password
//! is accepted whatever wrong ones came before, from anywhere: no outsider can lock the
//! operator out. Guessing is made hopeless by the password's strength, checked at start; a
//! wrong one is answered after a pause, logged with the client's address and counted. The
//! password is never logged, counted or echoed.

use crate::client::Asking;
use crate::error::json_error;
use crate::{ApiError, AppState};
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use svc_catalog::{CatalogWrite, Standing, Subject};
use svc_syntax::{AtUri, Did};

pub(crate) const UPDATE: &str = "/xrpc/com.atproto.admin.updateSubjectStatus";
pub(crate) const STATUS: &str = "/xrpc/com.atproto.admin.getSubjectStatus";
/// How long a wrong password waits for its answer: a guesser's requests each cost it this,
/// and nothing anyone does holds back the right password.
const WRONG_PASSWORD_PAUSE: Duration = Duration::from_millis(500);
/// The largest request body the update takes.
pub(crate) const MAX_BODY_BYTES: usize = 16 * 1024;
/// The longest takedown reference kept.
const MAX_REFERENCE_CHARS: usize = 1024;

/// What the admin methods work with, when the operator gave a password.
pub struct AdminAccess {
    pub password: String,
    /// Where takedowns are written: the indexer's catalog.
    pub catalog: Arc<dyn CatalogWrite>,
}

/// The admin methods' state: the access, and how many wrong passwords were given.
#[derive(Default)]
pub(crate) struct Admin {
    access: Option<AdminAccess>,
    wrong_passwords: Counter,
}

impl Admin {
    pub fn new(access: Option<AdminAccess>) -> Admin {
        Admin {
            access,
            wrong_passwords: Counter::default(),
        }
    }

    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "svc_admin_wrong_passwords",
            "Admin requests refused for a wrong password",
            self.wrong_passwords.clone(),
        );
    }

    /// The access, once the request shows the password; why not otherwise.
    async fn authorize(
        &self,
        asking: Option<Asking>,
        headers: &HeaderMap,
    ) -> Result<&AdminAccess, Refused> {
        let Some(access) = &self.access else {
            return Err(Refused::NotServed);
        };
        if shows_password(headers, &access.password) {
            return Ok(access);
        }
        let offered = headers.contains_key(header::AUTHORIZATION);
        if offered {
            self.wrong_passwords.inc();
            let address = asking.map(|asking| asking.address.to_string());
            tracing::warn!(
                client = address.as_deref().unwrap_or("-"),
                "an admin request with a wrong password"
            );
            tokio::time::sleep(WRONG_PASSWORD_PAUSE).await;
        }
        Err(Refused::Unauthenticated { offered })
    }
}

/// Why an admin request is not served.
enum Refused {
    /// No admin password was configured.
    NotServed,
    /// The request showed no password, or a wrong one (`offered`).
    Unauthenticated { offered: bool },
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::NotServed => not_served(),
            Refused::Unauthenticated { offered: false } => json_error(
                StatusCode::UNAUTHORIZED,
                "AuthenticationRequired",
                "the admin methods take HTTP Basic authentication as admin, with the admin password",
            ),
            Refused::Unauthenticated { offered: true } => json_error(
                StatusCode::UNAUTHORIZED,
                "AuthenticationRequired",
                "wrong admin password (or a user other than admin)",
            ),
        }
    }
}

/// The answer of a server that takes no admin requests here.
pub(crate) fn not_served() -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        "MethodNotImplemented",
        "this server takes no admin requests here (it was started without \
         --admin-password-file, or serves them on its --admin-listen address)",
    )
}

/// The admin route a server without admin methods here answers with.
pub(crate) async fn not_here() -> Response {
    not_served()
}

/// Whether the request's `Authorization` is Basic `admin:<password>`, compared in time that
/// does not depend on where it differs.
fn shows_password(headers: &HeaderMap, password: &str) -> bool {
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Basic "))
        .and_then(|encoded| {
            base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .ok()
        })
    else {
        return false;
    };
    let expected = format!("admin:{password}");
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected.as_bytes())
            .fold(0u8, |differs, (a, b)| differs | (a ^ b))
            == 0
}

/// `POST updateSubjectStatus`: `{subject, takedown: {applied, ref?}}`, answered with the
/// subject and its takedown as they now stand.
pub(crate) async fn update(
    State(state): State<Arc<AppState>>,
    asking: Option<Extension<Asking>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let asking = asking.map(|Extension(asking)| asking);
    let access = match state.admin.authorize(asking, &headers).await {
        Ok(access) => access,
        Err(refused) => return refused.into_response(),
    };
    let (subject, subject_json, applied, reference) = match update_input(&body) {
        Ok(input) => input,
        Err(message) => return ApiError::InvalidRequest(message).into_response(),
    };
    let written = match applied {
        true => access.catalog.take_down(subject, reference.clone()).await,
        false => access.catalog.lift_takedown(subject).await,
    };
    match written {
        Ok(_) => {}
        Err(svc_catalog::CatalogError::NotWriter) => {
            return json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "NotWriter",
                "this process does not write the catalog: send admin updates to the indexer",
            );
        }
        Err(error) => return ApiError::from(error).into_response(),
    }
    tracing::info!(subject = %subject_json, applied, "takedown updated");
    let mut takedown = json!({"applied": applied});
    if let (true, Some(reference)) = (applied, reference) {
        takedown["ref"] = json!(reference);
    }
    json_answer(json!({"subject": subject_json, "takedown": takedown}))
}

/// `GET getSubjectStatus?did=` or `?uri=`: the subject and its takedown.
pub(crate) async fn status(
    State(state): State<Arc<AppState>>,
    asking: Option<Extension<Asking>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let asking = asking.map(|Extension(asking)| asking);
    if let Err(refused) = state.admin.authorize(asking, &headers).await {
        return refused.into_response();
    }
    let (subject, subject_json) = match status_input(raw.as_deref()) {
        Ok(input) => input,
        Err(error) => return error.into_response(),
    };
    match state.catalog.takedown(subject.as_str().to_string()).await {
        Ok(standing) => json_answer(status_json(subject_json, &standing)),
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// A subject's status: `takedown.applied` says whether it is out of sight (by whomever),
/// `ref` the operator's reference; beside the lexicon's fields, `takenDownBy` names who holds
/// it down (`operator`, labelers' DIDs) and `keptShown` says the operator keeps it shown
/// whatever they say.
fn status_json(subject: Value, standing: &Standing) -> Value {
    let mut takedown = json!({"applied": standing.in_force().is_some()});
    if let Some(reference) = standing.by_operator().and_then(|t| t.reference.as_ref()) {
        takedown["ref"] = json!(reference);
    }
    let sources: Vec<&str> = standing
        .takedowns
        .iter()
        .map(|t| t.source.as_str())
        .collect();
    json!({
        "subject": subject,
        "takedown": takedown,
        "takenDownBy": sources,
        "keptShown": standing.kept_shown,
    })
}

fn json_answer(body: Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The update's subject (as svc takes it and as the lexicon writes it), whether the takedown
/// is applied, and its reference.
fn update_input(body: &[u8]) -> Result<(Subject, Value, bool, Option<String>), String> {
    let input: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let subject_json = input.get("subject").cloned().ok_or("subject: required")?;
    let subject = subject_of(&subject_json)?;
    let takedown = input
        .get("takedown")
        .ok_or("takedown: required (svc takes no other status)")?;
    let applied = takedown
        .get("applied")
        .and_then(Value::as_bool)
        .ok_or("takedown.applied: must be a boolean")?;
    let reference = match takedown.get("ref") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if text.chars().count() <= MAX_REFERENCE_CHARS => {
            Some(text.clone())
        }
        Some(Value::String(_)) => {
            return Err(format!(
                "takedown.ref: longer than {MAX_REFERENCE_CHARS} characters"
            ));
        }
        Some(_) => return Err("takedown.ref: must be a string".into()),
    };
    Ok((subject, subject_json, applied, reference))
}

/// An account (`com.atproto.admin.defs#repoRef`, `{did}`) or a record
/// (`com.atproto.repo.strongRef`, `{uri, cid}`); blobs are not held here.
fn subject_of(subject: &Value) -> Result<Subject, String> {
    let kind = subject.get("$type").and_then(Value::as_str);
    match kind {
        Some("com.atproto.admin.defs#repoRef") => account(subject.get("did")),
        Some("com.atproto.repo.strongRef") => record(subject.get("uri")),
        Some("com.atproto.admin.defs#repoBlobRef") => {
            Err("subject: blobs are not held by this service".into())
        }
        Some(other) => Err(format!(
            "subject.$type: {other:?} is neither com.atproto.admin.defs#repoRef nor com.atproto.repo.strongRef"
        )),
        None if subject.get("did").is_some() => account(subject.get("did")),
        None if subject.get("uri").is_some() => record(subject.get("uri")),
        None => Err("subject: must name a did or a uri".into()),
    }
}

fn account(did: Option<&Value>) -> Result<Subject, String> {
    let text = did
        .and_then(Value::as_str)
        .ok_or("subject.did: must be a string")?;
    Did::new(text)
        .map(Subject::Account)
        .map_err(|e| format!("subject.did: {e}"))
}

fn record(uri: Option<&Value>) -> Result<Subject, String> {
    let text = uri
        .and_then(Value::as_str)
        .ok_or("subject.uri: must be a string")?;
    let uri = AtUri::new(text).map_err(|e| format!("subject.uri: {e}"))?;
    if uri.record_parts().is_none() {
        return Err("subject.uri: must name a record (at://did/collection/rkey)".into());
    }
    Ok(Subject::Record(uri))
}

/// `did=` or `uri=`, one of them.
fn status_input(raw: Option<&str>) -> Result<(Subject, Value), ApiError> {
    let params = crate::params::Params::parse(raw);
    let (did, uri) = (params.get("did")?, params.get("uri")?);
    let found = match (did, uri) {
        (Some(did), None) => account(Some(&json!(did))).map(|subject| {
            (
                subject,
                json!({"$type": "com.atproto.admin.defs#repoRef", "did": did}),
            )
        }),
        (None, Some(uri)) => record(Some(&json!(uri))).map(|subject| {
            (
                subject,
                json!({"$type": "com.atproto.repo.strongRef", "uri": uri}),
            )
        }),
        _ => Err("one of did and uri is required".to_string()),
    };
    found.map_err(ApiError::InvalidRequest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(credentials: &str) -> HeaderMap {
        let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
        let mut headers = HeaderMap::new();
        let value = format!("Basic {encoded}").parse().expect("a header");
        headers.insert(header::AUTHORIZATION, value);
        headers
    }

    #[test]
    fn only_admin_with_the_password_passes() {
        assert!(shows_password(&basic("admin:s3cret"), "s3cret"));
        assert!(!shows_password(&basic("admin:s3cre"), "s3cret"));
        assert!(!shows_password(&basic("root:s3cret"), "s3cret"));
        assert!(!shows_password(&HeaderMap::new(), "s3cret"));
    }

    #[test]
    fn subjects_are_an_account_or_a_record_and_nothing_else() {
        let account = json!({"$type": "com.atproto.admin.defs#repoRef", "did": "did:plc:a"});
        assert!(matches!(subject_of(&account), Ok(Subject::Account(_))));
        let record = json!({"$type": "com.atproto.repo.strongRef",
            "uri": "at://did:plc:a/dev.svc.bounty/1", "cid": "bafy"});
        assert!(matches!(subject_of(&record), Ok(Subject::Record(_))));
        let refused = |subject: Value| subject_of(&subject).expect_err("refused");
        assert!(refused(json!({"did": "plc:a"})).contains("subject.did"));
        assert!(refused(json!({"uri": "at://did:plc:a"})).contains("record"));
        assert!(refused(json!({"$type": "com.atproto.admin.defs#repoBlobRef"})).contains("blobs"));
        assert!(refused(json!({"$type": "x.y#z", "did": "did:plc:a"})).contains("$type"));
    }
}
