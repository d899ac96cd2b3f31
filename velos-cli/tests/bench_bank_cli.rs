//! `velos bench bank` as a user runs it: a short run in each place passes every check and
//! its premises hold (the replacement voted, commands committed after the `replace`
//! call); a run whose replacement cannot vote in time fails (exit 1) instead of reporting
//! a measurement of nothing; bad flags are refused before anything runs (exit 2). No
//! speed is asserted: only that the replacement votes within the run's 10 s bound.

mod cli_run;

use cli_run::velos;

/// A short run in `place`: its one run's JSON object.
fn short(place: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec![
        "bench",
        "bank",
        "--place",
        place,
        "--runs",
        "1",
        "--before-crash",
        "400ms",
        "--settle",
        "100ms",
        "--after",
        "200ms",
        "--json",
    ];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = velos(&args);
    let report = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("one JSON object ({e}): {stdout}{stderr}"));
    (code, report, stderr)
}

#[test]
fn both_places_pass_every_check_with_their_premises() {
    for place in ["leader", "follower"] {
        let (code, report, stderr) = short(place, &[]);
        let run = &report["runs"][0];
        assert_eq!(code, 0, "{place}: {stderr}{run}");
        assert_eq!(run["ok"], true, "{place}: {run}");
        let vote = run["vote_ms"].as_f64().expect("premise: it voted");
        assert!(vote < 10_000.0, "{place}: voted within the bound: {run}");
        assert!(run["commits_during"].as_u64() > Some(0), "{place}: {run}");
        assert_eq!(run["duplicates"], 0, "{place}: {run}");
        assert_eq!(run["wrong"], 0, "{place}: {run}");
        assert!(run["replace_gap_ms"].as_f64().is_some(), "{place}: {run}");
        assert!(report["replace_gap_ms"][1].as_f64().is_some(), "{report}");
    }
}

#[test]
fn a_replacement_that_never_votes_fails_the_run() {
    // A vote within a microsecond of the call cannot happen: nothing was measured.
    let (code, report, stderr) = short("follower", &["--vote-timeout", "1us"]);
    assert_eq!(code, 1, "{stderr}{report}");
    assert_eq!(report["runs"][0]["ok"], false, "{report}");
    assert!(report["runs"][0]["vote_ms"].is_null(), "{report}");
    assert!(stderr.contains("never voted"), "{stderr}");
}

#[test]
fn bad_flags_are_refused_before_anything_runs() {
    for (flags, says) in [
        (&["--place", "middle"][..], "unknown place"),
        (&["--runs", "0"], "--runs"),
        (&["--state-bytes", "100"], "--state-bytes"),
        (&["--async-clients", "5"], "--async-clients"),
        (&["--before-crash", "10ms"], "--before-crash"),
        (&["--after", "2h"], "unknown time unit"),
        (&["--vote-timeout", "0s"], "--vote-timeout"),
    ] {
        let mut args = vec!["bench", "bank"];
        args.extend_from_slice(flags);
        let (code, stdout, stderr) = velos(&args);
        assert_eq!(code, 2, "{flags:?}: {stdout}{stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(stdout.is_empty(), "{flags:?}: nothing ran: {stdout}");
    }
}
