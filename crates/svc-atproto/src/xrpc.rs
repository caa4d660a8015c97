//! The XRPC client of the command line and the backfill. Error answers become
//! [`AtprotoError::Xrpc`] with the server's error name and message.

use crate::{
    AtprotoError, AtprotoResult, MAX_ERROR_ANSWER_BYTES, MAX_XRPC_ANSWER_BYTES, http_error,
    read_body,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// An XRPC client: queries (GET with parameters) and procedures (POST with a JSON body) on
/// any service, error answers as [`AtprotoError::Xrpc`].
#[derive(Clone)]
pub struct Xrpc {
    http: reqwest::Client,
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
        Xrpc { http }
    }

    /// The body of a successful answer (at most [`MAX_XRPC_ANSWER_BYTES`]), or the error the
    /// server answered with.
    async fn answer(url: &str, request: reqwest::RequestBuilder) -> AtprotoResult<Vec<u8>> {
        let response = request.send().await.map_err(|e| http_error(url, e))?;
        let status = response.status();
        if status.is_success() {
            return read_body(url, response, "an XRPC answer", MAX_XRPC_ANSWER_BYTES).await;
        }
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
        })
    }

    fn url(service: &str, method: &str) -> String {
        format!("{}/xrpc/{method}", service.trim_end_matches('/'))
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
        method: &str,
        params: &[(&str, &str)],
    ) -> AtprotoResult<T> {
        let url = Self::url(service, method);
        let address = reqwest::Url::parse_with_params(&url, params)
            .map_err(|e| AtprotoError::Invalid(format!("{url}: {e}")))?;
        let body = Self::answer(&url, self.http.get(address)).await?;
        Self::decode(&url, &body)
    }

    /// Any XRPC procedure: POSTs `input` as JSON (with a bearer token when given) and returns
    /// the answer's body.
    pub async fn procedure(
        &self,
        service: &str,
        method: &str,
        input: &Value,
        bearer: Option<&str>,
    ) -> AtprotoResult<Value> {
        let url = Self::url(service, method);
        let mut request = self.http.post(&url).json(input);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let body = Self::answer(&url, request).await?;
        // A procedure may answer nothing at all.
        Ok(serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// `com.atproto.repo.getRecord`.
    pub async fn get_record(
        &self,
        service: &str,
        repo: &str,
        collection: &str,
        rkey: &str,
    ) -> AtprotoResult<FetchedRecord> {
        let params = [("repo", repo), ("collection", collection), ("rkey", rkey)];
        self.query(service, "com.atproto.repo.getRecord", &params)
            .await
    }

    pub async fn create_session(
        &self,
        service: &str,
        identifier: &str,
        password: &str,
    ) -> AtprotoResult<SessionTokens> {
        let method = "com.atproto.server.createSession";
        let input = json!({"identifier": identifier, "password": password});
        let url = Self::url(service, method);
        let body = Self::answer(&url, self.http.post(&url).json(&input)).await?;
        Self::decode(&url, &body)
    }

    pub async fn refresh_session(
        &self,
        service: &str,
        refresh_jwt: &str,
    ) -> AtprotoResult<SessionTokens> {
        let method = "com.atproto.server.refreshSession";
        let url = Self::url(service, method);
        let body = Self::answer(&url, self.http.post(&url).bearer_auth(refresh_jwt)).await?;
        Self::decode(&url, &body)
    }

    pub async fn create_record(
        &self,
        service: &str,
        access_jwt: &str,
        repo: &str,
        collection: &str,
        rkey: &str,
        record: &Value,
    ) -> AtprotoResult<CreatedRecord> {
        let method = "com.atproto.repo.createRecord";
        let input = json!({"repo": repo, "collection": collection, "rkey": rkey, "record": record});
        let url = Self::url(service, method);
        let request = self.http.post(&url).json(&input).bearer_auth(access_jwt);
        let body = Self::answer(&url, request).await?;
        Self::decode(&url, &body)
    }
}
