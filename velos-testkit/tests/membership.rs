//! Membership changes through the log on the simulation driver: a configuration entry
//! decided in slot s changes the voting replicas from slot s + pipeline on
//! (`velos_core::log::membership`). A replica is added, the leader removed, and then two of
//! the four replicas crash: only the new configuration's majority can go on, and it does
//! (the same crashes without the changes stall the log). A replica that missed the entry
//! while it was paused learns the members from the snapshot it copies. Bad changes are
//! typed errors. Every run passes agreement, validity, integrity, no holes, the snapshot
//! check and the membership check (a slot is a configuration entry everywhere or nowhere).

use velos_core::log::membership::Members;
use velos_core::log::{LogConfig, ProposeError, Replica};
use velos_rdma::Shared;
use velos_testkit::harness::cluster::{ClusterReport, ClusterSpec, run_checked};
use velos_testkit::harness::script::ClientScript;

const ADD_AT: u64 = 200_000;
const REMOVE_AT: u64 = 600_000;
/// The crashes come when the added replica has learned the log up to the leader: before
/// it votes it learns the backlog by catch-ups, one slot per four round trips or so, slower
/// than a stable leader decides (about 1,000 µs for the backlog of 200 µs of deciding); a
/// slot decided by the four members is out of its reach once two of them crashed.
const CRASH_AT: u64 = 1_400_000;
const SECOND_CRASH_AT: u64 = 1_500_000;
/// After both crashes.
const AFTER_CRASHES: u64 = 1_600_000;

fn spec(seed: u64) -> ClusterSpec {
    let mut log = LogConfig::new(4, 4096, 16);
    log.members = Members::of(&[0, 1, 2]);
    let client = ClientScript {
        count: 100_000,
        size: 16,
    };
    ClusterSpec {
        crashes: vec![(0, CRASH_AT), (2, SECOND_CRASH_AT)],
        ..ClusterSpec::new(log, seed, 2_500_000, client)
    }
}

fn reconfigured(seed: u64) -> ClusterSpec {
    ClusterSpec {
        reconfigure: vec![
            (ADD_AT, Members::of(&[0, 1, 2, 3])),
            (REMOVE_AT, Members::of(&[1, 2, 3])),
        ],
        ..spec(seed)
    }
}

fn replay(spec: &ClusterSpec) -> String {
    let mut cmd = format!(
        "cargo run --release -- sim --replicas 4 --members 0,1,2 --seed {} --duration {} \
         --values 100000",
        spec.seed, spec.duration_ns
    );
    for (n, t) in &spec.crashes {
        cmd += &format!(" --crash {n}@{t}");
    }
    for (t, m) in &spec.reconfigure {
        let ids: Vec<String> = m.iter().map(|r| r.to_string()).collect();
        cmd += &format!(" --reconfigure {t}={}", ids.join(","));
    }
    cmd
}

fn checked(spec: &ClusterSpec) -> ClusterReport {
    run_checked(spec, &replay(spec))
}

/// Entries replica `r` applied after `ns`.
fn applied_after(report: &ClusterReport, r: usize, ns: u64) -> usize {
    report.replicas[r]
        .applied_at
        .iter()
        .filter(|&&t| t > ns)
        .count()
}

#[test]
fn after_adding_a_replica_and_removing_the_leader_the_new_majority_goes_on() {
    let report = checked(&reconfigured(1));
    // Both entries applied everywhere that got that far, 3 and 1 included.
    for r in [1, 3] {
        let masks: Vec<u64> = report.replicas[r]
            .memberships
            .iter()
            .map(|&(_, m)| m)
            .collect();
        assert_eq!(masks, vec![0b1111, 0b1110], "replica {r}");
        assert_eq!(report.replicas[r].members, 0b1110, "replica {r}");
    }
    // The removed leader handed over to the lowest remaining member.
    let removal = report.replicas[1].memberships[1].0;
    assert!(
        report
            .leader_changes
            .iter()
            .any(|c| c.leader == 1 && c.at_ns > REMOVE_AT),
        "replica 1 took over after the removal (slot {removal}): {:?}",
        report.leader_changes
    );
    // After 0 and 2 crashed, {1, 3} is a majority of {1, 2, 3}: the log goes on, and the
    // added replica has every entry.
    for r in [1, 3] {
        assert!(
            applied_after(&report, r, AFTER_CRASHES) > 100,
            "replica {r} applied {} entries after both crashes",
            applied_after(&report, r, AFTER_CRASHES)
        );
    }
    let (n1, n3) = (
        report.replicas[1].applied.len(),
        report.replicas[3].applied.len(),
    );
    assert!(n1.abs_diff(n3) <= 8, "replica 1: {n1}, replica 3: {n3}");
}

/// The control: without the changes, 0 and 2 crashing leaves one of the three voters.
#[test]
fn without_the_changes_the_same_crashes_stop_the_log() {
    let report = checked(&spec(1));
    assert!(report.replicas[1].memberships.is_empty());
    for r in [1, 3] {
        assert_eq!(applied_after(&report, r, AFTER_CRASHES), 0, "replica {r}");
    }
}

