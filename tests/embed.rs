//! The embedding API (`velos::embed`) on the in-process backend and on the emulator:
//! commands committed and applied in the same order on every replica, the async form on
//! a minimal executor, batching and pipelining, typed errors for bad input, a leader
//! crash, consistent metrics. Every wait is bounded; nothing asserts speed.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};
use velos::embed::{
    Backend, Cluster, Config, EmulatorConfig, Error, Position, Receipt, RestoreError, Role,
    StartError, StateMachine,
};

/// How long a test waits for a change to take effect.
const WAIT: Duration = Duration::from_secs(10);

/// Records every command it applied.
#[derive(Debug, Default)]
struct Recorder {
    applied: Vec<(Position, Vec<u8>)>,
}

impl StateMachine for Recorder {
    /// The position and the command applied there: a receipt's response names its own
    /// command, so a response handed to the wrong receipt shows.
    type Response = (Position, Vec<u8>);

    fn apply(&mut self, position: Position, command: &[u8]) -> Self::Response {
        self.applied.push((position, command.to_vec()));
        (position, command.to_vec())
    }

    fn snapshot(&self) -> Vec<u8> {
        // Enough for the tests: the commands, length-prefixed (positions are not kept).
        let mut out = Vec::new();
        for (_, c) in &self.applied {
            out.extend_from_slice(&(c.len() as u32).to_le_bytes());
            out.extend_from_slice(c);
        }
        out
    }

    fn restore(&mut self, mut bytes: &[u8]) -> Result<(), RestoreError> {
        let mut applied = Vec::new();
        while !bytes.is_empty() {
            let (len, rest) = bytes
                .split_first_chunk::<4>()
                .ok_or_else(|| RestoreError("a truncated length".into()))?;
            let len = u32::from_le_bytes(*len) as usize;
            if rest.len() < len {
                return Err(RestoreError("a truncated command".into()));
            }
            let index = applied.len() as u32;
            applied.push((Position { slot: 0, index }, rest[..len].to_vec()));
            bytes = &rest[len..];
        }
        self.applied = applied;
        Ok(())
    }
}

/// A receipt of a [`Recorder`] cluster.
type RecorderReceipt = Receipt<<Recorder as StateMachine>::Response>;

fn recorders(n: usize) -> impl Iterator<Item = Recorder> {
    (0..n).map(|_| Recorder::default())
}

/// The emulator backend with its engine timing (virtual microseconds).
fn emulator(seed: u64) -> Config {
    Config::emulator(3, seed)
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

fn command(tag: &str, i: u32) -> Vec<u8> {
    format!("{tag} {i}").into_bytes()
}

/// The commands of a replica's log, in order.
fn commands(r: &Recorder) -> Vec<Vec<u8>> {
    r.applied.iter().map(|(_, c)| c.clone()).collect()
}

fn assert_same_prefix(a: &Recorder, b: &Recorder) {
    let n = a.applied.len().min(b.applied.len());
    assert_eq!(
        a.applied[..n],
        b.applied[..n],
        "replicas applied differently"
    );
}

/// Positions strictly increase: in log order, without repeats.
fn assert_in_order(r: &Recorder) {
    assert!(r.applied.windows(2).all(|w| w[0].0 < w[1].0), "log order");
}

fn every_replica_applies_what_was_committed(config: Config) {
    let cluster = Cluster::start(config, recorders(3)).expect("a valid configuration");
    let mut infos = Vec::new();
    for i in 0..50 {
        infos.push(cluster.submit(command("c", i)).expect("committed"));
    }
    assert!(
        infos.windows(2).all(|w| w[0].position < w[1].position),
        "positions grow"
    );
    wait_until("every replica to apply 50", || {
        (0..3).all(|r| cluster.applied_commands(r) >= 50)
    });
    let m = cluster.metrics();
    assert_eq!(m.committed, 50);
    assert_eq!(m.proposed, 50);
    assert_eq!(m.latency.len(), 50);
    assert_eq!(m.lost, 0);
    let machines = cluster.shutdown();
    let logs: Vec<&Recorder> = machines.iter().map(|m| m.as_ref().unwrap()).collect();
    let expected: Vec<Vec<u8>> = (0..50).map(|i| command("c", i)).collect();
    for log in &logs {
        assert_in_order(log);
        assert_same_prefix(logs[0], log);
        assert_eq!(commands(log), expected, "every command once, in order");
    }
    for (i, info) in infos.iter().enumerate() {
        assert_eq!(logs[0].applied[i], (info.position, command("c", i as u32)));
    }
}

#[test]
fn mem_every_replica_applies_what_was_committed_in_the_same_order() {
    every_replica_applies_what_was_committed(Config::new(3));
}

#[test]
fn emulator_every_replica_applies_what_was_committed_in_the_same_order() {
    every_replica_applies_what_was_committed(emulator(7));
}

/// A minimal executor: polls on this thread, parks until woken.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    let start = Instant::now();
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never woken");
        thread::park_timeout(Duration::from_millis(100));
    }
}

