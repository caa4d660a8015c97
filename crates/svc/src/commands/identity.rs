//! `svc resolve` and `svc fetch`, and the record fetcher every command that reads records
//! shares.

use super::{UsageError, http, plc_url, print_json};
use std::cell::RefCell;
use std::collections::HashMap;
use svc_atproto::{FetchedRecord, Located, Resolver, Xrpc};
use svc_syntax::{AtUri, Did, Handle};

pub async fn resolve(did: &str) -> anyhow::Result<()> {
    let Ok(did) = Did::new(did) else {
        return Err(UsageError(format!("{did} is not a DID (did:plc:... or did:web:...)")).into());
    };
    let resolver = Resolver::new(http()?, &plc_url());
    print_json(&resolver.resolve_did(&did).await?)
}

/// Fetches records by at-uri from their authors' PDSes (`$SVC_PLC_URL` resolves DIDs), or
/// all from one PDS. Each authority is located once, however many records name it.
pub struct RecordFetcher {
    resolver: Resolver,
    xrpc: Xrpc,
    pds: Option<String>,
    located: RefCell<HashMap<String, Located>>,
}

impl RecordFetcher {
    /// With `pds`, every record is read from that server (a handle is resolved by it too).
    pub fn new(pds: Option<&str>) -> anyhow::Result<RecordFetcher> {
        if let Some(pds) = pds {
            super::warn_if_plain_http("--pds-url", pds);
        }
        let http = http()?;
        Ok(RecordFetcher {
            resolver: Resolver::new(http.clone(), &plc_url()),
            xrpc: Xrpc::new(http),
            pds: pds.map(str::to_string),
            located: RefCell::new(HashMap::new()),
        })
    }

    /// The DID and PDS of an at-uri's authority.
    async fn locate(&self, authority: &str) -> anyhow::Result<Located> {
        if let Some(found) = self.located.borrow().get(authority).cloned() {
            return Ok(found);
        }
        let found = match &self.pds {
            Some(pds) => Located {
                did: match Did::new(authority) {
                    Ok(did) => did,
                    Err(_) => {
                        let handle = Handle::new(authority)
                            .map_err(|e| UsageError(format!("{authority}: {e}")))?;
                        self.resolver.resolve_handle(&handle, Some(pds)).await?
                    }
                },
                pds: pds.clone(),
            },
            None => self.resolver.locate(authority).await?,
        };
        self.located
            .borrow_mut()
            .insert(authority.to_string(), found.clone());
        Ok(found)
    }

    /// The record at an at-uri: its uri, CID and value.
    pub async fn fetch(&self, uri: &str) -> anyhow::Result<FetchedRecord> {
        let parsed = AtUri::new(uri).map_err(|e| UsageError(format!("{uri}: {e}")))?;
        let (Some(collection), Some(rkey)) = (parsed.collection(), parsed.rkey()) else {
            return Err(UsageError(format!(
                "{uri}: a record's at-uri has a collection and a record key"
            ))
            .into());
        };
        // Checked as parts of the at-uri already.
        let (collection, rkey) = (collection.parse()?, rkey.parse()?);
        let Located { did, pds } = self.locate(parsed.authority()).await?;
        Ok(self.xrpc.get_record(&pds, &did, &collection, &rkey).await?)
    }
}

pub async fn fetch(uri: &str) -> anyhow::Result<()> {
    print_json(&RecordFetcher::new(None)?.fetch(uri).await?.value)
}
