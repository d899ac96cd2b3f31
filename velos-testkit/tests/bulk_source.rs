//! Rule (a region per silent source), `velos_core`'s `log/replica/bulk.rs`: a bulk
//! catch-up's value reads given up towards a peer that crashed for good (it hangs, and is
//! never replaced) may still land, so their region stays held — but only that region, and
//! only that peer is not read from. One shared region, held for ever, turned every later
//! catch-up into one slot per round trip: the replica fell behind the leader, and where
//! the leader needed its snapshots to reuse the ring the log stopped (`velos vopr
//! --overflow` seeds 3099 and 10486).
//!
//! The class: a replacement learning the backlog in bulk (a 4,096-slot ring that never
//! recycles, so it learns by reading) while the leader it reads from crashes, at drawn
//! moments across its catch-up. Where a value round towards the crashed leader was given
//! up (the premise, from the replacement's events), it must still catch up with the new
//! leader's log, which keeps deciding.

use velos_core::log::{Event, LogConfig};
use velos_sim::rng::Rng;
use velos_sim::simulate::Simulator;
use velos_testkit::harness::cluster::{
    ClusterSpec, crash_leader, machine, replace, report_with, sim_config,
};
use velos_testkit::harness::script::ClientScript;
use velos_testkit::harness::service::Services;

const START: u64 = 1_000_000;
const END: u64 = 2_000_000;
const SCHEDULES: u64 = 16;
const REPLACED: u16 = 4;

/// The command that replays schedule `seed` (without the events).
fn replay(seed: u64, crash_at: u64) -> String {
    format!(
        "cargo run --release -- sim --replicas 5 --seed {seed} --duration {END} --slots 4096 \
         --value-size 16 --values 1000000 --replace {REPLACED}@{START}+0 \
         --crash-leader-at {crash_at}"
    )
}

#[test]
fn a_bulk_source_that_crashes_for_good_holds_one_region_and_the_catch_up_goes_on() {
    let mut abandoned = 0;
    for seed in 0..SCHEDULES {
        // Across the replacement's catch-up (it starts at START, blank).
        let crash_at = START + 5_000 + Rng::new(seed).below(150_000);
        let client = ClientScript {
            count: 1_000_000,
            size: 16,
        };
        let spec = ClusterSpec {
            replace: vec![(REPLACED, START, 0)],
            ..ClusterSpec::new(LogConfig::new(5, 4096, 16), seed, END, client)
        };
        let again = replay(seed, crash_at);
        let mut sim = Simulator::new(machine(&spec), sim_config(&spec));
        let mut services = Services::new(&spec);
        services.run(&mut sim, START);
        sim.inject(velos_sim::simulate::Fault::Crash {
            node: velos_rdma::NodeId(REPLACED),
            mode: velos_sim::machine::CrashMode::Hang,
        });
        replace(&spec, &mut sim, &mut services, REPLACED);
        let new = usize::from(REPLACED);
        sim.machine_mut().threads[new].process.report_events();
        services.run(&mut sim, crash_at);
        let behind = sim.machine().threads[new].process.next_apply();
        let crashed = crash_leader(&mut sim).expect("premise: a replica led");
        services.run(&mut sim, END);
        let report = report_with(&spec, &sim, &services);
        assert!(report.ok(), "{again}: {:?}", report.failures);
        let events = sim.machine_mut().threads[new].process.take_events();
        let gave_up = events
            .iter()
            .any(|e| matches!(e, Event::BulkAbandoned { source } if *source == crashed));
        let m = sim.machine();
        let leader = m
            .threads
            .iter()
            .find(|t| m.is_up(t.node) && t.process.is_leader());
        let log = leader.expect("premise: a new leader").process.next_apply();
        let caught = m.threads[new].process.next_apply();
        println!(
            "seed {seed}: leader {crashed} crashed at {crash_at} ns with the replacement at \
             slot {behind}; value reads given up: {gave_up}; at the end the log is at {log}, \
             the replacement at {caught}"
        );
        let backlog = report
            .replicas
            .iter()
            .find(|r| (r.id, r.incarnation) == (crashed, 0));
        let at_crash = backlog.expect("the crashed leader's report").applied.len() as u64;
        assert!(
            log > at_crash + 100,
            "{again}: premise, the new leader decided ({log} after {at_crash})"
        );
        if !gave_up {
            continue; // no value round was out towards the crashed leader
        }
        abandoned += 1;
        // Caught up: within a pipeline's worth of the leader (what is in flight).
        assert!(
            caught + 16 >= log,
            "{again}: the replacement stayed behind after giving up reads from {crashed}: \
             slot {caught} against the log's {log}"
        );
    }
    assert!(
        abandoned >= SCHEDULES / 4,
        "premise: value reads towards the crashed leader were given up in {abandoned} of \
         {SCHEDULES} schedules"
    );
}