#[test]
fn receipts_are_futures_for_any_executor() {
    let cluster = Cluster::start(Config::new(3), recorders(3)).expect("valid");
    cluster.submit(b"warm-up".to_vec()).expect("a leader");
    let receipts: Vec<RecorderReceipt> = (0..20)
        .map(|i| cluster.propose_async(command("a", i)))
        .collect();
    let infos = block_on(async move {
        let mut infos = Vec::new();
        for r in receipts {
            infos.push(r.await);
        }
        infos
    });
    for (i, info) in infos.into_iter().enumerate() {
        let info = info.unwrap_or_else(|e| panic!("command {i}: {e}"));
        assert_eq!(info.leader, 0);
    }
    let machines = cluster.shutdown();
    let leader = machines[0].as_ref().unwrap();
    assert_eq!(
        leader.applied.len(),
        21,
        "applied at the leader before resolving"
    );
}

fn pipelined_commands_are_batched_and_each_gets_its_result(config: Config) {
    let cluster = Cluster::start(config, recorders(3)).expect("valid");
    cluster.submit(b"warm-up".to_vec()).expect("a leader");
    let leader = cluster.leader().expect("a leader");
    let n = 2_000u32;
    let receipts: Vec<RecorderReceipt> = (0..n)
        .map(|i| cluster.propose_at(leader, command("b", i)))
        .collect();
    let infos: Vec<_> = receipts
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.wait().unwrap_or_else(|e| panic!("command {i}: {e}")))
        .collect();
    let mut positions: Vec<Position> = infos.iter().map(|i| i.position).collect();
    positions.sort();
    positions.dedup();
    assert_eq!(positions.len(), n as usize, "one position per command");
    assert!(infos.iter().all(|i| i.position.index < i.batch_commands));
    // Each receipt carries the state machine's answer to its own command, computed at
    // its position: through batching, nothing shifts or swaps.
    for (i, info) in infos.iter().enumerate() {
        let expected = (info.position, command("b", i as u32));
        assert_eq!(info.response, expected, "command {i}");
    }
    let m = cluster.metrics();
    assert!(
        m.batch_commands_max > 1,
        "some batch packs several commands"
    );
    assert!(m.commands_per_batch() > 1.0, "{m:?}");
    assert_eq!(m.committed, u64::from(n) + 1);
    assert_eq!(m.batched_commands, m.committed);
    assert!(m.batches < m.committed);
    assert_eq!(m.latency.len(), m.committed, "one latency per command");
    assert_eq!(m.proposed, m.committed, "nothing lost or pending");
    assert_eq!(m.lost, 0);
    wait_until("the followers", || {
        (0..3).all(|r| cluster.applied_commands(r) > u64::from(n))
    });
    let machines = cluster.shutdown();
    let log = machines[usize::from(leader)].as_ref().unwrap();
    for info in infos.iter().step_by(97) {
        let (position, c) = log
            .applied
            .iter()
            .find(|(p, _)| *p == info.position)
            .expect("applied");
        assert_eq!(*position, info.position);
        assert!(c.starts_with(b"b "), "{c:?}");
    }
    // Every command once, in the order the leader took them (one client, one leader).
    // Another replica's brief leadership may decide a slot of the pipeline with what it
    // found there, and the leader then proposes its batch again in a later slot: the
    // order may change then, never the set.
    let expected: Vec<Vec<u8>> = std::iter::once(b"warm-up".to_vec())
        .chain((0..n).map(|i| command("b", i)))
        .collect();
    let mut sorted_expected = expected.clone();
    sorted_expected.sort();
    for machine in machines.iter().flatten() {
        let got = commands(machine);
        if got != expected {
            assert!(m.leaderships > 1, "reordered under one leadership: {m:?}");
            let mut sorted = got;
            sorted.sort();
            assert_eq!(sorted, sorted_expected, "every command once");
        }
    }
}

#[test]
fn mem_pipelined_commands_are_batched_and_each_gets_its_result() {
    pipelined_commands_are_batched_and_each_gets_its_result(Config::new(3));
}

#[test]
fn emulator_pipelined_commands_are_batched_and_each_gets_its_result() {
    pipelined_commands_are_batched_and_each_gets_its_result(emulator(11));
}

#[test]
fn a_batch_delay_holds_commands_for_company_within_both_bounds() {
    // On the emulator, whose clock is virtual: a lone command waits out the delay.
    let mut config = emulator(3);
    config.batch.max_delay = Duration::from_micros(100);
    config.batch.max_commands = 8;
    let cluster = Cluster::start(config, recorders(3)).expect("valid");
    let info = cluster.submit(b"alone".to_vec()).expect("committed");
    assert!(info.latency >= Duration::from_micros(100), "{info:?}");
    assert_eq!(info.batch_commands, 1);
    // A burst: batches of 8 go out at once (full), never more.
    let receipts: Vec<RecorderReceipt> = (0..64)
        .map(|i| cluster.propose_async(command("d", i)))
        .collect();
    for r in receipts {
        let info = r.wait().expect("committed");
        assert!(info.batch_commands <= 8, "max_commands bounds a batch");
    }
    let m = cluster.metrics();
    assert_eq!(m.batch_commands_max, 8, "{m:?}");
}

