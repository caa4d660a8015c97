//! DID documents (did:plc through a PLC directory, did:web through `/.well-known/did.json`) and
//! handles (HTTPS `/.well-known/atproto-did`, then DNS TXT `_atproto.<handle>`).

use crate::dns::HandleDns;
use crate::reach::Reach;
use crate::xrpc::{Method, Xrpc};
use crate::{AtprotoError, AtprotoResult, MAX_IDENTITY_ANSWER_BYTES, http_error, read_body};
use svc_repo::crypto::{KeyError, PublicKey};
use svc_syntax::{Did, Handle};

/// What the identity answers are called in an error about their size.
const IDENTITY_ANSWER: &str = "an identity answer (DID document or handle)";
use serde::Serialize;
use serde_json::Value;

/// What `svc resolve` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedDid {
    pub did: String,
    pub method: String,
    pub handle: Option<String>,
    pub pds_url: Option<String>,
    /// The key that signs the repository's commits, as a did:key: the document's `#atproto`
    /// verification method.
    pub signing_key: Option<String>,
    pub also_known_as: Vec<String>,
}

/// Where the DID document of a DID is: `<plc>/<did>` for did:plc, `/.well-known/did.json` of
/// the host for did:web. Plain HTTP only for a loopback host itself (`localhost`,
/// `127.x.x.x`), as test servers run: any other host is HTTPS, so nobody on the path can forge
/// the document. A port (`%3A`) is accepted only on a loopback host, as atproto allows; a path
/// (`:` after the host) is not supported.
pub fn did_document_url(did: &Did, plc_url: &str) -> AtprotoResult<String> {
    match did.split(':').nth(1).unwrap_or_default() {
        "plc" => Ok(format!("{}/{did}", plc_url.trim_end_matches('/'))),
        "web" => {
            let specific = &did["did:web:".len()..];
            if specific.contains(':') {
                return Err(AtprotoError::Invalid(format!(
                    "{did}: did:web with a path is not supported"
                )));
            }
            let authority = specific.replace("%3A", ":").replace("%3a", ":");
            // A DID cannot hold brackets, so the host is a name or an IPv4 address.
            let (host, port) = match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority.as_str(), None),
            };
            let loopback = is_loopback_host(host);
            if let Some(port) = port {
                if !loopback {
                    return Err(AtprotoError::Invalid(format!(
                        "{did}: did:web with a port ({port}) is only supported for localhost"
                    )));
                }
                if port.parse::<u16>().is_err() {
                    return Err(AtprotoError::Invalid(format!(
                        "{did}: {port:?} is not a port number"
                    )));
                }
            }
            let scheme = if loopback { "http" } else { "https" };
            Ok(format!("{scheme}://{authority}/.well-known/did.json"))
        }
        other => Err(AtprotoError::Invalid(format!(
            "{did}: the DID method {other} is not supported (plc, web)"
        ))),
    }
}

/// Whether a URL's host is this machine itself: `localhost` or a loopback address (`127.x.x.x`,
/// `[::1]`). Nothing else may be spoken to without TLS.
pub fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The PDS a DID document names: its `#atproto_pds` service endpoint.
pub fn pds_endpoint(document: &Value, did: &str) -> Option<String> {
    service_endpoint(document, did, "atproto_pds")
}

/// The endpoint of the document's service `#<fragment>` (`atproto_pds`, `atproto_labeler`).
pub fn service_endpoint(document: &Value, did: &str, fragment: &str) -> Option<String> {
    document
        .get("service")?
        .as_array()?
        .iter()
        .find_map(|service| {
            let id = service.get("id")?.as_str()?;
            names_fragment(id, did, fragment)
                .then(|| service.get("serviceEndpoint")?.as_str().map(str::to_string))
                .flatten()
        })
}

/// Whether a document's `id` (`#name` or `<did>#name`) names `#<fragment>`.
fn names_fragment(id: &str, did: &str, fragment: &str) -> bool {
    let local = id.strip_prefix(did).unwrap_or(id);
    local.strip_prefix('#') == Some(fragment)
}

