//! Replacing a replica's process on the simulation driver (rule (no amnesia),
//! `velos_core::log::configuration`): a replica crashes, a fresh process starts in its
//! place on blank memory at the next incarnation, the others are told, and the leader
//! removes the old incarnation and adds the new one through the log. The replacement
//! copies a snapshot, follows, and votes; the log keeps deciding; and when the leader is
//! the one replaced, or the same replica twice, the same holds. Every run passes
//! agreement, validity, integrity, no holes, the snapshot and membership checks over every
//! process the run had (a replaced process's log is checked as it was at its crash).

use velos_core::log::LogConfig;
use velos_testkit::harness::cluster::{ClusterReport, ClusterSpec, ReplicaReport, run_checked};
use velos_testkit::harness::script::ClientScript;

/// A 3-replica log on a 64-slot ring whose services snapshot every 16 entries (so a
/// replacement that starts late has fallen off the ring and copies a snapshot), its leader
/// deciding back to back.
fn spec(seed: u64, replace: Vec<(u16, u64, u64)>) -> ClusterSpec {
    let mut log = LogConfig::new(3, 64, 16);
    log.max_snapshot_bytes = 1024;
    let client = ClientScript {
        count: 1_000_000,
        size: 16,
    };
    ClusterSpec {
        snapshot_every: Some(16),
        snapshot_bytes: 1024,
        replace,
        ..ClusterSpec::new(log, seed, 1_500_000, client)
    }
}

fn replay(spec: &ClusterSpec) -> String {
    let mut cmd = format!(
        "cargo run --release -- sim --seed {} --duration {} --slots 64 --value-size 16 \
         --values 1000000 --snapshot-every 16 --snapshot-bytes 1024",
        spec.seed, spec.duration_ns
    );
    for (n, at, after) in &spec.replace {
        cmd += &format!(" --replace {n}@{at}+{after}");
    }
    cmd
}

fn checked(spec: &ClusterSpec) -> ClusterReport {
    run_checked(spec, &replay(spec))
}

/// The process of replica `id` at `incarnation`.
fn process(report: &ClusterReport, id: u16, incarnation: u64) -> &ReplicaReport {
    report
        .replicas
        .iter()
        .find(|r| (r.id, r.incarnation) == (id, incarnation))
        .unwrap_or_else(|| panic!("replica {id} at incarnation {incarnation}"))
}

/// The configuration entries the longest log applied: `(slot, member mask)`.
fn changes(report: &ClusterReport) -> Vec<(u64, u64)> {
    let longest = report
        .replicas
        .iter()
        .filter(|r| !r.crashed)
        .max_by_key(|r| r.applied.len())
        .expect("a live replica");
    longest.memberships.clone()
}

/// The last slot `r` applied.
fn last(r: &ReplicaReport) -> u64 {
    r.applied.last().map_or(0, |&(s, _)| s)
}

#[test]
fn a_replaced_follower_joins_through_the_log_copies_a_snapshot_and_keeps_up() {
    for seed in 0..4 {
        let s = spec(seed, vec![(2, 300_000, 20_000)]);
        let report = checked(&s);
        let old = process(&report, 2, 0);
        let new = process(&report, 2, 1);
        assert!(old.crashed && !new.crashed, "seed {seed}");
        // Removed at its old incarnation, then added at the new one: two entries, in that
        // order, the second after the replacement started.
        let ch = changes(&report);
        assert_eq!(
            ch.iter().map(|&(_, m)| m).collect::<Vec<_>>(),
            vec![0b011, 0b111],
            "seed {seed}: {ch:?}"
        );
        assert!(
            !new.installs.is_empty(),
            "seed {seed}: it started off the ring and copied a snapshot"
        );
        assert!(
            new.memberships.iter().any(|&(_, m)| m == 0b111)
                || new.installs.iter().any(|&(p, _)| p > ch[1].0),
            "seed {seed}: it applied the entry that names it, or a snapshot past it"
        );
        let leader = process(&report, 0, 0);
        assert!(
            last(new) + 16 >= last(leader),
            "seed {seed}: caught up: slot {} against the leader's {}",
            last(new),
            last(leader)
        );
        assert!(
            leader.applied.len() > 600,
            "seed {seed}: the log kept deciding ({} entries)",
            leader.applied.len()
        );
    }
}

