//! The leader's side of the log: a window of slots, each run by Algorithm 5
//! ([`SlotProposer`]), pre-prepared ahead of the values that will fill them, with one
//! proposal number (the ballot) shared by the window while nothing outbids it.
//!
//! A new leader starts at its first unapplied slot and prepares from there: every slot in
//! the window adopts what a majority shows accepted (the old leader's values are
//! re-proposed), and a slot with nothing to adopt below an adopted one is filled with a
//! no-op, so the log never has a hole.
//!
//! previous_decision: the accept of slot s in epoch e carries c > 0 only when s is accepted
//! at the current ballot B of epoch e, no slot overflowed out of epoch e in this term, and
//! every slot up to s − c is decided. Lemma (learning): if a replica's epoch-e word of some
//! k ≤ s − c shows B accepted, k's value at B is the decided one. Proof: B is this leader's
//! and fresh for the term in epoch e: ballots only grow within a term, and a term's start
//! strictly above every ballot of my earlier terms (rule (fresh term), [`Leader::new`]),
//! so no CAS at B from an earlier term of mine, still in flight, exists; k was attempted
//! at B in epoch e; an abort at B would have moved the epoch's ballot above B before s's
//! accept could carry B, and an overflow of k out of epoch e would have stopped every later
//! count in e, so k was decided by its attempt at B — or, under rule (chosen at prepare),
//! decided before it, with the value its accept at B writes: whether that accept succeeds
//! or is overtaken, my buffer of k at B holds the decided value, which is what the lemma
//! lets a learner read.
//!
//! The overflow fallback ([`crate::freeze`]) lives in [`overflow`]: a slot whose proposal
//! numbers run out freezes its epoch and continues in the next one, with its own ballots.

use super::config::LogConfig;
use super::event::{AbortCause, AfterAbort, Event};
use super::membership::Membership;
use crate::AcceptorState;
use crate::freeze::Freezer;
use crate::proposal::{Numbering, ProposerId};
use crate::slot::{Content, Outcome, SlotCommand, SlotConfig, SlotProposer};
use crate::spare::Spare;
use crate::word::Lap;
use std::collections::{BTreeSet, VecDeque};

mod ahead;
mod decided;
mod overflow;
#[cfg(test)]
mod tests;
mod window;

use ahead::Ahead;
pub(super) use ahead::Read;
use decided::Decided;
use window::Window;

/// The most acceptors a log has (its membership is a 64-bit mask).
const MAX_ACCEPTORS: usize = 64;

/// The previous_decision count an accept writes, per acceptor (the same for all): an
/// array, so that computing it allocates nothing on the hot path.
type Previous = [u8; MAX_ACCEPTORS];

/// Every count's array, made once: an accept borrows its row instead of filling 64 bytes.
static PREVIOUS: [Previous; 256] = {
    let mut rows = [[0u8; MAX_ACCEPTORS]; 256];
    let mut c = 0;
    while c < 256 {
        rows[c] = [c as u8; MAX_ACCEPTORS];
        c += 1;
    }
    rows
};

/// Where a slot command goes: the slot and the epoch of its words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct SlotAt {
    pub slot: u64,
    pub epoch: u32,
}

/// The leader's CAS ids: `epoch:16 | freeze:1 | id:47`, so that a completion finds the
/// proposer or freezer of its epoch (or nothing, if the slot moved on).
fn cas_id(epoch: u32, freeze: bool, id: u64) -> u64 {
    assert!(id < 1 << 47 && epoch < 1 << 16, "CAS id fields");
    u64::from(epoch) << 48 | u64::from(freeze) << 47 | id
}

fn split_id(id: u64) -> (u32, bool, u64) {
    ((id >> 48) as u32, id >> 47 & 1 == 1, id & ((1 << 47) - 1))
}

/// A client value (or a configuration entry) and the id its proposer was given for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Proposal {
    pub id: u64,
    pub value: Value,
    /// A batch of submitted commands ([`crate::batch`]) still taking more: `Some(n)`, `n`
    /// commands so far. It closes when it leaves the pending queue for a slot, before any
    /// of its words is written, and is never opened again (rule (closed batch)).
    pub open: Option<u32>,
}

/// A value of the log: its bytes, whether it is a configuration entry
/// ([`super::membership`]; the stamps of its buffer say so to readers), and its origin.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Value {
    pub bytes: Vec<u8>,
    pub config: bool,
    /// The proposal that brought it: [`origin`] of its replica and proposal id (0: a
    /// leader's no-op). It travels with the value — the first content word of every
    /// buffer it is written to, copied by every leader that adopts it — so that a leader
    /// knows its own proposal in a value another leader adopted (lemma (own adoption)).
    pub origin: u64,
}

