//! The XRPC client of the command line and the backfill. Error answers become
//! [`AtprotoError::Xrpc`] with the server's error name and message.

use crate::Session;
use crate::{
    AtprotoError, AtprotoResult, BodyChunks, MAX_ERROR_ANSWER_BYTES, MAX_XRPC_ANSWER_BYTES, Pace,
    http_error, read_body,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use svc_syntax::{Did, Nsid, RecordKey};

/// An XRPC client: queries (GET with parameters) and procedures (POST with a JSON body) on
/// any service, error answers as [`AtprotoError::Xrpc`].
#[derive(Clone)]
pub struct Xrpc {
    http: reqwest::Client,
    /// The longest successful answer read.
    answer_limit: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedRecord {
    pub uri: String,
    pub cid: String,
}

/// What `com.atproto.repo.getRecord` answers: the record's at-uri, its CID and its value.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FetchedRecord {
    pub uri: String,
    pub cid: String,
    pub value: Value,
}

/// The name of an XRPC method (`com.atproto.repo.getRecord`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method(pub &'static str);

impl Method {
    pub const GET_RECORD: Method = Method("com.atproto.repo.getRecord");
    pub const CREATE_RECORD: Method = Method("com.atproto.repo.createRecord");
    pub const CREATE_SESSION: Method = Method("com.atproto.server.createSession");
    pub const REFRESH_SESSION: Method = Method("com.atproto.server.refreshSession");
    pub const RESOLVE_HANDLE: Method = Method("com.atproto.identity.resolveHandle");
    pub const LIST_REPOS: Method = Method("com.atproto.sync.listRepos");
    pub const LIST_RECORDS: Method = Method("com.atproto.repo.listRecords");
    pub const LIST_REPOS_BY_COLLECTION: Method = Method("com.atproto.sync.listReposByCollection");
    pub const GET_LATEST_COMMIT: Method = Method("com.atproto.sync.getLatestCommit");
    pub const GET_REPO: Method = Method("com.atproto.sync.getRepo");
}

/// What a login sends: the account (handle, DID or email) and its app password.
#[derive(Clone, Copy)]
pub struct Login<'a> {
    pub identifier: &'a str,
    pub password: &'a str,
}

/// What `createSession` and `refreshSession` answer.
#[derive(Debug, Clone, Deserialize)]
pub struct SessionTokens {
    pub did: String,
    pub handle: String,
    #[serde(rename = "accessJwt")]
    pub access_jwt: String,
    #[serde(rename = "refreshJwt")]
    pub refresh_jwt: String,
}

impl Xrpc {
    pub fn new(http: reqwest::Client) -> Xrpc {
        Xrpc {
            http,
            answer_limit: MAX_XRPC_ANSWER_BYTES,
        }
    }

    /// The same client, reading successful answers up to `bytes` (an identity answer is
    /// small, a page of records is not).
    pub fn with_answer_limit(self, bytes: usize) -> Xrpc {
        Xrpc {
            answer_limit: bytes,
            ..self
        }
    }

    /// The body of a successful answer (at most the client's limit), or the error the server
    /// answered with.
    async fn answer(&self, url: &str, request: reqwest::RequestBuilder) -> AtprotoResult<Vec<u8>> {
        let response = self.succeeded(url, request).await?;
        read_body(url, response, "an XRPC answer", self.answer_limit).await
    }