#[test]
fn bad_input_is_a_typed_error() {
    let mut config = Config::new(3);
    config.log.max_value_bytes = 64;
    let cluster = Cluster::start(config, recorders(3)).expect("valid");
    cluster.submit(b"first".to_vec()).expect("a leader");
    let refused_before = cluster.metrics().refused;
    let max = cluster.max_command_bytes();
    assert_eq!(max, 62, "64 bytes less the tag and a one-byte length");
    assert_eq!(
        cluster.propose(vec![0; 63]),
        Err(Error::CommandTooLarge { len: 63, max: 62 })
    );
    cluster
        .propose(vec![0; 62])
        .expect("the largest command fits");
    cluster
        .propose(Vec::new())
        .expect("an empty command is a command");
    assert_eq!(
        cluster.propose_at(1, b"x".to_vec()).wait(),
        Err(Error::NotLeader {
            replica: 1,
            leader: 0
        })
    );
    assert_eq!(
        cluster.propose_at(9, b"x".to_vec()).wait(),
        Err(Error::NoSuchReplica {
            replica: 9,
            replicas: 3
        })
    );
    assert_eq!(cluster.role(0), Role::Leader);
    assert_eq!(cluster.role(2), Role::Follower);
    cluster.crash(2).expect("up");
    assert_eq!(cluster.role(2), Role::Crashed);
    assert_eq!(cluster.crash(2), Err(Error::Unavailable { replica: 2 }));
    assert_eq!(
        cluster.propose_at(2, b"x".to_vec()).wait(),
        Err(Error::Unavailable { replica: 2 })
    );
    let m = cluster.metrics();
    assert_eq!(m.committed, 3);
    assert_eq!(
        m.refused - refused_before,
        4,
        "too large, not leader, no such replica, down"
    );
    let machines = cluster.shutdown();
    assert!(machines[2].is_none(), "crashed");
    let leader = machines[0].as_ref().unwrap();
    assert_eq!(commands(leader)[2], Vec::<u8>::new());
}

#[test]
fn bad_configurations_are_refused_at_start() {
    let r = Cluster::start(Config::new(3), recorders(2));
    assert!(matches!(r, Err(StartError::InvalidConfig(_))));
    let mut config = Config::new(3);
    config.batch.max_commands = 0;
    assert!(matches!(
        Cluster::start(config, recorders(3)),
        Err(StartError::InvalidConfig(_))
    ));
    let mut config = Config::new(3);
    config.batch.max_bytes = 1;
    assert!(matches!(
        Cluster::start(config, recorders(3)),
        Err(StartError::InvalidConfig(_))
    ));
    let mut config = Config::new(3);
    config.log.failure_timeout_ns = 1;
    assert!(matches!(
        Cluster::start(config, recorders(3)),
        Err(StartError::InvalidConfig(_))
    ));
    // A member outside the replicas: the set is named by its ids, not as a bit mask.
    let mut config = Config::new(3);
    config.log.members = velos::core::log::membership::Members::of(&[0, 3]);
    match Cluster::start(config, recorders(3)) {
        Err(StartError::InvalidConfig(why)) => assert!(why.contains("{0, 3}"), "{why}"),
        other => panic!("refused: {:?}", other.err()),
    }
    let mut config = Config::new(3);
    config.backend = Backend::Emulator(EmulatorConfig {
        quantum_ns: 0,
        ..EmulatorConfig::new(1)
    });
    assert!(matches!(
        Cluster::start(config, recorders(3)),
        Err(StartError::InvalidConfig(_))
    ));
}

#[test]
fn a_wait_on_a_cluster_that_cannot_decide_times_out() {
    // Two of three replicas down: no majority, so nothing commits; the wait is bounded.
    // It ends with the wait timeout, or earlier with an unknown outcome: the leader that
    // decides nothing for two failure timeouts passes the lead (rule (deciding leader)),
    // and a command it had put in a slot may yet be decided if a majority comes back.
    let mut config = Config::new(3);
    config.wait_timeout = Duration::from_millis(300);
    let cluster = Cluster::start(config, recorders(3)).expect("valid");
    cluster.submit(b"first".to_vec()).expect("a leader");
    cluster.crash(1).expect("up");
    cluster.crash(2).expect("up");
    let started = std::time::Instant::now();
    let stuck = cluster.propose(b"stuck".to_vec());
    let waited = started.elapsed();
    assert!(
        matches!(
            stuck,
            Err(Error::TimedOut { after }) if after == Duration::from_millis(300)
        ) || stuck == Err(Error::OutcomeUnknown),
        "{stuck:?}"
    );
    // Bounded: the wait timeout, and slack for a loaded machine's scheduling.
    assert!(waited < Duration::from_secs(3), "waited {waited:?}");
    let machines = cluster.shutdown();
    assert_eq!(
        commands(machines[0].as_ref().unwrap()),
        vec![b"first".to_vec()]
    );
}

