//! The leader's side of the log: a window of slots, each run by Algorithm 5
//! ([`SlotProposer`]), pre-prepared ahead of the values that will fill them, with one
//! proposal number (the ballot) shared by the window while nothing outbids it.
//!
//! A new leader starts at its first unapplied slot and prepares from there: every slot in
//! the window adopts what a majority shows accepted (the old leader's values are
//! re-proposed), and a slot with nothing to adopt below an adopted one is filled with a
//! no-op, so the log never has a hole.
//!
//! previous_decision: the accept of slot s carries c > 0 only when s is accepted at the
//! current ballot B and every slot up to s − c is decided. Lemma (learning): if a replica's
//! word of some k ≤ s − c shows B accepted, k's value at B is the decided one. Proof: B is
//! this leader's and fresh for the term (ballots only grow, across terms too); k was
//! attempted at B; an abort at B would have moved the ballot above B before s's accept
//! could carry B, so k was decided by its attempt at B.

use super::config::LogConfig;
use crate::proposal::{Numbering, ProposerId};
use crate::slot::{Content, Outcome, SlotCommand, SlotConfig, SlotProposer};
use std::collections::{BTreeMap, VecDeque};

/// A client value and the id its proposer was given for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Proposal {
    pub id: u64,
    pub bytes: Vec<u8>,
}

/// One slot in the leader's window.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Run {
    proposer: SlotProposer,
    /// My value, once given to this slot (a no-op has no proposal).
    mine: Option<Option<Proposal>>,
    /// The value read for adoption.
    adopted: Option<Vec<u8>>,
    /// A value read for adoption is under way.
    reading: bool,
}

/// What the leader learned in one step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Progress {
    /// Slots decided, in order, from the applied prefix on: apply them.
    pub apply: Vec<(u64, Vec<u8>)>,
    /// Proposals decided: `(proposal id, slot)`.
    pub committed: Vec<(u64, u64)>,
    /// Something changed.
    pub moved: bool,
}

/// The leader of one term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Leader {
    me: ProposerId,
    pub term: u64,
    /// The ballot: the proposal number of the window's slots.
    pub ballot: u64,
    /// Every slot below is decided and applied.
    pub prefix: u64,
    next_slot: u64,
    window: BTreeMap<u64, Run>,
    /// Client values not yet given to a slot.
    pub pending: VecDeque<Proposal>,
    decided: BTreeMap<u64, Vec<u8>>,
}

impl Leader {
    /// The leader `me` of `term`, starting at slot `prefix` with ballots above `floor`.
    pub(super) fn new(me: u16, term: u64, prefix: u64, floor: u64) -> Leader {
        Leader {
            me: ProposerId(me),
            term,
            ballot: floor,
            prefix,
            next_slot: prefix,
            window: BTreeMap::new(),
            pending: VecDeque::new(),
            decided: BTreeMap::new(),
        }
    }

    fn slot_config(&self, config: &LogConfig) -> SlotConfig {
        SlotConfig {
            layout: config.layout,
            acceptors: config.replicas,
            numbering: Numbering {
                proposers: config.replicas,
            },
            me: self.me,
            tag: 0,
            mutation: config.mutation,
        }
    }

    /// Values given to slots and not decided yet.
    pub(super) fn in_flight_values(&self) -> usize {
        self.window.values().filter(|r| r.mine.is_some()).count()
    }

    /// Everything not decided: the pending proposals and those in the window.
    pub(super) fn undecided(self) -> impl Iterator<Item = Proposal> {
        self.pending
            .into_iter()
            .chain(self.window.into_values().filter_map(|r| r.mine.flatten()))
    }

    /// The previous_decision count for an accept of `slot` at `proposal`.
    fn previous(&self, config: &LogConfig, slot: u64, proposal: u64) -> Vec<u8> {
        let c = if proposal == self.ballot && self.prefix >= 1 && slot >= self.prefix {
            let c = slot - (self.prefix - 1);
            if c <= config.layout.max_previous() {
                c as u8
            } else {
                0
            }
        } else {
            0
        };
        vec![c; usize::from(config.replicas)]
    }

    /// Opens slots up to the window's depth: predictions from `seed` (the local acceptor
    /// word of a slot, if known), prepared at the ballot.
    pub(super) fn open_slots(
        &mut self,
        config: &LogConfig,
        seed: impl Fn(u64) -> Option<u64>,
        out: &mut Vec<(u64, SlotCommand)>,
    ) {
        while self.next_slot < self.prefix + u64::from(config.pipeline)
            && self.next_slot < u64::from(config.slots)
        {
            let slot = self.next_slot;
            let cfg = self.slot_config(config);
            let mut proposer = match seed(slot) {
                Some(word) => SlotProposer::new(cfg, vec![word; usize::from(config.replicas)]),
                None => SlotProposer::fresh(cfg),
            }
            .holding();
            let mut cmds = Vec::new();
            proposer.prepare_above(self.ballot.saturating_sub(1), &mut cmds);
            self.ballot = self.ballot.max(proposer.proposal());
            let mut run = Run {
                proposer,
                mine: None,
                adopted: None,
                reading: false,
            };
            Self::note_reads(&mut run, &cmds);
            out.extend(cmds.into_iter().map(|c| (slot, c)));
            self.window.insert(slot, run);
            self.next_slot += 1;
        }
        assert!(
            self.window
                .keys()
                .all(|&s| s >= self.prefix && s < self.next_slot),
            "the window lies between the prefix and the next slot"
        );
    }

