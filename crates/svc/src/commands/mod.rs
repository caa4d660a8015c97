//! The data commands of `svc`: each prints JSON on stdout; errors reach `main` as one line.

pub mod encounter;
pub mod identity;
pub mod oauth;
pub mod orchestrator;
pub mod publish;

use anyhow::Context;

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
