//! A follower keeps up with the leader while it is in every majority (rule (learn a run),
//! `velos_core`'s `log/replica/reads.rs`).
//!
//! The class: a follower's link is slow for a while (every queue-pair step towards it waits
//! 20 µs for 60 µs), so it falls behind while the two others decide; then the third replica
//! crashes. The follower is now in every majority the leader decides with, and its snapshot
//! point in every majority's: the ring's room — how far past the oldest slot a majority
//! still needs the leader may open — moves only as fast as the follower applies. A follower
//! that learned one slot a turn kept its lag at pipeline 8, where a stable leader decides
//! faster than one slot a follower's turn: 163 to 224 slots behind, and three runs of four
//! stopped for 62 to 75 µs each time the ring's room closed (pipelines 2 and 4 caught up).
//! With the rule every run stays within a few windows and no commit gap exceeds 8.2 µs.
//!
//! Premises, per run: the follower was more than the bound behind at the crash, the
//! crashed replica stayed down, the first leader kept the lead, slots were decided after
//! the crash. The checks: from [`CATCH_UP_NS`] after the crash on, the follower is never
//! more than [`LAG_BOUND`] behind the leader, and commits never stop for longer than two
//! failure timeouts (from two failure timeouts after the crash). Run with `--nocapture`
//! for each run's numbers.

use std::cell::Cell;
use velos_rdma::NodeId;
use velos_sim::machine::CrashMode;
use velos_sim::simulate::{Fault, ScheduledFault, Simulator};
use velos_testkit::harness::cluster::most_applied as harness_most_applied;
use velos_testkit::harness::cluster::{ClusterSpec, Services, leader, machine, sim_config};
use velos_testkit::harness::script::Scripted;

/// The follower's slow link: from (ns), for (ns), each queue-pair step towards it this much
/// slower (ns). It falls behind while the two others decide.
const SLOW: (u64, u64, u64) = (100_000, 60_000, 20_000);

/// Virtual time of the crash (ns): 30 µs after the follower's link recovered (its backlog
/// of slowed steps drained, and the leader's Ω trusts it again).
const CRASH_NS: u64 = 190_000;

/// How long the follower has to catch up after the crash (ns): the lag is checked from
/// then on.
const CATCH_UP_NS: u64 = 200_000;

/// The first leader (the lowest id), the follower slowed, the replica crashed.
const LEADER: u16 = 0;
const FOLLOWER: u16 = 1;
const DOWN: u16 = 2;

/// How long the run goes on after the crash (ns).
const AFTER_NS: u64 = 1_000_000;

/// Step of the driver (ns): the resolution of the samples and the gaps.
const STEP_NS: u64 = 1_000;

/// How far behind the leader the follower may be at a sample, in windows (pipelines) and
/// slots: a slot is proven to a follower by a later word's previous-decision count, which
/// the leader writes a window later, within the turn's look-ahead of 8 words; the rest is
/// the slots decided while a turn runs. (Without rule (learn a run) the lag stays where the
/// slow link left it, or grows, to hundreds of slots.)
const LAG_BOUND: (u64, u64) = (4, 8);

/// One run's numbers.
#[derive(Debug)]
struct Run {
    /// Slots the follower was behind the leader at the crash.
    lag_at_crash: u64,
    /// The most slots the follower was behind the leader at a sample once it had time to
    /// catch up.
    max_lag: u64,
    /// Slots decided after the crash.
    decided: u64,
    /// The longest time without a commit after the crash's own settling (ns).
    gap: u64,
}

fn next_apply(sim: &Simulator<Scripted>, r: u16) -> u64 {
    sim.machine().threads[usize::from(r)].process.next_apply()
}

fn run(seed: u64, pipeline: u32) -> Run {
    let spec = ClusterSpec::busy_ring(3, pipeline, seed);
    let mut config = sim_config(&spec);
    let (from, slow_for, extra) = SLOW;
    config
        .faults
        .push(ScheduledFault::delay(FOLLOWER, from, extra, slow_for));
    let mut sim = Simulator::new(machine(&spec), config);
    let mut services = Services::new(&spec);
    services.run(&mut sim, CRASH_NS);
    assert_eq!(leader(&sim), Some(LEADER), "premise: the lowest id leads");
    sim.inject(Fault::Crash {
        node: NodeId(DOWN),
        mode: CrashMode::Hang,
    });
    let lag = |sim: &Simulator<Scripted>| {
        next_apply(sim, LEADER).saturating_sub(next_apply(sim, FOLLOWER))
    };
    let lag_at_crash = lag(&sim);
    let before = harness_most_applied(&sim, None);
    let since = CRASH_NS + 2 * spec.log.failure_timeout_ns;
    let max_lag = Cell::new(0);
    let end = CRASH_NS + AFTER_NS;
    // At every sample: the premise, the lag once it had time to close, how far the log got.
    let reached = |sim: &Simulator<Scripted>| {
        assert_eq!(leader(sim), Some(LEADER), "premise: the leader stays");
        if sim.now() >= CRASH_NS + CATCH_UP_NS {
            max_lag.set(max_lag.get().max(lag(sim)));
        }
        harness_most_applied(sim, None)
    };
    let (gap, last) = services.longest_gap(&mut sim, (before, since), (end, STEP_NS), reached);
    assert!(
        !sim.machine().is_up(NodeId(DOWN)),
        "premise: the crashed replica stayed down"
    );
    Run {
        lag_at_crash,
        max_lag: max_lag.get(),
        decided: last - before,
        gap,
    }
}

#[test]
fn with_a_replica_down_the_other_follower_stays_within_a_few_windows_of_the_leader() {
    for pipeline in [2, 4, 8] {
        for seed in 0..4u64 {
            let r = run(seed, pipeline);
            println!("pipeline {pipeline}, seed {seed}: {r:?}");
            let timeout = ClusterSpec::busy_ring(3, pipeline, seed)
                .log
                .failure_timeout_ns;
            assert!(r.decided > 0, "premise: slots decided after the crash");
            let bound = LAG_BOUND.0 * u64::from(pipeline) + LAG_BOUND.1;
            assert!(
                r.lag_at_crash > bound,
                "premise: the slow link left the follower behind: {r:?}"
            );
            assert!(
                r.max_lag <= bound,
                "pipeline {pipeline}, seed {seed}: the follower fell {} slots behind the \
                 leader (bound {bound}): {r:?}",
                r.max_lag
            );
            assert!(
                r.gap <= 2 * timeout,
                "pipeline {pipeline}, seed {seed}: commits stopped for {} ns (bound {} ns): \
                 {r:?}",
                r.gap,
                2 * timeout
            );
        }
    }
}
