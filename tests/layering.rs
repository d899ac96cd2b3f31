//! Architecture Invariant checks: the crates depend on each other only as ARCHITECTURE.md
//! says (read from `cargo metadata` and `cargo tree`), and no two files of one folder
//! import each other in a circle (read from their `crate::` and `super::` paths).

mod circles;
mod source_files;

use std::collections::BTreeSet;
use std::process::Command;

/// The workspace's crates, lowest layer first: a crate may depend (as a normal, build or
/// dev-dependency) only on crates of a lower rank.
const RANKS: &[(&str, u8)] = &[
    ("velos-rdma", 0),
    ("velos-store", 0),
    ("velos-sim", 1),
    ("velos-core", 1),
    ("velos-testkit", 2),
    ("velos", 2),
    ("velos-bench", 3),
    ("velos-cli", 4),
];

/// What the library a service embeds never pulls in, however indirectly: CLI, plotting,
/// progress-bar, benchmark and baseline crates, and the workspace's own non-library crates.
const NOT_IN_THE_LIBRARY: &[&str] = &[
    "clap",
    "plotters",
    "indicatif",
    "omnipaxos",
    "omnipaxos_storage",
    "cpu-time",
    "criterion",
    "dhat",
    "ctrlc",
    "anyhow",
    "velos-testkit",
    "velos-bench",
    "velos-cli",
];

fn cargo(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn metadata() -> serde_json::Value {
    let text = cargo(&[
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
        "--offline",
    ]);
    serde_json::from_str(&text).expect("metadata is JSON")
}

/// Package `name`'s entry in `cargo metadata`.
fn package<'a>(metadata: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("package {name} in the workspace"))
}

/// Package `name`'s direct dependencies of every kind: `(name, kind)`, kind `normal`,
/// `dev` or `build`.
fn dependencies(metadata: &serde_json::Value, name: &str) -> BTreeSet<(String, String)> {
    package(metadata, name)["dependencies"]
        .as_array()
        .expect("dependencies")
        .iter()
        .map(|d| {
            let kind = d["kind"].as_str().unwrap_or("normal");
            (d["name"].as_str().expect("name").to_string(), kind.into())
        })
        .collect()
}

fn rank(name: &str) -> Option<u8> {
    RANKS.iter().find(|(n, _)| *n == name).map(|&(_, r)| r)
}

#[test]
fn every_arrow_between_crates_points_down() {
    let metadata = metadata();
    let members: BTreeSet<&str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| p["name"].as_str().expect("name"))
        .collect();
    let ranked: BTreeSet<&str> = RANKS.iter().map(|(n, _)| *n).collect();
    assert_eq!(members, ranked, "every member has its layer in RANKS");
    let mut upward = Vec::new();
    for &(name, r) in RANKS {
        for (dep, kind) in dependencies(&metadata, name) {
            if let Some(d) = rank(&dep).filter(|&d| d >= r) {
                upward.push(format!("{name} (rank {r}) -> {dep} (rank {d}, {kind})"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "arrows that do not point down: {upward:#?}"
    );
}

#[test]
fn the_engine_builds_the_programming_model_alone() {
    let metadata = metadata();
    let core: BTreeSet<String> = dependencies(&metadata, "velos-core")
        .into_iter()
        .filter(|(_, kind)| kind == "normal")
        .map(|(name, _)| name)
        .collect();
    // velos-core depends on velos-rdma's types only: never on the emulator or a backend ...
    assert!(core.contains("velos-rdma"));
    assert!(
        core.iter()
            .all(|d| d == "velos-rdma" || !d.starts_with("velos")),
        "velos-core: {core:?}"
    );
    // ... and builds the programming model alone: not velos-rdma's default features (the
    // in-process backend, the lock library) nor any other.
    let rdma_dep = package(&metadata, "velos-core")["dependencies"]
        .as_array()
        .expect("dependencies")
        .iter()
        .find(|d| d["name"] == "velos-rdma" && d["kind"].is_null())
        .expect("velos-core depends on velos-rdma");
    assert_eq!(
        rdma_dep["uses_default_features"], false,
        "velos-core builds no backend: {rdma_dep}"
    );
    assert_eq!(
        rdma_dep["features"].as_array().map(Vec::len),
        Some(0),
        "velos-core asks for no velos-rdma feature: {rdma_dep}"
    );
}

/// The packages `package` pulls in as normal dependencies, however indirectly.
fn normal_closure(package: &str, features: &[&str]) -> BTreeSet<String> {
    let mut args = vec![
        "tree", "-p", package, "-e", "normal", "--prefix", "none", "--format", "{p}",
        // Not `--offline`: a feature's dependencies (the verbs backend's bindgen, say) are
        // in no cache until something fetched them, and this test must pass on a machine
        // that never built that feature. `--locked` keeps it to Cargo.lock's versions.
        "--locked",
    ];
    args.extend(features);
    cargo(&args)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_library_a_service_embeds_is_lean() {
    for features in [&[][..], &["--features", "verbs"]] {
        let closure = normal_closure("velos", features);
        assert!(closure.contains("velos-core"), "{closure:?}");
        let pulled: Vec<&&str> = NOT_IN_THE_LIBRARY
            .iter()
            .filter(|c| closure.contains(**c))
            .collect();
        assert!(
            pulled.is_empty(),
            "`cargo tree -p velos -e normal {features:?}` pulls {pulled:?}"
        );
    }
    // The test kit is apart from what runs, too.
    let testkit = normal_closure("velos-testkit", &[]);
    assert!(!testkit.contains("velos"), "velos-testkit: {testkit:?}");
    for forbidden in ["clap", "plotters", "indicatif", "omnipaxos"] {
        assert!(
            !testkit.contains(forbidden),
            "velos-testkit pulls {forbidden}"
        );
    }
}

#[test]
fn no_two_files_of_a_folder_import_each_other_in_a_circle() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for crate_src in [
        "src",
        "velos-rdma/src",
        "velos-sim/src",
        "velos-core/src",
        "velos-store/src",
        "velos-testkit/src",
        "benches/src",
        "velos-cli/src",
    ] {
        for circle in circles::circles(&root.join(crate_src)) {
            let place = format!("{crate_src}/{}", circle.folder);
            if !circles::ALLOWED
                .iter()
                .any(|(p, files, _)| *p == place && *files == circle.files)
            {
                found.push(format!("{place}: {:?}", circle.files));
            }
        }
    }
    assert!(
        found.is_empty(),
        "circles between the files of a folder: {found:#?}"
    );
}

/// The circle check finds circles: two files of a scratch crate that import each other
/// (and not the third, which only its unit tests tie to them).
#[test]
fn the_circle_check_finds_a_planted_circle() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).expect("mkdir");
    std::fs::write(src.join("lib.rs"), "mod a;\n").expect("write");
    std::fs::write(src.join("a/mod.rs"), "mod x;\nmod y;\nmod z;\n").expect("write");
    std::fs::write(src.join("a/x.rs"), "use super::{y::Y, z};\npub struct X;\n").expect("write");
    std::fs::write(
        src.join("a/y.rs"),
        "use crate::a::{x::X, z};\npub struct Y;\n",
    )
    .expect("write");
    let z = "// use super::x;\npub struct Z;\n#[cfg(all(test, unix))]\nmod tests {\n    use crate::a::x::X;\n}\n";
    std::fs::write(src.join("a/z.rs"), z).expect("write");
    let circles = circles::circles(&src);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert_eq!(circles[0].folder, "a");
    assert_eq!(circles[0].files, ["x", "y"]);
}