/// The key that signs a DID's repository commits: its document's `#atproto` verification
/// method, in any form the network writes (`Multikey`, or the older named suites). `None`
/// when the document names none; an error when the one it names is not a key svc can read.
pub fn signing_key(document: &Value, did: &str) -> Option<Result<PublicKey, KeyError>> {
    method_key(document, did, "atproto")
}

/// The key of the document's verification method `#<fragment>` (`atproto`, `atproto_label`).
pub fn method_key(
    document: &Value,
    did: &str,
    fragment: &str,
) -> Option<Result<PublicKey, KeyError>> {
    let method = document
        .get("verificationMethod")?
        .as_array()?
        .iter()
        .find(|method| {
            method
                .get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| names_fragment(id, did, fragment))
        })?;
    let kind = method
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let multibase = method
        .get("publicKeyMultibase")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(PublicKey::from_verification_method(kind, multibase))
}

/// A labeler as its DID document states it: where its labels are read, and the key that
/// signs them.
#[derive(Debug, Clone)]
pub struct LabelerService {
    pub endpoint: String,
    pub key: PublicKey,
}

/// An account found from a DID or a handle: its DID and the PDS that holds its repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub did: Did,
    pub pds: String,
}

/// What `com.atproto.identity.resolveHandle` answers.
#[derive(serde::Deserialize)]
struct ResolvedHandle {
    did: String,
}

pub struct Resolver {
    http: reqwest::Client,
    /// For what the network names (`did:web` hosts, a handle's host), under `reach`.
    web: reqwest::Client,
    reach: Reach,
    /// Identity answers are small: this client reads at most [`MAX_IDENTITY_ANSWER_BYTES`].
    xrpc: Xrpc,
    plc_url: String,
    /// Made on the first handle that needs DNS: most commands never do.
    dns: tokio::sync::OnceCell<HandleDns>,
}

impl Resolver {
    pub fn new(http: reqwest::Client, plc_url: &str) -> Resolver {
        Resolver {
            xrpc: Xrpc::new(http.clone()).with_answer_limit(MAX_IDENTITY_ANSWER_BYTES),
            web: http.clone(),
            reach: Reach::Anywhere,
            http,
            plc_url: plc_url.trim_end_matches('/').to_string(),
            dns: tokio::sync::OnceCell::new(),
        }
    }

    /// Asks these nameservers for handles instead of the system's.
    pub fn with_dns(self, dns: HandleDns) -> Resolver {
        Resolver {
            dns: tokio::sync::OnceCell::new_with(Some(dns)),
            ..self
        }
    }

    /// Reads `did:web` documents only where `reach` allows, with `web` (a client of that
    /// reach); the directory, which the operator names, is asked as before.
    pub fn reaching(self, reach: Reach, web: reqwest::Client) -> Resolver {
        Resolver { reach, web, ..self }
    }

    /// The DID document of `did`, read now from where its method keeps it.
    async fn document(&self, did: &Did) -> AtprotoResult<Value> {
        let url = self.document_url(did)?;
        if did.starts_with("did:web:") {
            self.reach.check(&url)?;
            return self.get_json(&self.web, &url).await;
        }
        self.get_json(&self.http, &url).await
    }

