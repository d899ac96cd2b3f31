//! The search: depth-first, by one or more threads sharing one table of visited
//! fingerprints. A state is expanded by the thread that first inserted it, and the steps
//! explored from a state depend on the state alone ([`State::steps`]), so every thread
//! count visits the same states: the counts are exact whatever the schedule.

use super::state::{State, Step};
use super::{ModelConfig, ModelError, ModelReport};
use std::collections::{BTreeSet, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A fingerprint is already a uniform hash: the table takes its low 64 bits as they are.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, _: &[u8]) {
        unreachable!("only fingerprints are hashed")
    }

    fn write_u128(&mut self, fingerprint: u128) {
        self.0 = fingerprint as u64;
    }
}

type Table = HashSet<u128, BuildHasherDefault<Identity>>;

/// Shards of the visited table (the high bits of a fingerprint pick one).
const SHARDS: usize = 64;

/// What the threads share.
struct Shared<'c> {
    config: &'c ModelConfig,
    seen: Vec<Mutex<Table>>,
    states: AtomicUsize,
    stop: AtomicBool,
    error: Mutex<Option<ModelError>>,
}

impl Shared<'_> {
    /// Inserts `state`; whether it was new.
    fn insert(&self, state: &State) -> bool {
        let fingerprint = state.fingerprint();
        let shard = (fingerprint >> 122) as usize % SHARDS;
        self.seen[shard]
            .lock()
            .expect("no search thread panics holding the table")
            .insert(fingerprint)
    }

    /// Stops every thread with `error` (the first one reported wins).
    fn fail(&self, error: ModelError) {
        let mut slot = self.error.lock().expect("no panic holding the error");
        if slot.is_none() {
            *slot = Some(error);
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Explores every reachable state of `config` with `config.threads` threads.
pub(super) fn explore(config: &ModelConfig) -> Result<ModelReport, ModelError> {
    assert!(config.threads >= 1, "at least one search thread");
    let initial = State::initial(config);
    if let Some(violation) = initial.violation(config) {
        return Err(ModelError::Violation {
            violation,
            trace: Vec::new(),
        });
    }
    let shared = Shared {
        config,
        seen: (0..SHARDS).map(|_| Mutex::new(Table::default())).collect(),
        states: AtomicUsize::new(1),
        stop: AtomicBool::new(false),
        error: Mutex::new(None),
    };
    shared.insert(&initial);
    let parts: Vec<ModelReport> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..config.threads)
            .map(|k| {
                let (shared, initial) = (&shared, initial.clone());
                scope.spawn(move || search(shared, initial, k))
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a search thread panicked"))
            .collect()
    });
    if let Some(error) = shared
        .error
        .into_inner()
        .expect("no panic holding the error")
    {
        return Err(error);
    }
    let mut report = ModelReport {
        states: shared.states.into_inner(),
        finals: 0,
        outcomes: BTreeSet::new(),
    };
    for part in parts {
        report.finals += part.finals;
        report.outcomes.extend(part.outcomes);
    }
    let stored: usize = shared
        .seen
        .iter()
        .map(|t| t.lock().expect("joined").len())
        .sum();
    assert_eq!(stored, report.states, "every visited state counted once");
    Ok(report)
}

/// One thread's depth-first search from the initial state; thread `k` tries the initial
/// state's steps in a rotated order, so the threads start apart.
fn search(shared: &Shared, initial: State, k: usize) -> ModelReport {
    let config = shared.config;
    let mut report = ModelReport {
        states: 0,
        finals: 0,
        outcomes: BTreeSet::new(),
    };
    let mut first = initial.steps(config);
    assert!(!first.is_empty(), "every proposer posts its first prepare");
    let turn = k % first.len();
    first.rotate_left(turn);
    // The path from the initial state: (state, steps still to try, step that led here).
    let mut stack: Vec<(State, Vec<Step>, Option<Step>)> = vec![(initial, first, None)];
    let trace = |stack: &[(State, Vec<Step>, Option<Step>)]| {
        stack
            .iter()
            .filter_map(|(_, _, s)| s.map(|s| format!("{s:?}")))
            .collect::<Vec<_>>()
    };
    while let Some((state, todo, _)) = stack.last_mut() {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let Some(step) = todo.pop() else {
            stack.pop();
            continue;
        };
        let mut next = state.clone();
        next.apply(config, step);
        if !shared.insert(&next) {
            continue;
        }
        if shared.states.fetch_add(1, Ordering::Relaxed) + 1 > config.max_states {
            shared.fail(ModelError::Budget(config.max_states));
            break;
        }
        let steps = next.steps(config);
        stack.push((next, steps, Some(step)));
        let (top, todo, _) = stack.last().expect("pushed");
        if let Some(violation) = top.violation(config) {
            shared.fail(ModelError::Violation {
                violation,
                trace: trace(&stack),
            });
            break;
        }
        if todo.is_empty() {
            report.finals += 1;
            if top.proposers.iter().any(|p| p.slot < config.slots) {
                shared.fail(ModelError::Deadlock {
                    trace: trace(&stack),
                });
                break;
            }
            report
                .outcomes
                .insert(top.proposers.iter().map(|p| p.decisions.clone()).collect());
        }
    }
    report
}
