//! Exhaustive checks of the slot protocol (Algorithm 5, [`SlotProposer`]) one level above
//! the rdma-rmw emulator: acceptor words are updated by atomic CAS, and each proposer's
//! operations towards one acceptor execute and complete in posting order (one queue pair:
//! the value write before its CAS, the CAS before a later read). Those are the two
//! properties the engine takes from the RDMA layer, and litmus tests pin them on the
//! emulator (`velos-sim/litmus/velos/write-then-cas*.litmus`, rule 6). Every other order is
//! explored: which acceptor executes next, which completion a proposer sees next.
//!
//! The emulator's own exhaustive checks ([`super::consensus_checks`]) run the same slot
//! proposer on the full model (NIC steps, puts acknowledged before they land) but stop at
//! one slot; this model reaches the configurations the issue asks for: 2 proposers × 3
//! acceptors × 1 and 2 slots, a retry after an abort, with and without a crashed acceptor,
//! and a term change of one proposer in the middle of a slot (its abandoned CASes still on
//! the queue pairs its new term shares: `ModelConfig::term_changes`). Agreement and
//! validity are checked on every reachable state; every final state must have both
//! proposers done with every slot (no deadlock).
//!
//! Visited states are kept as 128-bit fingerprints (XXH3-128 of the state), as
//! explicit-state model checkers do; a collision could only hide states, never invent a
//! violation.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::hash::Hash;
use velos_core::proposal::{Numbering, ProposerId};
use velos_core::slot::{Content, Mutation, Outcome, SlotCommand, SlotConfig, SlotProposer};
use velos_core::word::WordLayout;
use xxhash_rust::xxh3::Xxh3Default;

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
    /// Explore persistent sets only (see `State::steps`); without, every interleaving.
    pub reduce: bool,
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

/// An operation on one queue pair, towards one acceptor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Msg {
    Write {
        slot: u32,
        stamp: u64,
        value: u64,
    },
    Cas {
        slot: u32,
        term: u32,
        id: u64,
        expected: u64,
        desired: u64,
    },
    Read {
        slot: u32,
        term: u32,
        proposer: u16,
    },
}

