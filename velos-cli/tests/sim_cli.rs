//! `velos sim` as a user runs it: the JSON line is enough to re-check a run without our
//! checkers, and bad input is a usage error (exit status 2), never a panic.

mod cli_run;

use cli_run::velos;
use std::collections::BTreeMap;

#[test]
fn the_json_line_lets_anyone_recheck_agreement_and_no_holes() {
    let (code, stdout, stderr) = velos(&[
        "sim",
        "--replicas",
        "3",
        "--seed",
        "4",
        "--duration",
        "600us",
        "--crash-leader-at",
        "200us",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let last = stdout.lines().last().expect("a line");
    let run: serde_json::Value = serde_json::from_str(last).expect("the last line is JSON");
    assert_eq!(run["seed"], 4);
    let changes = run["leader_changes"].as_array().expect("leader changes");
    assert!(
        changes.len() >= 2,
        "the crashed leader was replaced: {changes:?}"
    );
    assert!(changes[1]["at_ns"].as_u64().unwrap() >= 200_000);
    let proposed: Vec<&str> = run["proposed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // Re-check, from the JSON alone: every replica's log is gapless, replicas agree slot by
    // slot, and every non-empty entry was proposed.
    let mut decided: BTreeMap<u64, String> = BTreeMap::new();
    for replica in run["replicas"].as_array().unwrap() {
        for (i, entry) in replica["applied"].as_array().unwrap().iter().enumerate() {
            let slot = entry[0].as_u64().unwrap();
            let value = entry[1].as_str().unwrap().to_string();
            assert_eq!(slot, i as u64, "no holes");
            assert!(value.is_empty() || proposed.contains(&value.as_str()));
            let first = decided.entry(slot).or_insert_with(|| value.clone());
            assert_eq!(*first, value, "agreement at slot {slot}");
        }
    }
    assert!(
        decided.len() > 20,
        "the log advanced: {} slots",
        decided.len()
    );
    assert!(
        run["checks"]
            .as_object()
            .unwrap()
            .values()
            .all(|v| v == true)
    );
}

#[test]
fn bad_input_is_a_usage_error() {
    for args in [
        &["sim", "--duration", "5 parsecs"][..],
        &["sim", "--crash", "9@1ms"],
        &["sim", "--crash", "1"],
        &["sim", "--replicas", "0"],
        &["sim", "--value-size", "4"],
        &["sim", "--members", "0,7"],
        &["sim", "--members", "x"],
        &["sim", "--reconfigure", "100us=0,1,2"],
        &["sim", "--reconfigure", "100us=0"],
        &["sim", "--reconfigure", "0,1,2"],
        &["sim", "--reconfigure", "1ms=0,1,2,3"],
        &["sim", "--crash-leader-at", "5ms"],
        &["sim", "--crash-leader-at", "1.9ms"],
        &["sim", "--crash", "1@2ms"],
        &["sim", "--pause", "1@3ms+10us"],
        &["sim", "--interval", "0"],
        &["sim", "--interval", "1ns"],
        &["sim", "--duration", "0"],
        &["sim", "--duration", "99999999999999999999s"],
        &["sim", "--replace", "3@100us"],
        &["sim", "--replace", "1@100us+"],
        &["sim", "--replace", "1"],
        &["sim", "--replace", "1@1.9ms"],
        &["sim", "--told-late", "3@100us"],
        &["sim", "--told-late", "1"],
        &["sim", "--power-loss-at", "1ms"],
        &["sim", "--durable", "--power-loss-at", "1.9ms"],
        &[
            "sim",
            "--durable",
            "--power-loss-at",
            "1ms",
            "--crash",
            "1@1.5ms",
        ],
        &[
            "sim",
            "--durable",
            "--power-loss-at",
            "1ms",
            "--members",
            "0,1",
        ],
        &[
            "sim",
            "--durable",
            "--power-loss-at",
            "1ms",
            "--reconfigure",
            "100us=0,1",
        ],
    ] {
        let (code, _, stderr) = velos(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_stopped_log_fails_the_liveness_check() {
    // Two of three replicas crashed: no majority is left, the log stops.
    let (code, stdout, stderr) = velos(&["sim", "--crash", "0@1ms", "--crash", "1@1ms"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("liveness: FAIL"), "{stdout}");
    assert!(stderr.contains("a log needs a majority"), "{stderr}");
    // One crashed: the log goes on, and the check says so.
    let (code, stdout, stderr) = velos(&["sim", "--crash", "2@1ms"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("liveness: pass"), "{stdout}");
    // Nothing proposed: nothing shows the log live, and the check does not pass on it.
    let (code, stdout, stderr) = velos(&["sim", "--duration", "1ms", "--values", "0"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("liveness: FAIL"), "{stdout}");
    assert!(stderr.contains("nothing was proposed"), "{stderr}");
    // A jitter so large that nothing is decided: liveness fails, not passes vacuously.
    let (code, stdout, stderr) = velos(&["sim", "--jitter", "1000000"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("liveness: FAIL"), "{stdout}");
    // A leader crash asked for before anyone leads crashes nobody: the run says so.
    let (code, stdout, stderr) = velos(&["sim", "--crash-leader-at", "0"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("crash_leader: FAIL"), "{stdout}");
    assert!(stderr.contains("none was crashed"), "{stderr}");
}

#[test]
fn a_replaced_replica_is_its_own_entry_with_its_incarnation() {
    replaced_with(&[]);
    // The join path reaching replica 1 only 200 µs after the new process started.
    replaced_with(&["--told-late", "1@200us"]);
}

fn replaced_with(more: &[&str]) {
    let mut args = vec![
        "sim",
        "--replace",
        "2@300us+20us",
        "--duration",
        "1ms",
        "--slots",
        "64",
        "--snapshot-every",
        "16",
        "--values",
        "100000",
        "--json",
    ];
    args.extend(more);
    let (code, stdout, stderr) = velos(&args);
    assert_eq!(code, 0, "{more:?}: {stderr}");
    let run: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("a line")).expect("JSON");
    let replicas = run["replicas"].as_array().expect("replicas");
    let of = |id: u64, incarnation: u64| {
        replicas
            .iter()
            .find(|r| r["id"] == id && r["incarnation"] == incarnation)
            .unwrap_or_else(|| panic!("replica {id} at incarnation {incarnation}"))
    };
    let (old, new) = (of(2, 0), of(2, 1));
    assert_eq!(old["crashed"], true);
    assert_eq!(new["crashed"], false);
    // The replacement's log starts where the snapshot it installed ends.
    let first = new["applied"][0][0].as_u64().expect("an entry applied");
    let install = new["installs"][0][0].as_u64().expect("a snapshot copied");
    assert_eq!(first, install, "applied from the snapshot's point on");
    assert!(
        run["checks"]
            .as_object()
            .unwrap()
            .values()
            .all(|ok| ok == true)
    );
}

#[test]
fn a_power_loss_loses_no_durable_entry_and_the_json_shows_it() {
    let (code, stdout, stderr) = velos(&[
        "sim",
        "--durable",
        "--power-loss-at",
        "700us",
        "--duration",
        "1400us",
        "--snapshot-every",
        "32",
        "--slots",
        "64",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let run: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("a line")).expect("JSON");
    let durable = &run["durable"];
    let loss = &durable["power_loss"];
    let index = durable["durable"].as_u64().expect("the durable index");
    let recovered = loss["recovered"].as_u64().expect("where the log restarts");
    // Re-checked from the JSON: something was durable, and the restarted log starts at or
    // past it; every disk the restart's majority could use reaches it.
    assert!(
        index > 0,
        "entries were durable at the power loss: {durable}"
    );
    assert!(recovered >= index, "{loss}");
    let mut by_disk: Vec<u64> = loss["recovered_by_disk"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    by_disk.sort_unstable();
    assert!(
        by_disk[by_disk.len() / 2] >= index,
        "the worst majority: {by_disk:?}"
    );
    // The restarted cluster decided on from the recovered log.
    let after = &loss["restarted"];
    assert!(loss["decided_after"].as_u64().unwrap() > 0, "{loss}");
    assert!(
        after["durable"]["durable"].as_u64().unwrap() > recovered,
        "the restarted cluster made entries durable past the recovered log"
    );
    for name in ["recovered", "restarted_services", "restarted_agreement"] {
        assert_eq!(run["checks"][name], true, "{name}: {}", run["checks"]);
    }
}
