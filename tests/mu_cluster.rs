//! The Mu baseline on the emulator: a 3-replica cluster decides; after its leader crashes
//! a new one takes over and decides; a deposed leader cannot write into the followers'
//! logs once they revoked it. Every failure prints its seed and the replay command.

use velos::baseline::mu::MuConfig;
use velos::harness::mu_cluster::{MuReport, MuSpec, decision_latencies, run};
use velos::sim::latency::LatencyModel;

/// The seeds to run: `VELOS_MU_SEED` replays one.
fn seeds(default: std::ops::Range<u64>) -> Vec<u64> {
    match std::env::var("VELOS_MU_SEED") {
        Ok(seed) => vec![seed.parse().expect("VELOS_MU_SEED is a number")],
        Err(_) => default.collect(),
    }
}

fn spec(seed: u64, entries: u32, duration_ns: u64) -> MuSpec {
    let mut config = MuConfig::new(3, 2_000, 1);
    config.entries = entries;
    MuSpec {
        config,
        seed,
        duration_ns,
        crash_leader_at: None,
        slow: Vec::new(),
        latency: LatencyModel::generic(),
    }
}

fn checked(spec: &MuSpec, test: &str) -> MuReport {
    let report = run(spec).expect("a valid spec");
    assert!(report.ok(), "{}", report.explain(test));
    report
}

#[test]
fn three_replicas_decide() {
    for seed in seeds(0..3) {
        let report = checked(&spec(seed, 50, 2_000_000), "three_replicas_decide");
        let leader = &report.decisions[0];
        println!(
            "{:?}",
            leader
                .iter()
                .map(|d| (d.slot, d.decided_at))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            leader.len(),
            50,
            "{}",
            report.explain("three_replicas_decide")
        );
        // Followers apply every entry but the last (its commit point rides in the next).
        for r in &report.replicas[1..] {
            assert_eq!(
                r.applied.len(),
                49,
                "{}",
                report.explain("three_replicas_decide")
            );
        }
        let mut lat: Vec<u64> = leader
            .iter()
            .map(|d| d.decided_at - d.proposed_at)
            .collect();
        lat.sort_unstable();
        println!("seed {seed}: p50 decision {} ns", lat[lat.len() / 2]);
    }
}

#[test]
fn leader_crash_new_leader_decides() {
    for seed in seeds(0..4) {
        let mut s = spec(seed, 2_000, 3_000_000);
        s.crash_leader_at = Some(500_000 + seed * 1_234);
        let report = checked(&s, "leader_crash_new_leader_decides");
        println!(
            "seed {seed}: crashed {:?}, detect {:?} ns, first decision after {:?} ns",
            report.crashed, report.detect_ns, report.failover_ns
        );
    }
}

#[test]
fn latencies_for_benchmarks() {
    let lat = decision_latencies(&LatencyModel::generic(), 3, 8, 20, 1).expect("decides");
    assert_eq!(lat.len(), 20);
    println!("{lat:?}");
}
