//! The command line's edges: `velos … | head -1` (a reader that closes the pipe early)
//! ends the run quietly with the shell's SIGPIPE status (141), and an empty budget is a
//! usage error (2) — never a panic.

mod cli_run;

use cli_run::velos;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

/// Runs `velos ARGS`, reads one line of its output, closes the pipe; its exit status and
/// standard error.
fn first_line_then_close(args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_velos"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("velos runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("a line"); // the reader, and the pipe with it, is dropped here
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut stderr)
        .expect("utf-8");
    let status = child.wait().expect("velos ends");
    (status.code(), line, stderr)
}

#[test]
fn a_closed_pipe_ends_the_run_quietly() {
    let suite = concat!(env!("CARGO_MANIFEST_DIR"), "/../velos-sim/litmus");
    for args in [
        // 10,000 timeline lines, far more than a pipe holds.
        &["sim", "--interval", "1us", "--duration", "10ms"][..],
        &["litmus", suite],
        &["litmus", "--json", suite],
    ] {
        let (code, line, stderr) = first_line_then_close(args);
        assert!(!line.is_empty(), "{args:?}: a first line");
        assert_eq!(code, Some(141), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn an_empty_budget_is_a_usage_error() {
    let suite = concat!(env!("CARGO_MANIFEST_DIR"), "/../velos-sim/litmus");
    for args in [
        &["litmus", "--max-states", "0", suite][..],
        &["litmus", "--backend", "mem", "--runs", "0", suite],
    ] {
        let (code, _, stderr) = velos(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn bench_emulator_finds_its_suite_from_any_directory_and_names_a_missing_one() {
    let elsewhere = tempfile::tempdir().expect("a temporary directory");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_velos"))
            .args(args)
            .current_dir(elsewhere.path())
            .output()
            .expect("velos runs")
    };
    let out = run(&[
        "bench",
        "emulator",
        "--repeats",
        "1",
        "--ops",
        "1000",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert!(json["suite_files"].as_u64().unwrap() > 0, "{json}");
    let out = run(&["bench", "emulator", "--suite", "no-such-suite"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no-such-suite") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

#[test]
fn an_interrupted_campaign_prints_the_summary_of_what_ran() {
    let child = Command::new(env!("CARGO_BIN_EXE_velos"))
        .args(["vopr", "--seeds", "0..1000000", "--jobs", "1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("velos runs");
    // Ctrl-C as a terminal sends it; the handler is in place long before a second is up.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT sent");
    let out = child.wait_with_output().expect("velos ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the summary");
    assert_eq!(summary["interrupted"], true, "{summary}");
    let ran = summary["seeds"].as_u64().expect("seeds");
    assert!(ran > 0 && ran < 1_000_000, "{summary}");
    assert!(summary["operations"].as_u64().unwrap() > 0, "{summary}");
}

/// The refusals of issue 32's cases: exit 2 before the run, naming the flag as typed and
/// the value, with no internal field or bitmask.
#[test]
fn an_out_of_range_flag_is_refused_at_once_naming_it() {
    for (args, says) in [
        (
            &["sim", "--replace", "1@100us", "--replace", "1@100us"][..],
            "--replace 1@",
        ),
        (&["sim", "--jitter", "18446744073709551615"], "'--jitter"),
        (
            &["sim", "--crash", "1@100us", "--crash", "1@200us"][..],
            "--crash 1@200us: replica 1 is down already",
        ),
        (
            &["sim", "--replace", "1@50us+100us", "--crash", "1@100us"][..],
            "--crash 1@100us: replica 1 is down already",
        ),
        (
            &["sim", "--crash", "1@100us", "--pause", "1@200us+50us"][..],
            "--pause 1@200us+50us: replica 1 is down from 100us to the end",
        ),
        (
            &[
                "sim",
                "--replace",
                "1@50us+100us",
                "--delay",
                "1@60us+90us:1us",
            ][..],
            "--delay 1@60us+90us:1us: replica 1 is down from 50us to 150us",
        ),
        (
            &["sim", "--crash", "2@1ms", "--delay-from", "2@1ms+1us:2us"][..],
            "--delay-from 2@1ms+1us:2us: replica 2 is down",
        ),
        (&["sim", "--members", "0,1,5"], "--members 0,1,5"),
        (&["sim", "--replicas", "-3"], "-3 is not in 1..=31"),
        (&["sim", "--slots", "0"], "'--slots"),
        (&["sim", "--slots", "16777216"], "--slots 16777216"),
        (&["sim", "--lease", "30us"], "'--lease"),
        (
            &["bench", "embed", "--outstanding", "1000000"],
            "'--outstanding",
        ),
        (
            &["bench", "embed", "--commits-many", "18446744073709551000"],
            "'--commits-many",
        ),
        (
            &[
                "bench",
                "embed",
                "--quick",
                "--outstanding",
                "4096",
                "--commits-many",
                "100",
            ],
            "--outstanding 4096",
        ),
        (&["demo", "--clients", "100000"], "'--clients"),
        (&["demo", "--interval", "1ns"], "--interval 1 ns"),
        (
            &["bench", "locks", "-p", "65536"],
            "65536 is not in 1..=1024",
        ),
        (
            &["bench", "locks", "--quick", "-p", "260"],
            "--processes 260",
        ),
        (
            &["bench", "latency", "--gap-ns", "18446744073709551615"],
            "'--gap-ns",
        ),
        (
            &["bench", "latency", "--gap-ns", "1000000000000"],
            "'--gap-ns",
        ),
        (
            &["bench", "latency", "--quick", "--out", "/proc/nope"],
            "--out /proc/nope",
        ),
        (
            &["bench", "locks", "--quick", "--out", "/proc/nope"],
            "--out /proc/nope",
        ),
        (
            &["bench", "failover", "--quick", "--out", "/proc/nope"],
            "--out /proc/nope",
        ),
        (
            &[
                "node",
                "--config",
                "c.toml",
                "--id",
                "0",
                "--value-size",
                "9",
            ],
            "9 is not in 10..=65536 bytes",
        ),
        (&["vopr", "--jobs", "100000"], "'--jobs"),
    ] {
        let started = std::time::Instant::now();
        let (code, _, stderr) = velos(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        for internal in ["max_value_bytes", "0x", "panicked", "unexpected argument"] {
            assert!(!stderr.contains(internal), "{args:?}: {stderr}");
        }
        assert!(
            started.elapsed().as_secs() < 5,
            "{args:?}: refused before the run"
        );
    }
}

/// The premise of the refusals of faults on a replica down: a fault whose window reaches
/// past the replica's restart, or starts before its crash, still runs (it acts on the
/// process up then).
#[test]
fn a_fault_on_a_replica_up_for_part_of_its_window_runs() {
    for args in [
        &[
            "sim",
            "--duration",
            "1ms",
            "--replace",
            "1@50us+100us",
            "--pause",
            "1@100us+100us",
        ][..],
        &[
            "sim",
            "--duration",
            "1ms",
            "--crash",
            "1@300us",
            "--delay",
            "1@200us+200us:1us",
        ],
        &[
            "sim",
            "--duration",
            "1ms",
            "--replace",
            "1@50us+100us",
            "--crash",
            "1@300us",
        ],
    ] {
        let (code, stdout, stderr) = velos(args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(
            stdout.contains("checks:"),
            "{args:?}: the run ran: {stdout}"
        );
    }
}

/// A fault that meets its replica down does nothing, so the checks that count on it held
/// without it: `--crash-leader-at` crashes replica 0, the leader then, and a pause of
/// replica 0 after it fails the run (the same pause of a live replica passes).
#[test]
fn a_fault_that_met_its_replica_down_fails_the_run() {
    let run = |pause: &str| {
        velos(&[
            "sim",
            "--duration",
            "1ms",
            "--crash-leader-at",
            "100us",
            "--pause",
            pause,
        ])
    };
    let (code, stdout, stderr) = run("0@200us+100us");
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("faults_acted: FAIL"), "{stdout}");
    assert!(
        stderr.contains("a pause of node 0 for 100000 ns at 200000 ns met it down"),
        "{stderr}"
    );
    let (code, stdout, stderr) = run("1@200us+100us");
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("faults_acted: pass"), "{stdout}");
}
