//! The exhaustive driver: every interleaving of every enabled step, states deduplicated,
//! final and stuck states found by graph analysis.

use crate::machine::{Machine, NoDelay, Transition};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::collections::hash_map::Entry;
use std::hash::Hash;
use std::rc::Rc;
use velos_rdma::Process;

/// The result of exploring a machine's whole state graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exploration<O> {
    /// Distinct states reached (the initial one included).
    pub states: usize,
    /// Transitions followed.
    pub transitions: usize,
    /// Distinct final states (end condition holds).
    pub finals: usize,
    /// States from which no final state can be reached (deadlocks and livelocks).
    pub stuck: usize,
    /// The final states, projected by the caller's function; sorted and deduplicated.
    pub outcomes: BTreeSet<O>,
}

/// The exploration would exceed its state budget: no verdict was established.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("state budget exceeded: more than {max_states} states")]
pub struct BudgetExceeded {
    /// The budget.
    pub max_states: usize,
}

/// Explores every reachable state of `initial`, at most `max_states` of them.
pub fn explore<P, O, F>(
    initial: Machine<P>,
    max_states: usize,
    project: F,
) -> Result<Exploration<O>, BudgetExceeded>
where
    P: Process,
    O: Ord,
    F: Fn(&Machine<P>) -> O,
{
    match explore_checked(initial, max_states, project, |_| None) {
        Ok(e) => Ok(e),
        Err(ExploreError::Budget(b)) => Err(b),
        Err(ExploreError::Invariant { .. }) => unreachable!("no invariant to break"),
    }
}

/// Why a checked exploration stopped without a result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExploreError {
    /// The state budget was exceeded.
    #[error(transparent)]
    Budget(#[from] BudgetExceeded),
    /// A reachable state breaks the invariant.
    #[error("invariant broken after {states} states: {message}")]
    Invariant {
        /// States explored when it was found.
        states: usize,
        /// What the invariant said.
        message: String,
    },
}

/// Like [`explore`], and checks `invariant` on every reachable state: it returns `None` when
/// the state is fine, or a description of what is wrong. (With the reduction, the states
/// checked are those the reduced graph visits; invariants over the processes' own states,
/// such as mutual exclusion, are preserved by it.)
pub fn explore_checked<P, O, F, I>(
    initial: Machine<P>,
    max_states: usize,
    project: F,
    invariant: I,
) -> Result<Exploration<O>, ExploreError>
where
    P: Process,
    O: Ord,
    F: Fn(&Machine<P>) -> O,
    I: Fn(&Machine<P>) -> Option<String>,
{
    assert!(max_states > 0, "a state budget of at least one state");
    let mut graph = Graph::default();
    let mut outcomes = BTreeSet::new();
    // States are shared between the index and the work stack; the fast (non-DoS-resistant)
    // Fx hash is fine: the keys are our own states.
    let mut index: FxHashMap<Rc<Machine<P>>, u32> = FxHashMap::default();
    let initial = Rc::new(initial);
    index.insert(Rc::clone(&initial), 0);
    graph.add_state();
    let mut stack = vec![(0u32, initial)];
    let mut enabled: Vec<(Transition, u64)> = Vec::new();
    let mut transitions = 0usize;
    while let Some((id, state)) = stack.pop() {
        if let Some(message) = invariant(&state) {
            return Err(ExploreError::Invariant {
                states: graph.preds.len(),
                message,
            });
        }
        state.enabled(&mut enabled);
        if enabled.is_empty() && state.is_complete() {
            graph.finals.push(id);
            outcomes.insert(project(&state));
            continue;
        }
        // Partial-order reduction: an invisible transition (see `Machine::is_invisible`)
        // forms a persistent set on its own, so it is explored alone, unless its successor
        // was seen before (the cycle proviso, taken conservatively: a loop made only of
        // reduced steps would otherwise ignore the other threads forever).
        let reduced = enabled
            .iter()
            .find(|&&(t, _)| state.is_invisible(t) || state.is_invisible_remote(t))
            .and_then(|&(t, _)| {
                let mut next = (*state).clone();
                next.fire(t, 0, &mut NoDelay);
                (!index.contains_key(&next)).then_some((t, next))
            });
        let successors: Vec<(Transition, Option<Machine<P>>)> = match reduced {
            Some((t, next)) => vec![(t, Some(next))],
            None => enabled.iter().map(|&(t, _)| (t, None)).collect(),
        };
        for (transition, ready) in successors {
            let next = ready.unwrap_or_else(|| {
                let mut next = (*state).clone();
                next.fire(transition, 0, &mut NoDelay);
                next
            });
            transitions += 1;
            let next_id = match index.entry(Rc::new(next)) {
                Entry::Occupied(known) => *known.get(),
                Entry::Vacant(slot) => {
                    if graph.preds.len() >= max_states {
                        return Err(BudgetExceeded { max_states }.into());
                    }
                    let new_id = graph.add_state();
                    stack.push((new_id, Rc::clone(slot.key())));
                    slot.insert(new_id);
                    new_id
                }
            };
            graph.preds[next_id as usize].push(id);
        }
    }
    let stuck = graph.count_stuck();
    let exploration = Exploration {
        states: index.len(),
        transitions,
        finals: graph.finals.len(),
        stuck,
        outcomes,
    };
    assert!(
        exploration.stuck + exploration.finals <= exploration.states,
        "graph accounting"
    );
    Ok(exploration)
}

/// The reverse state graph.
#[derive(Default)]
struct Graph {
    preds: Vec<Vec<u32>>,
    finals: Vec<u32>,
}

impl Graph {
    fn add_state(&mut self) -> u32 {
        self.preds.push(Vec::new());
        u32::try_from(self.preds.len() - 1).expect("state ids fit u32")
    }

    /// States that cannot reach any final state: all minus those reached backwards from
    /// the finals.
    fn count_stuck(&self) -> usize {
        let mut reaches = vec![false; self.preds.len()];
        let mut work: Vec<u32> = self.finals.clone();
        for &f in &self.finals {
            reaches[f as usize] = true;
        }
        while let Some(s) = work.pop() {
            for &p in &self.preds[s as usize] {
                if !reaches[p as usize] {
                    reaches[p as usize] = true;
                    work.push(p);
                }
            }
        }
        reaches.iter().filter(|r| !**r).count()
    }
}

/// Explores and returns only the projected outcomes: a convenience for tests.
pub fn outcomes<P, O, F>(initial: Machine<P>, max_states: usize, project: F) -> BTreeSet<O>
where
    P: Process,
    O: Ord + Hash,
    F: Fn(&Machine<P>) -> O,
{
    explore(initial, max_states, project)
        .expect("exploration within budget")
        .outcomes
}
