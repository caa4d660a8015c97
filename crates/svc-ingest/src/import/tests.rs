use super::*;
use std::sync::{Arc, Mutex, Once};
use svc_catalog::CatalogRead;
use svc_catalog::sqlite::SqliteCatalog;
use svc_spec::QuerySet;

/// A catalog file in a temporary directory, and the ingestor that feeds it.
struct Fixture {
    dir: tempfile::TempDir,
    catalog: SqliteCatalog,
    ingestor: Ingestor,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temporary directory");
        let queries = QuerySet::embedded();
        let catalog =
            SqliteCatalog::open(&dir.path().join("catalog.db"), queries.indexes().clone(), 1)
                .expect("catalog");
        let ingestor = Ingestor::new(Arc::new(queries), Arc::default());
        Fixture {
            dir,
            catalog,
            ingestor,
        }
    }

    /// Writes `content` to a file named `name` and imports it.
    async fn import(&self, name: &str, content: &[u8]) -> (ImportSummary, PathBuf) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).expect("write the file");
        let summary = import_file(&self.catalog, &self.ingestor, &path, |_, _| {})
            .await
            .expect("import");
        (summary, path)
    }

    async fn holds(&self, rkey: &str) -> bool {
        let uri = svc_syntax::AtUri::new(format!("at://did:plc:a/dev.svc.vocab/{rkey}"));
        let uri = uri.expect("an at-uri");
        self.catalog.get(uri).await.expect("get").is_some()
    }

    /// The stored resume cursor of an import: `offset:line`.
    async fn cursor(&self, path: &Path) -> String {
        let absolute = std::fs::canonicalize(path).expect("canonical path");
        let source = format!("import:{}", absolute.display());
        let stored = self.catalog.cursor(source).await.expect("cursor");
        stored.expect("a stored cursor").cursor
    }
}

/// One valid event line, with its line end: a vocabulary at `rkey`.
fn event(rkey: &str) -> String {
    format!(
        r#"{{"did":"did:plc:a","time_us":5,"kind":"commit","commit":{{"rev":"3kaaaaaaaaaa2","operation":"create","collection":"dev.svc.vocab","rkey":"{rkey}","record":{{"$type":"dev.svc.vocab","name":"colors","world":"open","occurredAt":"2026-01-01T00:00:00Z"}},"cid":"bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"}}}}{}"#,
        "\n"
    )
}

/// The warnings logged for the file at `path`, in line order: batches are prepared side by
/// side, so their warnings may come in any order.
fn warnings_for(path: &Path) -> Vec<String> {
    let prefix = format!("{}:", path.display());
    let log = warnings().lock().expect("log");
    let mut found: Vec<(u64, String)> = log
        .iter()
        .filter_map(|warning| {
            let rest = warning.strip_prefix(&prefix)?;
            let number = rest.split(':').next()?.parse().ok()?;
            Some((number, warning.clone()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, warning)| warning).collect()
}

fn warnings() -> &'static Mutex<Vec<String>> {
    static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        tracing::subscriber::set_global_default(Collector).expect("the only subscriber");
    });
    &LOG
}

/// Keeps the message of every warning, for the tests to read what a user would.
struct Collector;

