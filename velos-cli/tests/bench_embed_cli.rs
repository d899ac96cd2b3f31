//! `velos bench embed --quick`: the JSON object's fields (never its speed), and bad input
//! refused with exit code 2.

use std::process::Command;

fn velos() -> Command {
    Command::new(env!("CARGO_BIN_EXE_velos"))
}

#[test]
fn quick_embed_prints_its_fields() {
    let dir = std::env::temp_dir().join(format!("velos-embed-cli-{}", std::process::id()));
    let out = velos()
        .args(["bench", "embed", "--quick", "--json", "--out"])
        .arg(&dir)
        .output()
        .expect("velos runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    for system in ["velos", "omnipaxos", "omnipaxos_threads"] {
        for key in [
            "commits_per_s_1client",
            "commits_per_s_many",
            "commits_per_s_batched",
            "cpu_ns_per_decision",
            "cpu_ns_per_command_many",
            "cpu_ns_per_command_batched",
            "process_cpu_ns_per_decision",
            "leader_thread_cpu_ns_per_decision",
            "latency_p50_ns_1client",
        ] {
            assert!(
                json[system][key].is_number(),
                "{system}.{key}: {}",
                json[system][key]
            );
        }
        assert!(json[system]["cpu_ns_per_decision_basis"].is_string());
    }
    for key in ["submit_p50_us", "submit_p99_us"] {
        assert!(
            json["velos"][key].is_number(),
            "velos.{key}: {}",
            json["velos"][key]
        );
    }
    assert_eq!(json["submit_runs"].as_array().map(Vec::len), Some(1));
    for key in ["ratio_1client", "ratio_many", "ratio_batched"] {
        assert!(json[key].is_number(), "{key}: {}", json[key]);
    }
    let threads = json["ratio_threads"].as_array().expect("three ratios");
    assert!(threads.len() == 3 && threads.iter().all(serde_json::Value::is_number));
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(9));
    assert!(dir.join("embed.json").is_file(), "embed.json written");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_2() {
    for args in [
        &["--repeats", "0"][..],
        &["--outstanding", "0"],
        &["--commits-many", "100000000"],
        &["--velos-follower-idle", "nap"],
        &["--velos-pipeline", "16"],
        &["--batch", "0"],
        &["--batch", "65"],
        &["--outstanding", "64", "--batch", "48"],
    ] {
        let out = velos()
            .args(["bench", "embed", "--quick"])
            .args(args)
            .output()
            .expect("velos runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