/// A leader's no-op: no bytes, no origin.
static NOOP: Value = Value {
    bytes: Vec::new(),
    config: false,
    origin: 0,
};

/// The origin of replica `me`'s proposal `id`: never 0, unique to the proposal.
pub(super) fn origin(me: u16, id: u64) -> u64 {
    assert!(id < 1 << 48, "proposal ids fit 48 bits");
    (u64::from(me) + 1) << 48 | id
}

/// One slot in the leader's window.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Run {
    proposer: SlotProposer,
    /// My value, once given to this slot (a no-op has no proposal).
    mine: Option<Option<Proposal>>,
    /// The value read for adoption.
    adopted: Option<Value>,
    /// The adopted value is my own (`mine`), read back from my buffer: deciding it
    /// commits my proposal (see [`Leader::on_value_read`]).
    adopted_mine: bool,
    /// The keys (epoch, proposal) at which this run wrote my own value into its buffers.
    mine_keys: Vec<u64>,
    /// A value read for adoption is under way.
    reading: bool,
    /// The epoch of the slot's words this run works on.
    epoch: u32,
    /// Freezing `epoch` (the overflow fallback), once its proposal numbers ran out.
    freezer: Option<Freezer>,
    /// The value read from the frozen majority is under way.
    carrying: bool,
    /// The acceptor that carry read is of.
    carried_from: u16,
    /// The value this epoch must propose when its own promises show nothing accepted
    /// (carried from the frozen epoch below); `None`: free.
    carry: Option<Value>,
    /// The carried value is my own (as `adopted_mine`).
    carry_mine: bool,
    /// Rule (term predictions): the acceptors whose first prepare expects my seed and has
    /// not completed yet (bit a), and that seed.
    seeded: u64,
    seed: u64,
}

impl Run {
    /// A slot's run with nothing supplied, read or frozen yet.
    fn new(proposer: SlotProposer) -> Run {
        Run {
            proposer,
            mine: None,
            adopted: None,
            adopted_mine: false,
            mine_keys: Vec::new(),
            reading: false,
            epoch: 0,
            freezer: None,
            carrying: false,
            carried_from: 0,
            carry: None,
            carry_mine: false,
            seeded: 0,
            seed: 0,
        }
    }

    /// Clears everything but the proposer (renewed when the run serves again), keeping
    /// the room of its vectors.
    fn clear(&mut self) {
        self.mine = None;
        self.adopted = None;
        self.adopted_mine = false;
        self.mine_keys.clear();
        self.reading = false;
        self.epoch = 0;
        self.freezer = None;
        self.carrying = false;
        self.carry = None;
        self.carry_mine = false;
        (self.seeded, self.seed) = (0, 0);
    }
}

/// What the leader learned in one step (its vectors' room reused from step to step).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Progress {
    /// Slots decided, in order, from the applied prefix on: apply them.
    pub apply: Vec<(u64, Value)>,
    /// Proposals decided: `(proposal id, slot)`.
    pub committed: Vec<(u64, u64)>,
    /// Something changed.
    pub moved: bool,
    /// A slot was retried after its second abort or later: another live proposer keeps
    /// outbidding this one (see rule (duel) in `replica/leading.rs`).
    pub dueling: bool,
    /// Aborts and freezes, for the replica's events ([`crate::log::event`]): empty on a
    /// stable leader's path.
    pub events: Vec<Event>,
}

