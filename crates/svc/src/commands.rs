//! The data commands of `svc`: each prints JSON on stdout; errors reach `main` as one line.

pub mod admin;
pub mod encounter;
pub mod identity;
pub mod oauth;
pub mod orchestrator;
pub mod publish;
pub mod record;
pub mod verify;
pub mod watch;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};

/// The HTTP client of a command (the ring TLS provider, the network's limit per request).
pub fn http() -> anyhow::Result<svc_atproto::Client> {
    Ok(svc_atproto::http_client(svc_atproto::REQUEST_TIMEOUT)?)
}

/// Runs a command's network calls: one thread, one runtime for the whole command, so that a
/// client's connection pool serves every call.
pub fn block_on<T>(
    command: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the command's runtime")?
        .block_on(command)
}

/// Passwords and tokens go to `url`: say so when nothing protects them on the way (plain HTTP
/// to anything but this machine).
pub fn warn_if_plain_http(flag: &str, url: &str) {
    let Ok(parsed) = svc_atproto::Url::parse(url) else {
        return;
    };
    let host = parsed.host_str().unwrap_or_default();
    if parsed.scheme() == "http" && !svc_atproto::is_loopback_host(host) {
        eprintln!(
            "warning: {flag} {url} is plain HTTP to another machine: passwords and tokens cross \
             the network unencrypted (use https://)"
        );
    }
}

/// The PLC directory: `$SVC_PLC_URL`, else the default.
pub fn plc_url() -> String {
    std::env::var("SVC_PLC_URL").unwrap_or_else(|_| crate::cli::DEFAULT_PLC.to_string())
}

pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value).context("encoding the output")?;
    text.push('\n');
    print_bytes(text.as_bytes())
}

/// Writes `bytes` to standard output; a reader that has gone is [`StdoutClosed`].
pub fn print_bytes(bytes: &[u8]) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        written => written.context("writing to standard output"),
    }
}

/// Standard output's reader has gone (`svc ... | head`): it has read all it wanted, which is
/// a normal end for a command-line tool, not a failure.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct StdoutClosed;

/// A usage error: printed as `error: ...`, exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A progress bar on a terminal; hidden otherwise (logs and summaries say the rest).
pub fn progress_bar(template: &str, message: String) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(message);
    bar
}

/// A verification runner that could not reach a verdict: exit status 2 like a usage error,
/// so that 1 means only "does not hold".
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RunnerError(pub String);