    /// A JSON answer about an identity, read up to [`MAX_IDENTITY_ANSWER_BYTES`].
    async fn get_json(&self, http: &reqwest::Client, url: &str) -> AtprotoResult<Value> {
        let response = http.get(url).send().await.map_err(|e| http_error(url, e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(AtprotoError::Status {
                url: url.to_string(),
                status: status.as_u16(),
                message: format!("{status}"),
                retry_after: crate::retry_after(response.headers()),
            });
        }
        let body = read_body(url, response, IDENTITY_ANSWER, MAX_IDENTITY_ANSWER_BYTES).await?;
        serde_json::from_slice(&body).map_err(|e| AtprotoError::Http {
            url: url.to_string(),
            message: format!("not a JSON document: {e}"),
        })
    }

    pub async fn resolve_did(&self, did: &Did) -> AtprotoResult<ResolvedDid> {
        let method = did.split(':').nth(1).unwrap_or_default().to_string();
        let document = self.document(did).await?;
        if document.get("id").and_then(Value::as_str) != Some(did.as_str()) {
            return Err(AtprotoError::Invalid(format!(
                "{did}: the DID document is for another DID"
            )));
        }
        let also_known_as: Vec<String> = document
            .get("alsoKnownAs")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let handle = also_known_as
            .iter()
            .find_map(|a| a.strip_prefix("at://"))
            .map(str::to_string);
        let pds_url = pds_endpoint(&document, did);
        let signing_key = match signing_key(&document, did) {
            Some(Ok(key)) => Some(key.did_key()),
            Some(Err(error)) => {
                return Err(AtprotoError::Invalid(format!(
                    "{did}: the DID document's signing key: {error}"
                )));
            }
            None => None,
        };
        Ok(ResolvedDid {
            did: did.to_string(),
            method,
            handle,
            pds_url,
            signing_key,
            also_known_as,
        })
    }

    /// Where this resolver reads the DID document of `did`.
    pub fn document_url(&self, did: &Did) -> AtprotoResult<String> {
        did_document_url(did, &self.plc_url)
    }

    /// The PDS of a DID: its document's `#atproto_pds` service endpoint.
    pub async fn pds_of(&self, did: &Did) -> AtprotoResult<String> {
        self.resolve_did(did)
            .await?
            .pds_url
            .ok_or_else(|| AtprotoError::Invalid(format!("{did} names no PDS (#atproto_pds)")))
    }

    /// The key that signs a DID's repository commits, read from its DID document now.
    pub async fn signing_key(&self, did: &Did) -> AtprotoResult<PublicKey> {
        self.key_and_pds(did).await?.0
    }

    /// The key that signs a DID's repository commits (or why the document names none) and
    /// its PDS, from one read of its DID document now.
    pub async fn key_and_pds(
        &self,
        did: &Did,
    ) -> AtprotoResult<(AtprotoResult<PublicKey>, Option<String>)> {
        let document = self.document(did).await?;
        let pds = pds_endpoint(&document, did);
        let key = match signing_key(&document, did) {
            Some(Ok(key)) => Ok(key),
            Some(Err(error)) => Err(AtprotoError::Invalid(format!(
                "{did}: the DID document's signing key: {error}"
            ))),
            None => Err(AtprotoError::Invalid(format!(
                "{did} names no signing key (#atproto)"
            ))),
        };
        Ok((key, pds))
    }

    /// A labeler's endpoint (its `#atproto_labeler` service) and label key (its
    /// `#atproto_label` verification method), read from its DID document now.
    pub async fn labeler(&self, did: &Did) -> AtprotoResult<LabelerService> {
        let document = self.document(did).await?;
        let invalid = |what: String| AtprotoError::Invalid(format!("{did}: {what}"));
        let endpoint = service_endpoint(&document, did, "atproto_labeler")
            .ok_or_else(|| invalid("names no labeler service (#atproto_labeler)".into()))?;
        let key = match method_key(&document, did, "atproto_label") {
            Some(Ok(key)) => key,
            Some(Err(error)) => return Err(invalid(format!("the label key: {error}"))),
            None => return Err(invalid("names no label key (#atproto_label)".into())),
        };
        Ok(LabelerService { endpoint, key })
    }

    /// The DID and PDS of an account named by a DID or a handle (an at-uri's authority).
    pub async fn locate(&self, authority: &str) -> AtprotoResult<Located> {
        let invalid =
            |e: svc_syntax::SyntaxError| AtprotoError::Invalid(format!("{authority:?}: {e}"));
        let did = if authority.starts_with("did:") {
            Did::new(authority).map_err(invalid)?
        } else {
            let handle = Handle::new(authority).map_err(invalid)?;
            self.resolve_handle(&handle, None).await?
        };
        let pds = self.pds_of(&did).await?;
        Ok(Located { did, pds })
    }

    /// A handle to its DID: `GET https://<handle>/.well-known/atproto-did`, then DNS TXT
    /// `_atproto.<handle>`. With `service`, that server's `com.atproto.identity.resolveHandle`
    /// is asked instead (a PDS knows its own handles, also ones no DNS knows, like `*.test`).
    pub async fn resolve_handle(
        &self,
        handle: &Handle,
        service: Option<&str>,
    ) -> AtprotoResult<Did> {
        if let Some(service) = service {
            let answer: ResolvedHandle = self
                .xrpc
                .query(service, Method::RESOLVE_HANDLE, &[("handle", handle)])
                .await?;
            return Did::new(answer.did)
                .map_err(|e| AtprotoError::Invalid(format!("{handle}: {service} answered {e}")));
        }
        let well_known = format!("https://{handle}/.well-known/atproto-did");
        // Any failure here, a body too long included, leaves DNS to answer. The handle's host
        // is named by the network, so it is reached as `did:web` hosts are.
        let answer = match self.web.get(&well_known).send().await {
            Ok(response) if response.status().is_success() => read_body(
                &well_known,
                response,
                IDENTITY_ANSWER,
                MAX_IDENTITY_ANSWER_BYTES,
            )
            .await
            .ok(),
            _ => None,
        };
        if let Some(did) = answer
            .as_deref()
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .and_then(|text| Did::new(text.trim()).ok())
        {
            return Ok(did);
        }
        let dns = self
            .dns
            .get_or_try_init(|| async { HandleDns::system() })
            .await?;
        let found = dns.txt_did(handle).await?.ok_or_else(|| {
            AtprotoError::Invalid(format!(
                "{handle}: no DID found (HTTPS well-known and DNS TXT _atproto.{handle})"
            ))
        })?;
        Did::new(found).map_err(|e| AtprotoError::Invalid(format!("{handle}: DNS TXT: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::did_document_url;

    #[test]
    fn the_signing_key_is_the_atproto_verification_method() {
        let did = "did:plc:ewvi7nxzyoun6zhxrhs64oiz";
        let key = "zQ3shXjHeiBuRCKmM36cuYnm7YEMzhGnCmCyW92sRJ9pribSF";
        let document = serde_json::json!({
            "id": did,
            "verificationMethod": [
                {"id": format!("{did}#other"), "type": "Multikey", "publicKeyMultibase": "zBad"},
                {"id": format!("{did}#atproto"), "type": "Multikey", "publicKeyMultibase": key},
            ],
        });
        let found = super::signing_key(&document, did).unwrap().unwrap();
        assert_eq!(found.did_key(), format!("did:key:{key}"));
        let unreadable = serde_json::json!({"verificationMethod": [
            {"id": "#atproto", "type": "Multikey", "publicKeyMultibase": "zBad"}
        ]});
        assert!(super::signing_key(&unreadable, did).unwrap().is_err());
        assert!(super::signing_key(&serde_json::json!({"id": did}), did).is_none());
    }

    #[test]
    fn did_web_is_https_but_for_loopback_hosts() {
        let url = |did: &str| {
            let did = svc_syntax::Did::new(did).map_err(|e| e.to_string())?;
            did_document_url(&did, "https://plc.example").map_err(|e| e.to_string())
        };
        assert_eq!(
            url("did:web:example.com").unwrap(),
            "https://example.com/.well-known/did.json"
        );
        assert_eq!(
            url("did:web:localhost.evil.com").unwrap(),
            "https://localhost.evil.com/.well-known/did.json"
        );
        assert_eq!(
            url("did:web:localhost%3A8080").unwrap(),
            "http://localhost:8080/.well-known/did.json"
        );
        assert_eq!(
            url("did:web:127.0.0.1").unwrap(),
            "http://127.0.0.1/.well-known/did.json"
        );
        assert!(
            url("did:web:example.com%3A8080")
                .unwrap_err()
                .contains("port (8080)")
        );
        assert!(
            url("did:web:example.com:user:alice")
                .unwrap_err()
                .contains("path")
        );
        assert_eq!(
            url("did:plc:abc").unwrap(),
            "https://plc.example/did:plc:abc"
        );
    }
}
