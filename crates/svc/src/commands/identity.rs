//! `svc resolve` and `svc fetch`.

use super::{UsageError, plc_url, print_json};
use anyhow::Context;
use svc_atproto::{Resolver, Xrpc, http_client};

pub fn resolve(did: &str) -> anyhow::Result<()> {
    if svc_syntax::check_did(did).is_err() {
        return Err(UsageError(format!("{did} is not a DID (did:plc:... or did:web:...)")).into());
    }
    let resolver = Resolver::new(http_client()?, &plc_url());
    print_json(&resolver.resolve_did(did)?)
}

/// The DID and PDS of an at-uri's authority (a handle is resolved to its DID first).
pub fn locate(resolver: &Resolver, authority: &str) -> anyhow::Result<(String, String)> {
    let did = if authority.starts_with("did:") {
        authority.to_string()
    } else {
        resolver.resolve_handle(authority, None)?
    };
    let resolved = resolver.resolve_did(&did)?;
    let pds = resolved
        .pds_url
        .with_context(|| format!("{did} names no PDS (#atproto_pds)"))?;
    Ok((did, pds))
}

/// The value of the record at an at-uri, from its author's PDS (or `pds` when given).
pub fn fetch_value(uri: &str, pds: Option<&str>) -> anyhow::Result<serde_json::Value> {
    let parsed = svc_syntax::check_at_uri(uri).map_err(|e| UsageError(format!("{uri}: {e}")))?;
    let (Some(collection), Some(rkey)) = (parsed.collection, parsed.rkey) else {
        return Err(UsageError(format!(
            "{uri}: a record's at-uri has a collection and a record key"
        ))
        .into());
    };
    let http = http_client()?;
    let resolver = Resolver::new(http.clone(), &plc_url());
    let (did, service) = match pds {
        Some(pds) => (parsed.authority.to_string(), pds.to_string()),
        None => locate(&resolver, parsed.authority)?,
    };
    Ok(Xrpc::new(http).get_record(&service, &did, collection, rkey)?)
}

pub fn fetch(uri: &str) -> anyhow::Result<()> {
    print_json(&fetch_value(uri, None)?)
}