#[test]
fn membership_changes_over_many_seeds() {
    for seed in 0..30 {
        let mut s = reconfigured(seed);
        // The changes at other moments, the second crash elsewhere.
        s.reconfigure[0].0 = 50_000 + seed * 7_000;
        s.reconfigure[1].0 = 400_000 + seed * 11_000;
        s.crashes = vec![(0, CRASH_AT), (1 + 2 * (seed % 2) as u16, SECOND_CRASH_AT)];
        let report = checked(&s);
        let survivor = if seed % 2 == 0 { 3 } else { 1 };
        assert!(
            applied_after(&report, survivor, AFTER_CRASHES + 100_000) > 0,
            "seed {seed}: replica {survivor} stalled\nreplay: {}",
            replay(&s)
        );
    }
}

/// Replica 3 is paused while it is added, falls off the ring and copies a snapshot taken
/// after the entry: it learns the members from the snapshot, not from the entry.
#[test]
fn a_replica_that_copies_a_snapshot_learns_the_members_from_it() {
    let mut log = LogConfig::new(4, 16, 16);
    log.members = Members::of(&[0, 1, 2]);
    log.max_snapshot_bytes = 8;
    let client = ClientScript {
        count: 100_000,
        size: 16,
    };
    let spec = ClusterSpec {
        snapshot_every: Some(4),
        // Paused from the start: a non-member learns by catch-ups, slower than the leader
        // decides, and would fall off the 16-slot ring before the entry.
        pauses: vec![(3, 1_000, 400_000)],
        reconfigure: vec![(100_000, Members::all(4))],
        ..ClusterSpec::new(log, 1, 1_000_000, client)
    };
    let report = checked(&spec);
    let late = &report.replicas[3];
    assert!(!late.installs.is_empty(), "it copied a snapshot");
    let entry = report.replicas[0].memberships[0].0;
    assert!(late.installs[0].0 > entry, "the snapshot is past the entry");
    assert!(late.memberships.is_empty(), "it never applied the entry");
    assert_eq!(late.members, 0b1111, "yet it knows it votes");
}

#[test]
fn bad_changes_are_typed_errors() {
    let config = Shared::new(LogConfig::new(4, 64, 16));
    let mut r = Replica::new(config, 0).expect("valid");
    let bad = |e: Result<u64, ProposeError>| matches!(e, Err(ProposeError::BadMembership(_)));
    assert!(bad(r.propose_members(Members::of(&[0, 1]))), "two removed");
    assert!(
        bad(r.propose_members(Members::all(5))),
        "a replica the log lacks"
    );
    assert!(bad(r.propose_members(Members::all(4))), "no change");
    let id = r
        .propose_members(Members::of(&[0, 1, 2]))
        .expect("one removed: replica 0 leads a fresh log");
    assert_eq!(
        r.propose_members(Members::of(&[0, 1, 3])),
        Err(ProposeError::ChangePending),
        "another change while {id} is undecided"
    );
    let mut config = LogConfig::new(3, 64, 16);
    config.members = Members::of(&[0, 3]);
    assert!(config.validate().is_err(), "a member the log lacks");
    config.members = Members(0);
    assert!(config.validate().is_err(), "no member");
}

/// A replica outside the first members never leads, though its id is the lowest.
#[test]
fn a_replica_outside_the_members_follows_and_never_leads() {
    let mut log = LogConfig::new(4, 4096, 16);
    log.members = Members::of(&[1, 2, 3]);
    let client = ClientScript {
        count: 100,
        size: 16,
    };
    // A replica that does not vote learns by reading every slot from the others (no local
    // evidence: nobody writes its acceptor), a slot per catch-up round: given time.
    let report = checked(&ClusterSpec::new(log, 1, 2_000_000, client));
    assert!(
        report.leader_changes.iter().all(|c| c.leader == 1),
        "{:?}",
        report.leader_changes
    );
    for r in &report.replicas {
        assert_eq!(r.applied.len(), 100, "replica {} applied every value", r.id);
    }
}

/// Replica 3 is paused from before it is added until after the old voters 0 and 2 have
/// crashed: the slots it missed were decided by {0, 1, 2}, of which one is left, so no
/// read or repair can settle them. It copies a snapshot of replica 1's taken past them
/// (stuck on a slot a live peer's snapshot covers) and keeps up with 1 from there.
#[test]
fn a_replica_left_behind_a_replaced_configuration_copies_a_snapshot() {
    let mut log = LogConfig::new(4, 4096, 16);
    log.members = Members::of(&[0, 1, 2]);
    log.max_snapshot_bytes = 8;
    let client = ClientScript {
        count: 100_000,
        size: 16,
    };
    let spec = ClusterSpec {
        snapshot_every: Some(4),
        pauses: vec![(3, 100_000, 800_000)],
        reconfigure: vec![
            (200_000, Members::all(4)),
            (400_000, Members::of(&[1, 2, 3])),
        ],
        crashes: vec![(0, 600_000), (2, 700_000)],
        ..ClusterSpec::new(log, 1, 2_000_000, client)
    };
    let report = checked(&spec);
    let (one, late) = (&report.replicas[1], &report.replicas[3]);
    assert!(!late.installs.is_empty(), "it copied a snapshot");
    assert_eq!(late.members, 0b1110, "it knows the members from it");
    assert!(
        late.digest.0.abs_diff(one.digest.0) <= 8,
        "it keeps up: replica 3 at entry {}, replica 1 at {}",
        late.digest.0,
        one.digest.0
    );
}
