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

/// A survivor applying entries no replica had applied is not a failover without a
/// takeover: the old leader's pipelined accepts land on their own.
#[test]
fn no_failover_without_a_takeover() {
    // Replica 0 crashed at 1,000 ns; replica 1 applies slot 5 at 1,500 ns and slot 6 at
    // 3,000 ns.
    let applied = vec![
        (vec![0, 1, 2, 3, 4], vec![100, 200, 300, 400, 500], true),
        (
            vec![0, 1, 2, 3, 4, 5, 6],
            vec![150, 250, 350, 450, 550, 1_500, 3_000],
            false,
        ),
    ];
    assert_eq!(SeedRun::failover(&applied, 1_000, None), None);
    assert_eq!(SeedRun::failover(&applied, 1_000, Some(1_000)), Some(2_000));
    assert_eq!(SeedRun::next_decision(&applied, 1_000, 1_000), Some(500));
}

fn seed_run(seed: u64, failover_ns: Option<u64>) -> SeedRun {
    SeedRun {
        seed,
        crashed: 0,
        crash_ns: 100_000,
        detect_ns: failover_ns.map(|_| 5_000),
        takeover_ns: failover_ns.map(|_| 6_000),
        failover_ns,
        first_apply_ns: failover_ns,
        false_suspicions: Some(0),
        timeline: vec![10, 10],
        steps: 1,
    }
}

/// A target whose median leaves out a seed that never failed over fails on its premise,
/// whatever the median; with every seed failed over it is met or missed on its value.
#[test]
fn a_target_fails_when_a_seed_measured_no_failover() {
    let config = FailoverConfig {
        seeds: 3,
        ..FailoverConfig::quick()
    };
    let velos = |runs: Vec<SeedRun>| vec![(Protocol::Velos, runs)];
    let all = velos((1..=3).map(|s| seed_run(s, Some(10_000))).collect());
    let report = summary::report(&config, all, 0.0);
    assert!(report.targets[0].met, "{:?}", report.targets);
    assert!(report.missing_premises().is_empty());
    let one_short = velos(vec![
        seed_run(1, Some(10_000)),
        seed_run(2, None),
        seed_run(3, Some(10_000)),
    ]);
    let report = summary::report(&config, one_short, 0.0);
    let t = &report.targets[0];
    assert_eq!(t.value, Some(10.0));
    assert!(!t.met, "{t:?}");
    assert_eq!(
        t.premise_missing.as_deref(),
        Some("velos: 1 of 3 seeds measured no failover")
    );
    assert_eq!(report.missing_premises().len(), 1);
    assert!(table(&report).contains("(FAIL: velos: 1 of 3 seeds measured no failover)"));
}

/// The full sweep's crash instants spread over the span, so that the median is not the
/// point of the leader's decision cycle one instant falls on: within the span after the
/// configured time, nearly all distinct, reaching both ends of it, and the same on every
/// call (drawn from the seed alone).
#[test]
fn each_seed_crashes_at_its_own_instant_across_the_span() {
    let config = FailoverConfig::full();
    let seeds = config.first_seed..config.first_seed + config.seeds;
    let offsets: Vec<u64> = seeds
        .clone()
        .map(|s| crash_instant(config.velos_crash_ns, s) - config.velos_crash_ns)
        .collect();
    assert!(offsets.iter().all(|&o| o < CRASH_SPREAD_NS), "{offsets:?}");
    let mut distinct = offsets.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(
        distinct.len() * 10 >= offsets.len() * 9,
        "{} distinct",
        distinct.len()
    );
    let (lo, hi) = (distinct[0], distinct[distinct.len() - 1]);
    assert!(
        lo < CRASH_SPREAD_NS / 10 && hi > CRASH_SPREAD_NS * 9 / 10,
        "{lo}..{hi}"
    );
    let again: Vec<u64> = seeds
        .map(|s| crash_instant(config.velos_crash_ns, s) - config.velos_crash_ns)
        .collect();
    assert_eq!(offsets, again, "drawn from the seed alone");
}
