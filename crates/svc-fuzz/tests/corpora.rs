//! Replays every committed fuzz corpus file (`fuzz/corpus/<target>/`) through its target.

use std::path::Path;

#[test]
fn every_committed_corpus_file_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut replayed = 0;
    for (name, target) in svc_fuzz::TARGETS {
        let folder = root.join(name);
        let entries = std::fs::read_dir(&folder)
            .unwrap_or_else(|e| panic!("{}: {e} (every target has a corpus)", folder.display()));
        for entry in entries {
            let path = entry.expect("a corpus entry").path();
            let data = std::fs::read(&path).expect("a corpus file");
            target(&data);
            replayed += 1;
        }
    }
    assert!(
        replayed >= svc_fuzz::TARGETS.len(),
        "only {replayed} corpus files"
    );
}

/// The writer's corpus through a PostgreSQL catalog too (the target itself uses SQLite): the
/// engines must take the same records.
#[test]
fn the_writer_corpus_passes_on_postgres() {
    let Some(bench) = svc_fuzz::WriterBench::postgres() else {
        return;
    };
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/writer");
    for entry in std::fs::read_dir(&folder).expect("the writer's corpus") {
        let data = std::fs::read(entry.expect("a corpus entry").path()).expect("a corpus file");
        bench.drive(&data);
    }
}
