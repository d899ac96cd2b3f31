//! `velos bench failover --quick`: the JSON object's fields and the files it writes (never
//! its speed), a target without a failover in every seed fails, and bad input refused with
//! exit code 2.

use std::process::Command;

fn velos() -> Command {
    Command::new(env!("CARGO_BIN_EXE_velos"))
}

#[test]
fn quick_failover_prints_its_fields_and_writes_its_files() {
    let dir = std::env::temp_dir().join(format!("velos-failover-cli-{}", std::process::id()));
    let out = velos()
        .args([
            "bench", "failover", "--quick", "--seeds", "2", "--json", "--out",
        ])
        .arg(&dir)
        .output()
        .expect("velos runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    for p in ["velos", "mu"] {
        for key in ["detect_us", "failover_us"] {
            assert!(json[p][key].is_number(), "{p}.{key}: {}", json[p][key]);
        }
    }
    assert!(json["ratio_mu_over_velos"].is_number());
    assert!(json["velos"]["false_suspicions"].is_number());
    for f in [
        "failover.json",
        "failover_timeline.svg",
        "failover_distribution.svg",
    ] {
        assert!(dir.join(f).is_file(), "{f} written");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Mu run 100 µs past its crash cannot fail over (its detector alone takes about
/// 560 µs): the ratio target has no premise, fails and names it, and the command exits 1.
#[test]
fn a_target_without_a_failover_in_every_seed_fails() {
    let out = velos()
        .args([
            "bench",
            "failover",
            "--quick",
            "--seeds",
            "1",
            "--mu-after-us",
            "100",
        ])
        .output()
        .expect("velos runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("(FAIL: mu: 1 of 1 seeds measured no failover)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("bench failover: target mu failover / velos failover"),
        "{stderr}"
    );
}

#[test]
fn bad_input_exits_2() {
    for args in [
        &["--seeds", "0"][..],
        &["--latency", "nope"],
        &["--mu-crash-us", "150"],
        &["--protocols", "raft"],
    ] {
        let out = velos()
            .args(["bench", "failover"])
            .args(args)
            .output()
            .expect("velos runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// `--backend verbs` takes its own options and refuses the simulated sweep's; a build
/// without the verbs feature says how to get one, before any device is opened.
#[test]
fn the_verbs_backend_refuses_the_simulators_options_and_says_what_it_needs() {
    let status = |args: &[&str]| {
        let out = velos().args(args).output().expect("velos runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = status(&["bench", "failover", "--backend", "verbs", "--seeds", "3"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--seeds is an option of the simulated sweep"),
        "{err}"
    );
    let (code, err) = status(&["bench", "failover", "--trials", "3"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--trials is an option of --backend verbs"),
        "{err}"
    );
    let (code, err) = status(&[
        "bench",
        "failover",
        "--backend",
        "verbs",
        "--time-scale",
        "0",
    ]);
    assert_eq!(code, Some(2), "{err}");
    if !cfg!(feature = "verbs") {
        let (code, err) = status(&["bench", "failover", "--backend", "verbs", "--trials", "1"]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("--features verbs"), "{err}");
    }
}