/// The leader of one term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Leader {
    me: ProposerId,
    pub term: u64,
    /// The ballots, one per epoch: the proposal number of the window's slots there.
    pub ballots: Vec<u64>,
    /// Per epoch: some slot overflowed out of it in this term, so no accept in it carries
    /// previous_decision any more.
    overflowed: Vec<bool>,
    /// The slot whose proposal numbers ran out in the last epoch: the log stops there.
    pub exhausted: Option<u64>,
    /// A slot of the window met a word of a later ring lap: the log moved on without this
    /// leader, which must copy a snapshot ([`crate::log::ring`]).
    pub overtaken: bool,
    /// No slot at or above this is opened.
    end: u64,
    /// A learner's repair: a promised slot with nothing to adopt gets a no-op at once,
    /// and an abort ends the repair (`gave_up`) instead of outbidding whoever caused it.
    repair: bool,
    /// The repair aborted: its learner goes back to reading (and may repair again later).
    pub gave_up: bool,
    /// A repair's first predictions: per epoch, per acceptor, the word its learner's
    /// catch-up just read there (`None`: not read). Empty for a leader.
    seen: Vec<Vec<Option<u64>>>,
    /// A leader's words read ahead of its window, where its seeds mispredicted (rule
    /// (term predictions)). Empty for a repair.
    ahead: Ahead,
    /// Every slot below is decided and applied.
    pub prefix: u64,
    next_slot: u64,
    /// Boxed: a run moves in and out of the window and the spare room by pointer.
    window: Window<Box<Run>>,
    /// Client values not yet given to a slot.
    pub pending: VecDeque<Proposal>,
    /// Rule (lease-barrier): `pipeline` consecutive slots decided with my own proposals
    /// in the current lease period (`crate::log::lease`).
    pub barrier_done: bool,
    /// The slots decided with my own proposals since the barrier started.
    barrier_run: BTreeSet<u64>,
    /// Fill promised slots with no-ops when no value waits, until the barrier is done.
    force_noops: bool,
    /// Rule (decided elsewhere): a voter's heartbeat shows it applied every slot below
    /// this (its replica keeps it up to date). A promised slot of my window below it was
    /// decided by another leader after my prepare; filling it with a no-op — whose accept
    /// is refused where the decided value was accepted, so the retry adopts that value —
    /// makes me learn it with no command waiting. An idle leader otherwise sat on stale
    /// promises below its followers for good (`velos vopr` seed 10621: two leaders while
    /// a replacement was met late).
    pub applied_elsewhere: u64,
    decided: Decided,
    /// The members of the slots this leader may open ([`super::membership`]; its replica
    /// keeps it up to date as configuration entries are applied).
    pub membership: Membership,
    /// A slot proposer's commands on their way to `emit`: empty between calls, kept so
    /// that a step allocates nothing.
    buf: Vec<SlotCommand>,
    /// Runs of decided slots, for the next slots to open.
    spare: Spare<Box<Run>>,
}

impl Leader {
    /// The leader `me` of `term`, starting at slot `prefix` with ballots above `floors`
    /// (one per epoch: the highest ballot each of my earlier terms used there).
    ///
    /// Rule (fresh term): every ballot of the term is strictly above its floor, so that no
    /// CAS an earlier term of mine abandoned in flight is at one of this term's ballots
    /// (lemma (learning) needs B fresh for the term). Reusing the old term's last ballot B
    /// would still be safe, but only through the queue pairs: both terms post on the same
    /// ones, so the old term's CASes at an acceptor execute before the new term's, a
    /// prepare at B fails wherever the old term's succeeded, and B never gathers two
    /// majorities of promises (the exhaustive model checks both: velos-testkit's
    /// `protocol_model`, term changes).
    pub(super) fn new(
        me: u16,
        term: u64,
        prefix: u64,
        floors: Vec<u64>,
        membership: Membership,
    ) -> Leader {
        assert!(!floors.is_empty(), "a ballot per epoch");
        // A slot prepares above `ballot - 1`: starting at floor + 1 puts every one of
        // this term's ballots above the floor (rule (fresh term)).
        let ballots: Vec<u64> = floors.iter().map(|&f| f + 1).collect();
        Leader {
            me: ProposerId(me),
            term,
            overflowed: vec![false; floors.len()],
            ballots,
            exhausted: None,
            overtaken: false,
            end: u64::MAX,
            repair: false,
            gave_up: false,
            seen: Vec::new(),
            ahead: Ahead::default(),
            prefix,
            next_slot: prefix,
            window: Window::default(),
            pending: VecDeque::new(),
            barrier_done: false,
            barrier_run: BTreeSet::new(),
            force_noops: false,
            applied_elsewhere: 0,
            decided: Decided::default(),
            membership,
            buf: Vec::new(),
            spare: Spare::default(),
        }
    }

    /// A learner's repair of `slot` (proposer `me`, under `term`): the slot alone, run to a
    /// decision like a leader's, adopting what a majority shows or else deciding a no-op
    /// (the learner that never leaves a hole; see [`super::replica`]). `seen`: per epoch,
    /// per acceptor, the words of `slot` the learner's catch-up read.
    ///
    /// Rule (repair predictions): a repair predicts the words it just read. It gives up on
    /// its first abort, so a repair that predicted ⊥ where an acceptor had promised or
    /// accepted (in a later epoch, say) would abort on that nack every time it started
    /// again, and a slot only a repair can decide would never be.
    pub(super) fn repair(
        me: u16,
        term: u64,
        slot: u64,
        (floors, seen): (Vec<u64>, Vec<Vec<Option<u64>>>),
        membership: Membership,
    ) -> Leader {
        assert_eq!(seen.len(), floors.len(), "words seen in every epoch");
        let mut repair = Leader::new(me, term, slot, floors, membership);
        repair.end = slot + 1;
        repair.repair = true;
        repair.seen = seen;
        repair
    }

