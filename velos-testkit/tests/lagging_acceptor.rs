//! Once a slow acceptor heals, the log runs at full speed again at once (rule (bounded
//! backlog), `velos_core`'s `log/links.rs`).
//!
//! The class: every step towards one replica's memory costs 20 µs more for a while
//! (`velos_sim`'s `Fault::Delay`): a follower's, or the leader's own (its accepts to
//! itself cross the slowed queue pair too). The leader keeps deciding at the other
//! acceptors' pace, and its operations towards the slow one wait for free result cells in
//! a backlog. While every slot's CAS and puts joined that backlog, it grew through the
//! fault and did not drain after it (the leader fed it one slot a turn and tested two
//! completions a turn); a backlog held the link congested, rule (no retry into a
//! congested link) held every retry back, and the first abort after the heal stopped the
//! log until the leader passed the lead (`velos vopr` seed 3484: 67 µs without a commit,
//! 250 operations waiting). Now a decided slot's operations leave the backlogs.
//!
//! Premises, per run: the slowed replica led (or followed) at the fault's start, and the
//! log decided through the fault (the backlog's source). Check: from the heal to the end,
//! the log never goes a failure timeout and a half without a commit — a failure timeout,
//! and room for one hand-back: with 5 replicas the slowed leader's peers take the lead now
//! and then during the fault, and at the heal the lowest claimant takes it back (rule
//! (sticky leader)), 20.1 µs at most. Without the rule, 6 of the 8 runs with the leader
//! slowed fail (49.5 to 57.3 µs without a commit; the other two 4.0 and 11.0); with a
//! follower slowed (the control) the log passes either way. Run with `--nocapture` for
//! each run's numbers.

use velos_core::log::LogConfig;
use velos_rdma::NodeId;
use velos_sim::simulate::{Fault, Simulator};
use velos_testkit::harness::cluster::{ClusterSpec, Services, machine, most_applied, sim_config};
use velos_testkit::harness::script::Scripted;

/// When the fault starts (ns).
const AT_NS: u64 = 200_000;

/// How long it lasts (ns).
const FAULT_NS: u64 = 200_000;

/// How long the run goes on after the heal (ns).
const AFTER_NS: u64 = 600_000;

/// Step of the driver (ns): the resolution of the gaps measured.
const STEP_NS: u64 = 1_000;

/// One run's numbers.
#[derive(Debug)]
struct Run {
    /// Slots decided during the fault.
    during: u64,
    /// The longest time without a commit from the heal to the end (ns).
    gap: u64,
}

/// Slows every step towards the leader's memory (`leader`), else a follower's.
fn run(replicas: u16, seed: u64, leader: bool) -> Run {
    let spec = ClusterSpec::busy_ring(replicas, LogConfig::new(replicas, 256, 16).pipeline, seed);
    let mut sim = Simulator::<Scripted>::new(machine(&spec), sim_config(&spec));
    let mut services = Services::new(&spec);
    services.run(&mut sim, AT_NS);
    let m = sim.machine();
    let led = m.threads.iter().find(|t| t.process.is_leader());
    let led = led
        .expect("premise: a replica leads at the fault's start")
        .process
        .id();
    let slowed = if leader { led } else { (led + 1) % replicas };
    let start = most_applied(&sim, None);
    sim.inject(Fault::Delay {
        node: NodeId(slowed),
        extra_ns: 20_000,
        duration_ns: FAULT_NS,
    });
    let healed = AT_NS + FAULT_NS;
    services.run(&mut sim, healed);
    let from = most_applied(&sim, None);
    let end = healed + AFTER_NS;
    let (gap, _) = services.longest_gap(&mut sim, (from, healed), (end, STEP_NS), |sim| {
        most_applied(sim, None)
    });
    Run {
        during: from - start,
        gap,
    }
}

#[test]
fn a_healed_acceptor_does_not_hold_the_log_back() {
    let mut failed = Vec::new();
    for replicas in [3, 5] {
        for seed in 0..4u64 {
            for leader in [true, false] {
                let r = run(replicas, seed, leader);
                let what = format!(
                    "{replicas} replicas, seed {seed}, the {} slowed",
                    if leader { "leader" } else { "follower" }
                );
                println!("{what}: {r:?}");
                assert!(
                    r.during > 50,
                    "premise: {what}: the log decided through the fault"
                );
                let timeout = LogConfig::new(replicas, 256, 16).failure_timeout_ns;
                let bound = timeout + timeout / 2;
                if r.gap > bound {
                    failed.push(format!("{what}: {r:?}, more than {bound} ns"));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
