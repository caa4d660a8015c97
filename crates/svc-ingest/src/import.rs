//! `--import FILE`: a JSON Lines file of Jetstream events. A thread reads batches of lines, a
//! thread a core parses and validates them, and the catalog writer commits them in the file's
//! order while the next are prepared. Each batch is committed with a cursor (byte
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
/// Room for a batch of typical lines, so that reading one seldom grows its buffer.
const BATCH_TEXT: usize = BATCH_LINES * 1024;
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

/// Lines read from the file, not yet parsed: the unit of work of a preparing thread.
struct RawBatch {
    /// The lines, one after another, each with its line end.
    text: String,
    /// Where each line ends in `text`.
    ends: Vec<usize>,
    /// The byte offset and line number just after the last line.
    offset: u64,
    line_number: u64,
}

/// How many threads parse and validate: one per core. Parsing is most of the reader's work, and
/// alone on one thread it kept a core busy while the catalog's writer left the other half idle.
fn preparing_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// Reads the file in batches of lines on this thread; preparing threads parse them, batch `i`
/// on thread `i % n`, and a forwarding thread takes their results back in the file's order.
fn read_batches(
    path: &Path,
    ingestor: &Ingestor,
    source: String,
    endpoint: String,
    start: u64,
    line_number: u64,
    sender: &mpsc::Sender<Result<Batch, ImportError>>,
) -> Result<(), ImportError> {
    let threads = preparing_threads();
    std::thread::scope(|scope| {
        let mut to_preparers = Vec::with_capacity(threads);
        let mut from_preparers = Vec::with_capacity(threads);
        for index in 0..threads {
            let (raw_sender, raw_receiver) = std::sync::mpsc::sync_channel::<RawBatch>(1);
            let (done_sender, done_receiver) = std::sync::mpsc::sync_channel::<Batch>(1);
            let (source, endpoint) = (source.clone(), endpoint.clone());
            std::thread::Builder::new()
                .name(format!("import-parse-{index}"))
                .spawn_scoped(scope, move || {
                    for raw in raw_receiver {
                        let batch = prepare_batch(path, ingestor, raw, &source, &endpoint);
                        if done_sender.send(batch).is_err() {
                            return;
                        }
                    }
                })
                .map_err(io_error(path))?;
            to_preparers.push(raw_sender);
            from_preparers.push(done_receiver);
        }
        std::thread::Builder::new()
            .name("import-forward".into())
            .spawn_scoped(scope, move || {
                // A preparer that hangs up before its turn was given no more batches, and
                // neither was any after it.
                for turn in (0..from_preparers.len()).cycle() {
                    let Ok(batch) = from_preparers[turn].recv() else {
                        return;
                    };
                    if sender.blocking_send(Ok(batch)).is_err() {
                        return;
                    }
                }
            })
            .map_err(io_error(path))?;
        read_lines(path, start, line_number, |turn, raw| {
            to_preparers[turn % threads].send(raw).is_ok()
        })
    })
}

/// Reads batches of lines from `start`, handing each with its number to `hand_over` until it
/// says stop or the file ends.
fn read_lines(
    path: &Path,
    start: u64,
    mut line_number: u64,
    mut hand_over: impl FnMut(usize, RawBatch) -> bool,
) -> Result<(), ImportError> {
    let mut file = std::fs::File::open(path).map_err(io_error(path))?;
    file.seek(SeekFrom::Start(start)).map_err(io_error(path))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut offset = start;
    for turn in 0.. {
        let mut text = String::with_capacity(BATCH_TEXT);
        let mut ends = Vec::with_capacity(BATCH_LINES);
        while ends.len() < BATCH_LINES {
            let read = reader.read_line(&mut text).map_err(io_error(path))?;
            if read == 0 {
                break;
            }
            offset += read as u64;
            line_number += 1;
            ends.push(text.len());
        }
        let finished = ends.len() < BATCH_LINES;
        if !ends.is_empty() {
            let raw = RawBatch {
                text,
                ends,
                offset,
                line_number,
            };
            if !hand_over(turn, raw) {
                return Ok(());
            }
        }
        if finished {
            break;
        }
    }
    Ok(())
}

/// Parses, validates and indexes one batch of lines.
fn prepare_batch(
    path: &Path,
    ingestor: &Ingestor,
    raw: RawBatch,
    source: &str,
    endpoint: &str,
) -> Batch {
    let mut changes = Vec::with_capacity(raw.ends.len());
    let mut summary = ImportSummary {
        lines: raw.ends.len() as u64,
        ..ImportSummary::default()
    };
    let first_line = raw.line_number + 1 - raw.ends.len() as u64;
    let starts = std::iter::once(0).chain(raw.ends.iter().copied());
    for ((line_number, start), end) in (first_line..).zip(starts).zip(&raw.ends) {
        let text = raw.text[start..*end].trim();
        if text.is_empty() {
            continue;
        }
        match parse_jetstream_line(text) {
            Ok(JetstreamLine::Commit(event)) => match ingestor.prepare(event) {
                Prepared::Change(change) => changes.push(change),
                Prepared::Invalid => summary.invalid += 1,
                Prepared::Ignored => summary.ignored += 1,
            },
            Ok(JetstreamLine::Other { .. } | JetstreamLine::Account { .. }) => summary.ignored += 1,
            Err(reason) => {
                summary.malformed += 1;
                tracing::warn!(
                    "{}:{line_number}: malformed line skipped: {reason}",
                    path.display()
                );
            }
        }
    }
    Batch {
        changes,
        cursor: CursorPosition {
            source: source.to_owned(),
            endpoint: endpoint.to_owned(),
            cursor: format!("{}:{}", raw.offset, raw.line_number),
            event_time_us: None,
        },
        summary,
        bytes_done: raw.offset,
    }
}