/// A completion waiting for its proposer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Done {
    Cas {
        slot: u32,
        term: u32,
        id: u64,
        actual: u64,
    },
    Read {
        slot: u32,
        term: u32,
        stamp: u64,
        value: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Proposer {
    slot: u32,
    /// Terms started so far (0: the first).
    term: u32,
    /// The highest ballot of the earlier terms.
    floor: u64,
    sp: SlotProposer,
    attempts: u32,
    /// The read for adoption under way: the stamp it needs.
    reading: Option<u64>,
    adopted: u64,
    decisions: Vec<Option<u64>>,
    /// Per acceptor: posted, not executed.
    queue: Vec<VecDeque<Msg>>,
    /// Per acceptor: executed, completion not delivered.
    done: Vec<VecDeque<Done>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    /// Per acceptor, per slot: the word.
    words: Vec<Vec<u64>>,
    /// Per acceptor, per proposer, per slot: the value buffer (stamp, value).
    buffers: Vec<Vec<Vec<(u64, u64)>>>,
    proposers: Vec<Proposer>,
}

/// A step: acceptor `a` executes the head of proposer `p`'s queue towards it, or proposer
/// `p` takes the head completion from acceptor `a`.
#[derive(Clone, Copy, Debug)]
enum Step {
    Execute {
        p: usize,
        a: usize,
    },
    Deliver {
        p: usize,
        a: usize,
    },
    /// Proposer `p` starts a new term in the middle of its slot.
    NewTerm {
        p: usize,
    },
}

fn slot_config(config: &ModelConfig, p: u16) -> SlotConfig {
    SlotConfig {
        layout: WordLayout::PAPER,
        acceptors: config.acceptors,
        members: SlotConfig::all(config.acceptors),
        absent: 0,
        numbering: Numbering {
            proposers: config.proposers,
        },
        me: ProposerId(p),
        tag: 0,
        recycled: false,
        mutation: config.mutation,
    }
}

impl Proposer {
    fn post(&mut self, me: u16, cmds: Vec<SlotCommand>) {
        for cmd in cmds {
            match cmd {
                SlotCommand::Cas {
                    id,
                    acceptor,
                    expected,
                    desired,
                } => self.queue[usize::from(acceptor)].push_back(Msg::Cas {
                    slot: self.slot,
                    term: self.term,
                    id,
                    expected,
                    desired,
                }),
                SlotCommand::WriteValue {
                    acceptor,
                    content,
                    proposal,
                } => {
                    let value = match content {
                        Content::Mine => input_at(me, self.term),
                        Content::Adopted => self.adopted,
                    };
                    self.queue[usize::from(acceptor)].push_back(Msg::Write {
                        slot: self.slot,
                        stamp: proposal,
                        value,
                    });
                }
                SlotCommand::ReadValue {
                    acceptor,
                    proposer,
                    proposal,
                } => {
                    self.reading = Some(proposal);
                    self.queue[usize::from(acceptor)].push_back(Msg::Read {
                        slot: self.slot,
                        term: self.term,
                        proposer: proposer.0,
                    });
                }
            }
        }
    }

    /// Whether this proposer may start a new term now: terms left, and a slot pending.
    fn may_change_term(&self, config: &ModelConfig) -> bool {
        self.term < config.term_changes && self.slot < config.slots
    }

    /// A new term in the middle of the slot: the slot proposer is abandoned (its operations
    /// keep their places in the queues; their completions find nobody), and a fresh one
    /// prepares above the old term's ballot.
    fn new_term(&mut self, config: &ModelConfig, me: u16) {
        assert!(self.may_change_term(config), "a term change left");
        self.floor = self.floor.max(self.sp.proposal());
        self.term += 1;
        self.sp = SlotProposer::fresh(slot_config(config, me));
        self.attempts = 1;
        self.reading = None;
        // `Leader::new` starts its ballots at floor + 1 and a slot prepares above
        // `ballot - 1`; before rule (fresh term) it started at the floor itself.
        let above = if config.reuse_term_ballot {
            self.floor.saturating_sub(1)
        } else {
            self.floor
        };
        let mut out = Vec::new();
        self.sp.prepare_above(above, &mut out);
        self.post(me, out);
        self.settle(config, me);
    }

    /// Local steps after a delivery: settle a decided or aborted slot, retry or move on.
    fn settle(&mut self, config: &ModelConfig, me: u16) {
        loop {
            if self.slot >= config.slots {
                return;
            }
            let next = match self.sp.outcome() {
                Outcome::Pending => {
                    if self.sp.in_flight() == 0 && self.reading.is_none() {
                        // Nothing can answer any more (only the crashed acceptor was
                        // left): the attempt is given up, as the emulated proposer does.
                        Some(None)
                    } else {
                        None
                    }
                }
                Outcome::Decided { content, .. } => Some(Some(match content {
                    Content::Mine => input_at(me, self.term),
                    Content::Adopted => self.adopted,
                })),
                Outcome::Aborted if self.attempts < config.attempts => {
                    self.attempts += 1;
                    let mut out = Vec::new();
                    self.sp.prepare(&mut out);
                    self.post(me, out);
                    continue;
                }
                // The model's slots are never recycled: Overtaken does not happen.
                Outcome::Aborted | Outcome::Overflow | Outcome::Overtaken => Some(None),
            };
            let Some(decision) = next else { return };
            self.decisions.push(decision);
            self.floor = self.floor.max(self.sp.proposal());
            self.slot += 1;
            self.attempts = 0;
            self.reading = None;
            if self.slot < config.slots {
                self.sp = SlotProposer::fresh(slot_config(config, me));
                self.attempts = 1;
                let mut out = Vec::new();
                self.sp.prepare(&mut out);
                self.post(me, out);
            }
        }
    }
}

impl State {
    fn initial(config: &ModelConfig) -> State {
        let (n, a, s) = (
            usize::from(config.proposers),
            usize::from(config.acceptors),
            config.slots as usize,
        );
        let proposers = (0..config.proposers)
            .map(|p| {
                let mut proposer = Proposer {
                    slot: 0,
                    term: 0,
                    floor: 0,
                    sp: SlotProposer::fresh(slot_config(config, p)),
                    attempts: 1,
                    reading: None,
                    adopted: 0,
                    decisions: Vec::new(),
                    queue: vec![VecDeque::new(); a],
                    done: vec![VecDeque::new(); a],
                };
                let mut out = Vec::new();
                proposer.sp.prepare(&mut out);
                proposer.post(p, out);
                proposer
            })
            .collect();
        State {
            words: vec![vec![0; s]; a],
            buffers: vec![vec![vec![(0, 0); s]; n]; a],
            proposers,
        }
    }

    /// The steps explored from this state: an ample set (Clarke, Grumberg, Peled: C0, C1;
    /// the state graph is acyclic, every CAS having a fresh id, so C3 holds, and
    /// agreement and validity are stable, decisions being only appended, so a state
    /// breaking them leads to a final state breaking them: preserving every final state
    /// is enough, checked by `the_reduction_keeps_every_outcome`).
    ///
    /// * A proposer's deliveries touch its own state only; they depend on each other (the
    ///   order of completions matters) and on nothing else. All of proposer p's enabled
    ///   deliveries form an ample set if no other delivery of p can become enabled first:
    ///   every live acceptor p still has an operation queued at has a completion of p
    ///   waiting too (so p must deliver before anything new reaches it).
    /// * Executions at one acceptor depend on each other. All enabled executions at
    ///   acceptor a form an ample set if every proposer with nothing queued at a is
    ///   quiescent (nothing queued anywhere live, nothing to deliver): it cannot post
    ///   towards a first.
    ///
    /// Otherwise every enabled step.
    fn steps(&self, config: &ModelConfig) -> Vec<Step> {
        if !config.reduce {
            return self.all_steps(config);
        }
        let live = |a: usize| config.crashed != Some(a as u16);
        let acceptors = usize::from(config.acceptors);
        for (p, proposer) in self.proposers.iter().enumerate() {
            // A term change is p's local step too, dependent on its deliveries only.
            let delivers: Vec<Step> = (0..acceptors)
                .filter(|&a| !proposer.done[a].is_empty())
                .map(|a| Step::Deliver { p, a })
                .chain(
                    proposer
                        .may_change_term(config)
                        .then_some(Step::NewTerm { p }),
                )
                .collect();
            let closed = (0..acceptors)
                .all(|a| !live(a) || proposer.queue[a].is_empty() || !proposer.done[a].is_empty());
            if !delivers.is_empty() && closed {
                return delivers;
            }
        }
        let quiescent = |r: &Proposer| {
            !r.may_change_term(config)
                && (0..acceptors)
                    .all(|b| r.done[b].is_empty() && (!live(b) || r.queue[b].is_empty()))
        };
        let ample = (0..acceptors)
            .filter(|&a| live(a))
            .filter(|&a| {
                self.proposers
                    .iter()
                    .all(|r| !r.queue[a].is_empty() || quiescent(r))
            })
            .map(|a| {
                (0..self.proposers.len())
                    .filter(|&p| !self.proposers[p].queue[a].is_empty())
                    .map(|p| Step::Execute { p, a })
                    .collect::<Vec<Step>>()
            })
            .filter(|e| !e.is_empty())
            .min_by_key(Vec::len);
        ample.unwrap_or_else(|| self.all_steps(config))
    }

    /// Every enabled step.
    fn all_steps(&self, config: &ModelConfig) -> Vec<Step> {
        let mut steps = Vec::new();
        for (p, proposer) in self.proposers.iter().enumerate() {
            for a in 0..usize::from(config.acceptors) {
                if !proposer.queue[a].is_empty() && config.crashed != Some(a as u16) {
                    steps.push(Step::Execute { p, a });
                }
                if !proposer.done[a].is_empty() {
                    steps.push(Step::Deliver { p, a });
                }
            }
            if proposer.may_change_term(config) {
                steps.push(Step::NewTerm { p });
            }
        }
        steps
    }

    fn apply(&mut self, config: &ModelConfig, step: Step) {
        match step {
            Step::Execute { p, a } => {
                let msg = self.proposers[p].queue[a]
                    .pop_front()
                    .expect("an enabled step");
                let done = match msg {
                    Msg::Write { slot, stamp, value } => {
                        self.buffers[a][p][slot as usize] = (stamp, value);
                        None
                    }
                    Msg::Cas {
                        slot,
                        term,
                        id,
                        expected,
                        desired,
                    } => {
                        let word = &mut self.words[a][slot as usize];
                        let actual = *word;
                        if actual == expected {
                            *word = desired;
                        }
                        Some(Done::Cas {
                            slot,
                            term,
                            id,
                            actual,
                        })
                    }
                    Msg::Read {
                        slot,
                        term,
                        proposer,
                    } => {
                        let (stamp, value) = self.buffers[a][usize::from(proposer)][slot as usize];
                        Some(Done::Read {
                            slot,
                            term,
                            stamp,
                            value,
                        })
                    }
                };
                if let Some(done) = done {
                    self.proposers[p].done[a].push_back(done);
                }
            }
            Step::Deliver { p, a } => {
                let me = p as u16;
                let proposer = &mut self.proposers[p];
                let done = proposer.done[a].pop_front().expect("an enabled step");
                let mut out = Vec::new();
                match done {
                    // A completion of a slot already settled, or of an abandoned term:
                    // nothing to count.
                    Done::Cas { slot, term, .. } | Done::Read { slot, term, .. }
                        if (slot, term) != (proposer.slot, proposer.term) => {}
                    Done::Cas { id, actual, .. } => {
                        proposer.sp.on_cas(a as u16, id, actual, &[], &mut out);
                    }
                    Done::Read { stamp, value, .. } => {
                        let needed = proposer.reading.take().expect("a read under way");
                        proposer.adopted = value;
                        proposer
                            .sp
                            .on_value_read(stamp >= needed && value != 0, &[], &mut out);
                    }
                }
                proposer.post(me, out);
                proposer.settle(config, me);
            }
            Step::NewTerm { p } => self.proposers[p].new_term(config, p as u16),
        }
    }

    fn violation(&self, config: &ModelConfig) -> Option<String> {
        let inputs: BTreeSet<u64> = (0..config.proposers)
            .flat_map(|p| (0..=config.term_changes).map(move |t| input_at(p, t)))
            .collect();
        for s in 0..config.slots as usize {
            let decided: BTreeSet<u64> = self
                .proposers
                .iter()
                .filter_map(|p| p.decisions.get(s).copied().flatten())
                .collect();
            if let Some(v) = decided.iter().find(|v| !inputs.contains(v)) {
                return Some(format!("validity: slot {s} decided {v}"));
            }
            if decided.len() > 1 {
                return Some(format!("agreement: slot {s} decided {decided:?}"));
            }
        }
        None
    }

    fn fingerprint(&self) -> u128 {
        // One pass of XXH3's 128-bit hash (SipHash twice took most of the search's time).
        let mut h = Xxh3Default::new();
        self.hash(&mut h);
        h.digest128()
    }
}

/// Explores every reachable state of `config` depth first.
pub fn explore(config: &ModelConfig) -> Result<ModelReport, ModelError> {
    let initial = State::initial(config);
    let mut seen: HashSet<u128> = HashSet::new();
    seen.insert(initial.fingerprint());
    // The path from the initial state: (state, steps still to try, step that led here).
    let mut stack: Vec<(State, Vec<Step>, Option<Step>)> = Vec::new();
    let steps = initial.steps(config);
    let mut report = ModelReport {
        states: 1,
        finals: 0,
        outcomes: BTreeSet::new(),
    };
    let trace = |stack: &[(State, Vec<Step>, Option<Step>)]| {
        stack
            .iter()
            .filter_map(|(_, _, s)| s.map(|s| format!("{s:?}")))
            .collect::<Vec<_>>()
    };
    if let Some(violation) = initial.violation(config) {
        return Err(ModelError::Violation {
            violation,
            trace: Vec::new(),
        });
    }
    stack.push((initial, steps, None));
    while let Some((state, todo, _)) = stack.last_mut() {
        let Some(step) = todo.pop() else {
            stack.pop();
            continue;
        };
        let mut next = state.clone();
        next.apply(config, step);
        if !seen.insert(next.fingerprint()) {
            continue;
        }
        report.states += 1;
        if report.states > config.max_states {
            return Err(ModelError::Budget(config.max_states));
        }
        let steps = next.steps(config);
        stack.push((next, steps, Some(step)));
        let (top, todo, _) = stack.last().expect("pushed");
        if let Some(violation) = top.violation(config) {
            return Err(ModelError::Violation {
                violation,
                trace: trace(&stack),
            });
        }
        if todo.is_empty() {
            report.finals += 1;
            if top.proposers.iter().any(|p| p.slot < config.slots) {
                return Err(ModelError::Deadlock {
                    trace: trace(&stack),
                });
            }
            report
                .outcomes
                .insert(top.proposers.iter().map(|p| p.decisions.clone()).collect());
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(slots: u32, attempts: u32, crashed: Option<u16>) -> ModelConfig {
        ModelConfig {
            proposers: 2,
            acceptors: 3,
            slots,
            attempts,
            crashed,
            term_changes: 0,
            reuse_term_ballot: false,
            mutation: Mutation::None,
            max_states: 10_000_000,
            reduce: true,
        }
    }

    /// `config` with one term change per proposer (`reuse`: the new term may prepare at
    /// the old term's ballot).
    fn with_term_change(config: ModelConfig, reuse: bool) -> ModelConfig {
        ModelConfig {
            term_changes: 1,
            reuse_term_ballot: reuse,
            ..config
        }
    }

    /// Explores `config`: agreement and validity everywhere, no deadlock (`explore`), some
    /// run decides every slot at a proposer (with `both`: at both proposers), and the
    /// state count is pinned (unless `pinned` is 0: a run by hand).
    fn check(config: ModelConfig, both: bool, pinned: usize) -> ModelReport {
        let r = explore(&config).unwrap_or_else(|e| panic!("{config:?}: {e}"));
        eprintln!(
            "{config:?}: {} states, {} finals, {} outcomes",
            r.states,
            r.finals,
            r.outcomes.len()
        );
        let decides = |d: &Vec<Option<u64>>| d.iter().all(Option::is_some);
        assert!(
            r.outcomes.iter().any(|o| if both {
                o.iter().all(decides)
            } else {
                o.iter().any(decides)
            }),
            "no run decides every slot ({both}): {:?}",
            r.outcomes
        );
        if pinned > 0 {
            assert_eq!(r.states, pinned, "{config:?}: states (pinned)");
        }
        r
    }

    // A term change: a proposer abandons its slot proposer in the middle of the slot, its
    // CASes still queued or in flight on the queue pairs the new term shares, and starts
    // again for a value of its own. Agreement holds whether the new term's ballot is fresh
    // (rule (fresh term)) or may be the old term's: the old term's CASes at an acceptor
    // execute before any of the new term's there (one queue pair), so a prepare at the
    // old ballot fails wherever the old term's succeeded, and no ballot gathers two
    // majorities of promises. The rule makes lemma (learning) literal, not this safe.

    #[test]
    fn a_term_change_with_the_old_terms_cases_in_flight_agrees() {
        check(
            with_term_change(config(1, 1, None), false),
            false,
            1_394_291,
        );
    }

    #[test]
    fn a_term_change_and_a_retry_with_a_crashed_acceptor_agree() {
        check(
            with_term_change(config(1, 2, Some(2)), false),
            false,
            1_172_311,
        );
    }

    #[test]
    fn a_term_change_at_the_old_terms_ballot_agrees_too() {
        check(
            with_term_change(config(1, 2, Some(2)), true),
            false,
            1_409_994,
        );
    }

    // With one retry, a proposer that aborted retries at once, its other CASes still in
    // flight: its predictions for those acceptors are the optimistic ones and the retry
    // aborts too unless the others answered first. In the configurations below with one
    // retry no run decides at both proposers; with two retries some does.

    #[test]
    fn two_proposers_one_slot_agree() {
        check(config(1, 1, None), false, 33_855);
    }

    #[test]
    fn two_proposers_one_slot_with_a_retry_and_a_crashed_acceptor_agree() {
        check(config(1, 2, Some(2)), false, 5_824);
    }

    #[test]
    fn two_proposers_one_slot_with_two_retries_and_a_crashed_acceptor_both_decide() {
        check(config(1, 3, Some(2)), true, 71_481);
    }

    /// About 30 s and 200 MB in release mode.
    #[test]
    fn two_proposers_two_slots_agree() {
        check(config(2, 1, None), false, 3_904_863);
    }

    #[test]
    fn two_proposers_two_slots_with_a_retry_and_a_crashed_acceptor_agree() {
        check(config(2, 2, Some(2)), false, 189_412);
    }

    /// A retry with all three acceptors up: about 2.5 minutes and 1.7 GB in release mode.
    #[test]
    fn two_proposers_one_slot_with_a_retry_agree() {
        let config = ModelConfig {
            max_states: 40_000_000,
            ..config(1, 2, None)
        };
        check(config, false, 35_396_739);
    }

    // Out of reach: two slots with a retry and all three acceptors up (one slot alone has
    // 35 M states; the reduction is conservative while a proposer has operations queued
    // at several acceptors). Run by hand with a larger budget:
    // `VELOS_MODEL_BUDGET=300000000 cargo test --release --lib protocol_model --
    // --ignored --nocapture`.
    #[test]
    #[ignore = "out of reach: more than 10 M states"]
    fn two_proposers_two_slots_with_a_retry_agree() {
        check(budget(config(2, 2, None)), false, 0);
    }

    fn budget(config: ModelConfig) -> ModelConfig {
        ModelConfig {
            max_states: std::env::var("VELOS_MODEL_BUDGET")
                .ok()
                .and_then(|b| b.parse().ok())
                .unwrap_or(config.max_states),
            ..config
        }
    }

    /// The reduction keeps every final state: the same outcomes as every interleaving,
    /// where every interleaving is within reach.
    #[test]
    fn the_reduction_keeps_every_outcome() {
        for (slots, attempts, crashed) in [(1, 1, Some(2)), (1, 2, Some(2))] {
            let reduced = explore(&config(slots, attempts, crashed)).expect("explores");
            let full = explore(&ModelConfig {
                reduce: false,
                ..config(slots, attempts, crashed)
            })
            .expect("explores");
            eprintln!(
                "{slots} slots, {attempts} attempts: {} states reduced, {} in full",
                reduced.states, full.states
            );
            assert_eq!(reduced.outcomes, full.outcomes);
            assert!(reduced.states < full.states);
        }
    }

    /// The checks have teeth: each deliberately wrong variant breaks agreement somewhere.
    #[test]
    fn each_mutation_breaks_agreement() {
        for mutation in [
            Mutation::SkipAdoption,
            Mutation::AcceptWithoutMajority,
            Mutation::ReuseProposal,
            Mutation::TrustPromise,
        ] {
            let result = explore(&ModelConfig {
                mutation,
                ..config(1, 2, None)
            });
            match result {
                Err(ModelError::Violation { violation, trace }) => {
                    eprintln!("{mutation:?}: {violation} after {} steps", trace.len());
                }
                other => panic!("{mutation:?} not caught: {other:?}"),
            }
        }
    }
}