    /// A slot proposer for `slot` in `epoch`: a repair's predicts what its learner read
    /// (see [`Leader::repair`]), a leader's the words read ahead (rule (term
    /// predictions)), else `fallback` (a leader's local word) or ⊥.
    fn proposer_at(
        &self,
        cfg: SlotConfig,
        (slot, epoch): (u64, u32),
        fallback: Option<u64>,
    ) -> SlotProposer {
        let predicted = self.predictions(cfg, (slot, epoch), fallback).collect();
        let mut proposer = SlotProposer::new(cfg, predicted);
        self.set_up(&mut proposer);
        proposer
    }

    /// What every slot proposer of this window does, new or renewed: it holds its value
    /// back until supplied, and a leader's (not a repair's) adopts from its own acceptor
    /// among equally good promises (rule (local adoption)).
    fn set_up(&self, proposer: &mut SlotProposer) {
        proposer.hold();
        if !self.repair {
            proposer.read_locally();
        }
    }

    /// The first predictions of a slot proposer for `cfg`'s slot in `epoch` (see
    /// [`Leader::proposer_at`]), one per acceptor.
    fn predictions(
        &self,
        cfg: SlotConfig,
        (slot, epoch): (u64, u32),
        fallback: Option<u64>,
    ) -> impl Iterator<Item = u64> + '_ {
        let initial = cfg
            .layout
            .encode(AcceptorState::initial(cfg.tag))
            .expect("the tag fits the layout");
        let seen = self.seen.get(epoch as usize);
        // Words are read ahead in epoch 0 only: a slot moves up an epoch through its own
        // freeze, whose CASes learn the words there.
        let ahead = (epoch == 0 && !self.ahead.idle()).then_some(&self.ahead);
        (0..usize::from(cfg.acceptors)).map(move |a| {
            let read = seen.and_then(|words| words[a]);
            let ahead = ahead.and_then(|ahead| ahead.word(a as u16, slot));
            read.or(ahead).or(fallback).unwrap_or(initial)
        })
    }

    fn slot_config(&self, config: &LogConfig, slot: u64) -> SlotConfig {
        let ring = config.ring();
        let members = self.membership.at(slot).0;
        SlotConfig {
            layout: config.layout,
            acceptors: config.replicas,
            members,
            absent: members & !self.membership.voters(slot).0,
            numbering: Numbering {
                proposers: config.replicas,
            },
            me: self.me,
            tag: ring.tag(slot),
            recycled: ring.recycled(slot),
            mutation: config.mutation,
        }
    }

    /// Rule (lease-barrier): starts a barrier — until `pipeline` consecutive slots are
    /// decided with my own proposals, no lease read is answered, and idle promised slots
    /// get no-ops.
    pub(super) fn start_barrier(&mut self) {
        self.barrier_done = false;
        self.barrier_run.clear();
        self.force_noops = true;
    }

    fn barrier_decided(&mut self, config: &LogConfig, slot: u64) {
        if self.barrier_done || !self.force_noops {
            return;
        }
        self.barrier_run.insert(slot);
        let p = u64::from(config.pipeline);
        let run = |from: u64| (from..from + p).all(|s| self.barrier_run.contains(&s));
        if (slot.saturating_sub(p - 1)..=slot).any(run) {
            self.barrier_done = true;
            self.force_noops = false;
            self.barrier_run.clear();
        }
    }

    /// The read frontier: every slot that is, or may already be, decided lies below it —
    /// those decided so far (the applied prefix, or past decided slots waiting for a gap)
    /// and those of the window with a value in flight (mine or adopted). A lease read
    /// returns the state there.
    ///
    /// Lemma (read index): a write any replica may have applied is below it. A follower
    /// learns a slot's decision from the acceptors' words by itself, sometimes before the
    /// leader has seen its own accepts complete; a read index of the leader's decided
    /// slots alone then misses a write a follower applied (and a service may have acted
    /// on) before the read was asked — found by `velos vopr` with lease reads.
    pub(super) fn read_index(&self) -> u64 {
        let past = self.decided.last().map_or(0, |s| s + 1);
        let in_flight = self
            .window
            .iter()
            .filter(|(_, r)| r.mine.is_some() || r.adopted.is_some())
            .map(|(s, _)| s + 1)
            .max()
            .unwrap_or(0);
        let index = past.max(self.prefix).max(in_flight);
        assert!(
            index >= self.prefix,
            "lemma (read index): the applied prefix is below"
        );
        index
    }

    /// The next slot this term opens: the ones below it were opened (and are decided, or
    /// in the window).
    pub(super) fn next_slot(&self) -> u64 {
        self.next_slot
    }

    /// Whether this term decided `slot` (opened it and settled it: it left the window).
    pub(super) fn settled(&self, slot: u64) -> bool {
        slot < self.next_slot && !self.window.contains(slot)
    }

    /// Whether a configuration entry of mine is in a slot of the window, or decided and
    /// not applied yet.
    pub(super) fn config_in_window(&self) -> bool {
        // A configuration decided above my prefix is not in effect anywhere yet either:
        // one proposed meanwhile was computed from the configuration before it (two
        // removals of one replica decided, seed 2 of `tests/replacement.rs`).
        self.decided.holds_config()
            || self
                .window
                .values()
                .any(|r| matches!(&r.mine, Some(Some(p)) if p.value.config))
    }

    /// Whether the window holds a slot that nothing fills yet (no value of mine, nothing
    /// adopted or being read): the next command has a slot, prepared or being prepared.
    pub(super) fn has_prepared_room(&self) -> bool {
        self.window
            .values()
            .any(|r| r.mine.is_none() && r.adopted.is_none() && !r.reading)
    }

    /// Whether the window is empty because no slot is free to open below `room` (the
    /// ring waits for the members' snapshots, [`crate::log::ring`]).
    /// `room` is asked only when the window is empty (a busy leader never computes it).
    pub(in crate::log) fn waits_for_room(&self, room: impl FnOnce() -> u64) -> bool {
        self.window.is_empty() && self.next_slot >= room()
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

    /// The previous_decision count for an accept of `slot` at `proposal` in `epoch`.
    fn previous(
        &self,
        config: &LogConfig,
        slot: u64,
        epoch: u32,
        proposal: u64,
    ) -> &'static Previous {
        let e = epoch as usize;
        let c = if !self.overflowed[e]
            && proposal == self.ballots[e]
            && self.prefix >= 1
            && slot >= self.prefix
        {
            let c = slot - (self.prefix - 1);
            if c <= config.layout.max_previous() {
                c as u8
            } else {
                0
            }
        } else {
            0
        };
        assert!(
            usize::from(config.replicas) <= MAX_ACCEPTORS,
            "a count per acceptor"
        );
        &PREVIOUS[usize::from(c)]
    }

    /// The slots [`Leader::open_slots`] may open in this turn, with a window of `pipeline`
    /// slots (room and membership permitting): up to the window's depth, and one more for
    /// the room a decision in this turn makes.
    pub(super) fn opening(&self, pipeline: u32) -> std::ops::Range<u64> {
        let end = (self.prefix + u64::from(pipeline) + 1).min(self.end);
        self.next_slot..end.max(self.next_slot)
    }

    /// Opens slots up to the window's depth and below `room` (the first instance whose
    /// ring position is not free yet, [`crate::log::ring`]): predictions from `seed` (the
    /// local acceptor word of a slot, if known), prepared at the ballot.
    pub(super) fn open_slots(
        &mut self,
        config: &LogConfig,
        room: u64,
        seed: impl Fn(u64) -> Option<u64>,
        out: &mut Vec<(SlotAt, SlotCommand)>,
    ) {
        while self.next_slot < self.prefix + u64::from(config.pipeline)
            && self.next_slot < room.min(self.end)
            && self.exhausted.is_none()
            && !self.overtaken
            // A leader removed from the members opens no slot of the new configuration
            // (a repair may run any slot: a proposer need not be an acceptor).
            && (self.repair || self.membership.voters(self.next_slot).contains(self.me.0))
        {
            let slot = self.next_slot;
            let seed = seed(slot);
            let cfg = self.slot_config(config, slot);
            if seed.is_none() && cfg.recycled && !self.repair {
                // Rule (term predictions): a leader's slot of a recycled position opens
                // once its own word is loaded (in the next turn): the initial word it would
                // predict instead is held by no acceptor there. (On the ring's first lap
                // every acceptor holds it until a proposer of the instance writes.)
                break;
            }
            // A decided slot's run serves again (no allocation per slot).
            let mut run = match self.spare.take() {
                Some(mut run) => {
                    run.proposer
                        .renew(cfg, self.predictions(cfg, (slot, 0), seed));
                    self.set_up(&mut run.proposer);
                    run
                }
                None => Box::new(Run::new(self.proposer_at(cfg, (slot, 0), seed))),
            };
            if let Some(seed) = seed.filter(|_| !self.repair) {
                // Rule (term predictions): the first prepare's completions at the voters
                // predicted by my seed tell whether it mirrors their words.
                let mut read = 0u64;
                if !self.ahead.idle() {
                    read = (0..cfg.acceptors)
                        .filter(|&a| self.ahead.word(a, slot).is_some())
                        .fold(0, |m, a| m | 1 << a);
                    self.ahead.opened(slot, seed);
                }
                run.seeded = cfg.members & !cfg.absent & !(1 << self.me.0) & !read;
                run.seed = seed;
            }
            let mut cmds = std::mem::take(&mut self.buf);
            run.proposer
                .prepare_above(self.ballots[0].saturating_sub(1), &mut cmds);
            self.ballots[0] = self.ballots[0].max(run.proposer.proposal());
            Self::note_reads(&mut run, &cmds);
            emit(out, slot, 0, false, &mut cmds);
            self.buf = cmds;
            self.window.insert(slot, run);
            self.next_slot += 1;
        }
        assert!(
            self.window
                .iter()
                .all(|(s, _)| s >= self.prefix && s < self.next_slot),
            "the window lies between the prefix and the next slot"
        );
    }

    /// A CAS of `slot` towards `a` completed with `actual`.
    pub(super) fn on_cas(
        &mut self,
        config: &LogConfig,
        (slot, a, id): (u64, u16, u64),
        actual: u64,
        out: &mut Vec<(SlotAt, SlotCommand)>,
    ) {
        let Some(run) = self.window.get(slot) else {
            return; // decided already: a late completion
        };
        let (epoch, freeze, id) = split_id(id);
        if epoch != run.epoch {
            return; // an epoch the slot left: its words are frozen, nothing to count
        }
        let previous = self.previous(config, slot, epoch, run.proposer.proposal());
        let run = self.window.get_mut(slot).expect("present");
        if !freeze && run.seeded >> a & 1 == 1 {
            // Rule (term predictions): the slot's first CAS towards `a` (its first
            // prepare, which expected my seed) completed. If my seed or `a`'s word is of
            // another lap than the slot's, `a` holds a lap of this position otherwise than
            // my acceptor does: its words are read ahead. (Two states of this instance
            // that differ are another proposer's promise or accept of it: a conflict here,
            // no sign of the positions ahead.)
            run.seeded &= !(1 << a);
            let lap = |w| config.ring().classify(config.layout, slot, w);
            // (A word equal to my seed mirrors it: no lap to classify.)
            let mispredicted = actual != run.seed
                && !matches!(
                    (lap(run.seed), lap(actual)),
                    (Lap::Current(_), Lap::Current(_))
                );
            if mispredicted {
                self.ahead.mispredicted(a, self.next_slot);
            }
        }
        let mut cmds = std::mem::take(&mut self.buf);
        if freeze {
            if let Some(f) = run.freezer.as_mut().filter(|f| f.owns(a, id)) {
                f.on_cas(a, id, actual, &mut cmds);
            }
        } else {
            run.proposer.on_cas(a, id, actual, previous, &mut cmds);
            Self::note_reads(run, &cmds);
        }
        emit(out, slot, epoch, freeze, &mut cmds);
        self.buf = cmds;
    }

    /// Replica `a`'s memory now belongs to `incarnation`, a process started blank in its
    /// place (rule (no amnesia)): no slot open now counts it again — none of their
    /// configurations names that incarnation yet. Its CASes in flight are reported lost
    /// by the caller.
    pub(super) fn acceptor_replaced(&mut self, a: u16, incarnation: u64) {
        self.membership.connected(a, incarnation);
        self.ahead.forget(a);
        for run in self.window.values_mut() {
            run.proposer.acceptor_replaced(a);
            if let Some(f) = run.freezer.as_mut() {
                f.acceptor_replaced(a);
            }
        }
        assert!(
            self.window.values().all(|run| !run.proposer.counts(a)),
            "rule (no amnesia): no open slot counts a replaced acceptor"
        );
    }

    /// A CAS of `slot` towards `a` will never answer.
    pub(super) fn on_cas_lost(&mut self, slot: u64, a: u16, id: u64) {
        let Some(run) = self.window.get_mut(slot) else {
            return;
        };
        let (epoch, freeze, id) = split_id(id);
        if epoch != run.epoch {
            return;
        }
        run.seeded &= !(1 << a); // no word to check the seed against
        if freeze {
            if let Some(f) = run.freezer.as_mut().filter(|f| f.owns(a, id)) {
                f.on_cas_lost(a, id);
            }
        } else {
            run.proposer.on_cas_lost(a, id);
        }
    }

    /// The value read for adopting in `slot`, or for carrying it out of a frozen epoch:
    /// `None` if the read failed. `own_key`: the read was of my own buffer, whose stamps
    /// bore this key.
    ///
    /// Lemma (own adoption): a value read from my buffer of this slot with the key of a
    /// write of my value by this run is my value (a key names one write: proposal numbers
    /// are mine alone and never reused). Deciding it commits my proposal; proposing it
    /// again in a later slot would decide one client value twice (integrity) — what an
    /// attempt aborted after its accepts reached a majority used to do.
    pub(super) fn on_value_read(
        &mut self,
        config: &LogConfig,
        slot: u64,
        value: Option<Value>,
        own_key: Option<u64>,
        out: &mut Vec<(SlotAt, SlotCommand)>,
    ) {
        let Some(run) = self.window.get(slot) else {
            return;
        };
        // My proposal's origin on the value read: another leader adopted my value here
        // (it copies the origin), or this run wrote it (then the key names the write).
        let my_origin = match &run.mine {
            Some(Some(p)) => Some(p.value.origin),
            _ => None,
        };
        let mine = own_key.is_some_and(|k| run.mine_keys.contains(&k))
            || value
                .as_ref()
                .is_some_and(|v| v.origin != 0 && Some(v.origin) == my_origin);
        if run.carrying {
            self.on_carry_read(config, slot, value.map(|v| (v, mine)), out);
            return;
        }
        let epoch = run.epoch;
        let previous = self.previous(config, slot, epoch, run.proposer.proposal());
        let run = self.window.get_mut(slot).expect("present");
        assert!(run.reading, "a value read for a slot reading one");
        run.reading = false;
        let ok = value.is_some();
        run.adopted = value;
        run.adopted_mine = ok && mine;
        let mut cmds = std::mem::take(&mut self.buf);
        run.proposer.on_value_read(ok, previous, &mut cmds);
        emit(out, slot, epoch, false, &mut cmds);
        self.buf = cmds;
    }

    /// The bytes an accept of `slot` writes for `content`, stamped with `key`: a write of
    /// my own value is remembered by its key (lemma (own adoption)).
    pub(super) fn write_of(&mut self, slot: u64, content: Content, key: u64) -> &Value {
        let run = self.window.get_mut(slot).expect("a slot of the window");
        let mine = content == Content::Mine || run.adopted_mine;
        if mine && !run.mine_keys.contains(&key) {
            run.mine_keys.push(key);
        }
        match content {
            Content::Mine => match run.mine.as_ref().expect("my value was supplied") {
                Some(p) => &p.value,
                None => &NOOP,
            },
            Content::Adopted => run.adopted.as_ref().expect("the adopted value was read"),
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
    /// aborted ones prepare again above everything seen (once no link is congested:
    /// `may_retry`), promised ones get a value (a
    /// client's, or a no-op below an adopted slot).
    pub(super) fn step(
        &mut self,
        config: &LogConfig,
        out: &mut Vec<(SlotAt, SlotCommand)>,
        progress: &mut Progress,
        may_retry: bool,
    ) {
        assert!(
            progress.apply.is_empty() && progress.committed.is_empty() && !progress.moved,
            "a step starts from no progress"
        );
        let mut cmds = std::mem::take(&mut self.buf);
        let mut from = 0;
        // Every slot of the window in order, by a cursor (the window may change).
        while let Some(slot) = self.window.next_from(from) {
            from = slot + 1;
            assert!(cmds.is_empty(), "commands are emitted where they are made");
            let outcome = self.window[slot].proposer.outcome();
            match outcome {
                Outcome::Decided { content, .. } => {
                    let mut run = self.window.remove(slot).expect("present");
                    if content == Content::Mine {
                        self.barrier_decided(config, slot);
                    }
                    let (mine, adopted) = (run.mine.take(), run.adopted.take());
                    let adopted_mine = run.adopted_mine;
                    run.clear();
                    self.spare.keep(run);
                    let value = match content {
                        Content::Mine => match mine.expect("my value was supplied") {
                            Some(p) => {
                                progress.committed.push((p.id, slot));
                                p.value
                            }
                            None => Value::default(),
                        },
                        Content::Adopted => {
                            let adopted = adopted.expect("an adopted value was read");
                            match mine {
                                Some(Some(mine)) if adopted_mine => {
                                    assert_eq!(
                                        adopted, mine.value,
                                        "lemma (own adoption): my buffer's key names my value"
                                    );
                                    progress.committed.push((mine.id, slot));
                                }
                                // Not decided here: it goes in a later slot.
                                Some(Some(mine)) => self.pending.push_front(mine),
                                _ => {}
                            }
                            adopted
                        }
                    };
                    self.decided.insert(slot, value);
                    progress.moved = true;
                }
                Outcome::Aborted if self.repair => {
                    // A leader is likely working on the slot: let it, rather than duel.
                    self.gave_up = true;
                    let attempt = self.window[slot].proposer.attempt();
                    progress
                        .events
                        .push(aborted(slot, attempt, AfterAbort::GaveUp));
                }
                Outcome::Aborted if !may_retry => {
                    // Rule (no retry into a congested link): CASes wait for cells on some
                    // link, so a retry now would queue behind them; every retry posted
                    // into a backlog grew it (a CAS built on a failed one's hope fails
                    // too) faster than the link drained it, and the log stopped for good.
                    // The ballot still moves above the aborted one (see the lemma).
                    let run = &self.window[slot];
                    let e = run.epoch as usize;
                    let above = run.proposer.proposal() + 1;
                    if above > self.ballots[e] {
                        // Reported once: the slot stays aborted, and here, until a retry.
                        let attempt = run.proposer.attempt();
                        progress
                            .events
                            .push(aborted(slot, attempt, AfterAbort::Deferred));
                    }
                    self.ballots[e] = self.ballots[e].max(above);
                }
                Outcome::Aborted => {
                    let run = self.window.get_mut(slot).expect("present");
                    // A first abort is expected of a new term (a predecessor's promises);
                    // each later one means a proposer outbid the ballot this one moved to.
                    let attempt = run.proposer.attempt();
                    progress.dueling |= attempt >= 2;
                    run.adopted = None;
                    run.adopted_mine = false;
                    let e = run.epoch as usize;
                    run.proposer.prepare_above(self.ballots[e], &mut cmds);
                    Self::note_reads(run, &cmds);
                    // An abort moves the ballot above the aborted one (see the lemma).
                    let ballot = run.proposer.proposal();
                    self.ballots[e] = self.ballots[e].max(ballot);
                    progress
                        .events
                        .push(aborted(slot, attempt, AfterAbort::Retried { ballot }));
                    emit(out, slot, e as u32, false, &mut cmds);
                    progress.moved = true;
                }
                Outcome::Overflow => {
                    progress.moved |= self.overflow(config, slot, out, &mut progress.events);
                }
                Outcome::Overtaken => self.overtaken = true,
                Outcome::Pending
                    if self.window[slot].proposer.is_promised()
                        && self.window[slot].carry.is_some() =>
                {
                    let run = &self.window[slot];
                    let previous = self.previous(config, slot, run.epoch, run.proposer.proposal());
                    let run = self.window.get_mut(slot).expect("present");
                    // The frozen epoch's value goes first; my own waits for a later slot.
                    run.adopted = run.carry.clone();
                    run.adopted_mine = run.carry_mine;
                    run.proposer
                        .supply_content(Content::Adopted, previous, &mut cmds);
                    emit(out, slot, run.epoch, false, &mut cmds);
                    progress.moved = true;
                }
                Outcome::Pending if self.window[slot].proposer.is_promised() => {
                    let fill = self.fill_below(slot);
                    let run = &self.window[slot];
                    let previous = self.previous(config, slot, run.epoch, run.proposer.proposal());
                    let run = self.window.get_mut(slot).expect("present");
                    if run.mine.is_none() {
                        run.mine = match self.pending.pop_front() {
                            // Rule (closed batch): a value given a slot never grows.
                            Some(p) => Some(Some(Proposal { open: None, ..p })),
                            // A membership change waits for the slots before it takes
                            // effect: an idle leader fills them (no client need come).
                            None if fill
                                || self.repair
                                || self.force_noops
                                || slot < self.applied_elsewhere
                                || self.membership.pending_after(self.prefix) =>
                            {
                                Some(None)
                            }
                            None => None,
                        };
                    }
                    if run.mine.is_some() {
                        run.proposer.supply(previous, &mut cmds);
                        emit(out, slot, run.epoch, false, &mut cmds);
                        progress.moved = true;
                    }
                }
                Outcome::Pending => {}
            }
        }
        self.buf = cmds;
        while let Some(value) = self.decided.take_first(self.prefix) {
            progress.apply.push((self.prefix, value));
            self.prefix += 1;
        }
        assert!(
            self.decided.first().is_none_or(|s| s > self.prefix),
            "decided slots above the prefix wait for the gap below them"
        );
    }

    /// Whether `slot` must be filled with a no-op now: something above it was adopted or
    /// decided (recovery), so waiting for a client value would leave a hole.
    fn fill_below(&self, slot: u64) -> bool {
        self.decided.last().is_some_and(|s| s > slot)
            || self
                .window
                .above(slot)
                .any(|(_, r)| r.reading || r.adopted.is_some() || r.carrying || r.carry.is_some())
    }
}

/// Tags the commands of `slot`'s proposer (or freezer) in `epoch` for issuing.
fn emit(
    out: &mut Vec<(SlotAt, SlotCommand)>,
    slot: u64,
    epoch: u32,
    freeze: bool,
    cmds: &mut Vec<SlotCommand>,
) {
    let at = SlotAt { slot, epoch };
    out.extend(cmds.drain(..).map(|c| match c {
        SlotCommand::Cas {
            id,
            acceptor,
            expected,
            desired,
        } => (
            at,
            SlotCommand::Cas {
                id: cas_id(epoch, freeze, id),
                acceptor,
                expected,
                desired,
            },
        ),
        other => (at, other),
    }));
}

/// The event of an abort of `slot`'s attempt `attempt`.
fn aborted(slot: u64, attempt: u32, then: AfterAbort) -> Event {
    let cause = if attempt <= 1 {
        AbortCause::FirstOfTerm
    } else {
        AbortCause::Contended
    };
    Event::Aborted {
        slot,
        attempt,
        cause,
        then,
    }
}
