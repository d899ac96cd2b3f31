//! The embedding's `tracing` events, recorded with their wall-clock time, so that a gap
//! can be laid beside what the replicas reported around it: a minimal subscriber,
//! installed once per process as the global one (if no other is), that keeps every event
//! while a run records.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

/// One event: when, its level, its fields as `name=value` text.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When it was emitted.
    pub at: Instant,
    /// Its level, as text.
    pub level: &'static str,
    /// Its fields, the message first.
    pub text: String,
}

/// Whether events are kept now, and those kept.
static RECORDING: AtomicBool = AtomicBool::new(false);
static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
/// Every span's fields (a span's id is its index plus one): the replicas' spans name them.
static SPANS: Mutex<Vec<String>> = Mutex::new(Vec::new());

thread_local! {
    /// The span this thread is in (0: none).
    static CURRENT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn seen() -> MutexGuard<'static, Vec<Seen>> {
    SEEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// `DEBUG` events are kept too (a new configuration's aborted first attempts come one a
/// slot: formatting each costs the replica's thread).
static DEBUG: AtomicBool = AtomicBool::new(false);

/// Starts keeping events — `INFO` and above, `DEBUG` too if `debug` — (the recorder
/// installed first, unless another subscriber is): whether it is installed.
pub fn start(debug: bool) -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    let installed =
        *INSTALLED.get_or_init(|| tracing::subscriber::set_global_default(Recorder).is_ok());
    seen().clear();
    DEBUG.store(debug, Ordering::SeqCst);
    RECORDING.store(installed, Ordering::SeqCst);
    installed
}

/// Stops keeping events: those kept since [`start`].
pub fn stop() -> Vec<Seen> {
    RECORDING.store(false, Ordering::SeqCst);
    std::mem::take(&mut *seen())
}

struct Recorder;

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => {
                let _ = write!(self.0, "{value:?}");
            }
            name => {
                let _ = write!(self.0, " {name}={value:?}");
            }
        }
    }
}

impl Subscriber for Recorder {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // Asked again at every event: recording starts and stops.
        Interest::sometimes()
    }
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        let level = *metadata.level();
        RECORDING.load(Ordering::Relaxed)
            && (level <= Level::INFO || level == Level::DEBUG && DEBUG.load(Ordering::Relaxed))
    }
    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        let mut fields = Fields(String::new());
        attributes.record(&mut fields);
        let mut spans = SPANS.lock().unwrap_or_else(|e| e.into_inner());
        spans.push(format!("[{}{}]", attributes.metadata().name(), fields.0));
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let at = Instant::now();
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let span = CURRENT.with(|c| c.get());
        if let Some(name) = span.checked_sub(1).and_then(|i| {
            let spans = SPANS.lock().unwrap_or_else(|e| e.into_inner());
            spans.get(i as usize).cloned()
        }) {
            fields.0 = format!("{name} {}", fields.0);
        }
        let level = event.metadata().level().as_str();
        seen().push(Seen {
            at,
            level,
            text: fields.0,
        });
    }
    fn enter(&self, id: &Id) {
        CURRENT.with(|c| c.set(id.into_u64()));
    }
    fn exit(&self, _: &Id) {
        CURRENT.with(|c| c.set(0));
    }
}
