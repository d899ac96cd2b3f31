//! The simulator's cache of enabled steps (`velos-sim`'s `machine/enabled_cache.rs`,
//! lemma (cache key)): at every step of whole engine runs — five replicas, values of
//! 129 words read as that many one-word gets, every kind of fault the emulator has (a
//! pause, slow links both ways, a queue pair broken one way, crashes that hang and that
//! fail) — every part the cache would reuse is what a walk of its queue pair gives.
//!
//! Premises: the runs took steps, faults were applied, and most steps reused parts of
//! the cache (else the check compares nothing).

use velos_core::log::LogConfig;
use velos_rdma::NodeId;
use velos_sim::machine::CrashMode;
use velos_sim::simulate::{Fault, ScheduledFault, Simulator};
use velos_testkit::harness::cluster::{ClusterSpec, machine, sim_config};
use velos_testkit::harness::script::ClientScript;

const END_NS: u64 = 400_000;

fn at(at_ns: u64, fault: Fault) -> ScheduledFault {
    ScheduledFault { at_ns, fault }
}

#[test]
fn every_part_the_cache_reuses_is_what_a_walk_gives() {
    let (mut steps, mut reusing, mut faults) = (0u64, 0u64, 0usize);
    for seed in 0..3u64 {
        let mut log = LogConfig::new(5, 256, 1024);
        log.pipeline = 4;
        let client = ClientScript {
            count: 1_000_000,
            size: 1024,
        };
        let spec = ClusterSpec::new(log, seed, END_NS, client);
        let mut config = sim_config(&spec);
        let node = |n: u16| NodeId(n);
        config.faults.extend([
            at(
                40_000,
                Fault::Pause {
                    node: node(1),
                    duration_ns: 30_000,
                },
            ),
            ScheduledFault::delay(2, 60_000, 5_000, 40_000),
            ScheduledFault::delay_from(3, 90_000, 5_000, 40_000),
            at(
                150_000,
                Fault::QueuePairError {
                    from: node(4),
                    to: node(0),
                },
            ),
            at(
                200_000,
                Fault::Crash {
                    node: node(0),
                    mode: CrashMode::Hang,
                },
            ),
            at(
                280_000,
                Fault::Crash {
                    node: node(2),
                    mode: CrashMode::Error,
                },
            ),
        ]);
        let mut sim = Simulator::new(machine(&spec), config);
        while sim.now() < END_NS {
            assert!(
                sim.enabled_cache_agrees(),
                "seed {seed}, step {}: a reused part differs from a walk",
                sim.steps()
            );
            let (active, fresh) = sim.enabled_cache_reuse();
            reusing += u64::from(active > 0 && fresh > 0);
            if !sim.step() {
                break;
            }
            steps += 1;
        }
        faults += sim.faults_applied();
    }
    println!("{steps} steps, {reusing} reusing parts of the cache, {faults} faults");
    assert!(steps > 100_000, "premise: the runs took steps ({steps})");
    assert_eq!(faults, 3 * 6, "premise: every fault was applied");
    assert!(
        reusing * 2 > steps,
        "premise: most steps reused the cache ({reusing} of {steps})"
    );
}
