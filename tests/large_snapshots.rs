//! A service whose state is 64 MiB (`velos::embed` on the in-process backend): its
//! snapshots go to the log, the ring recycles past them, and a follower that fell off the
//! ring copies one whole and ends with the same state. Every wait is bounded; nothing
//! asserts speed (what it took is printed).

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};
use velos::embed::{Cluster, Config, Error, Position, RestoreError, StateMachine};

/// The state's size.
const STATE: usize = 64 << 20;
/// No replica is slowed.
const NOBODY: u16 = u16::MAX;

/// 64 MiB of bytes; each command writes its byte at a place its count picks and answers
/// the count. The replica named by `paused` stops in `apply` (its whole thread with it)
/// until it is named no more: it falls behind the others.
struct Big {
    me: u16,
    paused: Arc<AtomicU16>,
    applied: u64,
    bytes: Vec<u8>,
}

impl StateMachine for Big {
    type Response = u64;

    fn apply(&mut self, _: Position, command: &[u8]) -> u64 {
        while self.paused.load(Ordering::SeqCst) == self.me {
            std::thread::sleep(Duration::from_millis(1));
        }
        let at = (self.applied as usize * 1_048_583) % STATE;
        self.bytes[at] = command[0];
        self.applied += 1;
        self.applied
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + STATE);
        out.extend_from_slice(&self.applied.to_le_bytes());
        out.extend_from_slice(&self.bytes);
        out
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        let (count, bytes) = snapshot
            .split_first_chunk::<8>()
            .filter(|(_, b)| b.len() == STATE)
            .ok_or_else(|| RestoreError(format!("{} bytes", snapshot.len())))?;
        self.applied = u64::from_le_bytes(*count);
        self.bytes = bytes.to_vec();
        Ok(())
    }
}

#[test]
fn a_64_mib_state_recycles_the_ring_and_a_lagging_follower_copies_it() {
    let mut config = Config::new(3);
    config.log.slots = 32;
    config.log.max_snapshot_bytes = (STATE + 4096) as u32;
    config.snapshot_every_slots = 8;
    config.batch.max_commands = 1;
    // The state machine's own copy of 64 MiB runs on the replica's thread between turns
    // (tens of milliseconds): a failure timeout shorter than that makes the peers suspect
    // a replica while it snapshots.
    config.log.failure_timeout_ns = 500_000_000;
    let paused = Arc::new(AtomicU16::new(NOBODY));
    let machines = (0..3).map(|me| Big {
        me,
        paused: paused.clone(),
        applied: 0,
        bytes: vec![0; STATE],
    });
    let start = Instant::now();
    let cluster = Cluster::start(config, machines).expect("a valid configuration");
    let leader = cluster
        .wait_for_leader(Duration::from_secs(60))
        .expect("a leader");
    let lagging = (leader + 1) % 3;
    paused.store(lagging, Ordering::SeqCst);
    // Four times the ring: the paused follower falls off it (the other two snapshot
    // every 8 slots, which is what lets the ring recycle).
    for i in 0..128u64 {
        let outcome = cluster.submit(vec![i as u8]).expect("committed");
        assert_eq!(outcome.response, i + 1, "each command answers its count");
    }
    let ran = start.elapsed();
    paused.store(NOBODY, Ordering::SeqCst);
    cluster
        .catch_up(Duration::from_secs(120))
        .expect("every replica catches up");
    let caught_up = start.elapsed() - ran;
    let m = cluster.metrics();
    eprintln!(
        "128 commands in {ran:?}, caught up in {caught_up:?}: {} snapshots, {} installs, \
         {} leaderships, commit p50 {} µs, max {} µs",
        m.snapshots,
        m.installs,
        m.leaderships,
        m.latency.value_at_quantile(0.5) / 1000,
        m.latency.max() / 1000
    );
    assert_eq!(m.committed, 128);
    assert_eq!(m.snapshots_refused, 0, "every 64 MiB snapshot fits");
    assert!(m.snapshots >= 3, "snapshots went to the log");
    assert!(m.installs >= 1, "the paused follower copied a snapshot");
    let states: Vec<Big> = cluster.shutdown().into_iter().flatten().collect();
    assert_eq!(states.len(), 3);
    for s in &states {
        assert_eq!(s.applied, 128, "replica {}: every command once", s.me);
        assert!(
            s.bytes == states[0].bytes,
            "replica {}: the same state",
            s.me
        );
    }
}

/// A state machine whose snapshots are larger than the log's banks.
struct Ballast;

impl StateMachine for Ballast {
    type Response = ();

    fn apply(&mut self, _: Position, _: &[u8]) {}

    fn snapshot(&self) -> Vec<u8> {
        vec![7; 4097]
    }

    fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> {
        Ok(())
    }
}

#[test]
fn when_snapshots_are_refused_the_full_log_says_why() {
    let mut config = Config::new(3);
    config.log.slots = 32;
    config.log.max_snapshot_bytes = 4096;
    config.snapshot_every_slots = 4;
    config.batch.max_commands = 1;
    config.wait_timeout = Duration::from_millis(500);
    let cluster = Cluster::start(config, (0..3).map(|_| Ballast)).expect("valid");
    let mut committed = 0;
    let error = loop {
        match cluster.submit(vec![1]) {
            Ok(_) => committed += 1,
            Err(e) => break e,
        }
        assert!(committed <= 32, "the ring cannot recycle: it fills");
    };
    // The log's bytes are the state's and the (empty) session table's count.
    let why = "a snapshot of 4101 bytes is larger than the log's 4096";
    assert!(
        matches!(&error, Error::LogFull { snapshot_refused: Some(w) } if w.contains(why)),
        "{error}"
    );
    assert!(
        error.to_string().contains(why),
        "the message names it: {error}"
    );
    assert!(cluster.metrics().snapshots_refused > 0);
    cluster.shutdown();
}