fn after_the_leader_crashes_submit_continues(config: Config) {
    let cluster = Cluster::start(config, recorders(3)).expect("valid");
    for i in 0..20 {
        cluster.submit(command("before", i)).expect("committed");
    }
    assert_eq!(cluster.leader(), Some(0));
    cluster.crash(0).expect("up");
    for i in 0..20 {
        let info = cluster
            .submit(command("after", i))
            .expect("committed by the new leader");
        assert_eq!(info.leader, 1, "the next replica takes over");
    }
    cluster
        .catch_up(Duration::from_secs(60))
        .expect("replica 2 catches up");
    assert_eq!(cluster.applied_commands(2), cluster.applied_commands(1));
    let m = cluster.metrics();
    assert!(m.leader_changes() >= 1, "{m:?}");
    assert_eq!(m.committed, 40);
    assert_eq!(m.proposed, m.committed + m.lost);
    let machines = cluster.shutdown();
    assert!(machines[0].is_none(), "crashed");
    let (a, b) = (machines[1].as_ref().unwrap(), machines[2].as_ref().unwrap());
    assert_eq!(a.applied, b.applied, "caught up: the same commands");
    assert_in_order(a);
    for tag in ["before", "after"] {
        for i in 0..20 {
            assert!(
                commands(a).contains(&command(tag, i)),
                "{tag} {i} survives the crash"
            );
        }
    }
}

/// During a failover nobody is named leader (never the crashed one), a proposal is
/// refused with `NoLeader` (not proposed), `wait_for_leader` returns the next leader, and
/// `submit_async` and `read_async` — driven by a minimal executor — follow the
/// leadership change without polling.
#[test]
fn a_failover_is_named_waited_for_and_followed_by_the_async_submit() {
    let cluster = Cluster::start(Config::new(3), recorders(3)).expect("valid");
    let first = block_on(cluster.submit_async(command("a", 0))).expect("committed");
    assert_eq!(first.response, (first.position, command("a", 0)));
    assert_eq!(block_on(cluster.leader_async()), Some(first.leader));
    let crashed = first.leader;
    cluster.crash(crashed).expect("up");
    let since = Instant::now();
    assert_ne!(
        cluster.leader(),
        Some(crashed),
        "a crashed replica is not named"
    );
    let refused = cluster.propose(command("a", 1));
    // The failure timeout is 50 ms: well within it, no replica leads yet.
    if since.elapsed() < Duration::from_millis(20) {
        assert_eq!(refused, Err(Error::NoLeader));
        assert!(Error::NoLeader.not_proposed());
    }
    // The async submit waits for the next leader and commits there.
    let info = block_on(cluster.submit_async(command("a", 2))).expect("committed");
    assert_ne!(info.leader, crashed);
    assert_eq!(info.response, (info.position, command("a", 2)));
    let next = cluster
        .wait_for_leader(Duration::from_secs(10))
        .expect("a leader");
    assert_eq!(next, info.leader);
    // A read as a future: the leader's state holds both commits.
    let read = block_on(cluster.read_async(|r: &Recorder| commands(r)));
    let seen = read.expect("answered");
    assert!(seen.contains(&command("a", 0)) && seen.contains(&command("a", 2)));
    assert_eq!(block_on(cluster.leader_async()), Some(next));
    cluster.crash(next).expect("up");
    let last = (0..3)
        .find(|&r| r != crashed && r != next)
        .expect("a third");
    cluster.crash(last).expect("up");
    assert_eq!(
        cluster.wait_for_leader(Duration::from_secs(1)),
        Err(Error::NoReplicaUp)
    );
    assert_eq!(block_on(cluster.leader_async()), None);
    cluster.shutdown();
}

/// A session's command, submitted again as a client does after an unknown outcome,
/// reaches `apply` once and answers with the first application's response; another
/// session's identical command is its own.
fn a_session_command_applies_once_however_often_it_is_sent(config: Config) {
    let cluster = Cluster::start(config, recorders(3)).expect("valid");
    assert_eq!(
        cluster.session().resubmit(),
        Err(Error::NothingToResubmit),
        "nothing sent yet"
    );
    let mut session = cluster.session();
    let first = session.submit(command("s", 1)).expect("committed");
    assert_eq!(first.response, (first.position, command("s", 1)));
    for _ in 0..3 {
        let again = session.resubmit().expect("committed");
        assert_eq!(
            again.response, first.response,
            "the first application's answer"
        );
        assert!(
            again.position > first.position,
            "a later entry, skipped at apply"
        );
    }
    session.submit(command("s", 2)).expect("committed");
    let mut other = cluster.session();
    assert_ne!(other.id(), session.id());
    other
        .submit(command("s", 1))
        .expect("another session's command");
    wait_until("the followers", || {
        (0..3).all(|r| cluster.applied_commands(r) == 3)
    });
    let machines = cluster.shutdown();
    for m in machines.iter().flatten() {
        let seen = |c: Vec<u8>| commands(m).iter().filter(|x| **x == c).count();
        assert_eq!(seen(command("s", 1)), 2, "once per session");
        assert_eq!(seen(command("s", 2)), 1);
    }
}

