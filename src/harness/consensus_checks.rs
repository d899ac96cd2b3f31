//! Exhaustive checks of the CAS protocol (Algorithm 5) on the rdma-rmw emulator: every
//! interleaving of 2 proposers over 3 acceptors, with a retry after an abort, with and
//! without a crashed acceptor. Agreement and validity must hold in every final state.

use std::collections::BTreeSet;
use velos_core::cluster::ClusterShape;
use velos_core::proposal::ProposerId;
use velos_core::single_decree::{SingleDecree, SingleDecreeConfig};
use velos_core::slot::Mutation;
use velos_core::word::WordLayout;
use velos_rdma::{NodeId, Shared};
use velos_sim::explore::{Exploration, ExploreError, explore_checked};
use velos_sim::machine::{CrashMode, Machine};

/// One exhaustive configuration.
#[derive(Clone, Debug)]
pub struct CheckConfig {
    /// Slots each proposer decides.
    pub slots: u32,
    /// Attempts per slot.
    pub max_attempts: u32,
    /// Proposers (on nodes 0..proposers); 3 acceptors on nodes 0, 1, 2.
    pub proposers: u16,
    /// An acceptor that is crashed from the start.
    pub crashed: Option<u16>,
    /// State budget.
    pub max_states: usize,
    /// A deliberately wrong variant of the proposer (tests only: `mutations` feature).
    pub mutation: Mutation,
}

/// The inputs of the proposers: proposer i proposes `10 * (i + 1)`.
pub fn input(i: u16) -> u64 {
    10 * (u64::from(i) + 1)
}

/// Builds the machine of a configuration.
pub fn machine(check: &CheckConfig) -> Machine<SingleDecree> {
    let acceptors = 3;
    let shape = ClusterShape {
        nodes: acceptors,
        slots: check.slots,
        value_words: 0,
        scratch_words: SingleDecreeConfig::scratch_words(acceptors),
    };
    let config = Shared::new(SingleDecreeConfig {
        shape: shape.clone(),
        layout: WordLayout::PAPER,
        proposers: check.proposers,
        max_attempts: check.max_attempts,
        slots: check.slots,
        mutation: check.mutation,
    });
    let mut machine = Machine::new(&shape.layout());
    for p in 0..check.proposers {
        machine.spawn(
            NodeId(p),
            SingleDecree::new(config.clone(), ProposerId(p), input(p)),
        );
    }
    // What the explorer's reduction may rely on: acceptor words are touched by remote CAS
    // only; each proposer's scratch words by that proposer only.
    for a in 0..acceptors {
        for slot in 0..check.slots {
            machine.set_atomic_only(shape.acceptor_word(a, slot));
        }
    }
    for p in 0..check.proposers {
        for i in 0..shape.scratch_words {
            machine.set_private(shape.scratch(p, i), usize::from(p));
        }
    }
    if let Some(a) = check.crashed {
        machine.crash(NodeId(a), CrashMode::Hang);
    }
    machine
}

/// Agreement and validity over the decisions the processes hold in a state.
pub fn violation(machine: &Machine<SingleDecree>, proposers: u16) -> Option<String> {
    let inputs: BTreeSet<u64> = (0..proposers).map(input).collect();
    let mut decided: Vec<BTreeSet<u64>> = Vec::new();
    for thread in &machine.threads {
        for (slot, d) in thread.process.decisions.iter().enumerate() {
            if decided.len() <= slot {
                decided.resize(slot + 1, BTreeSet::new());
            }
            if let Some(v) = d {
                if !inputs.contains(v) {
                    return Some(format!("validity: slot {slot} decided {v}, not an input"));
                }
                decided[slot].insert(*v);
            }
        }
    }
    decided
        .iter()
        .enumerate()
        .find(|(_, values)| values.len() > 1)
        .map(|(slot, values)| format!("agreement: slot {slot} decided {values:?}"))
}

/// Runs one configuration: the invariant on every state, and the final decisions.
pub fn check(config: &CheckConfig) -> Result<Exploration<Vec<Vec<Option<u64>>>>, ExploreError> {
    let proposers = config.proposers;
    explore_checked(
        machine(config),
        config.max_states,
        |m| {
            m.threads
                .iter()
                .map(|t| t.process.decisions.clone())
                .collect()
        },
        |m| violation(m, proposers),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(slots: u32, crashed: Option<u16>) -> Exploration<Vec<Vec<Option<u64>>>> {
        let attempts = std::env::var("VELOS_CHECK_ATTEMPTS")
            .ok()
            .and_then(|a| a.parse().ok())
            .unwrap_or(2);
        let config = CheckConfig {
            slots,
            max_attempts: attempts,
            proposers: 2,
            crashed,
            mutation: Mutation::None,
            max_states: std::env::var("VELOS_CHECK_BUDGET")
                .ok()
                .and_then(|b| b.parse().ok())
                .unwrap_or(3_000_000),
        };
        let e = check(&config).unwrap_or_else(|e| panic!("{config:?}: {e}"));
        eprintln!(
            "{config:?}: {} states, {} finals, {} stuck, {} outcomes",
            e.states,
            e.finals,
            e.stuck,
            e.outcomes.len()
        );
        assert_eq!(e.stuck, 0, "every state can still finish");
        // Liveness in the small: some run decides every slot at both proposers.
        assert!(
            e.outcomes
                .iter()
                .any(|o| o.iter().all(|d| d.iter().all(Option::is_some)))
        );
        e
    }

    // Not yet within reach: more than 3 M states even with one attempt per slot. The
    // explorer's reduction must first learn that remote steps at different acceptors
    // commute (a stubborn-set reduction); until then these run only by hand:
    // `cargo test --release --lib consensus_checks -- --ignored --nocapture`.
    #[test]
    #[ignore = "the state space is too large for the explorer's current reduction"]
    fn two_proposers_one_slot_agree() {
        run(1, None);
    }

    #[test]
    #[ignore = "the state space is too large for the explorer's current reduction"]
    fn two_proposers_one_slot_one_acceptor_crashed_agree() {
        run(1, Some(2));
    }
}