#[test]
fn the_leader_replaced_and_the_same_replica_twice() {
    for seed in 0..3 {
        // The leader (0) crashes; the next leader (1) replaces it.
        let report = checked(&spec(seed, vec![(0, 300_000, 50_000)]));
        let new = process(&report, 0, 1);
        assert!(!new.crashed && !new.applied.is_empty(), "seed {seed}");
        assert_eq!(
            changes(&report).iter().map(|&(_, m)| m).collect::<Vec<_>>(),
            vec![0b110, 0b111],
            "seed {seed}"
        );
        // Replica 2 replaced twice: its third process is named at incarnation 2.
        let twice = spec(seed, vec![(2, 300_000, 20_000), (2, 800_000, 20_000)]);
        let report = checked(&twice);
        let third = process(&report, 2, 2);
        assert!(!third.crashed && !third.applied.is_empty(), "seed {seed}");
        assert_eq!(
            changes(&report).iter().map(|&(_, m)| m).collect::<Vec<_>>(),
            vec![0b011, 0b111, 0b011, 0b111],
            "seed {seed}"
        );
    }
}

/// The number of entries `r` had applied by `t`.
fn applied_by(r: &ReplicaReport, t: u64) -> usize {
    r.applied_at.partition_point(|&at| at <= t)
}

/// A replacement with no snapshot to copy (a 4,096-slot ring that never recycles, no
/// service) learns the backlog by reading it, in bulk (`velos_core`'s
/// `log/replica/bulk.rs`): from its start until it has applied what the leader had
/// applied then, it applies at least 5 times the leader's decision rate of the 200 µs
/// before. One slot per catch-up round learned about 8 times slower than the leader
/// decided. Virtual time, exact: the rate is the protocol's, not the machine's.
#[test]
fn a_replacement_without_a_snapshot_learns_the_backlog_in_bulk() {
    for seed in 0..4 {
        let start = 1_000_000;
        let log = LogConfig::new(3, 4096, 16);
        let client = ClientScript {
            count: 1_000_000,
            size: 16,
        };
        let s = ClusterSpec {
            replace: vec![(2, start, 0)],
            ..ClusterSpec::new(log, seed, 2_500_000, client)
        };
        let report = checked(&s);
        let leader = process(&report, 0, 0);
        let new = process(&report, 2, 1);
        let backlog = applied_by(leader, start);
        let before = backlog - applied_by(leader, start - 200_000);
        assert!(
            before > 50,
            "seed {seed}: premise, the leader decided ({before})"
        );
        let caught_up = new.applied_at.get(backlog - 1).copied().unwrap_or_else(|| {
            panic!(
                "seed {seed}: premise, it caught up ({} of {backlog})",
                new.applied.len()
            )
        });
        let rate = backlog as f64 / (caught_up - start) as f64;
        let leader_rate = before as f64 / 200_000.0;
        println!(
            "seed {seed}: {backlog} entries in {} ns, {:.1}x the leader's rate",
            caught_up - start,
            rate / leader_rate
        );
        assert!(
            rate >= 5.0 * leader_rate,
            "seed {seed}: {backlog} entries in {} ns: {:.1}x the leader's rate",
            caught_up - start,
            rate / leader_rate
        );
    }
}

/// The leader changes after `from` ns, each as (who, when).
fn leaders_after(report: &ClusterReport, from: u64) -> Vec<(u16, u64)> {
    report
        .leader_changes
        .iter()
        .filter(|c| c.at_ns > from)
        .map(|c| (c.leader, c.at_ns))
        .collect()
}

/// Rule (sticky leader): the crashed former leader's replacement (replica 0, a lower id
/// than the acting leader's) votes and catches up, and the acting leader keeps the lead;
/// the rule's wrong variant (`hand-over`: nobody claims the lead, so Ω moves it to the
/// lowest able replica) hands it to the replacement once it votes — the check sees it.
/// Premise: the replacement voted (its configuration took effect) and decided nothing
/// stopped: the log keeps deciding after the join.
#[test]
fn the_former_leaders_replacement_does_not_take_the_lead() {
    use velos_core::slot::Mutation;
    let hand_over = Mutation::from_name("hand-over").expect("the tests build the mutants");
    for seed in 0..3 {
        let crash = 300_000;
        let run = |mutation| {
            let mut s = spec(seed, vec![(0, crash, 100_000)]);
            s.log.mutation = mutation;
            checked(&s)
        };
        let report = run(Mutation::None);
        let voted = changes(&report).iter().any(|&(_, m)| m == 0b111);
        assert!(voted, "seed {seed}: the replacement was named again");
        let after_failover = crash + 100_000;
        assert_eq!(
            leaders_after(&report, after_failover),
            vec![],
            "seed {seed}: the acting leader kept the lead"
        );
        let late = last(process(&report, 1, 0));
        assert!(late > 600, "seed {seed}: the log kept deciding ({late})");
        let mutant = run(hand_over);
        let moved = leaders_after(&mutant, after_failover);
        assert!(
            moved.iter().any(|&(l, _)| l == 0),
            "seed {seed}: the hand-over variant gives the replacement the lead: {moved:?}"
        );
    }
}
