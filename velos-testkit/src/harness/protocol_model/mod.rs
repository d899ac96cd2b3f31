//! Exhaustive checks of the slot protocol (Algorithm 5, [`SlotProposer`](velos_core::slot::SlotProposer)) one level above
//! the rdma-rmw emulator: acceptor words are updated by atomic CAS, and each proposer's
//! operations towards one acceptor execute and complete in posting order (one queue pair:
//! the value write before its CAS, the CAS before a later read). Those are the two
//! properties the engine takes from the RDMA layer, and litmus tests pin them on the
//! emulator (`velos-sim/litmus/velos/write-then-cas*.litmus`, rule 6). Every other order is
//! explored: which acceptor executes next, which completion a proposer sees next.
//!
//! The emulator's own exhaustive checks ([`super::consensus_checks`]) run the same slot
//! proposer on the full model (NIC steps, puts acknowledged before they land) but stop at
//! one slot; this model reaches 2 proposers × 3 acceptors × 2 slots with a retry, 1 slot
//! with two retries, 3 proposers, a crashed acceptor, and a term change of one proposer in
//! the middle of a slot (its abandoned CASes still on the queue pairs its new term shares:
//! `ModelConfig::term_changes`). Agreement and validity are checked on every reachable
//! state; every final state must have every proposer done with every slot (no deadlock).
//!
//! Three things make the large configurations complete searches rather than samples:
//! * the quotient (`State::quotient`): steps that change nothing a later step reads are
//!   taken at once (completions of an earlier slot or term, superseded CAS completions),
//!   and what no later step reads is blanked (a finished slot's words and buffers, a
//!   finished proposer's slot proposer, operations queued at a crashed acceptor);
//! * persistent sets, built as stubborn sets over the model's operations
//!   (`reduction.rs`): at one acceptor only two proposers' CASes of one slot, or a write
//!   and a read of one buffer, are dependent; a proposer's local steps depend on each
//!   other; a proposer past its last accept posts nothing more for the slot;
//! * a compact search (`search.rs`): states are kept as 128-bit fingerprints (XXH3-128),
//!   as explicit-state model checkers do — a collision could only hide states, never
//!   invent a violation — in one table shared by a depth-first search per core.
//!
//! Both reductions are checked against every interleaving of the unreduced model wherever
//! that is within reach, with and without each mutant (`tests.rs`).

use std::collections::BTreeSet;
use velos_core::slot::Mutation;

/// A configuration to explore.
#[derive(Clone, Copy, Debug)]
pub struct ModelConfig {
    /// Proposers (each also one of the acceptors' nodes; they only matter as ids).
    pub proposers: u16,
    /// Acceptors.
    pub acceptors: u16,
    /// Slots each proposer decides, in order.
    pub slots: u32,
    /// Attempts per slot (the first included).
    pub attempts: u32,
    /// An acceptor that never executes anything (crashed from the start).
    pub crashed: Option<u16>,
    /// How many times each proposer may start a new term in the middle of a slot: its
    /// slot proposer is abandoned with its CASes still queued or in flight (they keep their
    /// place on the queue pairs, which the new term shares), and a fresh one — predicting
    /// ⊥ everywhere, as a new leader whose own words do not show the old term's CASes yet
    /// — prepares the slot for a value of its own (`input_at(p, term)`), its ballot above
    /// the old term's (rule (fresh term) of `velos_core::log::leader`).
    pub term_changes: u32,
    /// The new term prepares above the old term's ballot minus one, so that it may reuse it
    /// (the rule before (fresh term)).
    pub reuse_term_ballot: bool,
    /// A deliberately wrong variant of the protocol.
    pub mutation: Mutation,
    /// Give up after this many states.
    pub max_states: usize,
    /// Explore persistent sets only (`reduction.rs`); without, every interleaving.
    pub reduce: bool,
    /// Explore each state's representative: without what no later step reads
    /// (`State::quotient`).
    pub quotient: bool,
    /// Search threads sharing the visited table (the counts do not depend on it).
    pub threads: usize,
}

/// What an exploration found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelReport {
    /// States visited.
    pub states: usize,
    /// Final states (nothing enabled).
    pub finals: usize,
    /// The decisions of every final state: per proposer, per slot.
    pub outcomes: BTreeSet<Vec<Vec<Option<u64>>>>,
}

/// Why an exploration stopped without a report.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// Agreement or validity broke; the trace of steps leading there.
    #[error("{violation} after {} steps: {trace:?}", trace.len())]
    Violation {
        /// What broke.
        violation: String,
        /// The steps from the initial state.
        trace: Vec<String>,
    },
    /// A final state where some proposer is not done.
    #[error("deadlock after {} steps: {trace:?}", trace.len())]
    Deadlock {
        /// The steps from the initial state.
        trace: Vec<String>,
    },
    /// The state budget ran out.
    #[error("more than {0} states")]
    Budget(usize),
}

/// The input of proposer `p`.
pub fn input(p: u16) -> u64 {
    input_at(p, 0)
}

/// The input of proposer `p` in its term `term` (each term proposes a value of its own).
pub fn input_at(p: u16, term: u32) -> u64 {
    10 * (u64::from(p) + 1) + 1000 * u64::from(term)
}

mod reduction;
mod search;
mod state;
#[cfg(test)]
mod tests;

/// Explores every reachable state of `config` (`search.rs`).
pub fn explore(config: &ModelConfig) -> Result<ModelReport, ModelError> {
    search::explore(config)
}
