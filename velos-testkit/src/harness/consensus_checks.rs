//! Exhaustive checks of the CAS protocol (Algorithm 5) on the rdma-rmw emulator: every
//! interleaving of 2 proposers over 3 acceptors, with a retry after an abort, with and
//! without a crashed acceptor. Agreement and validity must hold in every visited state.
//!
//! The explorer uses stubborn sets ([`Reduction::Stubborn`]): steps of the two proposers
//! that touch different acceptors, words or queue pairs are not interleaved. That reduction
//! checks an invariant soundly when it is stable, and agreement and validity are: a
//! proposer only ever appends to its decisions, so a state that breaks them is broken in
//! every state after it.

use crate::single_decree::{SingleDecree, SingleDecreeConfig};
use std::collections::BTreeSet;
use velos_core::cluster::ClusterShape;
use velos_core::proposal::ProposerId;
use velos_core::slot::Mutation;
use velos_core::word::WordLayout;
use velos_rdma::{NodeId, Shared};
use velos_sim::explore::{Exploration, ExploreError, ExploreOptions, Reduction, explore_with};
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
        epochs: 1,
        value_words: 0,
        scratch_words: SingleDecreeConfig::scratch_words(acceptors),
        snapshot_words: 0,
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

/// Runs one configuration: the invariant on every visited state (stable, see the module
/// documentation), and the final decisions.
pub fn check(config: &CheckConfig) -> Result<Exploration<Vec<Vec<Option<u64>>>>, ExploreError> {
    let proposers = config.proposers;
    explore_with(
        machine(config),
        ExploreOptions::new(config.max_states, Reduction::Stubborn),
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

    /// The configuration of a test; for manual runs, `VELOS_CHECK_ATTEMPTS` replaces the
    /// attempts and `VELOS_CHECK_BUDGET` the state budget (pinned counts are then not
    /// compared).
    fn config(slots: u32, attempts: u32, crashed: Option<u16>) -> (CheckConfig, bool) {
        let manual_attempts = std::env::var("VELOS_CHECK_ATTEMPTS")
            .ok()
            .and_then(|a| a.parse().ok());
        let config = CheckConfig {
            slots,
            max_attempts: manual_attempts.unwrap_or(attempts),
            proposers: 2,
            crashed,
            mutation: Mutation::None,
            max_states: std::env::var("VELOS_CHECK_BUDGET")
                .ok()
                .and_then(|b| b.parse().ok())
                .unwrap_or(3_000_000),
        };
        (config, manual_attempts.is_none())
    }

    /// Explores a configuration: agreement and validity on every visited state (`check`),
    /// and no stuck state.
    fn explore(config: &CheckConfig) -> Exploration<Vec<Vec<Option<u64>>>> {
        let e = check(config).unwrap_or_else(|e| panic!("{config:?}: {e}"));
        eprintln!(
            "{config:?}: {} states, {} transitions, {} finals, {} stuck, {} outcomes",
            e.states,
            e.transitions,
            e.finals,
            e.stuck,
            e.outcomes.len()
        );
        assert_eq!(e.stuck, 0, "every state can still finish");
        e
    }

    /// The checks of the target configurations (a retry after an abort): also, some run
    /// decides every slot at both proposers.
    fn run(slots: u32, attempts: u32, crashed: Option<u16>, pinned: usize) {
        let (config, pin) = config(slots, attempts, crashed);
        let e = explore(&config);
        // Liveness in the small: some run decides every slot at both proposers.
        assert!(
            e.outcomes
                .iter()
                .any(|o| o.iter().all(|d| d.iter().all(Option::is_some))),
            "no run decides every slot at both proposers: {:?}",
            e.outcomes
        );
        if pin {
            assert_eq!(e.states, pinned, "{config:?}: states (pinned)");
        }
    }

    // Without a retry, a proposer whose prediction is stale aborts for good, so no run
    // decides at both proposers; what this check adds is agreement and validity over every
    // interleaving of the two first attempts. About 35 s and 5 GB in release mode.
    #[test]
    fn two_proposers_one_slot_one_attempt_agree() {
        settles(1, None, 1_386_147);
    }

    /// One slot explored: agreement, validity, no stuck state (`explore`); some run decides
    /// the slot and every proposer settles it; the state count is pinned.
    fn settles(attempts: u32, crashed: Option<u16>, pinned: usize) {
        let (config, pin) = config(1, attempts, crashed);
        let e = explore(&config);
        assert!(
            e.outcomes
                .iter()
                .any(|o| o.iter().any(|d| d.iter().all(Option::is_some))),
            "some run decides the slot"
        );
        assert!(
            e.outcomes.iter().all(|o| o.iter().all(|d| d.len() == 1)),
            "every proposer settles the slot"
        );
        if pin {
            assert_eq!(e.states, pinned, "{config:?}: states (pinned)");
        }
    }

    // Out of reach still: with a retry after an abort the reduced state space passes 3 M
    // states (220 s, 10 GB) without an end in sight. Run by hand:
    // `cargo test --release --lib consensus_checks -- --ignored --nocapture`.
    #[test]
    #[ignore = "more than 3 M states with stubborn sets (220 s, 10 GB at the budget)"]
    fn two_proposers_one_slot_agree() {
        run(1, 2, None, 0);
    }

    // A retry after an abort, with acceptor 2 crashed from the start: agreement and
    // validity over every interleaving, aborts while the proposer's own CASes are still in
    // flight included, and no stuck state (about 5 s). With two attempts a proposer that
    // lost the first race cannot decide (its retry is chained on a prediction still in
    // flight and fails too), so no run decides at both proposers; that takes three
    // attempts, which pass 3 M states (176 s at the budget).
    #[test]
    fn two_proposers_one_slot_retry_one_acceptor_crashed_agree() {
        settles(2, Some(2), 226_594);
    }

    #[test]
    #[ignore = "out of reach: two slots multiply the one-slot state space"]
    fn two_proposers_two_slots_agree() {
        run(2, 2, None, 0);
    }

    #[test]
    #[ignore = "out of reach: two slots multiply the one-slot state space"]
    fn two_proposers_two_slots_one_acceptor_crashed_agree() {
        run(2, 2, Some(2), 0);
    }
}