    /// The response of a successful answer, its body unread, or the error the server
    /// answered with.
    async fn succeeded(
        &self,
        url: &str,
        request: reqwest::RequestBuilder,
    ) -> AtprotoResult<reqwest::Response> {
        let response = request.send().await.map_err(|e| http_error(url, e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = crate::retry_after(response.headers());
        // The status is the error; a body too long or broken only loses its details.
        let body: Value = read_body(url, response, "an XRPC error", MAX_ERROR_ANSWER_BYTES)
            .await
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
        let field = |name: &str| body.get(name).and_then(Value::as_str).map(str::to_string);
        Err(AtprotoError::Xrpc {
            url: url.to_string(),
            status: status.as_u16(),
            error: field("error").unwrap_or_else(|| "Error".to_string()),
            message: field("message").unwrap_or_default(),
            retry_after,
        })
    }

    fn url(service: &str, method: Method) -> String {
        format!("{}/xrpc/{}", service.trim_end_matches('/'), method.0)
    }

    /// Decoded straight from the bytes: a page of records is never held twice, as text and as
    /// a generic tree.
    fn decode<T: DeserializeOwned>(url: &str, body: &[u8]) -> AtprotoResult<T> {
        serde_json::from_slice(body)
            .map_err(|e| AtprotoError::Invalid(format!("{url}: unexpected answer: {e}")))
    }

    /// Any XRPC query: GET with URL parameters, the answer decoded as `T`.
    pub async fn query<T: DeserializeOwned>(
        &self,
        service: &str,
        method: Method,
        params: &[(&str, &str)],
    ) -> AtprotoResult<T> {
        let body = self.query_bytes(service, method, params).await?;
        Self::decode(&Self::url(service, method), &body)
    }

    /// An XRPC query whose answer is not JSON (`getRepo`'s CAR file): its bytes, at most the
    /// client's limit.
    pub async fn query_bytes(
        &self,
        service: &str,
        method: Method,
        params: &[(&str, &str)],
    ) -> AtprotoResult<Vec<u8>> {
        let url = Self::url(service, method);
        let address = reqwest::Url::parse_with_params(&url, params)
            .map_err(|e| AtprotoError::Invalid(format!("{url}: {e}")))?;
        self.answer(&url, self.http.get(address)).await
    }

    /// An XRPC query whose answer may be large (`getRepo`): its body as it comes, at most the
    /// client's limit, for the caller to keep where it can.
    pub async fn query_chunks(
        &self,
        service: &str,
        method: Method,
        params: &[(&str, &str)],
    ) -> AtprotoResult<BodyChunks> {
        let url = Self::url(service, method);
        let address = reqwest::Url::parse_with_params(&url, params)
            .map_err(|e| AtprotoError::Invalid(format!("{url}: {e}")))?;
        let response = self.succeeded(&url, self.http.get(address)).await?;
        BodyChunks::new(
            &url,
            response,
            "an XRPC answer",
            self.answer_limit,
            Pace::LEAST,
        )
    }

    /// Any XRPC procedure: POSTs `input` as JSON (with a bearer token when given) and returns
    /// the answer's body.
    pub async fn procedure(
        &self,
        service: &str,
        method: Method,
        input: &Value,
        bearer: Option<&str>,
    ) -> AtprotoResult<Value> {
        let url = Self::url(service, method);
        let mut request = self.http.post(&url).json(input);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let body = self.answer(&url, request).await?;
        // A procedure may answer nothing at all.
        Ok(serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// `com.atproto.repo.getRecord`.
    pub async fn get_record(
        &self,
        service: &str,
        repo: &Did,
        collection: &Nsid,
        rkey: &RecordKey,
    ) -> AtprotoResult<FetchedRecord> {
        let params = [
            ("repo", repo.as_str()),
            ("collection", collection),
            ("rkey", rkey),
        ];
        self.query(service, Method::GET_RECORD, &params).await
    }

    pub async fn create_session(
        &self,
        service: &str,
        login: Login<'_>,
    ) -> AtprotoResult<SessionTokens> {
        let input = json!({"identifier": login.identifier, "password": login.password});
        let url = Self::url(service, Method::CREATE_SESSION);
        let body = self.answer(&url, self.http.post(&url).json(&input)).await?;
        Self::decode(&url, &body)
    }

    /// New tokens for a stored session, from its PDS.
    pub async fn refresh_session(&self, session: &Session) -> AtprotoResult<SessionTokens> {
        let url = Self::url(&session.pds_url, Method::REFRESH_SESSION);
        let request = self.http.post(&url).bearer_auth(&session.refresh_jwt);
        let body = self.answer(&url, request).await?;
        Self::decode(&url, &body)
    }

    /// Writes a record into the session's repository on its PDS.
    pub async fn create_record(
        &self,
        session: &Session,
        collection: &Nsid,
        rkey: &RecordKey,
        record: &Value,
    ) -> AtprotoResult<CreatedRecord> {
        let input = json!({
            "repo": session.did,
            "collection": collection.as_str(),
            "rkey": rkey.as_str(),
            "record": record,
        });
        let url = Self::url(&session.pds_url, Method::CREATE_RECORD);
        let request = self
            .http
            .post(&url)
            .json(&input)
            .bearer_auth(&session.access_jwt);
        let body = self.answer(&url, request).await?;
        Self::decode(&url, &body)
    }
}
