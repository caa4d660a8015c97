//! `--import FILE`: a JSON Lines file of Jetstream events. A thread parses and validates while
//! the catalog writer commits the previous batch. Each batch is committed with a cursor (byte
//! offset and line number), so an import interrupted by a crash resumes where it stopped, and
//! a file imported before (same size and modification time) is not read again.

use crate::ingest::{Ingestor, Prepared};
use crate::jetstream::{JetstreamLine, parse_jetstream_line};
use futures_util::stream::{FuturesOrdered, StreamExt};
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use svc_catalog::{ApplyReport, Catalog, CatalogError, Change, CursorPosition};
use tokio::sync::mpsc;

const BATCH_LINES: usize = 4096;
const BATCHES_IN_FLIGHT: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The OS error is the source: a chain printer shows it once.
    #[error("{path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportSummary {
    pub lines: u64,
    pub applied: u64,
    /// Events older than what the catalog holds for their uri.
    pub stale: u64,
    pub invalid: u64,
    /// Out-of-family collections and non-commit events.
    pub ignored: u64,
    pub malformed: u64,
    /// Lines not read again because an earlier run had already imported them.
    pub resumed_from_line: u64,
}

struct Batch {
    changes: Vec<Change>,
    cursor: CursorPosition,
    summary: ImportSummary,
    bytes_done: u64,
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> ImportError + '_ {
    move |source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Identifies the file's content well enough to tell a re-run from a changed file.
fn file_identity(path: &Path) -> Result<(String, u64), ImportError> {
    let meta = std::fs::metadata(path).map_err(io_error(path))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Ok((format!("size={},mtime={modified}", meta.len()), meta.len()))
}

/// Imports one file; `progress(bytes_done, bytes_total)` is called after each committed batch.
pub async fn import_file(
    catalog: &dyn Catalog,
    ingestor: &Ingestor,
    path: &Path,
    progress: impl Fn(u64, u64),
) -> Result<ImportSummary, ImportError> {
    let absolute = std::fs::canonicalize(path).map_err(io_error(path))?;
    let source = format!("import:{}", absolute.display());
    let (endpoint, size) = file_identity(&absolute)?;
    let (mut offset, mut line_number) = (0u64, 0u64);
    // A cursor stored for another version of the file is not reused: that file starts over.
    let stored = catalog
        .cursor(source.clone())
        .await?
        .filter(|c| c.endpoint == endpoint);
    if let Some((o, l)) = stored.as_ref().and_then(|c| c.cursor.split_once(':')) {
        offset = o.parse().unwrap_or(0);
        line_number = l.parse().unwrap_or(0);
    }
    let mut total = ImportSummary {
        resumed_from_line: line_number,
        ..ImportSummary::default()
    };
    if offset >= size && size > 0 {
        progress(size, size);
        return Ok(total);
    }
    let (sender, mut receiver) = mpsc::channel::<Result<Batch, ImportError>>(4);
    let reader_ingestor = ingestor.clone();
    let reader_path = absolute.clone();
    let reader = std::thread::Builder::new()
        .name("import-reader".into())
        .spawn(move || {
            let outcome = read_batches(
                &reader_path,
                &reader_ingestor,
                source,
                endpoint,
                offset,
                line_number,
                &sender,
            );
            if let Err(error) = outcome {
                let _ = sender.blocking_send(Err(error));
            }
        })
        .map_err(io_error(path))?;
    // Into an empty catalog, the import is a bulk load: staged, then merged in key order.
    let bulk = catalog.begin_bulk().await?;
    let mut last_cursor = None;
    let streamed = stream_batches(
        catalog,
        ingestor,
        &mut receiver,
        &mut total,
        &mut last_cursor,
        |done| progress(done, size),
    )
    .await;
    // A failed import still merges what it staged, with the cursor that covers exactly that.
    if bulk {
        let report = catalog.finish_bulk(last_cursor).await?;
        account(ingestor, &mut total, &report, &ImportSummary::default());
    }
    streamed?;
    let _ = reader.join();
    Ok(total)
}

async fn stream_batches(
    catalog: &dyn Catalog,
    ingestor: &Ingestor,
    receiver: &mut mpsc::Receiver<Result<Batch, ImportError>>,
    total: &mut ImportSummary,
    last_cursor: &mut Option<CursorPosition>,
    progress: impl Fn(u64),
) -> Result<(), ImportError> {
    // Several batches in flight let the writer merge them into one commit: with random
    // index keys, each commit rewrites most index pages, so fewer, larger commits win.
    let mut in_flight = FuturesOrdered::new();
    let mut reading = true;
    while reading || !in_flight.is_empty() {
        tokio::select! {
            Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                let (report, summary, cursor, bytes_done): (ApplyReport, ImportSummary, CursorPosition, u64) = done?;
                account(ingestor, total, &report, &summary);
                *last_cursor = Some(cursor);
                progress(bytes_done);
            }
            batch = receiver.recv(), if reading && in_flight.len() < BATCHES_IN_FLIGHT => match batch {
                Some(batch) => {
                    let Batch { changes, cursor, summary, bytes_done } = batch?;
                    let apply = catalog.apply(changes, Some(cursor.clone()));
                    in_flight.push_back(async move {
                        Ok::<_, ImportError>((apply.await?, summary, cursor, bytes_done))
                    });
                }
                None => reading = false,
            },
        }
    }
    Ok(())
}

