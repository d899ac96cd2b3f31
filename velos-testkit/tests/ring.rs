//! The log as a ring of slots on the simulation driver: positions recycled once a majority's
//! snapshots hold their instance, a replica paused long enough to fall off the ring copies
//! a snapshot from a peer and converges, leaders crash and pause meanwhile. Every run must
//! pass agreement, validity, integrity, no holes and the snapshot check (a copied snapshot
//! is exactly the log below its point), and every live replica's service must end in the
//! same state. A failing seed prints the command that replays it.

use velos_core::log::LogConfig;
use velos_testkit::harness::cluster::{ClusterReport, ClusterSpec, run};
use velos_testkit::harness::script::ClientScript;

const SLOTS: u32 = 16;
const VALUES: u64 = 300;
const EVERY: u64 = 4;
const DURATION_NS: u64 = 3_000_000;

fn spec(seed: u64, replicas: u16) -> ClusterSpec {
    let mut log = LogConfig::new(replicas, SLOTS, 16);
    log.max_snapshot_bytes = 8;
    let client = ClientScript {
        count: VALUES,
        size: 16,
    };
    ClusterSpec {
        snapshot_every: Some(EVERY),
        ..ClusterSpec::new(log, seed, DURATION_NS, client)
    }
}

fn replay(spec: &ClusterSpec) -> String {
    let mut cmd = format!(
        "cargo run --release -- sim --replicas {} --seed {} --duration {} --slots {} \
         --values {} --snapshot-every {} --snapshot-bytes {}",
        spec.log.replicas,
        spec.seed,
        spec.duration_ns,
        spec.log.slots,
        spec.client.count,
        spec.snapshot_every.unwrap_or(EVERY),
        spec.snapshot_bytes
    );
    if let Some(t) = spec.crash_leader_at {
        cmd += &format!(" --crash-leader-at {t}");
    }
    for (n, t) in &spec.crashes {
        cmd += &format!(" --crash {n}@{t}");
    }
    for (n, t, d) in &spec.pauses {
        cmd += &format!(" --pause {n}@{t}+{d}");
    }
    cmd
}

/// Every live replica's service ends at the same entry with the same digest.
fn converged(report: &ClusterReport) -> Result<(), String> {
    let live: Vec<_> = report.replicas.iter().filter(|r| !r.crashed).collect();
    let first = live.first().ok_or("no live replica")?;
    for r in &live {
        if r.digest != first.digest {
            return Err(format!(
                "replica {} ends at {:?}, replica {} at {:?} (next entry, digest)",
                r.id, r.digest, first.id, first.digest
            ));
        }
    }
    Ok(())
}

fn check(spec: &ClusterSpec) -> ClusterReport {
    let report = run(spec);
    let verdict = if report.ok() {
        converged(&report)
    } else {
        let shown: Vec<&str> = report.failures.iter().take(5).map(String::as_str).collect();
        Err(format!(
            "{} failures: {}",
            report.failures.len(),
            shown.join("; ")
        ))
    };
    if let Err(e) = verdict {
        panic!("seed {}: {e}\nreplay: {}", spec.seed, replay(spec));
    }
    report
}

#[test]
fn the_ring_recycles_its_slots_for_many_laps() {
    let report = check(&spec(1, 3));
    for r in &report.replicas {
        assert_eq!(r.applied.len() as u64, VALUES, "replica {}", r.id);
        assert!(r.installs.is_empty(), "nobody fell behind");
    }
    assert!(VALUES > 10 * u64::from(SLOTS), "ten laps and more");
    assert_eq!(report.replicas[0].digest.0, VALUES);
}

#[test]
fn without_snapshots_the_log_ends_after_its_slots() {
    let mut s = spec(1, 3);
    s.snapshot_every = None;
    let report = check(&s);
    for r in &report.replicas {
        assert_eq!(r.applied.len() as u64, u64::from(SLOTS), "replica {}", r.id);
    }
}

#[test]
fn a_replica_paused_off_the_ring_copies_a_snapshot_and_converges() {
    let mut s = spec(1, 3);
    s.pauses = vec![(2, 100_000, 400_000)];
    let report = check(&s);
    let paused = &report.replicas[2];
    assert!(!paused.installs.is_empty(), "it fell off the ring");
    assert!(
        paused.applied.len() < VALUES as usize,
        "it skipped entries by copying a snapshot"
    );
    assert_eq!(paused.digest.0, VALUES, "and caught up with the others");
}

/// A large snapshot (16 KiB, 2048 words): the copy gets only the words its length
/// covers, a chunk per turn, so the copier's heartbeat reads are not queued behind
/// thousands of gets (that made it suspect its sources and give every copy up); a copy
/// is given up only when no stage completes for a failure timeout. A source that
/// snapshots every 16 entries rewrites its banks faster than such a copy completes, so
/// under load the copies tear; the copier converges once the load stops.
#[test]
fn a_large_snapshot_is_copied_in_chunks() {
    let mut s = spec(1, 3);
    s.log.slots = 64;
    s.log.max_snapshot_bytes = 16 << 10;
    s.snapshot_bytes = 16 << 10;
    s.snapshot_every = Some(16);
    s.client.count = 800;
    // The load ends at about 7.5 ms and the copier has converged by 9 ms (8 ms left it
    // too little time once the engine changed its timing).
    s.duration_ns = 10_000_000;
    s.pauses = vec![(2, 100_000, 600_000)];
    let report = check(&s);
    let paused = &report.replicas[2];
    assert!(
        !paused.installs.is_empty(),
        "it fell off the ring and copied"
    );
    // Caught up: as far as the others (800 values, and a leader's no-ops if it changed).
    let others = report.replicas[0].digest.0;
    assert!(others >= 800, "every value applied: {others}");
    assert_eq!(paused.digest.0, others, "and caught up with the others");
}

#[test]
fn a_paused_leader_is_replaced_and_then_copies_a_snapshot() {
    let mut s = spec(1, 3);
    s.pauses = vec![(0, 100_000, 400_000)];
    let report = check(&s);
    assert!(
        !report.replicas[0].installs.is_empty(),
        "the old leader copied"
    );
    assert!(report.leader_changes.len() >= 2, "someone took over");
}

#[test]
fn pauses_and_crashes_over_many_seeds() {
    for seed in 0..60 {
        let replicas = if seed % 2 == 0 { 3 } else { 5 };
        let mut s = spec(seed, replicas);
        let paused = (seed % u64::from(replicas)) as u16;
        s.draw_pause_and_leader_crash(seed, paused, 50_000 + (seed * 104_729) % 500_000);
        if replicas == 5 && seed % 4 == 1 {
            let other = (paused + 1) % replicas;
            s.crashes = vec![(other, (seed * 6_007) % 500_000)];
        }
        check(&s);
    }
}
