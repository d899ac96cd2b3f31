//! The overflow fallback in simulation: clusters whose slots start promised just below the
//! overflow threshold, with the leader and a minority crashed. Slots freeze epoch 0 and
//! are decided in epoch 1; every check must hold, every run must have used the fallback,
//! and the last leader's values must all be applied. A failing seed prints its replay.

use velos_core::log::LogConfig;
use velos_testkit::harness::cluster::{ClusterSpec, run};
use velos_testkit::harness::script::ClientScript;

const SEEDS: u64 = 60;
const VALUES: u64 = 20;
const DURATION_NS: u64 = 2_000_000;

/// Seed `seed`: 3 or 5 replicas, every slot promised 3 to 5 numbers below the threshold
/// and at the threshold at the last replica (a proposer whose prepare meets that one
/// aborts and overflows), the leader crashed, with 5 a follower too at the same moment.
/// Slots the old leader decided in epoch 0 without the last replica are then unknown to
/// the survivors' catch-up, and the new leader must carry them out of epoch 0.
fn spec(seed: u64) -> ClusterSpec {
    let replicas = if seed % 2 == 0 { 3 } else { 5 };
    let crash_leader_at = 50_000 + (seed * 7_919) % 400_000;
    let crashes = if replicas == 5 {
        vec![(4 - (seed % 3) as u16, crash_leader_at)]
    } else {
        Vec::new()
    };
    let client = ClientScript {
        count: VALUES,
        size: 16,
    };
    let log = LogConfig::new(replicas, 256, 16);
    ClusterSpec {
        crash_leader_at: Some(crash_leader_at),
        crashes,
        near_overflow: Some(3 + seed % 3),
        ..ClusterSpec::new(log, seed, DURATION_NS, client)
    }
}

fn replay(spec: &ClusterSpec) -> String {
    let mut cmd = format!(
        "cargo run --release -- sim --replicas {} --seed {} --duration {} --slots {} \
         --values {VALUES} --crash-leader-at {} --near-overflow {}",
        spec.log.replicas,
        spec.seed,
        spec.duration_ns,
        spec.log.slots,
        spec.crash_leader_at.expect("set"),
        spec.near_overflow.expect("set"),
    );
    for (n, t) in &spec.crashes {
        cmd += &format!(" --crash {n}@{t}");
    }
    cmd
}

#[test]
fn slots_driven_over_the_threshold_are_decided_in_the_next_epoch() {
    let mut failed = Vec::new();
    let mut frozen = Vec::new();
    for seed in 0..SEEDS {
        let spec = spec(seed);
        let report = run(&spec);
        let last = report.leader_changes.last().map(|c| c.leader);
        let prefix = last.map(|l| format!("{:04x}", l.swap_bytes()));
        let theirs: Vec<&String> = report
            .proposed
            .iter()
            .filter(|v| prefix.as_ref().is_some_and(|p| v.starts_with(p)))
            .collect();
        let unapplied = report
            .replicas
            .iter()
            .filter(|r| !r.crashed)
            .flat_map(|r| {
                theirs
                    .iter()
                    .filter(|v| !r.applied.iter().any(|(_, a)| a == **v))
                    .map(move |v| format!("replica {} never applied {v}", r.id))
            })
            .next();
        let live = report.leader_changes.len() >= 2 && theirs.len() as u64 == VALUES;
        if !report.ok() || report.frozen_slots == 0 || !live || unapplied.is_some() {
            failed.push(format!(
                "seed {seed}: checks {:?}, frozen slots {}, leader changes {}, last leader's \
                 values {}, {unapplied:?}, first failures {:?}\n  replay: {}",
                report.checks,
                report.frozen_slots,
                report.leader_changes.len(),
                theirs.len(),
                report.failures.iter().take(3).collect::<Vec<_>>(),
                replay(&spec)
            ));
        }
        frozen.push(report.frozen_slots);
    }
    frozen.sort_unstable();
    eprintln!(
        "{SEEDS} runs: slots frozen per run, median {}, min {}, max {}",
        frozen[frozen.len() / 2],
        frozen[0],
        frozen[frozen.len() - 1]
    );
    assert!(
        failed.is_empty(),
        "{} seeds failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// With one epoch only, a slot at the threshold cannot be decided: the log stops there,
/// and nothing is applied rather than anything wrong.
#[test]
fn one_epoch_at_the_threshold_stops_the_log() {
    let mut spec = spec(0);
    spec.log.epochs = 1;
    spec.near_overflow = Some(0);
    let report = run(&spec);
    assert!(report.ok(), "{:?}", report.failures);
    assert_eq!(
        report.frozen_slots, 0,
        "no epoch to move to, nothing frozen"
    );
    assert!(
        report.replicas.iter().all(|r| r.applied.is_empty()),
        "nothing decided"
    );
}

/// The carry has teeth: moving slots to epoch 1 without the value their frozen majority
/// holds (velos-core's `mutations` feature) breaks agreement on some seed above.
#[test]
fn the_checks_catch_a_dropped_carry() {
    use velos_core::slot::Mutation;
    let caught = (0..SEEDS).find_map(|seed| {
        let mut spec = spec(seed);
        spec.log.mutation = Mutation::DropCarry;
        let report = run(&spec);
        (!report.ok()).then(|| (seed, report.failures[0].clone()))
    });
    match caught {
        Some((seed, failure)) => eprintln!("DropCarry: caught at seed {seed}: {failure}"),
        None => panic!("DropCarry passed every check on {SEEDS} seeds"),
    }
}

/// Rule (give up): near the threshold, with snapshots and a crashed middle replica whose
/// operations hang, a slot could wait for ever on its CAS towards the crashed acceptor
/// while the other could no longer accept (a follower's repair had frozen its word). The
/// CASes towards a suspected acceptor are now reported lost and a hopeless attempt
/// aborts, so the log goes on. Before, about a third of these crash times stopped the log
/// at a few dozen entries.
#[test]
fn a_crashed_middle_acceptor_does_not_stop_a_log_over_the_threshold() {
    let mut stopped = Vec::new();
    for step in 0..12u64 {
        let crash_at = 400_000 + step * 8_000;
        let mut log = LogConfig::new(3, 4096, 16);
        log.pipeline = 1;
        log.max_snapshot_bytes = 8;
        let client = ClientScript {
            count: 100_000,
            size: 16,
        };
        let spec = ClusterSpec {
            crashes: vec![(1, crash_at)],
            near_overflow: Some(14),
            snapshot_every: Some(64),
            ..ClusterSpec::new(log, 1, 3_000_000, client)
        };
        let report = run(&spec);
        assert!(report.ok(), "crash at {crash_at}: {:?}", report.failures);
        let least = report
            .replicas
            .iter()
            .filter(|r| !r.crashed)
            .map(|r| r.applied.len())
            .min()
            .expect("survivors");
        // ~90 entries a millisecond at one slot in flight: a log that goes on for the
        // 2.5 ms after the crash applies well over 150.
        if least < 150 {
            stopped.push(format!(
                "crash at {crash_at} ns: a survivor applied {least} entries; replay: cargo run \
                 --release -- sim --near-overflow 14 --crash 1@{crash_at} --pipeline 1 \
                 --duration 3ms --values 100000 --slots 4096 --snapshot-every 64"
            ));
        }
    }
    assert!(
        stopped.is_empty(),
        "the log stopped:\n{}",
        stopped.join("\n")
    );
}
