//! What the indexer loads besides the live source: the files given to `--import` (JSON Lines
//! and repository exports) and the `--backfill`, each with its progress and its summary.

use crate::cli::ServeArgs;
use crate::commands::progress_bar;
use anyhow::Context;
use std::path::Path;
use svc_catalog::Catalog;
use svc_ingest::{
    BackfillPeers, Ingestor, RepositoryImportError, Resync, import_file, import_repository,
    run_backfill,
};
use tokio::sync::watch;

/// Runs the imports one after another; `false` when the process was told to stop meanwhile.
pub(crate) async fn run_imports(
    args: &ServeArgs,
    catalog: &dyn Catalog,
    ingestor: &Ingestor,
    stopped: &mut watch::Receiver<bool>,
) -> anyhow::Result<bool> {
    let plc = (args.verify == "all").then_some(args.plc_url.as_str());
    for path in &args.imports {
        let is_repository = path.extension().is_some_and(|ext| ext == "car");
        tokio::select! {
            outcome = import_one(catalog, ingestor, path), if !is_repository => outcome?,
            outcome = import_repository_file(catalog, ingestor, path, plc, args.network_reach()), if is_repository => outcome?,
            _ = stopped.wait_for(|stop| *stop) => return Ok(false),
        }
    }
    Ok(!*stopped.borrow())
}

/// A backfill that cannot list repositories is reported, not fatal: the live stream goes on.
/// A storage failure still ends the process.
pub(crate) fn fail_on_storage_error(outcome: anyhow::Result<()>) -> anyhow::Result<()> {
    let Err(error) = outcome else {
        return Ok(());
    };
    let storage = error.chain().any(|e| {
        matches!(
            e.downcast_ref::<svc_ingest::BackfillError>(),
            Some(svc_ingest::BackfillError::Catalog(_))
        )
    });
    if storage {
        return Err(error);
    }
    tracing::error!("backfill failed, following the live source without it: {error:#}");
    Ok(())
}

/// A repository export (`.car`): verified unless `plc` is `None`, then made the catalog's
/// records of that repository.
async fn import_repository_file(
    catalog: &dyn Catalog,
    ingestor: &Ingestor,
    path: &Path,
    plc: Option<&str>,
    reach: svc_atproto::Reach,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let done = match import_repository(catalog, ingestor, path, plc, reach).await {
        Ok(done) => done,
        // A repository that does not verify is refused whole, and the rest goes on.
        Err(error @ RepositoryImportError::Unverified { .. }) => {
            tracing::error!("import refused: {error}");
            eprintln!("import refused: {error}");
            return Ok(());
        }
        Err(error) => return Err(error).context("importing a repository"),
    };
    let verified = if plc.is_some() {
        "verified"
    } else {
        "not verified (--verify none)"
    };
    eprintln!(
        "import {}: repository {} at {}, {verified}: {} family records, {} applied, {} stale, {} invalid in {:.1}s",
        path.display(),
        done.did,
        done.rev,
        done.records,
        done.report.applied,
        done.report.stale,
        done.invalid,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn import_one(catalog: &dyn Catalog, ingestor: &Ingestor, path: &Path) -> anyhow::Result<()> {
    let bar = progress_bar(
        "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        format!("importing {}", path.display()),
    );
    let started = std::time::Instant::now();
    let summary = import_file(catalog, ingestor, path, |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })
    .await
    .context("importing")?;
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    if summary.lines == 0 && summary.resumed_from_line > 0 {
        eprintln!(
            "import {}: already imported ({} lines); nothing to do",
            path.display(),
            summary.resumed_from_line
        );
    } else {
        eprintln!(
            "import {}: {} lines, {} applied, {} stale, {} invalid, {} ignored, {} malformed, {} refused in {seconds:.1}s ({:.0} lines/s)",
            path.display(),
            summary.lines,
            summary.applied,
            summary.stale,
            summary.invalid,
            summary.ignored,
            summary.malformed,
            summary.refused,
            summary.lines as f64 / seconds.max(1e-9),
        );
    }
    Ok(())
}

/// Backfills `collections` from the server `peers` names, with a progress bar and a summary.
pub(crate) async fn backfill(
    catalog: &dyn Catalog,
    resync: &Resync,
    peers: BackfillPeers<'_>,
    collections: &[String],
) -> anyhow::Result<()> {
    let url = peers.server;
    let bar = progress_bar(
        "{msg} [{bar:40}] {pos}/{len} repositories eta {eta}",
        format!("backfilling from {url}"),
    );
    let started = std::time::Instant::now();
    tracing::info!(%url, "backfill started");
    let summary = run_backfill(catalog, resync, peers, collections, |done, total| {
        bar.set_length(total);
        bar.set_position(done);
        if done % 100 == 0 || done == total {
            tracing::info!("backfill: {done}/{total} repositories");
        }
    })
    .await
    .with_context(|| format!("backfilling from {url}"))?;
    bar.finish_and_clear();
    tracing::info!(
        repositories = summary.repositories,
        records = summary.records,
        applied = summary.applied,
        stale = summary.stale,
        invalid = summary.invalid,
        failed = summary.failed,
        waiting = summary.waiting,
        "backfill finished in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
