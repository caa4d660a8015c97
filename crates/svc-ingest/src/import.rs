//! `--import FILE`: a JSON Lines file of Jetstream events. A thread reads batches of lines, a
//! thread a core parses and validates them, and the catalog writer commits them in the file's
//! order while the next are prepared. Each batch is committed with a cursor (byte
//! offset and line number), so an import interrupted by a crash resumes where it stopped, and
//! a file imported before (same size and modification time) is not read again. A line that
//! holds no event (not UTF-8, longer than a live event may be, not an event's JSON) is
//! skipped, counted and logged with its line number and byte offset.

use crate::firehose::MAX_MESSAGE_BYTES;
use crate::ingest::{Ingestor, Prepared};
use crate::jetstream::{JetstreamLine, parse_jetstream_line};
use futures_util::stream::{FuturesOrdered, StreamExt};
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use svc_catalog::{ApplyReport, CatalogError, CatalogWrite, Change, CursorPosition};
use tokio::sync::mpsc;

mod repository;

pub use repository::{RepositoryImport, RepositoryImportError, import_repository};

const BATCH_LINES: usize = 4096;
/// Room for a batch of typical lines, so that reading one seldom grows its buffer. A batch of
/// longer lines ends once it fills this, so that the batches in flight hold bounded memory.
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
    /// Changes the catalog's store refused for their content.
    pub refused: u64,
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

/// Imports of fewer bytes than this are applied batch by batch even into an empty catalog.
const BULK_FROM_BYTES: u64 = 256 << 10;

/// Imports one file; `progress(bytes_done, bytes_total)` is called after each committed batch.
pub async fn import_file(
    catalog: &dyn CatalogWrite,
    ingestor: &Ingestor,
    path: &Path,
    progress: impl Fn(u64, u64),
) -> Result<ImportSummary, ImportError> {
    let absolute = std::fs::canonicalize(path).map_err(io_error(path))?;
    let (endpoint, size) = file_identity(&absolute)?;
    let cursor_of = CursorOf {
        source: format!("import:{}", absolute.display()),
        endpoint,
    };
    let at = resume_point(catalog, &cursor_of).await?;
    let mut total = ImportSummary {
        resumed_from_line: at.line_number,
        ..ImportSummary::default()
    };
    if at.offset >= size && size > 0 {
        progress(size, size);
        return Ok(total);
    }
    let (sender, mut receiver) = mpsc::channel::<Result<Batch, ImportError>>(4);
    let start = ReadFrom { cursor_of, at };
    let reader = spawn_reader(ingestor.clone(), absolute, start, sender).map_err(io_error(path))?;
    // A large import into an empty catalog is a bulk load: staged, then merged in key order,
    // and seen by the change stream as one gap. A small one is applied as live events are,
    // each of its records a change a subscriber sees.
    let bulk = size.saturating_sub(at.offset) >= BULK_FROM_BYTES && catalog.begin_bulk().await?;
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

/// The byte offset and line number an earlier run of this file stopped at; the start when
/// there was none. A cursor stored for another version of the file is not reused: that file
/// starts over.
async fn resume_point(
    catalog: &dyn CatalogWrite,
    cursor_of: &CursorOf,
) -> Result<Position, ImportError> {
    let stored = catalog
        .cursor(cursor_of.source.clone())
        .await?
        .filter(|c| c.endpoint == cursor_of.endpoint);
    Ok(
        match stored.as_ref().and_then(|c| c.cursor.split_once(':')) {
            Some((o, l)) => Position {
                offset: o.parse().unwrap_or(0),
                line_number: l.parse().unwrap_or(0),
            },
            None => Position::default(),
        },
    )
}

/// What an import's cursors are stored as: its source (the file's path) and its endpoint (the
/// file's identity).
#[derive(Clone)]
struct CursorOf {
    source: String,
    endpoint: String,
}

/// A place in the file: the byte offset of a line's start, and the number of lines before it.
#[derive(Debug, Clone, Copy, Default)]
struct Position {
    offset: u64,
    line_number: u64,
}

/// Where the reader starts, and what it stores its cursors as.
struct ReadFrom {
    cursor_of: CursorOf,
    at: Position,
}

/// Starts the thread that reads and prepares the batches; a failure of its own is sent as the
/// last batch.
fn spawn_reader(
    ingestor: Ingestor,
    path: PathBuf,
    start: ReadFrom,
    sender: mpsc::Sender<Result<Batch, ImportError>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("import-reader".into())
        .spawn(move || {
            let outcome = read_batches(&path, &ingestor, start, &sender);
            if let Err(error) = outcome {
                let _ = sender.blocking_send(Err(error));
            }
        })
}

async fn stream_batches(
    catalog: &dyn CatalogWrite,
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
    metrics.count_report("import", report);
    metrics.count("import", "invalid", batch.invalid);
    metrics.count("import", "ignored", batch.ignored);
    metrics.malformed_events.inc_by(batch.malformed);
    total.lines += batch.lines;
    total.invalid += batch.invalid;
    total.ignored += batch.ignored;
    total.malformed += batch.malformed;
    total.applied += report.applied;
    total.refused += report.refused_total();
    total.stale += report.stale;
}

/// Lines read from the file, not yet parsed: the unit of work of a preparing thread.
struct RawBatch {
    /// The lines' bytes, one after another, each with its line end; a line skipped for its
    /// length has none.
    bytes: Vec<u8>,
    /// Where each line ends in `bytes`.
    ends: Vec<usize>,
    /// The lines skipped for their length: index in `ends`, and length in the file.
    too_long: Vec<(usize, u64)>,
    /// The byte offset and line number of the first line.
    start: u64,
    first_line: u64,
    /// The byte offset and line number just after the last line.
    offset: u64,
    line_number: u64,
}

/// One line of a batch: its number, where it starts in the file, and its bytes.
struct RawLine<'a> {
    number: u64,
    offset: u64,
    content: Content<'a>,
}

