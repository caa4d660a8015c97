//! Writes a repository export (`getRepo`'s CAR) for the memory benchmark of whole reads
//! (`bench/exports.sh`): `export_bench OUT.car PATHS BYTES same|distinct` holds PATHS records
//! of the vocabulary kind with a description of BYTES, all naming one block (`same`) or each
//! its own (`distinct`).

use svc_repo::author::{Repository, SigningKey, Write};
use svc_repo::crypto::Curve;
use svc_repo::dagcbor::Cbor;

fn record(bytes: usize, n: usize) -> Cbor {
    let mut description = format!("{n} ");
    description.extend(std::iter::repeat_n(
        'd',
        bytes.saturating_sub(description.len()),
    ));
    Cbor::Map(vec![
        ("name".into(), Cbor::Text(format!("export-{n}"))),
        ("$type".into(), Cbor::Text("dev.svc.vocab".into())),
        ("world".into(), Cbor::Text("open".into())),
        (
            "occurredAt".into(),
            Cbor::Text("2026-01-01T00:00:00Z".into()),
        ),
        ("description".into(), Cbor::Text(description)),
    ])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, out, paths, bytes, shape] = args.as_slice() else {
        eprintln!("usage: export_bench OUT.car PATHS BYTES same|distinct");
        std::process::exit(2);
    };
    let (Ok(paths), Ok(bytes)) = (paths.parse::<usize>(), bytes.parse::<usize>()) else {
        eprintln!("export_bench: PATHS and BYTES are numbers");
        std::process::exit(2);
    };
    let same = shape == "same";
    let did = svc_syntax::Did::new(format!("did:plc:export{paths}x{bytes}{shape}")).expect("a DID");
    let key = SigningKey::from_seed(Curve::K256, b"the export benchmark's key");
    let writes: Vec<Write> = (0..paths)
        .map(|i| {
            let record = record(bytes, if same { 0 } else { i });
            Write::create("dev.svc.vocab", &format!("r{i:08}"), record)
        })
        .collect();
    let mut repository = Repository::new(did, key);
    repository.commit(&writes).expect("a commit");
    let car = repository.car().expect("an export");
    std::fs::write(out, &car).expect("the export written");
    println!("{out}: {paths} paths, {} bytes", car.len());
}