/// The replicas keep the `max_sessions` most recently used sessions: a command of a
/// session evicted since its last one is not applied (it might repeat one applied before
/// the eviction) and answers `SessionExpired`; a new session works.
#[test]
fn a_session_evicted_from_the_table_is_told_it_expired() {
    let mut config = Config::new(3);
    config.max_sessions = 2;
    let cluster = Cluster::start(config, recorders(3)).expect("valid");
    let mut old = cluster.session();
    old.submit(command("old", 1)).expect("committed");
    for i in 0..2 {
        cluster
            .session()
            .submit(command("new", i))
            .expect("committed");
    }
    assert_eq!(
        old.submit(command("old", 2)),
        Err(Error::SessionExpired { session: old.id() })
    );
    assert_eq!(
        old.resubmit(),
        Err(Error::SessionExpired { session: old.id() }),
        "and stays expired"
    );
    cluster
        .session()
        .submit(command("fresh", 0))
        .expect("a new session works");
    wait_until("the followers", || {
        (0..3).all(|r| cluster.applied_commands(r) == 4)
    });
    for m in cluster.shutdown().iter().flatten() {
        assert!(!commands(m).contains(&command("old", 2)), "never applied");
        assert_eq!(commands(m).len(), 4);
    }
}

#[test]
fn mem_a_session_command_applies_once_however_often_it_is_sent() {
    a_session_command_applies_once_however_often_it_is_sent(Config::new(3));
}

#[test]
fn emulator_a_session_command_applies_once_however_often_it_is_sent() {
    a_session_command_applies_once_however_often_it_is_sent(emulator(5));
}

/// Four clients, each in its own session, write through a leader crash: every command
/// is applied exactly once on every survivor (a retry after an unknown outcome is
/// skipped if its first copy was decided), and a snapshot carries the sessions. The crash
/// comes once the clients are a sixth of the way through (not at a time: fast clients
/// finished before it). `catch_up` counts the crashed leader's slots too: one it decided
/// and applied alone is the survivors' once the next leader settles it, and `catch_up`
/// waits for that (when it counted live replicas only, this check failed in 2 of 20 runs
/// with the crash at 10 ms, 18 of 30 once snapshots got cheaper).
#[test]
fn sessions_write_through_a_leader_crash_and_apply_each_command_once() {
    let mut config = Config::new(3);
    config.snapshot_every_slots = 64;
    let cluster = Cluster::start(config, recorders(3)).expect("valid");
    let leader = cluster
        .submit(b"warm-up".to_vec())
        .expect("a leader")
        .leader;
    let done = std::sync::atomic::AtomicU32::new(0);
    thread::scope(|s| {
        for c in 0..4u32 {
            let (cluster, done) = (&cluster, &done);
            s.spawn(move || {
                let mut session = cluster.session();
                for i in 0..150 {
                    session
                        .submit(command(&format!("c{c}"), i))
                        .unwrap_or_else(|e| panic!("client {c}, command {i}: {e}"));
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            });
        }
        wait_until("a sixth of the commands", || {
            done.load(std::sync::atomic::Ordering::SeqCst) >= 100
        });
        cluster.crash(leader).expect("up");
    });
    assert!(
        done.load(std::sync::atomic::Ordering::SeqCst) == 600,
        "every command committed"
    );
    cluster
        .catch_up(Duration::from_secs(60))
        .expect("the survivors catch up");
    let machines = cluster.shutdown();
    for m in machines.iter().flatten() {
        for c in 0..4u32 {
            for i in 0..150 {
                let wanted = command(&format!("c{c}"), i);
                let n = commands(m).iter().filter(|x| **x == wanted).count();
                assert_eq!(n, 1, "client {c}, command {i}: applied {n} times");
            }
        }
    }
}

/// Whether `T` may move into a spawned task (checked when the test compiles).
fn send_static<T: Send + 'static>(_: &T) {}

/// A session that shares the cluster through an `Arc` is `Send + 'static`, and so are its
/// futures' tasks: two clients move theirs into tasks — threads running the minimal
/// executor here, as a runtime's spawned tasks would — and submit with `submit_async`
/// through a leader crash; a command whose outcome was unknown is sent again by the
/// future itself, and every command is applied exactly once on every survivor. A
/// resubmitted command answers with its first application's response.
#[test]
fn owned_sessions_move_into_tasks_and_apply_each_command_once_through_a_crash() {
    let cluster = Arc::new(Cluster::start(Config::new(3), recorders(3)).expect("valid"));
    let leader = cluster.submit(b"w".to_vec()).expect("a leader").leader;
    let mut fresh = cluster.owned_session();
    assert_eq!(
        block_on(fresh.resubmit_async()),
        Err(Error::NothingToResubmit)
    );
    let first = block_on(fresh.submit_async(command("f", 0))).expect("committed");
    let again = block_on(fresh.resubmit_async()).expect("committed");
    assert_eq!(
        again.response, first.response,
        "applied once: its first answer"
    );
    let done = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..2u32)
        .map(|c| {
            let mut session = cluster.owned_session();
            let done = Arc::clone(&done);
            let task = async move {
                for i in 0..100 {
                    let info = session
                        .submit_async(command(&format!("t{c}"), i))
                        .await
                        .unwrap_or_else(|e| panic!("client {c}, command {i}: {e}"));
                    assert_eq!(info.response.1, command(&format!("t{c}"), i));
                    done.fetch_add(1, Ordering::SeqCst);
                }
                session.resends()
            };
            send_static(&task);
            thread::spawn(move || block_on(task))
        })
        .collect();
    wait_until("a fifth of the commands", || {
        done.load(Ordering::SeqCst) >= 40
    });
    cluster.crash(leader).expect("up");
    for client in clients {
        client.join().expect("every command committed");
    }
    cluster
        .catch_up(Duration::from_secs(60))
        .expect("the survivors catch up");
    drop(fresh); // a session holds the cluster: the last one gone, it can be shut down
    let cluster = Arc::try_unwrap(cluster).unwrap_or_else(|_| panic!("the last handle"));
    for m in cluster.shutdown().iter().flatten() {
        let seen = |c: Vec<u8>| commands(m).iter().filter(|x| **x == c).count();
        assert_eq!(seen(command("f", 0)), 1, "resubmitted, applied once");
        for c in 0..2u32 {
            for i in 0..100 {
                let n = seen(command(&format!("t{c}"), i));
                assert_eq!(n, 1, "client {c}, command {i}: applied {n} times");
            }
        }
    }
}

