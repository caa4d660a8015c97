//! Handle resolution by DNS: the TXT record `_atproto.<handle>`, asked through a full stub
//! resolver (every nameserver of the system's configuration, TCP when an answer is truncated or
//! UDP fails, timeouts and retries) rather than one datagram to one server.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;

use crate::{AtprotoError, AtprotoResult};

/// How long one nameserver gets to answer one query, and how often a query is retried: a
/// handle that DNS cannot answer within about ten seconds is reported as unresolvable.
const QUERY_TIMEOUT: Duration = Duration::from_secs(3);
const QUERY_ATTEMPTS: usize = 2;

pub struct HandleDns {
    resolver: TokioResolver,
}

impl HandleDns {
    /// The nameservers of the system's configuration (`/etc/resolv.conf`).
    pub fn system() -> AtprotoResult<HandleDns> {
        let builder = TokioResolver::builder_tokio()
            .map_err(|e| AtprotoError::Invalid(format!("the system's DNS configuration: {e}")))?;
        Self::finish(builder)
    }

    /// These nameservers, each over UDP and TCP on its port, in order.
    pub fn with_nameservers(servers: &[SocketAddr]) -> AtprotoResult<HandleDns> {
        let name_servers = servers
            .iter()
            .map(|server| {
                let mut udp = ConnectionConfig::udp();
                udp.port = server.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = server.port();
                NameServerConfig::new(server.ip(), true, vec![udp, tcp])
            })
            .collect();
        let builder = TokioResolver::builder_with_config(
            ResolverConfig::from_name_servers(name_servers),
            TokioRuntimeProvider::default(),
        );
        Self::finish(builder)
    }

    fn finish(
        mut builder: hickory_resolver::ResolverBuilder<TokioRuntimeProvider>,
    ) -> AtprotoResult<HandleDns> {
        let options = builder.options_mut();
        options.timeout = QUERY_TIMEOUT;
        options.attempts = QUERY_ATTEMPTS;
        options.try_tcp_on_error = true;
        let resolver = builder
            .build()
            .map_err(|e| AtprotoError::Invalid(format!("a DNS resolver: {e}")))?;
        Ok(HandleDns { resolver })
    }

    /// The DID that `_atproto.<handle>` names (`did=<did>`), or `None` when there is no such
    /// record. Two records naming different DIDs are an error: the handle is ambiguous.
    pub async fn txt_did(&self, handle: &str) -> AtprotoResult<Option<String>> {
        // The trailing dot makes the name absolute: no search domain is ever appended.
        let name = format!("_atproto.{handle}.");
        let lookup = match self.resolver.txt_lookup(name.as_str()).await {
            Ok(lookup) => lookup,
            Err(e) if e.is_no_records_found() => return Ok(None),
            Err(e) => {
                return Err(AtprotoError::Invalid(format!(
                    "{handle}: DNS TXT _atproto.{handle}: {e}"
                )));
            }
        };
        let mut dids: Vec<String> = lookup
            .answers()
            .iter()
            .filter_map(|record| match &record.data {
                RData::TXT(txt) => Some(
                    txt.txt_data
                        .iter()
                        .map(|part| String::from_utf8_lossy(part))
                        .collect::<String>(),
                ),
                _ => None,
            })
            .filter_map(|text| {
                text.strip_prefix("did=")
                    .filter(|did| svc_syntax::check_did(did).is_ok())
                    .map(str::to_string)
            })
            .collect();
        dids.sort();
        dids.dedup();
        match dids.len() {
            0 => Ok(None),
            1 => Ok(dids.pop()),
            _ => Err(AtprotoError::Invalid(format!(
                "{handle}: DNS TXT _atproto.{handle} names several DIDs ({})",
                dids.join(", ")
            ))),
        }
    }
}
