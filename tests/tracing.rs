//! The embedding reports what a service must hear through `tracing`: a leader change, a
//! crash, a snapshot the log refused, a gap without a replica that takes proposals, and
//! the engine's own events (a term begun, a configuration decided), each replica's thread
//! in its span. A minimal subscriber records every event and span of the run; the tests
//! take turns (each clears the record and shuts its cluster down before the next).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use velos::embed::{Cluster, Config, Error, Position, RestoreError, StateMachine};

/// Every event seen: its level and its fields as `name=value` text.
static EVENTS: Mutex<Vec<(Level, String)>> = Mutex::new(Vec::new());
/// Every span created: its name and its fields as `name=value` text.
static SPANS: Mutex<Vec<(&'static str, String)>> = Mutex::new(Vec::new());
/// Held by the test that runs: one at a time.
static TURN: Mutex<()> = Mutex::new(());

/// The recorder installed (once), the record cleared, and this test's turn.
fn recording() -> MutexGuard<'static, ()> {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        tracing::subscriber::set_global_default(Recorder).expect("the only subscriber")
    });
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    EVENTS.lock().unwrap().clear();
    SPANS.lock().unwrap().clear();
    turn
}

struct Recorder;

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        let mut fields = Fields(String::new());
        attributes.record(&mut fields);
        let name = attributes.metadata().name();
        SPANS.lock().unwrap().push((name, fields.0));
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let level = *event.metadata().level();
        EVENTS.lock().unwrap().push((level, fields.0));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Whether an event of `level` holds every one of `needles`.
fn seen(level: Level, needles: &[&str]) -> bool {
    EVENTS
        .lock()
        .unwrap()
        .iter()
        .any(|(l, text)| *l == level && needles.iter().all(|n| text.contains(n)))
}

