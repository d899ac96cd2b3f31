//! ARCHITECTURE.md's code map stays true file by file: every source file of every crate
//! (its `src/`, `tests/`, `benches/`, and the root's `examples/`) is named in its crate's
//! section, in a paragraph or bullet that also names the file's folder (`mem/` for
//! `src/mem/task.rs`). Unit-test files (`tests.rs`) and module roots (`mod.rs`) count
//! through their folder.

mod source_files;

use source_files::rust_files;
use std::path::Path;

/// Each crate's folder and the heading of its section.
const SECTIONS: &[(&str, &str)] = &[
    ("velos-rdma", "### `velos-rdma/`"),
    ("velos-sim", "### `velos-sim/`"),
    ("velos-core", "### `velos-core/`"),
    ("velos-store", "### `velos-store/`"),
    ("", "### The library `velos`"),
    ("velos-testkit", "### `velos-testkit/`"),
    ("benches", "### `benches/`"),
    ("velos-cli", "### `velos-cli/`"),
];

/// The text of the section under `heading`, up to the next `###` or `##` heading.
fn section<'a>(map: &'a str, heading: &str) -> &'a str {
    let start = map
        .find(heading)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has a section {heading}"));
    let rest = &map[start + heading.len()..];
    let end = rest.find("\n##").unwrap_or(rest.len());
    &rest[..end]
}

/// The paragraphs and top-level bullets of a section.
fn blocks(section: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for line in section.lines() {
        if line.trim().is_empty() || line.starts_with("- ") {
            out.push(String::new());
        }
        let block = out.last_mut().expect("one block at least");
        block.push_str(line);
        block.push('\n');
    }
    out
}

/// Files of `crate_dir` the section does not name (paths relative to the crate).
fn unmapped(root: &Path, crate_dir: &str, section: &str) -> Vec<String> {
    let base = root.join(crate_dir);
    let mut files = Vec::new();
    for sub in ["src", "tests", "benches", "examples"] {
        if crate_dir.is_empty() && sub == "benches" {
            continue; // the root's benches/ is the velos-bench crate
        }
        rust_files(&base.join(sub), &mut files);
    }
    let blocks = blocks(section);
    let mut missing = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&base).expect("under the crate");
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let name = parts.last().expect("a file name").clone();
        // The file's own name, or for a module root or unit tests its folder's.
        let (needle, folder) = match name.as_str() {
            "mod.rs" | "tests.rs" | "lib.rs" | "main.rs" if parts.len() > 2 => (
                format!("{}/", parts[parts.len() - 2]),
                parts.get(parts.len().wrapping_sub(3)).cloned(),
            ),
            "mod.rs" | "tests.rs" | "lib.rs" | "main.rs" => continue,
            _ => (name.clone(), parts.get(parts.len() - 2).cloned()),
        };
        // Directly under src/, tests/…: the name alone; deeper: with its folder.
        let folder =
            folder.filter(|f| !["src", "tests", "benches", "examples"].contains(&f.as_str()));
        let named = blocks.iter().any(|b| {
            b.contains(&needle) && folder.as_ref().is_none_or(|f| b.contains(&format!("{f}/")))
        });
        if !named {
            missing.push(rel.display().to_string());
        }
    }
    missing
}

#[test]
fn every_source_file_is_on_the_code_map() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut missing = Vec::new();
    for &(crate_dir, heading) in SECTIONS {
        for file in unmapped(root, crate_dir, section(&map, heading)) {
            missing.push(format!("{crate_dir}/{file}"));
        }
    }
    assert!(
        missing.is_empty(),
        "files ARCHITECTURE.md's code map does not name: {missing:#?}"
    );
}

/// The check fires: a file the section does not name is reported, and one named with its
/// folder is not.
#[test]
fn an_unnamed_file_is_reported() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let src = dir.path().join("k/src");
    std::fs::create_dir_all(src.join("mem")).expect("mkdir");
    for f in [
        "lib.rs",
        "mem/mod.rs",
        "mem/task.rs",
        "mem/worker.rs",
        "top.rs",
    ] {
        std::fs::write(src.join(f), "").expect("write");
    }
    let section = "- `src/mem/` — the backend: `task.rs` (a task).\n- `top.rs` — the top.\n\
                   - `worker.rs` — named, but not with its folder.\n";
    let missing = unmapped(dir.path(), "k", section);
    assert_eq!(missing, ["src/mem/worker.rs"]);
}
