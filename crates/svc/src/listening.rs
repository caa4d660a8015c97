//! The addresses `svc serve` answers on: bound (before the catalog opens), served with their
//! connection limits, and stopped together on SIGINT or SIGTERM.

use crate::cli::ServeArgs;
use anyhow::Context;
use std::time::Duration;
use tokio::sync::watch;

type ServerTask = tokio::task::JoinHandle<std::io::Result<()>>;

/// Serves the public router on the bound listener; the receiver turns true on SIGINT or
/// SIGTERM.
pub async fn start_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: svc_server::ConnectionLimits,
) -> anyhow::Result<(ServerTask, watch::Receiver<bool>)> {
    let (trigger, stopped) = watch::channel(false);
    let server = serve_on(listener, router, limits, stopped.clone(), "listening on")?;
    tokio::spawn(shutdown_signal(trigger));
    Ok((server, stopped))
}

/// Serves the admin methods on their own address until `stopped`.
pub fn start_admin(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: svc_server::ConnectionLimits,
    stopped: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    serve_on(listener, router, limits, stopped, "admin methods on").map(drop)
}

/// Serves `router` on `listener` until `stopped`, saying `what` and the address in the log.
fn serve_on(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: svc_server::ConnectionLimits,
    stopped: watch::Receiver<bool>,
    what: &str,
) -> anyhow::Result<ServerTask> {
    let bound = listener.local_addr().context("reading the bound address")?;
    let server = svc_server::serve(listener, router, limits, stopped, Duration::from_secs(10))
        .with_context(|| format!("starting the server {what} {bound}"))?;
    tracing::info!("{what} http://{bound}");
    Ok(tokio::spawn(server))
}

/// The admin methods' own address, bound, when `--admin-listen` names one.
pub async fn listen_for_admin(args: &ServeArgs) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    let Some(address) = &args.admin_listen else {
        return Ok(None);
    };
    let listener = listen(address)
        .await
        .with_context(|| format!("--admin-listen {address}"))?;
    Ok(Some(listener))
}

async fn shutdown_signal(trigger: watch::Sender<bool>) {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
    tracing::info!("shutting down");
    let _ = trigger.send(true);
}

/// Connections the kernel queues for the accept loop. tokio's default of 1,024 overflows when
/// thousands of clients connect at once, and a dropped SYN costs its client a second before it
/// retries; the kernel caps this at `net.core.somaxconn`.
const ACCEPT_BACKLOG: u32 = 65_535;

/// A host name is resolved (`localhost:8787`); the first address that binds is used.
pub async fn listen(address: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last_error = None;
    for address in tokio::net::lookup_host(address).await? {
        let socket = if address.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket
            .bind(address)
            .and_then(|()| socket.listen(ACCEPT_BACKLOG))
        {
            Ok(listener) => return Ok(listener),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no address to listen on")
    }))
}

pub async fn finish(server: ServerTask) -> anyhow::Result<()> {
    server
        .await
        .context("the server task failed")?
        .context("serving HTTP")
}

/// The longest request URI and the most header bytes a request may have (414 and 431 beyond).
/// (hyper itself answers a bare 414 from 64 KiB on.)
pub const MAX_URI_BYTES: usize = 60 * 1024;
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// `--max-connections` must leave descriptors for the catalog and the sources: a cap the
/// process cannot reach would let connections exhaust them instead.
pub fn connection_limits(
    args: &ServeArgs,
    descriptors: Option<u64>,
) -> anyhow::Result<svc_server::ConnectionLimits> {
    let usable = descriptors.map(|limit| {
        limit
            .saturating_sub(svc_server::RESERVED_DESCRIPTORS)
            .max(16)
    });
    let max_connections = match (args.max_connections, usable) {
        (Some(wanted), Some(usable)) if wanted > usable => anyhow::bail!(
            "--max-connections {wanted} is more than this process can open ({usable}: the \
             hard file-descriptor limit less {} for the catalog and sources); raise the hard \
             limit (`ulimit -Hn`, or LimitNOFILE= for a systemd service) or ask for fewer",
            svc_server::RESERVED_DESCRIPTORS
        ),
        (Some(wanted), _) => wanted,
        (None, Some(usable)) => usable,
        (None, None) => 1024,
    };
    Ok(svc_server::ConnectionLimits {
        head_timeout: args.head_timeout,
        max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
        write_timeout: args.write_timeout,
        // hyper's buffer for a request head: room for the largest head the limits above
        // answer with JSON, before hyper's own bare 431.
        max_head_bytes: 4 * (MAX_URI_BYTES + MAX_HEADER_BYTES),
    })
}