fn wait_for(level: Level, needles: &[&str]) {
    let start = Instant::now();
    while !seen(level, needles) {
        let events = EVENTS.lock().unwrap().clone();
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no {level} event with {needles:?}: {events:#?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A state machine whose snapshot is `size` bytes (shared: the test changes it).
struct Ballast {
    size: Arc<AtomicUsize>,
}

impl StateMachine for Ballast {
    type Response = ();

    fn apply(&mut self, _: Position, _: &[u8]) {}
    fn snapshot(&self) -> Vec<u8> {
        vec![0; self.size.load(Ordering::SeqCst)]
    }
    fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> {
        Ok(())
    }
}

fn ballast(size: &Arc<AtomicUsize>) -> impl Iterator<Item = Ballast> {
    (0..3).map(|_| Ballast { size: size.clone() })
}

#[test]
fn leader_changes_crashes_and_configurations_are_events() {
    let _turn = recording();
    let cluster = Cluster::start(Config::new(3), ballast(&Arc::default())).expect("valid");
    let leader = cluster.submit(b"x".to_vec()).expect("committed").leader;
    let me = format!("replica={leader} ");
    wait_for(Level::INFO, &["message=leads: takes proposals", &me]);
    // The engine's own events: its term began.
    wait_for(Level::INFO, &["message=term begins", &me, "from_slot=0"]);
    cluster.crash(leader).expect("crashed");
    wait_for(Level::WARN, &["message=crashed", &me]);
    cluster
        .submit(b"x".to_vec())
        .expect("committed under the next leader");
    let next = cluster.leader().expect("a leader");
    let next_is = format!("replica={next} ");
    wait_for(Level::INFO, &["message=leads: takes proposals", &next_is]);
    wait_for(Level::INFO, &["message=term begins", &next_is]);
    // Removing the crashed replica: every live replica hears the configuration decided.
    let live: Vec<u16> = (0..3).filter(|&r| r != leader).collect();
    cluster.change_members(&live).expect("removed");
    // Printed as ids (`{1, 2}`), not as a bit mask.
    let ids: Vec<String> = live.iter().map(u16::to_string).collect();
    let members = format!("members={{{}}} ", ids.join(", "));
    for r in &live {
        let who = format!("replica={r} ");
        wait_for(
            Level::INFO,
            &["message=configuration decided", &who, &members],
        );
    }
    // Each replica's thread runs inside its span.
    for r in 0..3 {
        let replica = format!("replica={r} ");
        let spans = SPANS.lock().unwrap();
        assert!(
            spans
                .iter()
                .any(|(n, f)| *n == "velos_replica" && f.contains(&replica)),
            "no span of replica {r}: {spans:?}"
        );
    }
    let events = EVENTS.lock().unwrap().len();
    assert!(
        events < 200,
        "events at the edges, not per decision: {events}"
    );
    cluster.shutdown();
}

/// A state that grows past the log's snapshot banks: its snapshot is refused with a
/// warning naming the sizes, commands fail at once (`SnapshotTooLarge`), and once the
/// state shrinks and a snapshot fits again (reads through the log fill the slots to the
/// next one), commands commit again.
#[test]
fn a_refused_snapshot_is_an_event_and_commands_wait_for_one_that_fits() {
    let _turn = recording();
    let mut config = Config::new(3);
    config.snapshot_every_slots = 8;
    let too_large = config.log.max_snapshot_bytes as usize + 1;
    let size = Arc::new(AtomicUsize::new(0));
    let cluster = Cluster::start(config, ballast(&size)).expect("valid");
    cluster.submit(b"x".to_vec()).expect("committed");
    size.store(too_large, Ordering::SeqCst);
    let refused = (0..16).find_map(|_| cluster.submit(b"x".to_vec()).err());
    assert!(
        matches!(refused, Some(Error::SnapshotTooLarge { .. })),
        "{refused:?}"
    );
    // Each replica's snapshot is refused, and says why.
    let larger = format!("larger than the log's {}", too_large - 1);
    wait_for(Level::WARN, &["snapshot refused", &larger]);
    size.store(0, Ordering::SeqCst);
    let mut reads = 0;
    while let Err(e) = cluster.submit(b"x".to_vec()) {
        assert!(matches!(e, Error::SnapshotTooLarge { .. }), "{e}");
        cluster.read(|_: &Ballast| ()).expect("a read takes a slot");
        reads += 1;
        assert!(reads <= 32, "a snapshot every 8 slots fits again");
    }
    cluster.shutdown();
}

/// Applies nothing; while `held` is set, a replica other than `free` that applies the
/// command `hold` stays in `apply` — its whole thread with it — and counts itself in
/// `entered`.
struct Gate {
    me: u16,
    free: Arc<AtomicU16>,
    held: Arc<AtomicBool>,
    entered: Arc<AtomicU32>,
}

impl StateMachine for Gate {
    type Response = ();

    fn apply(&mut self, _: Position, command: &[u8]) {
        if command == b"hold" && self.free.load(Ordering::SeqCst) != self.me {
            self.entered.fetch_add(1, Ordering::SeqCst);
            while self.held.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }
    fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> {
        Ok(())
    }
}

/// The number after `name=` in an event of `level` holding every one of `needles`.
fn field(level: Level, needles: &[&str], name: &str) -> f64 {
    wait_for(level, needles);
    let events = EVENTS.lock().unwrap();
    let (_, text) = events
        .iter()
        .find(|(l, t)| *l == level && needles.iter().all(|n| t.contains(n)))
        .expect("seen");
    let at = text.find(&format!("{name}=")).expect("the field") + name.len() + 1;
    let value = text[at..].split(' ').next().expect("a value");
    value
        .parse()
        .unwrap_or_else(|e| panic!("{name}={value}: {e}"))
}

/// A failover is a gap in which no replica takes proposals: once it lasts longer than the
/// failure timeout (50 ms) the embedding warns, and when proposals resume it tells how
/// long the gap was. The gap is made longer than the timeout for sure: the leader crashes
/// while both followers are held inside `apply` for twice the timeout (so nobody can take
/// over), then they are let go and elect a leader.
#[test]
fn a_gap_without_a_leader_longer_than_the_failure_timeout_is_reported() {
    let _turn = recording();
    let config = Config::new(3);
    let timeout_ms = config.log.failure_timeout_ns as f64 / 1e6;
    let (free, held, entered) = (
        Arc::new(AtomicU16::new(u16::MAX)),
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicU32::new(0)),
    );
    let gates = (0..3).map(|me| Gate {
        me,
        free: free.clone(),
        held: held.clone(),
        entered: entered.clone(),
    });
    let cluster = Cluster::start(config, gates).expect("valid");
    let leader = cluster.submit(b"x".to_vec()).expect("committed").leader;
    let gap = "no replica has taken proposals for longer than the failure timeout";
    free.store(leader, Ordering::SeqCst);
    cluster.submit(b"hold".to_vec()).expect("committed");
    let start = Instant::now();
    while entered.load(Ordering::SeqCst) < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the followers apply"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    EVENTS.lock().unwrap().clear(); // the start's election is not this test's gap
    cluster.crash(leader).expect("up");
    // The length of the gap this test is about, not a wait for something to happen.
    std::thread::sleep(Duration::from_millis(2 * timeout_ms as u64));
    held.store(false, Ordering::SeqCst);
    let next = cluster
        .submit(b"after".to_vec())
        .expect("committed by the next leader")
        .leader;
    assert_ne!(next, leader);
    let so_far = field(Level::WARN, &[gap], "for_ms");
    assert!(so_far > timeout_ms, "warned past the timeout: {so_far} ms");
    assert_eq!(field(Level::WARN, &[gap], "failure_timeout_ms"), timeout_ms);
    let resumed = "proposals resume";
    let lasted = field(Level::INFO, &[resumed], "gap_ms");
    assert!(
        lasted >= 2.0 * timeout_ms && lasted >= so_far,
        "the gap lasted the hold at least: {lasted} ms"
    );
    let count = |needle: &str| {
        let events = EVENTS.lock().unwrap();
        events.iter().filter(|(_, t)| t.contains(needle)).count()
    };
    assert_eq!((count(gap), count(resumed)), (1, 1), "one gap, told once");
    cluster.shutdown();
}
