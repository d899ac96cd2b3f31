//! `velos bench locks`: a point without an acquisition in its window fails the run (its
//! mutual exclusion held on nothing); a short sweep passes.

mod cli_run;

use cli_run::velos;

#[test]
fn a_window_without_an_acquisition_fails_the_run() {
    let point = ["bench", "locks", "--quick", "--locks", "nlock", "-p", "4"];
    // 1 µs from the start: no process has acquired the lock yet.
    let mut args = point.to_vec();
    args.extend([
        "--writer-percent",
        "100",
        "--warmup-us",
        "0",
        "--measure-us",
        "1",
    ]);
    let (code, stdout, stderr) = velos(&args);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("no acquisition in the measured window"),
        "{stderr}"
    );
    // The same point with a window long enough measures acquisitions and passes.
    let mut args = point.to_vec();
    args.extend(["--writer-percent", "100", "--json"]);
    let (code, stdout, stderr) = velos(&args);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert!(
        report["points"][0]["acquisitions"].as_u64() > Some(0),
        "{stdout}"
    );
}
