//! The Mu baseline on the emulator: a 3-replica cluster decides; after its leader crashes
//! a new one takes over and decides; a deposed leader cannot write into the followers'
//! logs once they revoked it. Every failure prints its seed and the replay command.

use velos_sim::latency::LatencyModel;
use velos_testkit::baseline::mu::MuConfig;
use velos_testkit::harness::mu_cluster::{MuReport, MuSpec, decision_latencies, run};

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
        stalls: Vec::new(),
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
        let explain = report.explain("leader_crash_new_leader_decides");
        let (old, _) = report.crashed.expect("a leader was crashed");
        let after: usize = (0..3)
            .filter(|&n| n != usize::from(old))
            .map(|n| report.decisions[n].len())
            .sum();
        assert!(after > 100, "the new leader goes on deciding: {explain}");
        // Mu's published configuration: detection in 560-600 µs, then the permission
        // switch (250 µs) and the slow path.
        let detect = report.detect_ns.expect("detected");
        assert!(
            (550_000..=610_000).contains(&detect),
            "detect {detect}: {explain}"
        );
        println!(
            "seed {seed}: crashed {:?}, detect {:?} ns, first decision after {:?} ns",
            report.crashed, report.detect_ns, report.failover_ns
        );
    }
}

#[test]
fn latencies_for_benchmarks() {
    for profile in ["generic", "cluster"] {
        let latency = LatencyModel::by_name(profile).expect("a profile");
        for bytes in [8, 64] {
            let mut lat = decision_latencies(&latency, 3, bytes, 200, 1).expect("decides");
            assert_eq!(lat.len(), 200);
            lat.sort_unstable();
            println!(
                "{profile}, {bytes} B: p50 {} ns, p99 {} ns",
                lat[100], lat[198]
            );
        }
    }
}

/// The leader (node 0) stalls for 1.5 ms, long enough to look dead: node 1 takes over and the followers revoke node 0's write permission, so
/// node 0's later log writes are refused; when node 0 is trusted again it takes over
/// again. Every node agrees throughout.
#[test]
fn deposed_leader_cannot_overwrite() {
    for seed in seeds(0..3) {
        let mut s = spec(seed, 2_000, 5_000_000);
        s.stalls = vec![(0, 400_000, 1_500_000)];
        let report = checked(&s, "deposed_leader_cannot_overwrite");
        let explain = report.explain("deposed_leader_cannot_overwrite");
        assert!(report.refusals > 0, "node 0 was refused: {explain}");
        assert!(!report.decisions[1].is_empty(), "node 1 led: {explain}");
        println!(
            "seed {seed}: refusals {}, decisions per node {:?}",
            report.refusals,
            report.decisions.iter().map(Vec::len).collect::<Vec<_>>()
        );
    }
}

/// Same seed, same run: decisions and their virtual times replay exactly.
#[test]
fn runs_replay_by_seed() {
    let mut s = spec(9, 2_000, 1_500_000);
    s.crash_leader_at = Some(400_000);
    let (a, b) = (run(&s).expect("valid"), run(&s).expect("valid"));
    assert_eq!(
        a.decisions,
        b.decisions,
        "{}",
        a.explain("runs_replay_by_seed")
    );
    assert_eq!((a.detect_ns, a.failover_ns), (b.detect_ns, b.failover_ns));
}
