//! Velos clusters on the simulation driver over many seeds, with the leader crashed and a
//! minority of followers crashed: every run must pass agreement, validity, integrity and
//! no holes, and, once a stable leader is in place, every value it proposes is applied by
//! every live replica. A failing seed prints the command that replays it.

use velos_core::log::LogConfig;
use velos_testkit::harness::cluster::{ClusterReport, ClusterSpec, run};
use velos_testkit::harness::script::ClientScript;

const SEEDS: u64 = 200;
const VALUES: u64 = 40;
const DURATION_NS: u64 = 1_500_000;

/// The faults of seed `seed`: 3 or 5 replicas; the leader crashed between 50 and 450 µs;
/// with 5 replicas, a follower crashed too (a minority of two in all).
fn spec(seed: u64) -> ClusterSpec {
    let replicas = if seed % 2 == 0 { 3 } else { 5 };
    let crash_leader_at = 50_000 + (seed * 7_919) % 400_000;
    let crashes = if replicas == 5 {
        vec![(4 - (seed % 3) as u16, (seed * 104_729) % 600_000)]
    } else {
        Vec::new()
    };
    let client = ClientScript {
        count: VALUES,
        size: 16,
    };
    let log = LogConfig::new(replicas, 1024, 16);
    ClusterSpec {
        crash_leader_at: Some(crash_leader_at),
        crashes,
        ..ClusterSpec::new(log, seed, DURATION_NS, client)
    }
}

fn replay(spec: &ClusterSpec) -> String {
    let mut cmd = format!(
        "cargo run --release -- sim --replicas {} --seed {} --duration {} --slots {} \
         --values {VALUES} --crash-leader-at {}",
        spec.log.replicas,
        spec.seed,
        spec.duration_ns,
        spec.log.slots,
        spec.crash_leader_at.expect("set")
    );
    for (n, t) in &spec.crashes {
        cmd += &format!(" --crash {n}@{t}");
    }
    cmd
}

/// Liveness after the faults: the last leader's values are all applied everywhere alive.
fn liveness(report: &ClusterReport) -> Result<(), String> {
    let last = report.leader_changes.last().ok_or("no leader ever")?;
    let crash_leader = report.leader_changes.len() >= 2;
    if !crash_leader {
        return Err("the crashed leader was never replaced".into());
    }
    let prefix = format!("{:04x}", last.leader.swap_bytes());
    let theirs: Vec<&String> = report
        .proposed
        .iter()
        .filter(|v| v.starts_with(&prefix))
        .collect();
    if theirs.len() as u64 != VALUES {
        return Err(format!(
            "leader {} proposed {} of its {VALUES} values",
            last.leader,
            theirs.len()
        ));
    }
    for r in report.replicas.iter().filter(|r| !r.crashed) {
        for v in &theirs {
            if !r.applied.iter().any(|(_, a)| a == *v) {
                return Err(format!("replica {} never applied {v}", r.id));
            }
        }
    }
    Ok(())
}

