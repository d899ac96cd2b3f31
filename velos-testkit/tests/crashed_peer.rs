//! What the survivors keep posting towards a crashed replica stays bounded for as long as
//! the crash lasts: a hung peer completes nothing, so anything posted per entry towards it
//! piles up on the queue pair (on a real NIC, in its send queue until that is full). Each
//! seed crashes the leader or a follower, in either crash mode, and samples the operations
//! queued towards the crashed node while the survivors decide entries for milliseconds.
//! The named case: `velos bench failover --velos-after-us 65536` took minutes, since the
//! new leader posted one value per entry towards its crashed predecessor (rule (puts wait
//! with their CAS)).

use velos_core::log::LogConfig;
use velos_rdma::NodeId;
use velos_sim::machine::{CrashMode, Machine};
use velos_sim::simulate::{Fault, Simulator};
use velos_testkit::harness::cluster::{ClusterSpec, machine, report, sim_config};
use velos_testkit::harness::script::ClientScript;

/// Replicas.
const REPLICAS: u16 = 3;
/// When the victim crashes (ns).
const CRASH_AT: u64 = 150_000;
/// How long the survivors run after it (ns): hundreds of entries each millisecond.
const AFTER: u64 = 3_000_000;
/// How often the queues towards the victim are sampled (ns).
const SAMPLE: u64 = 100_000;

/// The operations of every surviving thread queued towards `victim` and not yet done.
fn towards<P: velos_rdma::Process>(m: &Machine<P>, victim: NodeId) -> usize {
    (0..m.threads.len())
        .filter(|&t| m.threads[t].node != victim)
        .map(|t| {
            let qp = &m.qps[m.qp_index(t, victim)];
            qp.pipe.len() + qp.rw.len() + qp.lw.len()
        })
        .sum()
}

#[test]
fn operations_towards_a_crashed_replica_stay_bounded() {
    let log = LogConfig::new(REPLICAS, 4096, 16);
    // Per survivor: a CAS in every cell, the value's puts ahead of each, a few reads.
    let bound = (REPLICAS as usize - 1) * (3 * log.cas_cells() as usize + 16);
    let mut runs = 0;
    for seed in 0..8u64 {
        let mode = if seed % 4 < 2 {
            CrashMode::Hang
        } else {
            CrashMode::Error
        };
        let client = ClientScript {
            count: 4096,
            size: 16,
        };
        let spec = ClusterSpec::new(log.clone(), seed, CRASH_AT + AFTER, client);
        let replay = format!(
            "seed {seed}, {mode:?}, crashing the {}",
            ["leader", "follower"][seed as usize % 2]
        );
        let mut sim = Simulator::new(machine(&spec), sim_config(&spec));
        sim.run(CRASH_AT, u64::MAX);
        let m = sim.machine();
        let leader = (0..REPLICAS)
            .find(|&r| m.threads[usize::from(r)].process.is_leader())
            .unwrap_or_else(|| panic!("{replay}: a leader at the crash"));
        // Even seeds crash the leader, odd ones a follower.
        let victim = NodeId(if seed % 2 == 0 {
            leader
        } else {
            (leader + 1) % REPLICAS
        });
        let applied_at_crash = m.threads[usize::from((victim.0 + 1) % REPLICAS)]
            .process
            .applied
            .len();
        sim.inject(Fault::Crash { node: victim, mode });
        let mut most = 0;
        while sim.now() < CRASH_AT + AFTER {
            let next = (sim.now() + SAMPLE).min(CRASH_AT + AFTER);
            sim.run(next, u64::MAX);
            most = most.max(towards(sim.machine(), victim));
        }
        // The premises: the victim is down, and the survivors kept deciding after it.
        assert!(!sim.machine().is_up(victim), "{replay}: the victim crashed");
        let survivor = usize::from((victim.0 + 1) % REPLICAS);
        let decided = sim.machine().threads[survivor].process.applied.len() - applied_at_crash;
        assert!(
            decided >= 500,
            "{replay}: only {decided} entries decided after the crash"
        );
        assert!(
            most <= bound,
            "{replay}: {most} operations queued towards the crashed replica (bound {bound}) \
             while {decided} entries were decided"
        );
        let r = report(&spec, &sim);
        assert!(r.ok(), "{replay}: {:?}", r.failures);
        println!("{replay}: at most {most} operations towards it, {decided} entries after");
        runs += 1;
    }
    assert_eq!(runs, 8);
}
