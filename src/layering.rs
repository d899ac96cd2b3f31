//! Architecture Invariant check: the crates depend on each other only as ARCHITECTURE.md
//! says, read from `cargo metadata`.

use std::collections::BTreeSet;

/// Package `name`'s entry in `cargo metadata`.
fn package<'a>(metadata: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("package {name} in the workspace"))
}

fn dependencies(metadata: &serde_json::Value, name: &str) -> BTreeSet<String> {
    package(metadata, name)["dependencies"]
        .as_array()
        .expect("dependencies")
        .iter()
        .map(|d| d["name"].as_str().expect("name").to_string())
        .collect()
}

#[test]
fn crates_are_layered() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let core = dependencies(&metadata, "velos-core");
    let rdma = dependencies(&metadata, "velos-rdma");
    let sim = dependencies(&metadata, "velos-sim");
    // velos-core depends on velos-rdma's types only: never on the emulator or the facade.
    assert!(core.contains("velos-rdma"));
    assert!(
        !core.contains("velos-sim") && !core.contains("velos"),
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
    // velos-rdma is the bottom layer.
    assert!(
        rdma.iter().all(|d| !d.starts_with("velos")),
        "velos-rdma: {rdma:?}"
    );
    // velos-sim knows the programming model, not the consensus engine or the facade.
    assert!(sim.contains("velos-rdma"));
    assert!(
        !sim.contains("velos-core") && !sim.contains("velos"),
        "velos-sim: {sim:?}"
    );
}
