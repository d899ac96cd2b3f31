//! The model's state and its steps: acceptor words and value buffers, each proposer's
//! queues (posted, not executed) and completions (executed, not delivered), and the real
//! [`SlotProposer`] driving each proposer.

use super::{ModelConfig, input_at};
use std::collections::{BTreeSet, VecDeque};
use std::hash::Hash;
use velos_core::proposal::{Numbering, ProposerId};
use velos_core::slot::{Content, Outcome, SlotCommand, SlotConfig, SlotProposer};
use velos_core::word::WordLayout;
use xxhash_rust::xxh3::Xxh3Default;

/// An operation on one queue pair, towards one acceptor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Msg {
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
pub(super) enum Done {
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
pub(super) struct Proposer {
    pub(super) slot: u32,
    /// Terms started so far (0: the first).
    pub(super) term: u32,
    /// The highest ballot of the earlier terms.
    pub(super) floor: u64,
    pub(super) sp: SlotProposer,
    pub(super) attempts: u32,
    /// The read for adoption under way: the stamp it needs.
    pub(super) reading: Option<u64>,
    /// This attempt posted its accept (a value write): the slot proposer posts nothing more
    /// in this attempt.
    pub(super) accepting: bool,
    pub(super) adopted: u64,
    pub(super) decisions: Vec<Option<u64>>,
    /// Per acceptor: posted, not executed.
    pub(super) queue: Vec<VecDeque<Msg>>,
    /// Per acceptor: executed, completion not delivered.
    pub(super) done: Vec<VecDeque<Done>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct State {
    /// Per acceptor, per slot: the word.
    pub(super) words: Vec<Vec<u64>>,
    /// Per acceptor, per proposer, per slot: the value buffer (stamp, value).
    pub(super) buffers: Vec<Vec<Vec<(u64, u64)>>>,
    pub(super) proposers: Vec<Proposer>,
}

/// A step: acceptor `a` executes the head of proposer `p`'s queue towards it, or proposer
/// `p` takes the head completion from acceptor `a`.
#[derive(Clone, Copy, Debug)]
pub(super) enum Step {
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

/// A word's (promise, accepted proposal) pair: what a changing CAS raises (rule (dead CAS)).
fn progress(word: u64) -> (u64, u64) {
    let s = WordLayout::PAPER.decode(word);
    (s.min_proposal, s.accepted_proposal)
}

pub(super) fn slot_config(config: &ModelConfig, p: u16) -> SlotConfig {
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
    pub(super) fn post(&mut self, me: u16, cmds: Vec<SlotCommand>) {
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
                    self.accepting = true;
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

    /// Takes the steps that change nothing a later step or a check reads, so that states
    /// differing only in them are one (the quotient, [`State::quotient`]). Each such step
    /// commutes with every other step and stays enabled until taken:
    ///
    /// * Rule (stale completion): a completion of an earlier slot or term is delivered to
    ///   nobody (`apply` drops it); a read of one still queued changes no memory and its
    ///   completion would be one of those.
    /// * Rule (superseded completion): a CAS completion with a newer CAS of the same slot
    ///   proposer behind it at that acceptor only leaves the slot proposer's books
    ///   (`SlotProposer::on_cas`): the prediction is corrected only by the last CAS in
    ///   flight, and the completion counts for nothing — it is of an earlier attempt, or
    ///   it is this attempt's prepare and the accept behind it means the prepare phase is
    ///   over. It posts nothing and leaves the outcome alone, asserted below.
    pub(super) fn take_unobservable(&mut self) {
        let now = (self.slot, self.term);
        for done in &mut self.done {
            done.retain(|d| match *d {
                Done::Cas { slot, term, .. } | Done::Read { slot, term, .. } => (slot, term) == now,
            });
        }
        for queue in &mut self.queue {
            queue.retain(|m| !matches!(*m, Msg::Read { slot, term, .. } if (slot, term) != now));
        }
        for a in 0..self.done.len() {
            while let Some(&Done::Cas { id, actual, .. }) = self.done[a].front() {
                let newer = self.done[a]
                    .iter()
                    .skip(1)
                    .any(|d| matches!(d, Done::Cas { .. }))
                    || self.queue[a]
                        .iter()
                        .any(|m| matches!(*m, Msg::Cas { slot, term, .. } if (slot, term) == now));
                if !newer {
                    break;
                }
                let (outcome, predicted) = (self.sp.outcome(), self.sp.predicted_word(a as u16));
                let mut out = Vec::new();
                self.sp.on_cas(a as u16, id, actual, &[], &mut out);
                assert!(
                    out.is_empty()
                        && self.sp.outcome() == outcome
                        && self.sp.predicted_word(a as u16) == predicted,
                    "rule (superseded completion): it posts, decides and predicts nothing"
                );
                self.done[a].pop_front();
            }
        }
    }

    /// A proposer done with every slot: its slot proposer, ballots and reads are used by no
    /// later step (its completions are all stale).
    pub(super) fn forget_finished(&mut self, config: &ModelConfig) {
        self.sp = SlotProposer::fresh(slot_config(config, 0));
        self.term = 0;
        self.floor = 0;
        self.attempts = 0;
        self.accepting = false;
        self.reading = None;
        self.adopted = 0;
    }

    /// Whether this proposer may start a new term now: terms left, and a slot pending.
    pub(super) fn may_change_term(&self, config: &ModelConfig) -> bool {
        self.term < config.term_changes && self.slot < config.slots
    }

    /// A new term in the middle of the slot: the slot proposer is abandoned (its operations
    /// keep their places in the queues; their completions find nobody), and a fresh one
    /// prepares above the old term's ballot.
    pub(super) fn new_term(&mut self, config: &ModelConfig, me: u16) {
        assert!(self.may_change_term(config), "a term change left");
        self.floor = self.floor.max(self.sp.proposal());
        self.term += 1;
        self.sp = SlotProposer::fresh(slot_config(config, me));
        self.attempts = 1;
        self.accepting = false;
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
    pub(super) fn settle(&mut self, config: &ModelConfig, me: u16) {
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
                    self.accepting = false;
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
            self.accepting = false;
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
    pub(super) fn initial(config: &ModelConfig) -> State {
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
                    accepting: false,
                    reading: None,
                    adopted: 0,
                    decisions: Vec::new(),
                    queue: vec![VecDeque::new(); a],
                    done: vec![VecDeque::new(); a],
                };
                let mut out = Vec::new();
                proposer.sp.prepare(&mut out);
                proposer.post(p, out);
                proposer.settle(config, p);
                proposer
            })
            .collect();
        State {
            words: vec![vec![0; s]; a],
            buffers: vec![vec![vec![(0, 0); s]; n]; a],
            proposers,
        }
    }

    /// Acceptor `a` executes the head of proposer `p`'s queue towards it.
    fn apply_execute(&mut self, p: usize, a: usize) {
        let msg = self.proposers[p].queue[a]
            .pop_front()
            .expect("an enabled step");
        let done = match msg {
            Msg::Write { slot, stamp, value } => {
                // Rule (invisible write) reads a blank buffer as never written.
                assert!(stamp > 0, "a value is written under a proposal number");
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
                    assert!(
                        desired == expected || progress(desired) > progress(expected),
                        "rule (dead CAS): a word that changes raises its (promise, accepted) pair"
                    );
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

    pub(super) fn apply(&mut self, config: &ModelConfig, step: Step) {
        match step {
            Step::Execute { p, a } => self.apply_execute(p, a),
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
        if config.quotient {
            self.quotient(config);
        }
    }

    /// Replaces the state by the representative of its class: states that differ only in
    /// what no later step can read reach the same decisions and final states.
    pub(super) fn quotient(&mut self, config: &ModelConfig) {
        self.execute_dead(config);
        for proposer in &mut self.proposers {
            proposer.take_unobservable();
            if let Some(c) = config.crashed {
                // Never executed: nothing reads it.
                proposer.queue[usize::from(c)].clear();
            }
            if proposer.slot >= config.slots {
                proposer.forget_finished(config);
            }
        }
        // A slot every proposer has left, with nothing of it queued: its words and buffers
        // are read by no later step.
        let oldest = self.proposers.iter().map(|p| p.slot).min().unwrap_or(0);
        for s in 0..oldest.min(config.slots) {
            let queued = self.proposers.iter().any(|p| {
                p.queue.iter().flatten().any(|m| match *m {
                    Msg::Write { slot, .. } | Msg::Cas { slot, .. } | Msg::Read { slot, .. } => {
                        slot == s
                    }
                })
            });
            if !queued {
                for a in 0..self.words.len() {
                    self.words[a][s as usize] = 0;
                    for b in &mut self.buffers[a] {
                        b[s as usize] = (0, 0);
                    }
                }
            }
        }
    }

    /// Rule (dead CAS): executes at once every CAS at the head of a queue that fails
    /// whenever it runs and whose completion nobody reads. A successful CAS that changes a
    /// word raises its (promise, accepted proposal) pair, so a word never returns to a
    /// pair it has passed: a CAS expecting a pair at or below the word's, and not the word
    /// itself, fails now and for ever. Its completion is read by nobody when it is of an
    /// earlier slot or term (rule (stale completion)) or has a newer CAS of its slot
    /// proposer behind it (rule (superseded completion)). Such an execution changes
    /// nothing any step reads.
    fn execute_dead(&mut self, config: &ModelConfig) {
        for p in 0..self.proposers.len() {
            for a in 0..usize::from(config.acceptors) {
                if config.crashed == Some(a as u16) {
                    continue;
                }
                loop {
                    let proposer = &self.proposers[p];
                    let Some(&Msg::Cas {
                        slot,
                        term,
                        expected,
                        ..
                    }) = proposer.queue[a].front()
                    else {
                        break;
                    };
                    let word = self.words[a][slot as usize];
                    let dead = expected != word && progress(expected) <= progress(word);
                    let current = (slot, term) == (proposer.slot, proposer.term);
                    let superseded = proposer.queue[a].iter().skip(1).any(
                        |m| matches!(*m, Msg::Cas { slot: s, term: t, .. } if (s, t) == (slot, term)),
                    );
                    if !dead || (current && !superseded) {
                        break;
                    }
                    self.apply_execute(p, a);
                }
            }
        }
    }

    pub(super) fn violation(&self, config: &ModelConfig) -> Option<String> {
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

    pub(super) fn fingerprint(&self) -> u128 {
        // One pass of XXH3's 128-bit hash (SipHash twice took most of the search's time).
        let mut h = Xxh3Default::new();
        self.hash(&mut h);
        h.digest128()
    }
}
