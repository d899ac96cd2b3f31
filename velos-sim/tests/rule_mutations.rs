//! The litmus suite pins every rule of the model: for each deliberately wrong variant of
//! rules 1–13 ([`Mutation::ALL`]), some test under `velos-sim/litmus/` must fail (its verdict
//! changes, or it gets stuck without `allow stuck`), while with the real model every test
//! passes. A mutation that panics the emulator is a wiring bug, not a catch: panics are not
//! caught here.

use std::path::{Path, PathBuf};
use velos_sim::litmus::{RunOptions, collect_files, run_file};
use velos_sim::machine::Mutation;

/// A budget far above any test of the suite (the largest explores a few thousand states).
const MAX_STATES: usize = 200_000;

/// The instruction-level part of the suite (the library tests in `locks/` and `sc/` are
/// checked by `paper_suite.rs`; run unreduced under every mutation they would take minutes).
fn suite() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("litmus");
    let mut files = Vec::new();
    for part in ["paper", "loopback", "rules"] {
        files.extend(collect_files(&root.join(part)).expect("the litmus suite is readable"));
    }
    assert!(
        !files.is_empty(),
        "no .litmus files under {}",
        root.display()
    );
    files
}

fn short(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("litmus");
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn options(mutation: Option<Mutation>) -> RunOptions {
    RunOptions {
        mutation,
        max_states: MAX_STATES,
        ..RunOptions::default()
    }
}

/// The files that fail under `mutation`, with why. A file that cannot be run (budget) is
/// reported but does not count as a catch: it established no verdict.
fn failures(files: &[PathBuf], mutation: Option<Mutation>) -> (Vec<String>, Vec<String>) {
    let mut caught = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        match run_file(file, &options(mutation)) {
            Ok(report) if !report.pass => caught.push(format!(
                "{} ({} expect={} stuck={})",
                short(file),
                report.verdict,
                report.expect,
                report.stuck
            )),
            Ok(_) => {}
            Err(e) => errors.push(e.0),
        }
    }
    (caught, errors)
}

#[test]
fn the_model_passes_every_test() {
    let files = suite();
    let (failed, errors) = failures(&files, None);
    assert!(errors.is_empty(), "tests that could not run: {errors:#?}");
    assert!(
        failed.is_empty(),
        "tests failing on the real model: {failed:#?}"
    );
}

#[test]
fn every_mutation_is_caught() {
    let files = suite();
    let mut missed = Vec::new();
    for mutation in Mutation::ALL {
        let (caught, errors) = failures(&files, Some(mutation));
        eprintln!("{mutation:?}: caught by {} test(s)", caught.len());
        for c in &caught {
            eprintln!("    {c}");
        }
        for e in &errors {
            eprintln!("    (no verdict) {e}");
        }
        if caught.is_empty() {
            missed.push(mutation);
        }
    }
    assert!(
        missed.is_empty(),
        "mutations no litmus test catches: {missed:?}"
    );
}
