//! A replica restarting with its disk (`Replica::resume_at`): a fresh process in a
//! crashed replica's place — blank memory, a new incarnation, joining through the log as
//! any replacement — that restored its service from the last snapshot its disk kept
//! resumes at that snapshot's point and reads only the tail it lacks from the ring; if
//! the ring moved past that tail meanwhile it copies a peer's snapshot as a blank process
//! does. Every run passes agreement, validity, integrity, no holes (the resume is a jump
//! of the new process's log, its digest held to the decided entries below it), the
//! snapshot and membership checks.

use velos_core::log::LogConfig;
use velos_rdma::NodeId;
use velos_sim::machine::CrashMode;
use velos_sim::simulate::{Fault, Simulator};
use velos_testkit::harness::cluster::{
    ClusterReport, ClusterSpec, Services, machine, report_with, restart_from, sim_config,
};
use velos_testkit::harness::script::ClientScript;

/// Crash and restart time of replica 2 (ns), and the run's end.
const CRASH_NS: u64 = 300_000;
const END_NS: u64 = 1_200_000;

/// What a run showed of replica 2's new process.
struct Rejoined {
    report: ClusterReport,
    /// The point its disk's snapshot held (the old process's last snapshot).
    point: u64,
    /// How far the log had got when the new process started.
    reached: u64,
    /// Snapshots its engine copied from peers.
    copies: Vec<u64>,
    /// The first slot it applied itself.
    first_applied: Option<u64>,
}

/// A 3-replica log on a ring of `slots`, services snapshotting every 16 entries; replica
/// 2 crashes at 300 µs and a fresh process starts in its place `down_ns` later, resuming
/// from the old process's last snapshot if `resume`.
fn rejoin(seed: u64, slots: u32, down_ns: u64, resume: bool) -> Rejoined {
    let mut log = LogConfig::new(3, slots, 16);
    log.max_snapshot_bytes = 1024;
    let client = ClientScript {
        count: 1_000_000,
        size: 16,
    };
    let spec = ClusterSpec {
        snapshot_every: Some(16),
        snapshot_bytes: 64,
        ..ClusterSpec::new(log, seed, END_NS, client)
    };
    let mut sim = Simulator::new(machine(&spec), sim_config(&spec));
    let mut services = Services::new(&spec);
    services.run(&mut sim, CRASH_NS);
    sim.inject(Fault::Crash {
        node: NodeId(2),
        mode: CrashMode::Hang,
    });
    services.run(&mut sim, CRASH_NS + down_ns);
    // What replica 2's disk kept: its service's last snapshot, wrapped by its engine.
    let (point, bytes) = services.snapshot_of(2).expect("replica 2 took a snapshot");
    let old = &sim.machine().threads[2].process;
    let wrapped = old.wrap_snapshot(point, &bytes).expect("it fits");
    let reached = velos_testkit::harness::cluster::most_applied(&sim, Some(2));
    let resumed = resume.then_some((point, &wrapped[..]));
    let (old, state) = restart_from(&spec.log, &spec.client, &mut sim, (2, &[]), resumed);
    services.retire(2, old);
    if resume {
        assert_eq!(
            state,
            Some(&bytes[..]),
            "it resumed with its disk's service"
        );
        services.resume(2, point, &bytes);
    }
    services.run(&mut sim, END_NS);
    let report = report_with(&spec, &sim, &services);
    assert!(
        report.ok(),
        "seed {seed}, ring {slots}, down {down_ns} ns, resume {resume}: {:?}",
        report.failures.iter().take(5).collect::<Vec<_>>()
    );
    let new = &sim.machine().threads[2].process;
    Rejoined {
        point,
        reached,
        copies: new.installs.clone(),
        first_applied: new.applied.first().map(|&(s, _)| s),
        report,
    }
}

/// Replica 2's new process at the end: it applied up to `within` slots of the most
/// advanced live replica, and votes.
fn caught_up(r: &Rejoined, within: u64) {
    let new = r
        .report
        .replicas
        .iter()
        .find(|p| (p.id, p.incarnation) == (2, 1))
        .expect("the new process");
    let last = |p: &velos_testkit::harness::cluster::ReplicaReport| {
        p.applied.last().map_or(0, |&(s, _)| s)
    };
    let best = r
        .report
        .replicas
        .iter()
        .filter(|p| !p.crashed)
        .map(last)
        .max();
    assert!(
        last(new) + within >= best.unwrap_or(0),
        "the new process keeps up: {} against {best:?}",
        last(new)
    );
    assert!(
        new.members >> 2 & 1 == 1,
        "it votes again: {:#x}",
        new.members
    );
}

#[test]
fn a_replica_restarting_with_its_disk_reads_only_the_tail_it_lacks() {
    for seed in 0..4 {
        let r = rejoin(seed, 256, 20_000, true);
        // Premises: its disk held a snapshot, and the log went past it before the restart
        // (there was a tail to read).
        assert!(
            r.point > 0 && r.reached > r.point,
            "seed {seed}: {} {}",
            r.point,
            r.reached
        );
        assert!(
            r.copies.is_empty(),
            "seed {seed}: no snapshot copied: {:?}",
            r.copies
        );
        assert_eq!(
            r.first_applied,
            Some(r.point),
            "seed {seed}: it applied from its disk's point on"
        );
        caught_up(&r, 32);
        // The same restart on a blank process starts from the log's start: it replays
        // every slot from 0 (or copies a snapshot, once the ring moved past slot 0).
        let blank = rejoin(seed, 256, 20_000, false);
        assert!(
            blank.first_applied == Some(0) || !blank.copies.is_empty(),
            "seed {seed}: a blank process gets the whole log"
        );
        caught_up(&blank, 32);
    }
}

#[test]
fn a_disk_behind_the_ring_falls_back_to_a_copy() {
    for seed in 0..4 {
        // A 64-slot ring and 200 µs down: the positions of the tail were reused.
        let r = rejoin(seed, 64, 200_000, true);
        assert!(
            r.reached > r.point + 64,
            "seed {seed}: the ring lapped the tail"
        );
        assert!(
            !r.copies.is_empty(),
            "seed {seed}: a peer's snapshot copied"
        );
        assert!(r.copies[0] > r.point, "seed {seed}: past its disk's point");
        caught_up(&r, 32);
    }
}
