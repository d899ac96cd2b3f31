//! `velos vopr` as CI and a user run it: a thousand seeds of the campaign find no
//! violation; a seed's history is JSON lines another checker can read; bad input is a
//! usage error. (The seeds that once broke are pinned in velos-testkit's `tests/vopr.rs`,
//! the mutants' detection in its `src/vopr/mutants.rs`.)

mod cli_run;

use cli_run::velos;
use velos_testkit::check::linearizability::{OpKind, Verdict, check, from_json_lines};

/// The campaign's CI run: 1,000 seeds (faults, then liveness, then every checker),
/// 1,000 more with near-overflow starts on one seed in four, and 1,000 with whole-cluster
/// power losses and restarts from disk.
#[test]
fn a_thousand_seeds_of_the_campaign_find_no_violation() {
    thousand_seeds(&[]);
    thousand_seeds(&["--overflow"]);
    thousand_seeds(&["--power-loss"]);
}

fn thousand_seeds(flags: &[&str]) {
    let mut args = vec!["vopr", "--seeds", "0..1000", "--json"];
    args.extend(flags);
    let (code, stdout, stderr) = velos(&args);
    let summary: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("one JSON object ({e}): {stdout}\n{stderr}"));
    let violating = summary["violating_seeds"].as_array().expect("a list");
    assert!(violating.is_empty(), "{violating:#?}");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["seeds"], 1000);
    let ops = summary["operations"].as_u64().expect("a count");
    assert!(ops > 10_000, "the clients worked: {ops} operations");
    if flags.contains(&"--power-loss") {
        // The power loss cuts the run short: operations under way then stay pending.
        let p = &summary["power"];
        let count = |f: &str| p[f].as_u64().unwrap_or_else(|| panic!("{f} in {p}"));
        assert!(
            count("seeds_with_durable") >= 900 && count("cuts") > 0,
            "premise: entries were durable at the power losses and recoveries cut: {p}"
        );
        assert!(
            count("snapshots_checked") > 0 && count("decided_after_restart") > 0,
            "premise: snapshots checked, the restarted clusters decided: {p}"
        );
        assert!(count("disks_stopped") > 0, "premise: some disk filled: {p}");
        assert!(
            count("resumes_checked") > 0,
            "premise: replaced processes resumed from their disks, their state checked: {p}"
        );
        assert!(
            count("own_restarts") >= 400 && count("own_states_checked") > 0,
            "premise: restarts from each replica's own disk, their services checked: {p}"
        );
        assert!(
            count("seeds_durable_after_restart") >= 900,
            "premise: the restarted clusters made entries durable: {p}"
        );
        return;
    }
    assert_eq!(summary["operations_completed"].as_u64(), Some(ops));
    let after_join = summary["crashes_after_join"].as_u64().expect("a count");
    assert!(
        after_join >= 10,
        "premise: the failure model's schedule ran — a leader crashed after a replacement \
         joined in {after_join} seeds"
    );
    let gap_checked = summary["gap_checked_seeds"].as_u64().expect("a count");
    assert!(
        gap_checked >= 500,
        "premise: the commit-gap check saw operations wait outside every fault's window \
         in {gap_checked} seeds"
    );
    let applied = summary["faults_applied"].as_u64().expect("a count");
    let idle = summary["faults_idle"].as_u64().expect("a count");
    assert!(
        applied >= 1000 && idle * 100 <= applied * 15,
        "premise: the campaign's faults acted — {applied} applied, {idle} of them on a replica \
         already down"
    );
    println!(
        "1000 seeds {flags:?}, {ops} client operations: {:.1} seeds/s",
        summary["seeds_per_s"].as_f64().expect("a rate")
    );
}

#[test]
fn a_seeds_history_is_json_lines_that_recheck_as_linearizable() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("history.jsonl");
    let path_arg = path.to_str().expect("utf-8");
    let (code, stdout, stderr) = velos(&["vopr", "--seeds", "7..8", "--history-out", path_arg]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("seed 7:"),
        "the scenario is described: {stdout}"
    );
    let text = std::fs::read_to_string(&path).expect("the history was written");
    let history = from_json_lines(&text, "history.jsonl").expect("JSON lines");
    assert!(!history.is_empty());
    assert!(history.iter().any(|o| o.kind == OpKind::Put));
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
        for field in ["client", "kind", "key", "value", "invoke_ns", "response_ns"] {
            assert!(v.get(field).is_some(), "{field} in {line}");
        }
    }
    assert_eq!(check(&history), Verdict::Linearizable);
}

#[test]
fn bad_input_is_a_usage_error() {
    for args in [
        &["vopr", "--seeds", "5..5"][..],
        &["vopr", "--seeds", "x..9"],
        &["vopr", "--seeds", "0..2", "--history-out", "h.jsonl"],
        &["vopr", "--mutant", "no-such-mutant"],
    ] {
        let (code, _, stderr) = velos(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
