//! `velos bench durable` as a user runs it: the short run measures both sides (the syncs
//! counted only where durability is on, the durable acknowledgement only there); bad
//! input is a usage error.

mod cli_run;

use cli_run::velos;

/// The median syncs per 1,000 commits of the runs with durability on, one load.
fn syncs(report: &serde_json::Value, load: &str) -> f64 {
    let mut on: Vec<f64> = report["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["durable"] == true)
        .map(|r| {
            r[load]["syncs_per_1000"]
                .as_f64()
                .expect("counted with durability on")
        })
        .collect();
    on.sort_by(f64::total_cmp);
    on[on.len() / 2]
}

#[test]
fn the_short_run_measures_both_sides_and_counts_the_syncs() {
    let args = [
        "bench",
        "durable",
        "--quick",
        "--recovery-bytes",
        "1048576",
        "--json",
    ];
    let (code, stdout, stderr) = velos(&args);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "one pair: off and on");
    for run in runs {
        let on = run["durable"] == true;
        assert!(
            run["one_client"]["commits_per_s"].as_f64().unwrap() > 0.0,
            "{run}"
        );
        assert_eq!(run["one_client"]["syncs_per_1000"].is_null(), !on, "{run}");
        assert_eq!(run["durable_ack"].is_null(), !on, "{run}");
    }
    // The sync counts count something: the disks synced under both loads. (How many
    // fewer group commit makes them is a measurement: `paper-notes/results.md`.)
    for load in ["one_client", "pipelined"] {
        assert!(
            syncs(&report, load) > 0.0,
            "{load}: the disks synced: {report}"
        );
    }
}

#[test]
fn bad_input_is_a_usage_error() {
    for args in [
        &["bench", "durable", "--group-commit", "2s"][..],
        &["bench", "durable", "--group-commit", "soon"],
        &["bench", "durable", "--repeats", "0"],
    ] {
        let (code, _, stderr) = velos(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