#[test]
fn mem_after_the_leader_crashes_submit_continues() {
    after_the_leader_crashes_submit_continues(Config::new(3));
}

#[test]
fn emulator_after_the_leader_crashes_submit_continues() {
    after_the_leader_crashes_submit_continues(emulator(5));
}

#[test]
fn snapshots_restore_the_state_and_bad_ones_are_errors() {
    let mut r = Recorder::default();
    r.apply(Position { slot: 0, index: 0 }, b"one");
    r.apply(Position { slot: 0, index: 1 }, b"");
    let snapshot = r.snapshot();
    let mut copy = Recorder::default();
    copy.restore(&snapshot).expect("a snapshot");
    assert_eq!(commands(&copy), commands(&r));
    assert!(copy.restore(&[1, 0]).is_err());
    assert_eq!(
        commands(&copy),
        commands(&r),
        "unchanged by a failed restore"
    );
}

/// More commands than the log has slots: the state machines' snapshots let the ring reuse
/// its slots (without them the log would fill at 32).
fn the_ring_reuses_slots_once_snapshots_hold_them(mut config: Config) {
    config.log.slots = 32;
    config.log.max_snapshot_bytes = 1 << 14;
    config.snapshot_every_slots = 4;
    config.batch.max_commands = 1;
    let cluster = Cluster::start(config, recorders(3)).expect("a valid configuration");
    for i in 0..200 {
        cluster.submit(command("r", i)).expect("committed");
    }
    // A follower that fell off the ring restores a snapshot instead of applying each
    // command: wait for the slots, then compare the states.
    cluster
        .catch_up(Duration::from_secs(60))
        .expect("every replica catches up");
    let m = cluster.metrics();
    assert_eq!(m.committed, 200);
    assert!(m.snapshots > 0, "snapshots were handed to the log");
    assert_eq!(m.snapshots_refused, 0);
    let machines = cluster.shutdown();
    let expected: Vec<Vec<u8>> = (0..200).map(|i| command("r", i)).collect();
    for log in machines.iter().map(|m| m.as_ref().unwrap()) {
        assert_eq!(commands(log), expected, "every command once, in order");
    }
}

#[test]
fn mem_the_ring_reuses_slots_once_snapshots_hold_them() {
    the_ring_reuses_slots_once_snapshots_hold_them(Config::new(3));
}

#[test]
fn emulator_the_ring_reuses_slots_once_snapshots_hold_them() {
    the_ring_reuses_slots_once_snapshots_hold_them(emulator(7));
}