#[test]
fn two_hundred_seeds_with_leader_and_minority_crashes() {
    let mut failed = Vec::new();
    let mut failover_ns: Vec<(u64, u64)> = Vec::new();
    for seed in 0..SEEDS {
        let spec = spec(seed);
        let report = run(&spec);
        let live = liveness(&report);
        if !report.ok() || live.is_err() {
            failed.push(format!(
                "seed {seed}: checks {:?}, liveness {live:?}, first failures {:?}\n  replay: {}",
                report.checks,
                report.failures.iter().take(3).collect::<Vec<_>>(),
                replay(&spec)
            ));
            continue;
        }
        let crash = spec.crash_leader_at.expect("set");
        if let Some(change) = report.leader_changes.iter().find(|c| c.at_ns >= crash) {
            // The first entry the new leader applies after its term starts.
            let leader = &report.replicas[usize::from(change.leader)];
            if let Some(&first) = leader.applied_at.iter().find(|&&t| t >= change.at_ns) {
                failover_ns.push((change.at_ns - crash, first - crash));
            }
        }
    }
    if !failover_ns.is_empty() {
        let median = |mut v: Vec<u64>| {
            v.sort_unstable();
            (v[v.len() / 2], v[v.len() - 1])
        };
        let elected = median(failover_ns.iter().map(|f| f.0).collect());
        let decided = median(failover_ns.iter().map(|f| f.1).collect());
        eprintln!(
            "{} runs, virtual ns after the leader's crash: new leader median {}, max {}; \
             its first decision median {}, max {}",
            failover_ns.len(),
            elected.0,
            elected.1,
            decided.0,
            decided.1
        );
    }
    assert!(
        failed.is_empty(),
        "{} seeds failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The same seed gives the same run, bit for bit.
#[test]
fn a_seed_replays_exactly() {
    let a = run(&spec(7));
    let b = run(&spec(7));
    assert_eq!(a.steps, b.steps);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

/// The checks have teeth: each deliberately wrong variant of the slot protocol (velos-core's
/// `mutations` feature) breaks a check on some of the seeds above, with the followers
/// slowed down (a leader's own acceptor answers first; without slow followers the other
/// acceptors have executed an accept before its loopback completion arrives, and deciding
/// on one accept goes unseen).
#[test]
fn the_checks_catch_each_mutation() {
    use velos_core::slot::Mutation;
    // ReuseProposal needs two proposers racing on one slot, which a cluster with one
    // leader at a time does not produce: the two-proposer runs of
    // `src/harness/mutation_checks.rs` catch it.
    for mutation in [Mutation::SkipAdoption, Mutation::AcceptWithoutMajority] {
        let caught = (0..SEEDS).find_map(|seed| {
            let mut spec = spec(seed);
            spec.log.mutation = mutation;
            spec.slow = (1..spec.log.replicas).map(|r| (r, 3_000)).collect();
            let report = run(&spec);
            (!report.ok()).then(|| (seed, report.failures[0].clone()))
        });
        match caught {
            Some((seed, failure)) => eprintln!("{mutation:?}: caught at seed {seed}: {failure}"),
            None => panic!("{mutation:?} passed every check on {SEEDS} seeds"),
        }
    }
}

/// A leader's short pause with a deep pipeline: the others suspect it and one of them
/// starts preparing, so the leader's attempts abort after their accepts reached a majority,
/// and the followers' catch-ups skip it. Two bugs showed here, each on several of these
/// seeds before its fix:
/// * integrity — re-preparing, the leader adopted its own value back and, deciding it,
///   proposed it once more in a later slot ("decided twice"; lemma (own adoption) in
///   `velos_core::log::leader`);
/// * liveness — a catch-up that started while the leader was suspected waited for ever for
///   its answer, though it was never asked (a follower stuck near entry 89 of 300).
#[test]
fn a_paused_leader_decides_each_value_once_and_every_replica_keeps_up() {
    let mut failed = Vec::new();
    for (pause_ns, seeds) in [(15_000, 40), (25_000, 60)] {
        for seed in 0..seeds {
            let client = ClientScript {
                count: 300,
                size: 16,
            };
            let mut log = LogConfig::new(3, 4096, 16);
            log.pipeline = 8;
            let mut spec = ClusterSpec::new(log, seed, 3_000_000, client);
            spec.pauses = vec![(0, 300_000, pause_ns)];
            let report = run(&spec);
            let applied: Vec<usize> = report.replicas.iter().map(|r| r.applied.len()).collect();
            // Every value proposed is applied everywhere (a no-op may fill a slot too).
            let all = applied.iter().all(|&n| n == applied[0] && n >= 300);
            if !report.ok() || !all {
                failed.push(format!(
                    "seed {seed}: applied {applied:?}, {:?}\n  replay: cargo run --release -- \
                     sim --seed {seed} --pipeline 8 --values 300 --duration 3ms --pause \
                     0@300us+{}us",
                    report.failures.iter().take(2).collect::<Vec<_>>(),
                    pause_ns / 1000
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A leader paused long enough for another replica to take over and adopt the value the
/// paused leader had written into a slot, then leading again (the lowest live id) without
/// a new term: its attempt at that slot aborts, it reads the value back from the other
/// leader's buffer — under the other's stamp key — and decides it. Before values carried
/// their origin (`velos_core::log::leader::Value::origin`) it did not know the value for
/// its own and proposed it once more in a later slot: "decided twice" on 6 of these 40
/// runs (found by `velos vopr`, seed 65).
#[test]
fn a_leader_knows_its_own_value_in_a_slot_another_leader_adopted_it_into() {
    let mut failed = Vec::new();
    for pause_at_us in (300..=480).step_by(20) {
        for seed in 1..=4 {
            let client = ClientScript {
                count: 100_000,
                size: 16,
            };
            let mut log = LogConfig::new(5, 4096, 16);
            log.pipeline = 4;
            let mut spec = ClusterSpec::new(log, seed, 1_000_000, client);
            spec.latency = velos_sim::latency::LatencyModel::generic();
            spec.crashes = vec![(0, 60_000), (1, 167_000)];
            spec.pauses = vec![(2, pause_at_us * 1_000, 50_000)];
            let report = run(&spec);
            if !report.ok() {
                failed.push(format!(
                    "{:?}\n  replay: cargo run --release -- sim --replicas 5 --seed {seed} \
                     --crash 0@60us --crash 1@167us --pause 2@{pause_at_us}us+50us \
                     --pipeline 4 --latency generic --duration 1ms --values 100000",
                    report.failures.iter().take(2).collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// `crash_leader_at` states its premise: a crash asked for when no replica leads yet (at
/// 0 ns) crashes nobody, and the run fails saying so — it used to pass in silence; asked
/// for once a leader leads, it crashes it and the check passes.
#[test]
fn a_leader_crash_that_crashes_nobody_fails_the_run() {
    // Seed 2: three replicas, no other crash.
    let mut early = spec(2);
    early.crash_leader_at = Some(0);
    let report = run(&early);
    assert_eq!(report.checks.get("crash_leader"), Some(&false));
    assert!(
        report
            .failures
            .iter()
            .any(|f| f.contains("none was crashed")),
        "{:?}",
        report.failures
    );
    let mut later = spec(2);
    later.crash_leader_at = Some(300_000);
    let report = run(&later);
    assert_eq!(report.checks.get("crash_leader"), Some(&true));
    assert!(
        report.replicas.iter().filter(|r| r.crashed).count() == 1,
        "the leader crashed, and only it"
    );
}
