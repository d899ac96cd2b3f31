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
    explore_with(
        initial,
        ExploreOptions::new(max_states, Reduction::Singletons),
        project,
        invariant,
    )
}

/// Which partial-order reduction the explorer applies. Each one yields the same final
/// states (so the same outcomes) and the same answer to "is some reachable state stuck?"
/// as [`Reduction::None`]; they differ in how many states they visit and in which
/// invariants they check soundly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// Every enabled step of every state: the full state graph, the reference the
    /// reductions are checked against.
    None,
    /// A step that commutes with every other and changes nothing the outcome shows
    /// ([`Machine::is_invisible`], [`Machine::is_invisible_remote`]) is explored alone,
    /// unless its successor was seen before: what [`explore`] and [`explore_checked`] do,
    /// whose state counts the test suites pin.
    #[default]
    Singletons,
    /// Stubborn sets ([`Machine::stubborn_set`]): the enabled steps of a set of agents (CPUs,
    /// store buffers, the three buffers of each queue pair) closed under a footprint-based
    /// dependency and necessary-enabling relation, with a depth-first search whose cycle
    /// proviso expands a state fully when a reduced successor is on the search stack.
    ///
    /// An invariant is checked soundly only if it is *stable*: once false, false in every
    /// state reachable from there (agreement and validity of decisions that are never
    /// taken back are; mutual exclusion read from flags that are later cleared is not).
    /// Such an invariant is checked at every visited state, and a reachable state that
    /// breaks it is reported.
    Stubborn,
}

/// How to explore: the state budget and the reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExploreOptions {
    /// At most this many distinct states; beyond it the exploration stops with no verdict.
    pub max_states: usize,
    /// The partial-order reduction.
    pub reduction: Reduction,
}

impl ExploreOptions {
    /// A budget and a reduction.
    pub fn new(max_states: usize, reduction: Reduction) -> ExploreOptions {
        ExploreOptions {
            max_states,
            reduction,
        }
    }
}

/// Explores every reachable state of `initial` as `options` say, checking `invariant` on
/// every visited state (see [`Reduction`] for which invariants each reduction preserves).
pub fn explore_with<P, O, F, I>(
    initial: Machine<P>,
    options: ExploreOptions,
    project: F,
    invariant: I,
) -> Result<Exploration<O>, ExploreError>
where
    P: Process,
    O: Ord,
    F: Fn(&Machine<P>) -> O,
    I: Fn(&Machine<P>) -> Option<String>,
{
    assert!(
        options.max_states > 0,
        "a state budget of at least one state"
    );
    let exploration = match options.reduction {
        Reduction::None => explore_all(initial, options.max_states, false, project, invariant),
        Reduction::Singletons => explore_all(initial, options.max_states, true, project, invariant),
        Reduction::Stubborn => explore_stubborn(initial, options.max_states, project, invariant),
    }?;
    assert!(
        exploration.stuck + exploration.finals <= exploration.states,
        "graph accounting"
    );
    assert!(
        exploration.states <= options.max_states,
        "the budget bounds the states"
    );
    Ok(exploration)
}

/// Every enabled step of every state, or (`singletons`) one invisible step alone where
/// there is one.
fn explore_all<P, O, F, I>(
    initial: Machine<P>,
    max_states: usize,
    singletons: bool,
    project: F,
    invariant: I,
) -> Result<Exploration<O>, ExploreError>
where
    P: Process,
    O: Ord,
    F: Fn(&Machine<P>) -> O,
    I: Fn(&Machine<P>) -> Option<String>,
{
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
            .filter(|_| singletons)
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
    Ok(exploration)
}

/// A state on the depth-first search stack of [`explore_stubborn`]: its successors still to
/// follow, the next one last.
struct Frame<P> {
    id: u32,
    successors: Vec<Machine<P>>,
}

