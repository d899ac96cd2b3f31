//! A replica that cannot reach the leader, while the leader and a majority reach each
//! other, does not keep claiming the lead (rule (outvoted claim), `velos_core`'s
//! `log/replica/turn.rs`).
//!
//! The class: the queue pairs from one follower towards the leader break (one way: the
//! leader still reaches the follower). The follower's reads of the leader's heartbeat fail,
//! so its Ω suspects the leader for good and names the follower itself; it starts a term.
//! The leader reads the follower's heartbeat and the others' as before, so it leads on
//! too: two leaders, each aborting the other's slots, until the run ends (seed 891 of
//! `velos vopr`: from 317 µs to the end). With the rule, a replica whose Ω names it while
//! a majority of the voters is with another live leader steps down after a failure
//! timeout, and stays down while that majority lasts.
//!
//! Premises, per run: the cut follower started a term after the break (it did suspect the
//! leader), slots were decided after the break. The checks: from [`SETTLE_NS`] after the
//! break on, at most one replica leads at every sample, and commits never stop for longer
//! than two failure timeouts. Run with `--nocapture` for each run's numbers.

use std::cell::Cell;
use velos_rdma::NodeId;
use velos_sim::simulate::{Fault, Simulator};
use velos_testkit::harness::cluster::most_applied;
use velos_testkit::harness::cluster::{ClusterSpec, Services, leader, machine, sim_config};
use velos_testkit::harness::script::Scripted;

/// When the follower's queue pairs towards the leader break (ns).
const BREAK_NS: u64 = 100_000;

/// How long after the break the duel may last (ns): the follower's detection, its term,
/// a failure timeout outvoted, the step down.
const SETTLE_NS: u64 = 80_000;

/// How long the run goes on after the break (ns).
const AFTER_NS: u64 = 600_000;

/// Step of the driver (ns): the resolution of the samples and the gaps.
const STEP_NS: u64 = 1_000;

/// The first leader (the lowest id) and the follower cut off from it.
const LEADER: u16 = 0;
const CUT: u16 = 1;

/// One run's numbers.
#[derive(Debug)]
struct Run {
    /// Terms the cut follower started after the break.
    terms: usize,
    /// Samples from the settling on at which more than one replica led.
    duels: u64,
    /// Slots decided after the break.
    decided: u64,
    /// The longest time without a commit from the settling on (ns).
    gap: u64,
}

fn leaders(sim: &Simulator<Scripted>) -> usize {
    let m = sim.machine();
    m.threads
        .iter()
        .filter(|t| m.is_up(t.node) && t.process.is_leader())
        .count()
}

fn run(replicas: u16, seed: u64) -> Run {
    let spec = ClusterSpec::busy_ring(replicas, 4, seed);
    let mut sim = Simulator::new(machine(&spec), sim_config(&spec));
    let mut services = Services::new(&spec);
    services.run(&mut sim, BREAK_NS);
    assert_eq!(leader(&sim), Some(LEADER), "premise: the lowest id leads");
    sim.inject(Fault::QueuePairError {
        from: NodeId(CUT),
        to: NodeId(LEADER),
    });
    let terms_before = sim.machine().threads[usize::from(CUT)]
        .process
        .terms_started
        .len();
    let before = most_applied(&sim, None);
    let since = BREAK_NS + SETTLE_NS;
    let duels = Cell::new(0);
    let reached = |sim: &Simulator<Scripted>| {
        if sim.now() >= since && leaders(sim) > 1 {
            duels.set(duels.get() + 1);
        }
        most_applied(sim, None)
    };
    let end = BREAK_NS + AFTER_NS;
    let (gap, last) = services.longest_gap(&mut sim, (before, since), (end, STEP_NS), reached);
    let terms = sim.machine().threads[usize::from(CUT)]
        .process
        .terms_started
        .len()
        - terms_before;
    Run {
        terms,
        duels: duels.get(),
        decided: last - before,
        gap,
    }
}

#[test]
fn a_replica_cut_off_from_the_leader_alone_does_not_lead_on_beside_it() {
    for replicas in [3u16, 5] {
        for seed in 0..4u64 {
            let r = run(replicas, seed);
            println!("{replicas} replicas, seed {seed}: {r:?}");
            let timeout = ClusterSpec::busy_ring(replicas, 4, seed)
                .log
                .failure_timeout_ns;
            assert!(
                r.terms > 0,
                "premise: the cut follower suspected the leader: {r:?}"
            );
            assert!(
                r.decided > 0,
                "premise: slots decided after the break: {r:?}"
            );
            assert_eq!(
                r.duels, 0,
                "{replicas} replicas, seed {seed}: two replicas led at {} samples after the \
                 settling: {r:?}",
                r.duels
            );
            assert!(
                r.gap <= 2 * timeout,
                "{replicas} replicas, seed {seed}: commits stopped for {} ns (bound {} ns): \
                 {r:?}",
                r.gap,
                2 * timeout
            );
        }
    }
}
