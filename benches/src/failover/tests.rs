//! The structure of the failover benchmark's output (never its speed).

use super::*;

#[test]
fn quick_sweep_reports_both_protocols_and_writes_its_files() {
    let config = FailoverConfig {
        seeds: 2,
        jobs: 1,
        ..FailoverConfig::quick()
    };
    let report = run(&config, false).expect("the quick sweep runs");
    for s in [&report.velos, &report.mu] {
        let s = s.as_ref().expect("both protocols measured");
        assert_eq!(s.runs.len(), 2);
        assert!(!s.timeline.is_empty());
        assert!(s.runs.iter().all(|r| r.crash_ns > 0), "{s:?}");
    }
    assert_eq!(report.targets.len(), 2);
    let table = table(&report);
    assert!(table.contains("velos") && table.contains("mu") && table.contains("target"));
    let dir = std::env::temp_dir().join(format!("velos-failover-test-{}", std::process::id()));
    write_outputs(&report, &dir).expect("outputs written");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("failover.json")).expect("json"))
            .expect("valid JSON");
    for p in ["velos", "mu"] {
        for key in [
            "detect_us",
            "failover_us",
            "failover_p99_us",
            "timeline",
            "runs",
        ] {
            assert!(json[p].get(key).is_some(), "{p}.{key} missing");
        }
    }
    assert!(json.get("ratio_mu_over_velos").is_some());
    assert!(!json["velos"]["false_suspicions"].is_null());
    for svg in ["failover_timeline.svg", "failover_distribution.svg"] {
        let text = std::fs::read_to_string(dir.join(svg)).expect("plot written");
        assert!(text.starts_with("<svg"), "{svg}: an SVG document");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_configurations_are_refused() {
    let bad = [
        FailoverConfig {
            seeds: 0,
            ..FailoverConfig::quick()
        },
        FailoverConfig {
            value_bytes: 4,
            ..FailoverConfig::quick()
        },
        FailoverConfig {
            velos_crash_ns: 150_000,
            ..FailoverConfig::quick()
        },
    ];
    for c in bad {
        assert!(c.check().is_err(), "{c:?}");
    }
}
