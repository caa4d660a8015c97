//! Embeds every lexicon document under the repository's `lexicons/` folder, so that adding a
//! record kind is adding a file.
use std::{env, fs, path::Path};

fn collect(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path.display().to_string());
        }
    }
}

fn main() {
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("../../lexicons");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &mut files);
    let mut code = String::from("pub(crate) const EMBEDDED_DOCUMENTS: &[&str] = &[\n");
    for file in &files {
        println!("cargo:rerun-if-changed={file}");
        code.push_str(&format!("    include_str!({file:?}),\n"));
    }
    code.push_str("];\n");
    let out = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("embedded.rs");
    fs::write(out, code).expect("write embedded.rs");
}
