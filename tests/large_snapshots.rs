//! A service whose state is 64 MiB (`velos::embed` on the in-process backend): its
//! snapshots go to the log, the ring recycles past them, and a follower that fell off the
//! ring copies one whole and ends with the same state. Every wait is bounded; nothing
//! asserts speed (what it took is printed).

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};
use velos::embed::{Cluster, Config, Error, Position, RestoreError, StartError, StateMachine};

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
    // A submit waits out a full ring (the snapshots that free it are 64 MiB copies) up to
    // the wait timeout; on a loaded machine that took more than the default 10 s (LogFull
    // under a concurrent campaign): bounded like every other wait here, never timed.
    config.wait_timeout = Duration::from_secs(120);
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

/// A state machine whose snapshot is `base` bytes and `growth` more per command applied.
struct Ballast {
    base: usize,
    growth: usize,
    applied: usize,
}

impl Ballast {
    fn new(base: usize, growth: usize) -> Ballast {
        Ballast {
            base,
            growth,
            applied: 0,
        }
    }
}

impl StateMachine for Ballast {
    type Response = ();

    fn apply(&mut self, _: Position, _: &[u8]) {
        self.applied += 1;
    }

    fn snapshot(&self) -> Vec<u8> {
        vec![7; self.base + self.growth * self.applied]
    }

    fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> {
        Ok(())
    }
}

/// A state machine whose very first snapshot would not fit is refused at the start, the
/// knob and the sizes named (before, the cluster started, and its ring filled for good).
/// Without snapshots nothing is checked.
#[test]
fn a_state_whose_snapshot_cannot_fit_is_refused_at_the_start() {
    let mut config = Config::new(3);
    config.log.max_snapshot_bytes = 4096;
    match Cluster::start(config.clone(), (0..3).map(|_| Ballast::new(4093, 0))) {
        Err(StartError::InvalidConfig(why)) => {
            // The state's bytes and the empty session table's count.
            let named = "snapshots to 4097 bytes at the start (4093 of state";
            assert!(why.contains(named), "{why}");
            assert!(why.contains("max_snapshot_bytes (4096)"), "{why}");
        }
        other => panic!("refused at the start: {:?}", other.err()),
    }
    let fits = Cluster::start(config.clone(), (0..3).map(|_| Ballast::new(4092, 0)));
    fits.expect("4096 bytes fit").shutdown();
    config.snapshot_every_slots = 0;
    let never = Cluster::start(config, (0..3).map(|_| Ballast::new(4093, 0)));
    never.expect("no snapshot is taken").shutdown();
}

/// A state that grows past `max_snapshot_bytes`: the first command after its snapshot was
/// refused fails at once, naming the knob and the sizes, long before the ring (32 slots)
/// fills and well within the wait timeout. Before, `submit` kept committing until the
/// ring was full, then retried `LogFull` for the whole wait timeout.
#[test]
fn a_snapshot_refused_for_its_size_fails_the_next_command_at_once() {
    let mut config = Config::new(3);
    config.log.slots = 32;
    config.log.max_snapshot_bytes = 4096;
    config.snapshot_every_slots = 4;
    config.batch.max_commands = 1;
    config.wait_timeout = Duration::from_secs(30);
    // 3,000 bytes at first; past 4,096 after 11 commands.
    let cluster = Cluster::start(config, (0..3).map(|_| Ballast::new(3000, 100))).expect("valid");
    let mut committed = 0;
    let (error, took) = loop {
        let start = Instant::now();
        match cluster.submit(vec![1]) {
            Ok(_) => committed += 1,
            Err(e) => break (e, start.elapsed()),
        }
        assert!(committed < 32, "the ring cannot recycle: it fills");
    };
    assert!(took < Duration::from_secs(5), "at once, not after {took:?}");
    let Error::SnapshotTooLarge {
        bytes,
        state_bytes,
        sessions,
        max,
        ..
    } = error
    else {
        panic!("a snapshot too large: {error}");
    };
    assert_eq!((sessions, max), (0, 4096));
    assert_eq!(
        bytes,
        state_bytes + 4,
        "the state and the empty session table"
    );
    assert!(
        bytes > 4096 && committed >= 11,
        "{bytes} bytes after {committed}"
    );
    let text = error.to_string();
    assert!(
        text.contains(&format!("raise max_snapshot_bytes to at least {bytes}")),
        "{text}"
    );
    assert!(error.not_proposed(), "nothing was proposed");
    assert!(
        matches!(
            cluster.propose(vec![1]),
            Err(Error::SnapshotTooLarge { .. })
        ),
        "and again, until a snapshot fits"
    );
    assert!(cluster.metrics().snapshots_refused > 0);
    cluster.shutdown();
}
