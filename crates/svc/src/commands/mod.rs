//! The data commands of `svc`: each prints JSON on stdout; errors reach `main` as one line.

pub mod encounter;
pub mod identity;
pub mod oauth;
pub mod orchestrator;
pub mod publish;
pub mod record;
pub mod verify;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// The PLC directory: `$SVC_PLC_URL`, else the default.
pub fn plc_url() -> String {
    std::env::var("SVC_PLC_URL").unwrap_or_else(|_| crate::cli::DEFAULT_PLC.to_string())
}

pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).context("encoding the output")?
    );
    Ok(())
}

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