#[derive(Clone, Copy)]
enum Content<'a> {
    Bytes(&'a [u8]),
    /// Longer than one event may be: only its length in the file is known.
    TooLong(u64),
}

impl RawBatch {
    fn lines(&self) -> impl Iterator<Item = RawLine<'_>> {
        let (mut start, mut offset) = (0, self.start);
        let mut too_long = self.too_long.iter().peekable();
        self.ends.iter().enumerate().map(move |(index, &end)| {
            let (content, length) = match too_long.next_if(|(at, _)| *at == index) {
                Some(&(_, length)) => (Content::TooLong(length), length),
                None => {
                    let bytes = &self.bytes[start..end];
                    (Content::Bytes(bytes), bytes.len() as u64)
                }
            };
            let line = RawLine {
                number: self.first_line + index as u64,
                offset,
                content,
            };
            (start, offset) = (end, offset + length);
            line
        })
    }
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
    start: ReadFrom,
    sender: &mpsc::Sender<Result<Batch, ImportError>>,
) -> Result<(), ImportError> {
    let threads = preparing_threads();
    std::thread::scope(|scope| {
        let mut to_preparers = Vec::with_capacity(threads);
        let mut from_preparers = Vec::with_capacity(threads);
        for index in 0..threads {
            let (raw_sender, raw_receiver) = std::sync::mpsc::sync_channel::<RawBatch>(1);
            let (done_sender, done_receiver) = std::sync::mpsc::sync_channel::<Batch>(1);
            let cursor_of = start.cursor_of.clone();
            std::thread::Builder::new()
                .name(format!("import-parse-{index}"))
                .spawn_scoped(scope, move || {
                    for raw in raw_receiver {
                        let batch = prepare_batch(path, ingestor, raw, &cursor_of);
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
        read_lines(path, start.at, |turn, raw| {
            to_preparers[turn % threads].send(raw).is_ok()
        })
    })
}

/// Reads batches of lines from `start`, handing each with its number to `hand_over` until it
/// says stop or the file ends.
fn read_lines(
    path: &Path,
    start: Position,
    mut hand_over: impl FnMut(usize, RawBatch) -> bool,
) -> Result<(), ImportError> {
    let mut file = std::fs::File::open(path).map_err(io_error(path))?;
    file.seek(SeekFrom::Start(start.offset))
        .map_err(io_error(path))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut at = start;
    for turn in 0.. {
        let (raw, finished) = read_batch(&mut reader, at).map_err(io_error(path))?;
        at = Position {
            offset: raw.offset,
            line_number: raw.line_number,
        };
        if !raw.ends.is_empty() && !hand_over(turn, raw) {
            return Ok(());
        }
        if finished {
            break;
        }
    }
    Ok(())
}

/// Reads lines until the batch is full, in lines or in bytes, or the file ends; says which.
fn read_batch(reader: &mut impl BufRead, at: Position) -> std::io::Result<(RawBatch, bool)> {
    let mut raw = RawBatch {
        bytes: Vec::with_capacity(BATCH_TEXT),
        ends: Vec::with_capacity(BATCH_LINES),
        too_long: Vec::new(),
        start: at.offset,
        first_line: at.line_number + 1,
        offset: at.offset,
        line_number: at.line_number,
    };
    while raw.ends.len() < BATCH_LINES && raw.bytes.len() < BATCH_TEXT {
        if !read_line(reader, &mut raw)? {
            return Ok((raw, true));
        }
    }
    Ok((raw, false))
}

/// Adds the next line to the batch, or false at the end of the file. The bytes are checked
/// for UTF-8 later, on the preparing threads, so that one bad line spoils only itself. A line
/// longer than a live event may be is passed over in the reader's buffer-sized steps, never
/// held whole.
fn read_line(reader: &mut impl BufRead, raw: &mut RawBatch) -> std::io::Result<bool> {
    let before = raw.bytes.len();
    let most = MAX_MESSAGE_BYTES as u64 + 1; // with its line end
    let mut line = std::io::Read::take(&mut *reader, most);
    let mut read = line.read_until(b'\n', &mut raw.bytes)? as u64;
    if read == 0 {
        return Ok(false);
    }
    if read == most && raw.bytes.last() != Some(&b'\n') {
        raw.bytes.truncate(before);
        raw.bytes.shrink_to(BATCH_TEXT);
        read += reader.skip_until(b'\n')? as u64;
        raw.too_long.push((raw.ends.len(), read));
    }
    raw.ends.push(raw.bytes.len());
    raw.offset += read;
    raw.line_number += 1;
    Ok(true)
}

/// Parses, validates and indexes one batch of lines.
fn prepare_batch(path: &Path, ingestor: &Ingestor, raw: RawBatch, cursor_of: &CursorOf) -> Batch {
    let mut changes = Vec::with_capacity(raw.ends.len());
    let mut summary = ImportSummary {
        lines: raw.ends.len() as u64,
        ..ImportSummary::default()
    };
    for line in raw.lines() {
        match read_event(&line) {
            Ok(None) => {}
            Ok(Some(JetstreamLine::Commit(event))) => match ingestor.prepare(event) {
                Prepared::Change(change) => changes.push(change),
                Prepared::Invalid => summary.invalid += 1,
                Prepared::Ignored => summary.ignored += 1,
            },
            Ok(Some(JetstreamLine::Other { .. } | JetstreamLine::Account { .. })) => {
                summary.ignored += 1
            }
            Err(what) => {
                summary.malformed += 1;
                tracing::warn!(
                    "{}:{}: malformed line skipped (at byte {}): {what}",
                    path.display(),
                    line.number,
                    line.offset
                );
            }
        }
    }
    Batch {
        changes,
        cursor: CursorPosition {
            source: cursor_of.source.clone(),
            endpoint: cursor_of.endpoint.clone(),
            cursor: format!("{}:{}", raw.offset, raw.line_number),
            event_time: None,
        },
        summary,
        bytes_done: raw.offset,
    }
}

/// The event on a line, none for a blank line, or what is wrong with the line.
fn read_event(line: &RawLine<'_>) -> Result<Option<JetstreamLine>, String> {
    let bytes = match line.content {
        Content::Bytes(bytes) => bytes,
        Content::TooLong(length) => {
            return Err(format!(
                "longer than the {MAX_MESSAGE_BYTES} bytes one event may have ({length} bytes \
                 passed over)"
            ));
        }
    };
    let text = std::str::from_utf8(bytes).map_err(|error| {
        let at = line.offset + error.valid_up_to() as u64;
        format!("not UTF-8 text (the bytes at byte {at} are not UTF-8)")
    })?;
    // Some editors start a UTF-8 file with a byte-order mark.
    let text = match line.offset {
        0 => text.strip_prefix('\u{feff}').unwrap_or(text),
        _ => text,
    };
    let trimmed = text.trim_start();
    let lead = bytes.len() - trimmed.len();
    let trimmed = trimmed.trim_end();
    if trimmed.is_empty() {
        return Ok(None);
    }
    parse_jetstream_line(trimmed)
        .map(Some)
        .map_err(|reason| explain(trimmed, lead, reason))
}

const NOT_AN_EVENT: &str = "not a Jetstream event line (expected a JSON object with did, \
                            time_us, kind and, for a commit, commit)";

/// Says what is wrong with a line the parser refused, in the file's terms: the parser's words
/// where they name a field, a column where the JSON itself is broken, the field of the wrong
/// type where the JSON is sound.
fn explain(text: &str, lead: usize, reason: String) -> String {
    let detail = match reason.strip_prefix("not a JSON event: ") {
        None => Some(reason),
        Some(refusal) => match serde_json::from_str::<serde_json::Value>(text) {
            Err(error) => Some(broken_json(&error, lead)),
            Ok(value) => wrong_shape(&value).or_else(|| refused_json(refusal, lead)),
        },
    };
    match detail {
        Some(detail) => format!("{NOT_AN_EVENT}: {detail}"),
        None => NOT_AN_EVENT.to_owned(),
    }
}

/// How and where the JSON is broken, in serde_json's words but for its "ident" (a bare word
/// other than true, false and null).
fn broken_json(error: &serde_json::Error, lead: usize) -> String {
    let message = error.to_string();
    let (what, _) = split_position(&message);
    let what = match what {
        "expected ident" => "expected a value",
        what => what,
    };
    format!("not valid JSON: {what} at column {}", error.column() + lead)
}

/// serde_json's text without its position, and the column, counted in the parsed text.
fn split_position(message: &str) -> (&str, Option<usize>) {
    match message.rsplit_once(" at line ") {
        Some((what, at)) => {
            let column = at.rsplit_once("column ").and_then(|(_, c)| c.parse().ok());
            (what, column)
        }
        None => (message, None),
    }
}

/// The parser's refusal of sound JSON of the event's shape (a field given twice). Nothing
/// where it names only the parser's types.
fn refused_json(refusal: &str, lead: usize) -> Option<String> {
    let (what, column) = split_position(refusal);
    let at = column.map_or_else(String::new, |c| format!(" at column {}", c + lead));
    (!what.contains("struct")).then(|| format!("{what}{at}"))
}

/// What a field of an event holds.
#[derive(Clone, Copy)]
enum Expected {
    Text,
    Integer,
    Boolean,
    Object,
}

impl Expected {
    fn accepts(self, value: &serde_json::Value) -> bool {
        match self {
            Expected::Text => value.is_string(),
            Expected::Integer => value.is_i64(),
            Expected::Boolean => value.is_boolean(),
            Expected::Object => value.is_object(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Expected::Text => "a string",
            Expected::Integer => "a whole number (microseconds since 1970)",
            Expected::Boolean => "true or false",
            Expected::Object => "an object",
        }
    }
}

/// The fields the parser reads, each of which may also be absent or null.
const EVENT_FIELDS: [(&str, Expected); 5] = [
    ("did", Expected::Text),
    ("time_us", Expected::Integer),
    ("kind", Expected::Text),
    ("commit", Expected::Object),
    ("account", Expected::Object),
];
const COMMIT_FIELDS: [(&str, Expected); 5] = [
    ("rev", Expected::Text),
    ("operation", Expected::Text),
    ("collection", Expected::Text),
    ("rkey", Expected::Text),
    ("cid", Expected::Text),
];
const ACCOUNT_FIELDS: [(&str, Expected); 2] =
    [("active", Expected::Boolean), ("status", Expected::Text)];

/// Why sound JSON is not an event: not an object, or a field of the wrong type.
fn wrong_shape(value: &serde_json::Value) -> Option<String> {
    let Some(event) = value.as_object() else {
        return Some(format!("found {}", describe(value)));
    };
    let nested = |name: &str, fields: &[(&str, Expected)]| {
        let inner = event.get(name)?.as_object()?;
        wrong_field(inner, &format!("{name}."), fields)
    };
    wrong_field(event, "", &EVENT_FIELDS)
        .or_else(|| nested("commit", &COMMIT_FIELDS))
        .or_else(|| nested("account", &ACCOUNT_FIELDS))
}

fn wrong_field(
    object: &serde_json::Map<String, serde_json::Value>,
    prefix: &str,
    fields: &[(&str, Expected)],
) -> Option<String> {
    fields.iter().find_map(|&(name, expected)| {
        let value = object.get(name).filter(|v| !v.is_null())?;
        let wrong = !expected.accepts(value);
        wrong.then(|| {
            let (wanted, found) = (expected.name(), describe(value));
            format!("{prefix}{name} must be {wanted}, not {found}")
        })
    })
}

fn describe(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "true or false",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests;