/// A read sees every command committed before it was asked, through the log or, with
/// leases on, from the leader's lease.
fn reads_see_every_command_committed_before_them(config: Config) -> u64 {
    let cluster = Cluster::start(config, recorders(3)).expect("a valid configuration");
    for i in 0..20 {
        cluster.submit(command("w", i)).expect("committed");
        let seen = cluster
            .read(|r: &Recorder| commands(r))
            .expect("a read is answered");
        let expected: Vec<Vec<u8>> = (0..=i).map(|j| command("w", j)).collect();
        assert_eq!(
            seen, expected,
            "the read after write {i} sees it and nothing else"
        );
    }
    let leases = cluster.metrics().lease_reads;
    let before = cluster.leader().expect("a leader");
    cluster.crash(before).expect("the leader crashes");
    let after = cluster.read(|r: &Recorder| r.applied.len()).expect("read");
    assert_eq!(
        after, 20,
        "the new leader's state holds every committed command"
    );
    let m = cluster.metrics();
    assert!(
        m.lease_reads + m.log_reads >= 21,
        "every read was answered one way"
    );
    drop(cluster.shutdown());
    leases
}

#[test]
fn mem_reads_through_the_log_see_every_committed_command() {
    let leases = reads_see_every_command_committed_before_them(Config::new(3));
    assert_eq!(leases, 0, "leases are off");
}

#[test]
fn mem_lease_reads_see_every_committed_command() {
    let mut config = Config::new(3);
    config.log.lease_ns = 10_000_000;
    let leases = reads_see_every_command_committed_before_them(config);
    assert!(leases > 0, "some reads were answered from the lease");
}

#[test]
fn emulator_lease_reads_see_every_committed_command() {
    let mut config = emulator(3);
    config.log.lease_ns = 10_000;
    let leases = reads_see_every_command_committed_before_them(config);
    assert!(leases > 0, "some reads were answered from the lease");
}

/// Runs `events` on a cluster of three while a reader reads through the log without
/// pause (unless paused), blocking and as a future in turn — every read must be
/// answered, and see the one command — and a sampler checks that the handle names as
/// leader only a replica that takes proposals.
fn reads_are_answered_throughout(events: impl FnOnce(&Cluster<Recorder>, &Reads)) {
    let cluster = Cluster::start(Config::new(3), recorders(3)).expect("valid");
    cluster.submit(b"w".to_vec()).expect("committed");
    let reads = Reads::default();
    thread::scope(|s| {
        // The helpers stop however this thread leaves the scope (a failed check too).
        let _stop = StopOnDrop(&reads.stop);
        let reader = s.spawn(|| {
            let _stop = StopOnDrop(&reads.stop);
            while !reads.stop.load(Ordering::SeqCst) {
                let n = reads.done.load(Ordering::SeqCst);
                let query = |r: &Recorder| r.applied.len();
                let seen = if n % 2 == 0 {
                    cluster.read(query)
                } else {
                    block_on(cluster.read_async(query))
                };
                let seen = seen.unwrap_or_else(|e| panic!("read {n}: {e}"));
                assert_eq!(seen, 1, "read {n}: the one command");
                reads.done.fetch_add(1, Ordering::SeqCst);
            }
        });
        let sampler = s.spawn(|| {
            let _stop = StopOnDrop(&reads.stop);
            let mut named = 0;
            while !reads.stop.load(Ordering::SeqCst) {
                if let Some(l) = cluster.leader() {
                    assert_eq!(cluster.role(l), Role::Leader, "{l} is named: it leads");
                    named += 1;
                }
                thread::sleep(Duration::from_micros(100)); // a sample, not a wait
            }
            named
        });
        reads.some();
        events(&cluster, &reads);
        reads.some();
        let stopped = reads.stop.swap(true, Ordering::SeqCst);
        assert!(!stopped, "the helpers ran to the end");
        reader.join().expect("every read answered");
        assert!(sampler.join().expect("only leaders named") > 0);
    });
    cluster.shutdown();
}

/// The reader's controls: reads done, stopped.
#[derive(Default)]
struct Reads {
    done: AtomicU64,
    stop: AtomicBool,
}

impl Reads {
    /// Waits for 20 more reads (or the reader's end).
    fn some(&self) {
        let before = self.done.load(Ordering::SeqCst);
        wait_until("20 more reads", || {
            self.stop.load(Ordering::SeqCst) || self.done.load(Ordering::SeqCst) >= before + 20
        });
    }
}

/// The leader, once one takes proposals.
fn leader_of(cluster: &Cluster<Recorder>) -> u16 {
    let l = cluster
        .wait_for_leader(Duration::from_secs(10))
        .expect("a leader");
    assert_eq!(cluster.role(l), Role::Leader, "named: it takes proposals");
    l
}

