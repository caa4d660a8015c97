//! Where the import's reader thread spends its time, stage by stage, on one core:
//!
//!     cargo run --release -p svc-ingest --example import_stages -- FILE.jsonl [ROUNDS]
//!
//! Each stage repeats the ones before it, over every line held in memory (no disk reads), so
//! the differences between rows are what each stage adds. The best of ROUNDS (default 3) is
//! printed: the minimum is the least disturbed by the rest of the machine.

// The allocator the `svc` binary runs with, so that allocation costs match the import's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::BufRead;
use std::sync::Arc;
use std::time::{Duration, Instant};
use svc_ingest::{Ingestor, JetstreamLine, Prepared, parse_jetstream_line};
use svc_lexicon::Lexicons;
use svc_spec::{Json, QuerySet};

const STAGES: [&str; 5] = [
    "line parsed (event fields, record text)",
    "+ record parsed into its JSON tree",
    "+ record validated against its lexicon",
    "+ index keys extracted",
    "Ingestor::prepare (all of the above, as the import runs it)",
];

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: import_stages FILE.jsonl [ROUNDS]")?;
    let rounds: usize = match args.next() {
        Some(text) => text
            .parse()
            .map_err(|_| format!("ROUNDS: not a number: {text}"))?,
        None => 3,
    };
    let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    let lines = std::io::BufReader::new(file)
        .lines()
        .collect::<Result<Vec<String>, _>>()
        .map_err(|e| format!("{path}: {e}"))?;
    let queries = Arc::new(QuerySet::embedded());
    let ingestor = Ingestor::new(queries.clone(), Arc::default());
    let mut best = [Duration::MAX; STAGES.len()];
    for _ in 0..rounds {
        for (stage, best) in best.iter_mut().enumerate() {
            let started = Instant::now();
            std::hint::black_box(run_stage(stage, &lines, &queries, &ingestor));
            *best = (*best).min(started.elapsed());
        }
    }
    println!("{} lines, best of {rounds} rounds", lines.len());
    let per_line = |d: Duration| d.as_secs_f64() * 1e6 / lines.len().max(1) as f64;
    for (name, duration) in STAGES.iter().zip(best) {
        println!(
            "{name:<60} {:>8.0} ms {:>6.2} us/line",
            duration.as_secs_f64() * 1e3,
            per_line(duration)
        );
    }
    Ok(())
}

/// Runs the first `stage + 1` stages over every line; returns a figure that depends on all
/// of them, so that none is optimised away.
fn run_stage(stage: usize, lines: &[String], queries: &QuerySet, ingestor: &Ingestor) -> usize {
    let lexicons = Lexicons::embedded();
    let mut outcome = 0;
    for line in lines {
        let Ok(JetstreamLine::Commit(event)) = parse_jetstream_line(line) else {
            continue;
        };
        if stage == 4 {
            outcome += usize::from(matches!(ingestor.prepare(event), Prepared::Change(_)));
            continue;
        }
        let Some(text) = event.record_json.as_deref() else {
            continue;
        };
        outcome += text.len();
        if stage == 0 {
            continue;
        }
        let Ok(record) = Json::parse(text) else {
            continue;
        };
        if stage >= 2 && lexicons.validate_json(&event.collection, &record).is_err() {
            continue;
        }
        if stage >= 3 {
            outcome += queries
                .index_keys(&event.collection, &event.uri(), &record)
                .len();
        }
    }
    outcome
}
