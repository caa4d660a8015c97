//! Judges records against the embedded lexicons, one JSON line `{"collection", "record"}` in,
//! one line out: `ok`, `invalid\t<why>` or `error\t<why>` (the input line itself is unusable).
//! The Rust side of `scripts/lexdiff/run`, which compares it with `@atproto/lexicon`.

use std::io::{self, BufRead, BufWriter, Write};

use serde_json::Value;
use svc_lexicon::Lexicons;

fn judge(line: &str) -> String {
    let input: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(e) => return format!("error\t{e}"),
    };
    let (Some(collection), Some(record)) = (
        input.get("collection").and_then(Value::as_str),
        input.get("record"),
    ) else {
        return "error\tneeds a string collection and a record".to_string();
    };
    match Lexicons::embedded().validate_record(collection, record) {
        Ok(()) => "ok".to_string(),
        // Keep the answer on one line whatever the message holds.
        Err(e) => format!(
            "invalid\t{}",
            e.to_string().replace(['\n', '\r', '\t'], " ")
        ),
    }
}

fn main() -> io::Result<()> {
    let stdin = io::stdin().lock();
    let mut out = BufWriter::new(io::stdout().lock());
    // Split on bytes, not `lines()`: a line that is not UTF-8 is an `error`, not the end.
    for line in stdin.split(b'\n') {
        let verdict = match String::from_utf8(line?) {
            Ok(text) => judge(text.trim_end_matches('\r')),
            Err(e) => format!("error\t{e}"),
        };
        writeln!(out, "{verdict}")?;
    }
    out.flush()
}
