//! The replicated key-value demo, short: one leader change, the survivors' maps identical
//! and holding every acknowledged write, and `velos demo --out` writing its files. Wall
//! clock on a shared machine: correctness is checked, never speed.

use std::process::Command;
use std::time::Duration;
use velos_cli::demo::{DemoConfig, DemoError, run};

fn short() -> DemoConfig {
    DemoConfig {
        duration: Duration::from_millis(400),
        crash_at: Duration::from_millis(150),
        interval: Duration::from_millis(25),
        ..DemoConfig::default()
    }
}

#[test]
fn the_leader_changes_once_and_the_survivors_hold_every_acknowledged_write() {
    let report = run(&short()).expect("a valid configuration");
    let change = report.leader_change.as_ref().expect("the leader crashed");
    assert_eq!(change.crashed, 0, "replica 0 leads first");
    assert_eq!(report.leader_changes, 1, "{report}");
    assert_eq!(change.new_leader, Some(1), "{report}");
    assert_eq!(report.checks.survivors, vec![1, 2]);
    assert!(report.checks.survivors_agree, "{report}");
    assert!(report.checks.match_acknowledged, "{report}");
    assert!(report.checks.missing_writes.is_empty(), "{report}");
    assert_eq!(report.checks.wrong_responses, 0, "{report}");
    assert_eq!(report.checks.rejected_entries, 0);
    assert!(report.client_stopped.is_none(), "{report}");
    assert!(report.puts_acked > 0, "{report}");
    let b = &report.batching;
    assert!(b.batches > 0 && b.commands_per_batch >= 1.0, "{report}");
    assert!(
        b.batch_commands_max <= u64::from(report.config.clients),
        "one write per client"
    );
    assert_eq!(report.timeline.len(), 16);
    assert!(report.checks.failed_over, "{report}");
    assert!(report.ok());
}

#[test]
fn bad_configurations_are_typed_errors() {
    let late = DemoConfig {
        crash_at: Duration::from_millis(500),
        ..short()
    };
    assert!(matches!(run(&late), Err(DemoError::CrashAfterEnd { .. })));
    let zero = DemoConfig {
        interval: Duration::ZERO,
        ..short()
    };
    assert_eq!(run(&zero).err(), Some(DemoError::Zero("the interval")));
}

#[test]
fn velos_demo_writes_the_report_and_the_timeline() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = Command::new(env!("CARGO_BIN_EXE_velos"))
        .args([
            "demo",
            "--duration",
            "400ms",
            "--crash-at",
            "150ms",
            "--json",
        ])
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("velos runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().expect("a JSON line");
    let json: serde_json::Value = serde_json::from_str(last).expect("JSON");
    assert_eq!(json["leader_changes"], 1);
    assert_eq!(json["checks"]["survivors_agree"], true);
    let written = std::fs::read_to_string(dir.path().join("report.json")).expect("report.json");
    assert!(written.contains("\"timeline\""));
    let svg = std::fs::read_to_string(dir.path().join("timeline.svg")).expect("timeline.svg");
    assert!(svg.starts_with("<svg") && svg.contains("leader 0 crashed"));
}

#[test]
fn velos_demo_rejects_bad_input_with_status_2() {
    for args in [
        &["demo", "--crash-at", "3s", "--duration", "1s"][..],
        &["demo", "--duration", "soon"][..],
        &["demo", "--interval", "0"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_velos"))
            .args(args)
            .output()
            .expect("velos runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: an error message");
    }
}

#[test]
fn a_run_without_a_failover_fails_its_check() {
    let mut report = run(&short()).expect("a valid configuration");
    assert!(report.ok(), "{report}");
    // The same report as a run whose survivors never committed under a new leader.
    if let Some(change) = report.leader_change.as_mut() {
        change.new_leader = None;
        change.elected_after_ms = None;
        change.first_commit_after_ms = None;
    }
    report.checks.failed_over = false;
    assert!(!report.ok());
    let text = report.to_string();
    assert!(
        text.contains("no failover") && text.ends_with("FAILED"),
        "{text}"
    );
}

#[test]
fn an_output_path_that_cannot_be_written_is_refused_before_the_run() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_velos"))
        .args(["demo", "--out"])
        .arg(&file)
        .output()
        .expect("velos runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--out"), "{stderr}");
    // Refused before the run: no timeline was printed.
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `--power-loss-at` with `--data-dir`: every replica crashed at once, the cluster
/// recovered from its directories and the clients going on; every write durable at the
/// power loss came back, the maps after the recovery are the ones the writes below the
/// recovered log's end make, and the run's own checks hold after it. Premise: writes were
/// durable when the power went.
#[test]
fn a_power_loss_of_every_replica_keeps_every_durable_write() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = DemoConfig {
        data_dir: Some(dir.path().join("data")),
        power_loss_at: Some(Duration::from_millis(250)),
        ..short()
    };
    let report = run(&config).expect("a valid configuration");
    let power = report.power_loss.as_ref().expect("the power was lost");
    assert!(power.acknowledged_durable > 0, "premise: {report}");
    assert!(power.recovered_slot >= power.durable_index, "{report}");
    assert!(power.mismatches.is_empty(), "{report}");
    assert!(report.ok(), "{report}");
    assert!(
        report.checks.failed_over,
        "the leader crashed before the loss: {report}"
    );
    assert_eq!(
        report.checks.survivors,
        vec![0, 1, 2],
        "every replica restarted from disk"
    );
    // A power loss needs a directory; the directory now holds a log: a fresh run is refused.
    let bad = DemoConfig {
        data_dir: None,
        ..config.clone()
    };
    assert!(matches!(run(&bad), Err(DemoError::PowerLoss(_))));
    assert!(matches!(run(&config), Err(DemoError::Start(_))));
}
