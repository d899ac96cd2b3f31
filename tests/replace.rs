//! Replacing a crashed replica through the embedding API (`Cluster::replace`), on the
//! in-process backend and on the emulator: a fresh process on blank memory joins through
//! the log while commands keep committing, votes (its answer names its incarnation),
//! catches up — from a peer's snapshot once the ring moved on —, and its state ends equal
//! to the others'; with the leader replaced, and the same replica twice. Bad requests are
//! typed errors. Every wait is bounded; nothing asserts speed.

use std::time::Duration;
use velos::embed::{Cluster, Config, Error, Position, RestoreError, StateMachine};

/// The sum and count of the `u32` commands applied, and the count of each command's
/// first byte modulo 4 (so that an entry applied twice or lost changes the state).
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    sum: u64,
    count: u64,
    by_tag: [u64; 4],
}

impl StateMachine for Tally {
    type Response = u64;

    fn apply(&mut self, _: Position, command: &[u8]) -> u64 {
        let value = u32::from_le_bytes(command.try_into().expect("4-byte commands"));
        self.sum += u64::from(value);
        self.count += 1;
        self.by_tag[command[0] as usize % 4] += 1;
        self.count
    }

    fn snapshot(&self) -> Vec<u8> {
        [self.sum, self.count]
            .iter()
            .chain(&self.by_tag)
            .flat_map(|w| w.to_le_bytes())
            .collect()
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
        let words: Vec<u64> = bytes
            .chunks(8)
            .map(|c| c.try_into().map(u64::from_le_bytes))
            .collect::<Result<_, _>>()
            .map_err(|_| RestoreError("not whole words".into()))?;
        let [sum, count, a, b, c, d] = words[..] else {
            return Err(RestoreError(format!("{} words, not 6", words.len())));
        };
        *self = Tally {
            sum,
            count,
            by_tag: [a, b, c, d],
        };
        Ok(())
    }
}

const WAIT: Duration = Duration::from_secs(60);

/// Commands `from..to`, each submitted in a client session until committed: a leadership
/// change (a replacement with a lower id leads once it votes) leaves an outcome unknown,
/// and the session sends it again, applied once.
fn submit_range(cluster: &Cluster<Tally>, from: u32, to: u32) {
    let mut session = cluster.session();
    for i in from..to {
        match session.submit(i.to_le_bytes().to_vec()) {
            Ok(_) | Err(Error::ResponseLost { .. }) => {}
            Err(e) => panic!("command {i}: {e}"),
        }
    }
}

/// A small ring and frequent snapshots, so that a replacement has fallen off the ring
/// and copies a snapshot.
fn small_ring(mut config: Config) -> Config {
    config.log.slots = 64;
    config.snapshot_every_slots = 16;
    config
}

fn replaced_then_equal(config: Config, replaced: &[u16]) {
    let cluster = Cluster::start(config, (0..3).map(|_| Tally::default())).expect("valid");
    let mut next = 0;
    for &r in replaced {
        submit_range(&cluster, next, next + 150);
        next += 150;
        cluster.crash(r).expect("up");
        let running = (r + 1) % 3;
        assert_eq!(
            cluster.replace(running, Tally::default()).err(),
            Some(Error::NotCrashed { replica: running }),
            "only a crashed replica is replaced"
        );
        // The log goes on without it, then a fresh process takes its place.
        submit_range(&cluster, next, next + 50);
        next += 50;
        let voting = cluster.replace(r, Tally::default()).expect("crashed");
        submit_range(&cluster, next, next + 100);
        next += 100;
        let incarnation = voting.wait_timeout(WAIT).expect("the replacement votes");
        assert!(incarnation >= 1, "a new incarnation: {incarnation}");
    }
    submit_range(&cluster, next, next + 50);
    next += 50;
    cluster.catch_up(WAIT).expect("every replica catches up");
    let machines = cluster.shutdown();
    let expected = Tally {
        sum: (0..u64::from(next)).sum(),
        count: u64::from(next),
        by_tag: std::array::from_fn(|t| {
            (0..next).filter(|i| (i & 0xff) % 4 == t as u32).count() as u64
        }),
    };
    for (r, m) in machines.iter().enumerate() {
        assert_eq!(
            m.as_ref(),
            Some(&expected),
            "replica {r}: every command once"
        );
    }
}

#[test]
fn mem_a_replaced_follower_joins_votes_and_catches_up() {
    replaced_then_equal(small_ring(Config::new(3)), &[2]);
}

#[test]
fn emulator_a_replaced_follower_joins_votes_and_catches_up() {
    replaced_then_equal(small_ring(Config::emulator(3, 7)), &[2]);
}

#[test]
fn mem_the_same_replica_replaced_twice() {
    replaced_then_equal(small_ring(Config::new(3)), &[1, 1]);
}

#[test]
fn the_leader_replaced_on_both_backends() {
    for config in [
        small_ring(Config::new(3)),
        small_ring(Config::emulator(3, 3)),
    ] {
        let cluster = Cluster::start(config, (0..3).map(|_| Tally::default())).expect("valid");
        submit_range(&cluster, 0, 100);
        assert_eq!(cluster.leader(), Some(0));
        cluster.crash(0).expect("up");
        submit_range(&cluster, 100, 200);
        let voting = cluster.replace(0, Tally::default()).expect("crashed");
        submit_range(&cluster, 200, 300);
        assert_eq!(voting.wait_timeout(WAIT).expect("it votes"), 1);
        cluster.catch_up(WAIT).expect("caught up");
        let machines = cluster.shutdown();
        let counts: Vec<Option<u64>> = machines
            .iter()
            .map(|m| m.as_ref().map(|t| t.count))
            .collect();
        assert_eq!(counts, vec![Some(300); 3], "every command once everywhere");
    }
}

#[test]
fn bad_replacements_are_typed_errors() {
    let cluster = Cluster::start(Config::new(3), (0..3).map(|_| Tally::default())).expect("valid");
    assert_eq!(
        cluster.replace(1, Tally::default()).err(),
        Some(Error::NotCrashed { replica: 1 })
    );
    assert_eq!(
        cluster.replace(3, Tally::default()).err(),
        Some(Error::NoSuchReplica {
            replica: 3,
            replicas: 3
        })
    );
}

/// A spare — a running replica outside the configuration — is made a voter by
/// `add_replica` on both backends; with none left, a typed refusal. Then the first leader
/// is removed and another first voter crashed: the log goes on only because the spare
/// counts in the majority of {1, 2, 3}.
#[test]
fn a_spare_is_added_and_then_counts_in_the_majority() {
    for mut config in [Config::new(4), Config::emulator(4, 5)] {
        config.log.members = velos::core::log::membership::Members::of(&[0, 1, 2]);
        let cluster = Cluster::start(config, (0..4).map(|_| Tally::default())).expect("valid");
        submit_range(&cluster, 0, 50);
        assert_eq!(cluster.add_replica(), Ok(3), "replica 3 is the spare");
        assert_eq!(
            cluster.add_replica(),
            Err(Error::NoSpare),
            "every running replica votes"
        );
        cluster.change_members(&[1, 2, 3]).expect("0 removed");
        submit_range(&cluster, 50, 100);
        cluster.crash(1).expect("up");
        submit_range(&cluster, 100, 150);
        cluster.catch_up(WAIT).expect("the live replicas catch up");
        let machines = cluster.shutdown();
        for r in [2, 3] {
            let count = machines[r].as_ref().map(|t| t.count);
            assert_eq!(count, Some(150), "replica {r}: every command once");
        }
    }
}