/// The stubborn-set search. Depth-first, so that the cycle proviso can ask whether a
/// successor is on the search stack.
///
/// Why it preserves what the explorer reports (the conditions enforced, per state s whose
/// successors follow a proper subset T of its enabled steps):
/// * D0, D1, D2 (`Machine::stubborn_set`): T is non-empty and persistent — along any path
///   from s that takes no step of T, every step is independent of every step of T, which
///   stays enabled. Hence (the commuting lemma) for a path s →w→ s' that avoids T and a
///   step t of T: s →t→ s·t →w→ s'·t; and for a path whose first step of T is t at position
///   k, t can be moved to the front without changing where the path ends.
/// * C3, the cycle proviso: if a successor through T is on the search stack, s is expanded
///   fully. In a depth-first search every cycle of the explored graph holds an edge from a
///   state to one on the stack when the former was expanded, so every cycle of the reduced
///   graph holds a fully expanded state.
///
/// Final states (so outcomes): a final state d reachable from a visited state s by w is
/// reachable in the reduced graph. If w avoided T, the first step t of T would still be
/// enabled at d, which has none; so w holds a step of T, which moves to the front: one step
/// in the reduced graph and a shorter remaining path. By induction on |w|. Deadlocks that
/// are not final are kept the same way.
///
/// Stuck states: for a visited state, "no final state is reachable" is the same in the
/// reduced and the full graph (the previous point), so a visited state counted stuck is
/// stuck. Conversely, let some reachable state u be stuck, s0 →w→ u. Walk the reduced
/// graph from s0 keeping a target: if w holds a step of T, take it (w shortens, the target
/// stays); otherwise take any t in T and retarget to u·t, which is reachable from u, so
/// stuck, and keeps |w|. |w| shrinks at every fully expanded state (its first step is in
/// T), the walk follows reduced edges, and every cycle of them holds a fully expanded
/// state, so |w| reaches 0: a visited state is stuck.
///
/// Stable invariants: the same walk with "breaks the invariant" for "stuck" (a property
/// every successor inherits) reaches a visited state that breaks it. An invariant that is
/// not stable gets no such guarantee: the walk may retarget past the states that break it
/// (condition C2, keeping visible steps out of proper subsets, is not enforced).
fn explore_stubborn<P, O, F, I>(
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
    let mut graph = Graph::default();
    let mut outcomes = BTreeSet::new();
    let mut index: FxHashMap<Rc<Machine<P>>, u32> = FxHashMap::default();
    let mut on_stack: Vec<bool> = Vec::new();
    let mut stack: Vec<Frame<P>> = Vec::new();
    let mut enabled: Vec<(Transition, u64)> = Vec::new();
    let mut chosen: Vec<usize> = Vec::new();
    let mut transitions = 0usize;
    let initial = Rc::new(initial);
    index.insert(Rc::clone(&initial), 0);
    graph.add_state();
    on_stack.push(false);
    let mut discovered = Some((0u32, initial));
    loop {
        // Expand a newly discovered state: check it, then pick the steps to follow.
        if let Some((id, state)) = discovered.take() {
            if let Some(message) = invariant(&state) {
                return Err(ExploreError::Invariant {
                    states: graph.preds.len(),
                    message,
                });
            }
            state.enabled(&mut enabled);
            if enabled.is_empty() {
                if state.is_complete() {
                    graph.finals.push(id);
                    outcomes.insert(project(&state));
                }
                continue;
            }
            on_stack[id as usize] = true;
            state.stubborn_set(&enabled, &mut chosen);
            let fire = |i: usize| {
                let mut next = (*state).clone();
                next.fire(enabled[i].0, 0, &mut NoDelay);
                next
            };
            let mut successors: Vec<Machine<P>> = chosen.iter().map(|&i| fire(i)).collect();
            let proper = chosen.len() < enabled.len();
            // C3: a reduced successor on the stack closes a cycle; expand fully.
            if proper
                && successors
                    .iter()
                    .any(|n| index.get(n).is_some_and(|&j| on_stack[j as usize]))
            {
                let mut all = Vec::with_capacity(enabled.len());
                let mut reduced = chosen.iter().zip(successors).peekable();
                for i in 0..enabled.len() {
                    match reduced.next_if(|item| *item.0 == i) {
                        Some((_, next)) => all.push(next),
                        None => all.push(fire(i)),
                    }
                }
                successors = all;
            }
            assert!(
                !successors.is_empty(),
                "D0: a state that can move has successors"
            );
            successors.reverse(); // followed in the order of `enabled`
            stack.push(Frame { id, successors });
            continue;
        }
        // Follow the next successor of the state on top of the stack.
        let Some(frame) = stack.last_mut() else {
            break;
        };
        let Some(next) = frame.successors.pop() else {
            on_stack[frame.id as usize] = false;
            stack.pop();
            continue;
        };
        let from = frame.id;
        transitions += 1;
        let next_id = match index.entry(Rc::new(next)) {
            Entry::Occupied(known) => *known.get(),
            Entry::Vacant(slot) => {
                if graph.preds.len() >= max_states {
                    return Err(BudgetExceeded { max_states }.into());
                }
                let new_id = graph.add_state();
                on_stack.push(false);
                discovered = Some((new_id, Rc::clone(slot.key())));
                slot.insert(new_id);
                new_id
            }
        };
        graph.preds[next_id as usize].push(from);
    }
    assert!(
        on_stack.iter().all(|s| !s),
        "C3: every state left the search stack"
    );
    let stuck = graph.count_stuck();
    Ok(Exploration {
        states: index.len(),
        transitions,
        finals: graph.finals.len(),
        stuck,
        outcomes,
    })
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
