//! `velos bench join` as a user runs it: the former leader's replacement votes without
//! taking the lead, and a run whose replacement never votes fails (exit 1) instead of
//! reporting a measurement of nothing.

mod cli_run;

use cli_run::velos;

#[test]
fn the_former_leaders_replacement_votes_and_the_acting_leader_keeps_deciding() {
    let (code, stdout, stderr) =
        velos(&["bench", "join", "--seeds", "1", "--former-leader", "--json"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let run = &report["runs"][0];
    assert_eq!(run["ok"], true, "{run}");
    assert!(
        run["vote_ns"].as_u64().is_some(),
        "premise: it voted: {run}"
    );
    assert!(
        run["rate_during"].as_f64().expect("a rate") > 0.0,
        "the acting leader decided during the join: {run}"
    );
    assert!(report["longest_gap_ns_max"].as_u64().is_some(), "{report}");
}

#[test]
fn a_join_whose_replacement_never_votes_fails() {
    // Snapshots every 1,000 entries on a 64-slot ring: the ring fills and nothing is decided
    // after it, the configuration that would name the replacement included.
    let (code, stdout, stderr) = velos(&[
        "bench",
        "join",
        "--seeds",
        "1",
        "--snapshot-every",
        "1000",
        "--json",
    ]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(report["runs"][0]["ok"], false, "{report}");
    assert!(stderr.contains("never voted"), "{stderr}");
}
