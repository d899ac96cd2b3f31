//! The embedding reports what a service must hear through `tracing`: a leader change, a
//! crash, a snapshot the log refused, and the engine's own events (a term begun, a
//! configuration decided), each replica's thread in its span. A minimal subscriber records
//! every event and span of the run.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use velos::embed::{Cluster, Config, Position, RestoreError, StateMachine};

/// Every event seen: its level and its fields as `name=value` text.
static EVENTS: Mutex<Vec<(Level, String)>> = Mutex::new(Vec::new());
/// Every span created: its name and its fields as `name=value` text.
static SPANS: Mutex<Vec<(&'static str, String)>> = Mutex::new(Vec::new());

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

/// A state machine whose snapshot is `size` bytes.
struct Ballast {
    size: usize,
}

impl StateMachine for Ballast {
    type Response = ();

    fn apply(&mut self, _: Position, _: &[u8]) {}
    fn snapshot(&self) -> Vec<u8> {
        vec![0; self.size]
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
        self.size = bytes.len();
        Ok(())
    }
}

#[test]
fn leader_changes_crashes_and_refused_snapshots_are_events() {
    tracing::subscriber::set_global_default(Recorder).expect("the only subscriber");
    let mut config = Config::new(3);
    config.snapshot_every_slots = 8;
    let too_large = config.log.max_snapshot_bytes as usize + 1;
    let cluster =
        Cluster::start(config, (0..3).map(|_| Ballast { size: too_large })).expect("valid");
    let leader = cluster.submit(b"x".to_vec()).expect("committed").leader;
    let me = format!("replica={leader} ");
    wait_for(Level::INFO, &["message=leads: takes proposals", &me]);
    // The engine's own events: its term began.
    wait_for(Level::INFO, &["message=term begins", &me, "from_slot=0"]);
    for _ in 0..16 {
        cluster.submit(b"x".to_vec()).expect("committed");
    }
    // Each replica's snapshot every 8 slots is refused, and says why.
    let larger = format!("larger than the log's {}", too_large - 1);
    wait_for(Level::WARN, &["snapshot refused", &larger]);
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