    /// A CAS of `slot` towards `a` completed with `actual`.
    pub(super) fn on_cas(
        &mut self,
        config: &LogConfig,
        (slot, a, id): (u64, u16, u64),
        actual: u64,
        out: &mut Vec<(u64, SlotCommand)>,
    ) {
        let Some(run) = self.window.get(&slot) else {
            return; // decided already: a late completion
        };
        let previous = self.previous(config, slot, run.proposer.proposal());
        let run = self.window.get_mut(&slot).expect("present");
        let mut cmds = Vec::new();
        run.proposer.on_cas(a, id, actual, &previous, &mut cmds);
        Self::note_reads(run, &cmds);
        out.extend(cmds.into_iter().map(|c| (slot, c)));
    }

    /// A CAS of `slot` towards `a` will never answer.
    pub(super) fn on_cas_lost(&mut self, slot: u64, a: u16, id: u64) {
        if let Some(run) = self.window.get_mut(&slot) {
            run.proposer.on_cas_lost(a, id);
        }
    }

    /// The value read for adopting in `slot`: `None` if the buffer was overwritten.
    pub(super) fn on_value_read(
        &mut self,
        config: &LogConfig,
        slot: u64,
        value: Option<Vec<u8>>,
        out: &mut Vec<(u64, SlotCommand)>,
    ) {
        let Some(run) = self.window.get(&slot) else {
            return;
        };
        let previous = self.previous(config, slot, run.proposer.proposal());
        let run = self.window.get_mut(&slot).expect("present");
        assert!(run.reading, "a value read for a slot reading one");
        run.reading = false;
        let ok = value.is_some();
        run.adopted = value;
        let mut cmds = Vec::new();
        run.proposer.on_value_read(ok, &previous, &mut cmds);
        out.extend(cmds.into_iter().map(|c| (slot, c)));
    }

    /// The bytes an accept of `slot` writes for `content`.
    pub(super) fn value_of(&self, slot: u64, content: Content) -> Vec<u8> {
        let run = &self.window[&slot];
        match content {
            Content::Mine => run
                .mine
                .clone()
                .expect("my value was supplied")
                .map_or_else(Vec::new, |p| p.bytes),
            Content::Adopted => run.adopted.clone().expect("the adopted value was read"),
        }
    }

    fn note_reads(run: &mut Run, cmds: &[SlotCommand]) {
        if cmds
            .iter()
            .any(|c| matches!(c, SlotCommand::ReadValue { .. }))
        {
            run.reading = true;
        }
    }

    /// Settles outcomes: decided slots leave the window (and are applied in order),
    /// aborted ones prepare again above everything seen, promised ones get a value (a
    /// client's, or a no-op below an adopted slot).
    pub(super) fn step(
        &mut self,
        config: &LogConfig,
        out: &mut Vec<(u64, SlotCommand)>,
    ) -> Progress {
        let mut progress = Progress::default();
        let slots: Vec<u64> = self.window.keys().copied().collect();
        for slot in slots {
            let outcome = self.window[&slot].proposer.outcome();
            match outcome {
                Outcome::Decided { content, .. } => {
                    let run = self.window.remove(&slot).expect("present");
                    let value = match content {
                        Content::Mine => match run.mine.expect("my value was supplied") {
                            Some(p) => {
                                progress.committed.push((p.id, slot));
                                p.bytes
                            }
                            None => Vec::new(),
                        },
                        Content::Adopted => {
                            let adopted = run.adopted.expect("an adopted value was read");
                            if let Some(Some(mine)) = run.mine {
                                // Not decided here: it goes in a later slot.
                                self.pending.push_front(mine);
                            }
                            adopted
                        }
                    };
                    self.decided.insert(slot, value);
                    progress.moved = true;
                }
                Outcome::Aborted => {
                    let run = self.window.get_mut(&slot).expect("present");
                    let mut cmds = Vec::new();
                    run.adopted = None;
                    run.proposer.prepare_above(self.ballot, &mut cmds);
                    Self::note_reads(run, &cmds);
                    // An abort moves the ballot above the aborted one (see the lemma).
                    self.ballot = self.ballot.max(run.proposer.proposal());
                    out.extend(cmds.into_iter().map(|c| (slot, c)));
                    progress.moved = true;
                }
                Outcome::Overflow => {
                    // Proposal numbers are exhausted for this slot: the one-sided fast path
                    // must not be used on it. Not reachable with 24-bit numbers in the
                    // runs we make; surfaced loudly rather than ignored.
                    panic!("slot {slot}: proposal numbers exhausted (overflow fallback)");
                }
                Outcome::Pending if self.window[&slot].proposer.is_promised() => {
                    let fill = self.fill_below(slot);
                    let previous =
                        self.previous(config, slot, self.window[&slot].proposer.proposal());
                    let run = self.window.get_mut(&slot).expect("present");
                    if run.mine.is_none() {
                        run.mine = match self.pending.pop_front() {
                            Some(p) => Some(Some(p)),
                            None if fill => Some(None),
                            None => None,
                        };
                    }
                    if run.mine.is_some() {
                        let mut cmds = Vec::new();
                        run.proposer.supply(&previous, &mut cmds);
                        out.extend(cmds.into_iter().map(|c| (slot, c)));
                        progress.moved = true;
                    }
                }
                Outcome::Pending => {}
            }
        }
        while let Some(value) = self.decided.remove(&self.prefix) {
            progress.apply.push((self.prefix, value));
            self.prefix += 1;
        }
        assert!(
            self.decided.keys().all(|&s| s > self.prefix),
            "decided slots above the prefix wait for the gap below them"
        );
        progress
    }

    /// Whether `slot` must be filled with a no-op now: something above it was adopted or
    /// decided (recovery), so waiting for a client value would leave a hole.
    fn fill_below(&self, slot: u64) -> bool {
        self.decided.range(slot + 1..).next().is_some()
            || self
                .window
                .range(slot + 1..)
                .any(|(_, r)| r.reading || r.adopted.is_some())
    }
}
