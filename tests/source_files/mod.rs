//! The Rust files under a folder, for the checks that read the sources as text.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively, in a stable order; nothing if `dir` does not
/// exist.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.map(|e| e.expect("an entry").path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
