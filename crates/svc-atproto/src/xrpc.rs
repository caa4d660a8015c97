//! The XRPC calls of the command line. Error answers become [`AtprotoError::Xrpc`] with the
//! server's error name and message.

use crate::{AtprotoError, AtprotoResult};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub struct Xrpc {
    http: reqwest::blocking::Client,
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
    pub fn new(http: reqwest::blocking::Client) -> Xrpc {
        Xrpc { http }
    }

    fn answer(
        url: &str,
        response: reqwest::Result<reqwest::blocking::Response>,
    ) -> AtprotoResult<Value> {
        let response = response.map_err(|e| AtprotoError::Http {
            url: url.to_string(),
            message: e.to_string(),
        })?;
        let status = response.status();
        let body: Value = response.json().unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        Err(AtprotoError::Xrpc {
            url: url.to_string(),
            status: status.as_u16(),
            error: body
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("Error")
                .to_string(),
            message: body
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        })
    }

    fn url(service: &str, method: &str) -> String {
        format!("{}/xrpc/{method}", service.trim_end_matches('/'))
    }

    /// `com.atproto.repo.getRecord`.
    pub fn get_record(
        &self,
        service: &str,
        repo: &str,
        collection: &str,
        rkey: &str,
    ) -> AtprotoResult<FetchedRecord> {
        let url = Self::url(service, "com.atproto.repo.getRecord");
        let address = reqwest::Url::parse_with_params(
            &url,
            [("repo", repo), ("collection", collection), ("rkey", rkey)],
        )
        .map_err(|e| AtprotoError::Invalid(e.to_string()))?;
        let body = Self::answer(&url, self.http.get(address).send())?;
        serde_json::from_value(body)
            .map_err(|e| AtprotoError::Invalid(format!("{url}: not a record answer: {e}")))
    }

    /// Any XRPC procedure: POSTs `input` as JSON and returns the answer's body.
    pub fn procedure(&self, service: &str, method: &str, input: &Value) -> AtprotoResult<Value> {
        let url = Self::url(service, method);
        Self::answer(&url, self.http.post(&url).json(input).send())
    }

    pub fn create_session(
        &self,
        service: &str,
        identifier: &str,
        password: &str,
    ) -> AtprotoResult<SessionTokens> {
        let url = Self::url(service, "com.atproto.server.createSession");
        let body = Self::answer(
            &url,
            self.http
                .post(&url)
                .json(&json!({"identifier": identifier, "password": password}))
                .send(),
        )?;
        serde_json::from_value(body).map_err(|e| AtprotoError::Invalid(format!("{url}: {e}")))
    }

    pub fn refresh_session(
        &self,
        service: &str,
        refresh_jwt: &str,
    ) -> AtprotoResult<SessionTokens> {
        let url = Self::url(service, "com.atproto.server.refreshSession");
        let body = Self::answer(&url, self.http.post(&url).bearer_auth(refresh_jwt).send())?;
        serde_json::from_value(body).map_err(|e| AtprotoError::Invalid(format!("{url}: {e}")))
    }

    pub fn create_record(
        &self,
        service: &str,
        access_jwt: &str,
        repo: &str,
        collection: &str,
        rkey: &str,
        record: &Value,
    ) -> AtprotoResult<CreatedRecord> {
        let url = Self::url(service, "com.atproto.repo.createRecord");
        let input = json!({"repo": repo, "collection": collection, "rkey": rkey, "record": record});
        let body = Self::answer(
            &url,
            self.http
                .post(&url)
                .bearer_auth(access_jwt)
                .json(&input)
                .send(),
        )?;
        serde_json::from_value(body).map_err(|e| AtprotoError::Invalid(format!("{url}: {e}")))
    }
}
