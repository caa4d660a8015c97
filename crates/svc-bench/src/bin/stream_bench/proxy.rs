//! nginx in front of a run's svc, with deploy/nginx.conf (`--nginx BINARY`): the subscribers
//! then connect to nginx, as a deployment's do.

use std::net::SocketAddr;
use svc_testkit::nginx::Nginx;

/// As Debian's nginx.conf runs it (a worker a core), with room for thousands of streams.
const MAIN: &str = "worker_processes auto;\nworker_rlimit_nofile 65536;\n\
                    events { worker_connections 16384; }";

/// Starts `binary` in front of `upstream` (both of deploy/nginx.conf's replicas).
pub(crate) fn start(binary: &str, upstream: SocketAddr) -> Nginx {
    let upstream = upstream.to_string();
    Nginx::start(std::path::Path::new(binary), [&upstream, &upstream], MAIN)
}