impl tracing::Subscriber for Collector {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        warnings().lock().expect("log").push(message.0);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_is_not_utf8_is_skipped_and_the_lines_around_it_applied() {
    let fixture = Fixture::new();
    let first = event("3kaaaaaaaaaa2");
    let mut content = first.clone().into_bytes();
    content.extend_from_slice(b"{\"did\":\"did:plc:a\",\"name\":\"caf\xe9\"}\n");
    content.extend_from_slice(event("3kaaaaaaaaab2").as_bytes());
    warnings();
    let (summary, path) = fixture.import("latin1.jsonl", &content).await;
    assert_eq!((summary.lines, summary.applied), (3, 2), "{summary:?}");
    assert_eq!(summary.malformed, 1);
    assert!(fixture.holds("3kaaaaaaaaaa2").await);
    assert!(fixture.holds("3kaaaaaaaaab2").await);
    let bad_byte = first.len() + 30;
    assert_eq!(
        warnings_for(&path),
        [format!(
            "{}:2: malformed line skipped (at byte {}): not UTF-8 text (the bytes at byte \
             {bad_byte} are not UTF-8)",
            path.display(),
            first.len()
        )]
    );
    assert_eq!(fixture.cursor(&path).await, format!("{}:3", content.len()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_order_mark_at_the_start_of_the_file_is_accepted() {
    let fixture = Fixture::new();
    let content = format!(
        "\u{feff}{}{}",
        event("3kaaaaaaaaaa2"),
        event("3kaaaaaaaaab2")
    );
    warnings();
    let (summary, path) = fixture.import("bom.jsonl", content.as_bytes()).await;
    assert_eq!((summary.applied, summary.malformed), (2, 0), "{summary:?}");
    assert!(fixture.holds("3kaaaaaaaaaa2").await);
    assert!(warnings_for(&path).is_empty(), "{:?}", warnings_for(&path));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_longer_than_a_live_event_is_passed_over_and_counting_goes_on() {
    let fixture = Fixture::new();
    let mut content = event("3kaaaaaaaaaa2").into_bytes();
    let too_long_at = content.len();
    content.resize(too_long_at + MAX_MESSAGE_BYTES + 1, b'x');
    content.push(b'\n');
    // The longest line allowed: an event padded to the limit.
    let longest_at = content.len();
    let longest = event("3kaaaaaaaaab2");
    content.extend_from_slice(longest.trim_end().as_bytes());
    content.resize(longest_at + MAX_MESSAGE_BYTES, b' ');
    content.push(b'\n');
    content.extend_from_slice(event("3kaaaaaaaaac2").as_bytes());
    let broken_at = content.len();
    content.extend_from_slice(b"{not json\n");
    warnings();
    let (summary, path) = fixture.import("long.jsonl", &content).await;
    assert_eq!((summary.lines, summary.applied), (5, 3), "{summary:?}");
    assert_eq!(summary.malformed, 2);
    for rkey in ["3kaaaaaaaaaa2", "3kaaaaaaaaab2", "3kaaaaaaaaac2"] {
        assert!(fixture.holds(rkey).await, "{rkey}");
    }
    let file = path.display();
    let expected = [
        format!(
            "{file}:2: malformed line skipped (at byte {too_long_at}): longer than the \
             {MAX_MESSAGE_BYTES} bytes one event may have ({} bytes passed over)",
            MAX_MESSAGE_BYTES + 2
        ),
        format!(
            "{file}:5: malformed line skipped (at byte {broken_at}): {NOT_AN_EVENT}: not valid \
             JSON: key must be a string at column 2"
        ),
    ];
    assert_eq!(warnings_for(&path), expected);
    assert_eq!(fixture.cursor(&path).await, format!("{}:5", content.len()));
    // A second run of the same file starts where the first ended.
    let again = import_file(&fixture.catalog, &fixture.ingestor, &path, |_, _| {})
        .await
        .expect("import again");
    assert_eq!((again.resumed_from_line, again.lines), (5, 0), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_lines_are_counted_and_each_warning_says_what_to_fix() {
    let fixture = Fixture::new();
    let cases = [
        ("[]", "found an array"),
        ("  5", "found a number"),
        (
            "this is not json",
            "not valid JSON: expected a value at column 2",
        ),
        (
            "  {\"did\":",
            "not valid JSON: EOF while parsing a value at column 9",
        ),
        (
            r#"{"did":"did:plc:a","time_us":"5","kind":"commit"}"#,
            "time_us must be a whole number (microseconds since 1970), not a string",
        ),
        (
            r#"{"did":"did:plc:a","kind":"commit","commit":{"rev":3}}"#,
            "commit.rev must be a string, not a number",
        ),
        (r#"{"did":"did:plc:a","kind":"commit"}"#, "missing commit"),
        (r#"{"did":"alice","kind":"commit"}"#, "did: not a did"),
        (
            r#"{"did":"did:plc:a","did":"did:plc:b","kind":"commit"}"#,
            "duplicate field `did` at column 24",
        ),
        (
            r#"{"did":"did:plc:\u0061","kind":"c\u006fmmit","commit":{"rev":"3kaaaaaaaaaa2"}}"#,
            "missing commit.collection",
        ),
    ];
    let mut content = String::new();
    let mut expected = Vec::new();
    warnings();
    let path = fixture.dir.path().join("bad.jsonl");
    for (number, (line, detail)) in (1..).zip(cases) {
        expected.push(format!(
            "{}:{number}: malformed line skipped (at byte {}): {NOT_AN_EVENT}: {detail}",
            path.display(),
            content.len()
        ));
        content.push_str(line);
        content.push('\n');
    }
    content.push_str(&event("3kaaaaaaaaaa2"));
    let (summary, path) = fixture.import("bad.jsonl", content.as_bytes()).await;
    assert_eq!(summary.malformed, cases.len() as u64, "{summary:?}");
    assert_eq!(summary.applied, 1, "{summary:?}");
    assert_eq!(warnings_for(&path), expected);
}