/// A read has no side effect, so it is asked again when its leader loses its role before
/// answering: removed from the voters three times (then a new process in its place, the
/// only way back: rule (retire)), the leader steps down holding reads whose marker entries
/// are under way, and each is asked again of the next leader. Before, such a read failed
/// with `OutcomeUnknown` (8 runs of 8).
#[test]
fn reads_are_answered_while_the_leader_steps_down() {
    reads_are_answered_throughout(|cluster, reads| {
        for _ in 0..3 {
            let l = leader_of(cluster);
            let others: Vec<u16> = (0..3).filter(|&r| r != l).collect();
            cluster.change_members(&others).expect("the leader removed");
            reads.some();
            // The removed process is cut off by the others and ends.
            let removed = Instant::now();
            while cluster.role(l) != Role::Removed {
                assert!(
                    removed.elapsed() < WAIT,
                    "replica {l} still {:?}",
                    cluster.role(l)
                );
                thread::sleep(Duration::from_millis(1));
            }
            match cluster.change_members(&[0, 1, 2]) {
                Err(Error::BadMembership(why)) => assert!(why.contains("join path"), "{why}"),
                other => panic!("the removed process is not added back: {other:?}"),
            }
            let voting = cluster.replace(l, Recorder::default()).expect("removed");
            voting.wait_timeout(WAIT).expect("the new process votes");
            reads.some();
        }
    });
}

/// A read asked of a leader as it crashes is asked again of the next one.
#[test]
fn reads_are_answered_across_a_leader_crash() {
    reads_are_answered_throughout(|cluster, _| {
        cluster.crash(leader_of(cluster)).expect("up");
    });
}

/// Sets its flag when dropped: threads that loop until it is set stop when one of them,
/// or the test, fails.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Membership through the log: replica 3 starts outside the voters and is added, the
/// leader 0 is removed (cut off by the others, it ends: rule (retire)), then 2 crashes —
/// only {1, 3}, a majority of the new voters {1, 2, 3}, is left, and commands still
/// commit. Bad changes are typed errors.
fn members_change_through_the_log(mut config: Config) {
    config.log.members = velos::core::log::membership::Members::of(&[0, 1, 2]);
    // Replica 3 learns the slots of {0, 1, 2} by reading them (it votes in none): once 0
    // and 2 crashed, the ones it has not read yet have no majority left to read, and it
    // copies a snapshot of 1's taken past them.
    config.snapshot_every_slots = 16;
    let cluster = Cluster::start(config, recorders(4)).expect("valid");
    for i in 0..20 {
        cluster.submit(command("m", i)).expect("committed");
    }
    assert!(matches!(
        cluster.change_members(&[0, 1, 2, 3, 9]),
        Err(Error::NoSuchReplica { replica: 9, .. })
    ));
    assert!(matches!(
        block_on(cluster.change_members_async(&[0, 1, 2, 3, 9])),
        Err(Error::NoSuchReplica { replica: 9, .. })
    ));
    assert!(matches!(
        cluster.change_members(&[0, 1, 2]),
        Err(Error::BadMembership(_))
    ));
    // The future form, driven by a minimal executor: in effect once it resolves.
    block_on(cluster.change_members_async(&[0, 1, 2, 3])).expect("3 added");
    // Two changes at once; the reason names both sets by their ids.
    match cluster.change_members(&[1, 3]) {
        Err(Error::BadMembership(why)) => {
            assert!(why.contains("from {0, 1, 2, 3} to {1, 3}"), "{why}");
        }
        other => panic!("refused as two changes: {other:?}"),
    }
    cluster.change_members(&[1, 2, 3]).expect("0 removed");
    // The leader removed itself: while the others hand the lead over (Ω may name 0 again
    // until the change is in effect in their next slot), a command can be taken by a
    // leader that loses the role before deciding it. A session sends it again, applied
    // once.
    let mut session = cluster.session();
    for i in 20..40 {
        session.submit(command("m", i)).expect("committed");
    }
    // Removed, 0 is cut off by the others and ends (rule (retire)): nothing left to crash.
    let removed = Instant::now();
    while cluster.role(0) != Role::Removed {
        assert!(
            removed.elapsed() < WAIT,
            "replica 0 still {:?}",
            cluster.role(0)
        );
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(cluster.crash(0), Err(Error::Unavailable { replica: 0 }));
    cluster.crash(2).expect("crashed");
    for i in 40..60 {
        cluster
            .submit(command("m", i))
            .expect("committed by {1, 3}");
    }
    // Either survivor may lead: the one that had caught up first (rule (able leader)).
    let leader = cluster.leader();
    assert!(
        matches!(leader, Some(1 | 3)),
        "a survivor leads: {leader:?}"
    );
    if let Err(e) = cluster.catch_up(Duration::from_secs(10)) {
        panic!(
            "3 catches up: {e}; applied slots {:?}",
            (0..4).map(|r| cluster.applied_slots(r)).collect::<Vec<_>>()
        );
    }
    let machines = cluster.shutdown();
    let expected: Vec<Vec<u8>> = (0..60).map(|i| command("m", i)).collect();
    for r in [1, 3] {
        assert_eq!(
            commands(machines[r].as_ref().unwrap()),
            expected,
            "replica {r}"
        );
    }
}

#[test]
fn mem_members_change_through_the_log() {
    members_change_through_the_log(Config::new(4));
}

#[test]
fn emulator_members_change_through_the_log() {
    members_change_through_the_log(Config::emulator(4, 9));
}
