//! The search: depth-first, by one or more threads sharing one table of visited
//! fingerprints. A state is expanded by the thread that first inserted it, and the steps
//! explored from a state depend on the state alone ([`State::steps`]), so every thread
//! count visits the same states: the counts are exact whatever the schedule. A thread that
//! runs out of work waits for one a busy thread gives up: the next state it inserts, with
//! the steps that led there.

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

/// States inserted and not yet expanded, each with the steps that led to it, given up by
/// a busy thread; and how many threads wait for one.
struct Pool {
    states: Vec<(State, Vec<Step>)>,
    idle: usize,
}

/// What the threads share.
struct Shared<'c> {
    config: &'c ModelConfig,
    seen: Vec<Mutex<Table>>,
    states: AtomicUsize,
    pool: Mutex<Pool>,
    /// Threads waiting in the pool (read without its lock by busy threads).
    waiting: AtomicUsize,
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

    /// Gives `state` to a waiting thread if one waits and none is given yet; else hands
    /// it back.
    fn give(&self, state: State, path: impl FnOnce() -> Vec<Step>) -> Option<State> {
        if self.waiting.load(Ordering::Relaxed) == 0 {
            return Some(state);
        }
        let mut pool = self.pool.lock().expect("no panic holding the pool");
        if pool.idle == 0 || !pool.states.is_empty() {
            return Some(state);
        }
        pool.states.push((state, path()));
        None
    }

    /// A state to expand, waiting for one while other threads are busy; `None` once every
    /// thread waits with the pool empty (the search is over) or the search stopped.
    fn take(&self) -> Option<(State, Vec<Step>)> {
        let mut pool = self.pool.lock().expect("no panic holding the pool");
        if let Some(work) = pool.states.pop() {
            return Some(work);
        }
        pool.idle += 1;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        loop {
            if pool.idle == self.config.threads || self.stop.load(Ordering::Relaxed) {
                return None; // idle stays counted: the others see the end too
            }
            if let Some(work) = pool.states.pop() {
                pool.idle -= 1;
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                return Some(work);
            }
            drop(pool);
            std::thread::yield_now();
            pool = self.pool.lock().expect("no panic holding the pool");
        }
    }
}

/// Explores every reachable state of `config` with `config.threads` threads.
pub(super) fn explore(config: &ModelConfig) -> Result<ModelReport, ModelError> {
    assert!(config.threads >= 1, "at least one search thread");
    let initial = State::initial(config);
    let shared = Shared {
        config,
        seen: (0..SHARDS).map(|_| Mutex::new(Table::default())).collect(),
        states: AtomicUsize::new(1),
        pool: Mutex::new(Pool {
            states: Vec::new(),
            idle: 0,
        }),
        waiting: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        error: Mutex::new(None),
    };
    shared.insert(&initial);
    shared
        .pool
        .lock()
        .expect("not shared yet")
        .states
        .push((initial, Vec::new()));
    let parts: Vec<ModelReport> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..config.threads)
            .map(|_| scope.spawn(|| search(&shared)))
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

/// One thread's depth-first searches, each from a state the pool gives it.
fn search(shared: &Shared) -> ModelReport {
    let mut report = ModelReport {
        states: 0,
        finals: 0,
        outcomes: BTreeSet::new(),
    };
    while let Some((state, prefix)) = shared.take() {
        if !subtree(shared, state, prefix, &mut report) {
            break;
        }
    }
    report
}

/// The depth-first search below `root` (reached by `prefix`), whose new states are this
/// thread's unless a waiting thread takes one; false once the search stopped.
fn subtree(shared: &Shared, root: State, prefix: Vec<Step>, report: &mut ModelReport) -> bool {
    let config = shared.config;
    // The path from `root`: (state, steps still to try, step that led here).
    let mut stack: Vec<(State, Vec<Step>, Option<Step>)> = Vec::new();
    let path = |stack: &[(State, Vec<Step>, Option<Step>)], last: Option<Step>| {
        let mut path = prefix.clone();
        path.extend(stack.iter().filter_map(|(_, _, s)| *s).chain(last));
        path
    };
    let trace = |path: Vec<Step>| path.iter().map(|s| format!("{s:?}")).collect();
    let mut next = Some((root, None));
    loop {
        if let Some((state, step)) = next.take() {
            // Expand a new state: check it, and push it with its steps.
            if let Some(violation) = state.violation(config) {
                shared.fail(ModelError::Violation {
                    violation,
                    trace: trace(path(&stack, step)),
                });
                return false;
            }
            let steps = state.steps(config);
            if steps.is_empty() {
                report.finals += 1;
                if state.proposers.iter().any(|p| p.slot < config.slots) {
                    shared.fail(ModelError::Deadlock {
                        trace: trace(path(&stack, step)),
                    });
                    return false;
                }
                report.outcomes.insert(
                    state
                        .proposers
                        .iter()
                        .map(|p| p.decisions.clone())
                        .collect(),
                );
            }
            stack.push((state, steps, step));
        }
        if shared.stop.load(Ordering::Relaxed) {
            return false;
        }
        let Some((state, todo, _)) = stack.last_mut() else {
            return true;
        };
        let Some(step) = todo.pop() else {
            stack.pop();
            continue;
        };
        let mut child = state.clone();
        child.apply(config, step);
        if !shared.insert(&child) {
            continue;
        }
        if shared.states.fetch_add(1, Ordering::Relaxed) + 1 > config.max_states {
            shared.fail(ModelError::Budget(config.max_states));
            return false;
        }
        next = shared
            .give(child, || path(&stack, Some(step)))
            .map(|child| (child, Some(step)));
    }
}
