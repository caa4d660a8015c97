//! Checkpoints of a large WAL, on a thread and connection of their own so that the writer goes
//! on committing meanwhile: after a bulk load, which grows the WAL without checkpoints, and at
//! start (a process stopped before that checkpoint ended). Until one ends, the load is as
//! durable as any commit in WAL mode with `synchronous = NORMAL`.

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What the checkpoint follows, for its log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    Start,
    BulkLoad,
}

pub(crate) fn spawn(path: PathBuf, after: After) {
    let spawned = std::thread::Builder::new()
        .name("catalog-checkpoint".into())
        .spawn(move || run(&path, after));
    if let Err(error) = spawned {
        // The writer's automatic checkpoints will do it, in smaller steps.
        tracing::warn!("catalog checkpoint not started: {error}");
    }
}

fn run(path: &Path, after: After) {
    let label = match after {
        After::Start => "start",
        After::BulkLoad => "the bulk load",
    };
    let started = Instant::now();
    let outcome = Connection::open(path).and_then(|conn| {
        conn.busy_timeout(Duration::from_secs(30))?;
        // PASSIVE copies what it can without waiting for anyone; TRUNCATE then copies what
        // was committed meanwhile, waits for readers of older frames, and gives the WAL's
        // disk space back.
        let frames: i64 = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))?;
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
        Ok((frames, busy))
    });
    let seconds = started.elapsed().as_secs_f64();
    match outcome {
        // A start with a short WAL is not worth a line.
        Ok((_, 0)) if after == After::Start && seconds < 0.1 => {}
        Ok((frames, 0)) => {
            tracing::info!(
                frames,
                "catalog checkpointed after {label} in {seconds:.1}s"
            )
        }
        // Readers held the last step back; automatic checkpoints finish the job.
        Ok((frames, _)) => tracing::info!(
            frames,
            "catalog checkpoint after {label} copied the WAL in {seconds:.1}s; truncating it is left for later (busy)"
        ),
        Err(error) => tracing::warn!("catalog checkpoint after {label} failed: {error}"),
    }
}