fn account(
    ingestor: &Ingestor,
    total: &mut ImportSummary,
    report: &ApplyReport,
    batch: &ImportSummary,
) {
    let metrics = ingestor.metrics();
    metrics.count("import", "applied", report.applied);
    metrics.count("import", "stale", report.stale);
    metrics.count("import", "invalid", batch.invalid);
    metrics.count("import", "ignored", batch.ignored);
    metrics.malformed_events.inc_by(batch.malformed);
    total.lines += batch.lines;
    total.invalid += batch.invalid;
    total.ignored += batch.ignored;
    total.malformed += batch.malformed;
    total.applied += report.applied;
    total.stale += report.stale;
}

fn read_batches(
    path: &Path,
    ingestor: &Ingestor,
    source: String,
    endpoint: String,
    start: u64,
    mut line_number: u64,
    sender: &mpsc::Sender<Result<Batch, ImportError>>,
) -> Result<(), ImportError> {
    let mut file = std::fs::File::open(path).map_err(io_error(path))?;
    file.seek(SeekFrom::Start(start)).map_err(io_error(path))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut offset = start;
    let mut line = String::new();
    loop {
        let mut changes = Vec::with_capacity(BATCH_LINES);
        let mut summary = ImportSummary::default();
        let mut finished = false;
        while summary.lines < BATCH_LINES as u64 {
            line.clear();
            let read = reader.read_line(&mut line).map_err(io_error(path))?;
            if read == 0 {
                finished = true;
                break;
            }
            offset += read as u64;
            line_number += 1;
            summary.lines += 1;
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            match parse_jetstream_line(text) {
                Ok(JetstreamLine::Commit(event)) => match ingestor.prepare(event) {
                    Prepared::Change(change) => changes.push(change),
                    Prepared::Invalid => summary.invalid += 1,
                    Prepared::Ignored => summary.ignored += 1,
                },
                Ok(JetstreamLine::Other { .. } | JetstreamLine::Account { .. }) => {
                    summary.ignored += 1
                }
                Err(reason) => {
                    summary.malformed += 1;
                    tracing::warn!(
                        "{}:{line_number}: malformed line skipped: {reason}",
                        path.display()
                    );
                }
            }
        }
        if summary.lines > 0 {
            let cursor = CursorPosition {
                source: source.clone(),
                endpoint: endpoint.clone(),
                cursor: format!("{offset}:{line_number}"),
                event_time_us: None,
            };
            let batch = Batch {
                changes,
                cursor,
                summary,
                bytes_done: offset,
            };
            if sender.blocking_send(Ok(batch)).is_err() {
                return Ok(());
            }
        }
        if finished {
            return Ok(());
        }
    }
}
