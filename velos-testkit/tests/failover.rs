//! Failover in virtual time, over many seeds: the leader of a 3-replica cluster is crashed
//! and the run is broken down into crash → suspicion (the next leader's term starts) →
//! the first decision at a surviving replica; and steady-state runs without a crash count
//! false suspicions (any replica's view of the leader changing). Run with `--nocapture`
//! for the numbers; the bounds asserted are properties of the design in virtual time (the
//! adaptive failure timeout's ceiling, no false suspicion at a stable leader), not speed
//! claims about hardware.

use velos_core::log::LogConfig;
use velos_rdma::NodeId;
use velos_sim::latency::LatencyModel;
use velos_sim::machine::CrashMode;
use velos_sim::simulate::{Fault, Simulator};
use velos_testkit::harness::cluster::{ClusterSpec, machine, report, sim_config};
use velos_testkit::harness::script::{ClientScript, Scripted};

const SEEDS: u64 = 100;

fn spec(seed: u64, latency: LatencyModel, duration_ns: u64) -> ClusterSpec {
    let client = ClientScript {
        count: 4096,
        size: 16,
    };
    ClusterSpec {
        latency,
        ..ClusterSpec::new(LogConfig::new(3, 4096, 16), seed, duration_ns, client)
    }
}

/// One failover: ns after the crash until the next leader's term started and until the
/// first entry applied at a surviving replica once it did (the new leader's first
/// decision; entries applied before are ones the crashed leader decided).
#[derive(Debug)]
struct Failover {
    takeover: u64,
    decision: u64,
}

fn replay(seed: u64, profile: &str, crash: u64) -> String {
    format!(
        "cargo run --release -- sim --replicas 3 --seed {seed} --latency {profile} \
         --duration 400us --crash-leader-at {crash}"
    )
}

/// Crashes the leader of seed `seed` at a time between 100 and 200 µs.
fn failover(seed: u64, latency: LatencyModel) -> Result<Failover, String> {
    let crash = 100_000 + (seed * 7_919) % 100_000;
    let spec = spec(seed, latency, crash + 300_000);
    let name = spec.latency.name.clone();
    let mut sim = Simulator::new(machine(&spec), sim_config(&spec));
    sim.run(crash, u64::MAX);
    let m = sim.machine();
    let leader = m
        .threads
        .iter()
        .position(|t| t.process.is_leader())
        .ok_or("no leader at the crash")?;
    sim.inject(Fault::Crash {
        node: NodeId(leader as u16),
        mode: CrashMode::Hang,
    });
    sim.run(spec.duration_ns, u64::MAX);
    let r = report(&spec, &sim);
    let fail = |what: String| {
        format!(
            "seed {seed}: {what}\n  replay: {}",
            replay(seed, &name, crash)
        )
    };
    if !r.ok() {
        return Err(fail(format!("checks {:?}: {:?}", r.checks, r.failures)));
    }
    let takeover = r
        .leader_changes
        .iter()
        .find(|c| c.at_ns >= crash)
        .ok_or_else(|| fail("never a new leader".into()))?
        .at_ns;
    let decision = r
        .replicas
        .iter()
        .filter(|rep| !rep.crashed)
        .filter_map(|rep| rep.applied_at.iter().find(|&&t| t >= takeover).copied())
        .min()
        .ok_or_else(|| fail("no decision after the crash".into()))?;
    Ok(Failover {
        takeover: takeover - crash,
        decision: decision - crash,
    })
}

/// Leader views that changed in a run of `duration_ns` without a crash: each is a false
/// suspicion (the first view, replica 0 at time 0, is not a change).
fn false_suspicions(seed: u64, latency: LatencyModel, duration_ns: u64) -> usize {
    let spec = spec(seed, latency, duration_ns);
    let mut sim: Simulator<Scripted> = Simulator::new(machine(&spec), sim_config(&spec));
    sim.run(duration_ns, u64::MAX);
    let r = report(&spec, &sim);
    assert!(r.ok(), "seed {seed}: {:?}", r.failures);
    sim.machine()
        .threads
        .iter()
        .map(|t| t.process.leader_changes.len().saturating_sub(1))
        .sum()
}

fn quantiles(mut v: Vec<u64>) -> (u64, u64, u64) {
    v.sort_unstable();
    let p99 = v[(v.len() * 99).div_ceil(100) - 1];
    (v[v.len() / 2], p99, v[v.len() - 1])
}

/// Failover over `SEEDS` seeds: (median, p99, max) of takeover and of the next decision.
fn measure(latency: fn() -> LatencyModel) -> ((u64, u64, u64), (u64, u64, u64)) {
    let runs: Vec<Failover> = (0..SEEDS)
        .map(|seed| failover(seed, latency()).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let takeover = quantiles(runs.iter().map(|f| f.takeover).collect());
    let decision = quantiles(runs.iter().map(|f| f.decision).collect());
    eprintln!(
        "{}: {SEEDS} leader crashes, ns after the crash (median / p99 / max): \
         takeover {takeover:?}, next decision {decision:?}",
        latency().name
    );
    (takeover, decision)
}

/// Under `paper-cx6` the adaptive timeout settles near 3 heartbeat-read round trips
/// (measured: takeover median 5.6 µs, next decision median 10.1 µs, p99 11.2 µs). With
/// rule (watch the leader) a follower samples the leader's counter once per read round
/// trip; without it, once per two heartbeat periods, and the takeover median was 7.5 µs:
/// the takeover bound fails then. The decision bound leaves room for changes elsewhere
/// but fails if detection falls back to the 20 µs ceiling.
#[test]
fn failover_under_paper_cx6() {
    let (takeover, decision) = measure(LatencyModel::paper_cx6);
    assert!(
        takeover.0 <= 6_500,
        "takeover median {} ns: rule (watch the leader)",
        takeover.0
    );
    assert!(
        decision.0 <= 20_000,
        "next decision median {} ns",
        decision.0
    );
}

#[test]
fn failover_under_cluster() {
    let (takeover, _) = measure(LatencyModel::cluster);
    assert!(takeover.2 <= 22_000, "the ceiling bounds detection");
}

#[test]
fn no_false_suspicions_in_steady_state() {
    for latency in [LatencyModel::paper_cx6, LatencyModel::cluster] {
        let total: usize = (0..SEEDS)
            .map(|seed| false_suspicions(seed, latency(), 2_000_000))
            .sum();
        eprintln!(
            "{}: {SEEDS} seeds × 2 ms without a crash: {total} false suspicions",
            latency().name
        );
        assert_eq!(
            total,
            0,
            "{}: a stable leader is never suspected",
            latency().name
        );
    }
}
