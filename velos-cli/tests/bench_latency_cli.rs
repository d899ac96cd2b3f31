//! `velos bench latency --quick --json`: the JSON object's fields, the CPU-charged ones
//! included (never its speed), and bad input refused with exit code 2.

mod cli_run;
use cli_run::velos;

#[test]
fn quick_latency_json_has_the_cpu_charged_keys() {
    let args = [
        "bench",
        "latency",
        "--quick",
        "--json",
        "--cpu-replays",
        "2",
    ];
    let (status, stdout, stderr) = velos(&args);
    assert_eq!(status, 0, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    let targets = json["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 2, "one target per placement: {targets:?}");
    for t in targets {
        for key in ["p50_ns", "ratio", "cpu_charged_p50_ns", "cpu_charged_ratio"] {
            assert!(t[key].is_number(), "targets: {key} in {t}");
        }
        assert!(t["cpu_charged_within_25_percent"].is_boolean(), "{t}");
    }
    let points = json["points"].as_array().expect("points");
    for x in points {
        let velos = x["protocol"] == "velos";
        assert_eq!(x["cpu_charged_p50_ns"].is_number(), velos, "{x}");
        assert_eq!(x["cpu"]["engine_cpu_path_p50_ns"].is_number(), velos, "{x}");
    }
    assert_eq!(json["config"]["cpu_replays"], 2);
}

#[test]
fn bad_input_exits_2() {
    for args in [&["--cpu-replays", "0"][..], &["--sizes", "0"]] {
        let all: Vec<&str> = ["bench", "latency", "--quick"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        let (status, _, _) = velos(&all);
        assert_eq!(status, 2, "{args:?}");
    }
}
