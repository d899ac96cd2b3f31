//! Bulk catch-up: a follower in a streak of catch-ups (a replacement learning the backlog,
//! a replica back from a pause) reads up to [`BULK_SLOTS`] slots at a time instead of one:
//! one multi-word read of every epoch's words at every live replica, the decisions a
//! majority shows from its next slot on, then the values of the longest run of those
//! slots that one proposer wrote and one live holder accepted, in three multi-word reads
//! of that holder's buffers — their end stamps, their contents, their begin stamps, each
//! read posted once the one before completed, so every buffer is read as a single value
//! read reads it ([`crate::log::value`]: end, content, begin). One slot at a time cost a
//! round of word reads and three rounds of value reads per slot, and a replacement learned
//! the backlog about 8 times slower than the leader decided.
//!
//! Rule (bulk checked at apply): a slot is applied only if, at that moment, the words read
//! show it chosen under the configuration then known for it (a configuration entry
//! applied earlier in the same run changes the members of the slots after it) and its
//! buffer passes the checks of a single read (consistent stamps of the slot's lap, a key
//! at least the chosen proposal's). The first slot that fails stops the run; the single
//! catch-up (with its repair) takes over from there. A bulk that finds nothing chosen at
//! the next slot is not tried again for that slot.
//!
//! Gets towards a peer that stopped answering may land late: an acceptor whose abandoned
//! word reads are pending is not asked again until they complete (its words land in a
//! region of its own), and no value round starts while an abandoned one is pending.

use super::{Replica, Role, Then};
use crate::log::config::{BULK_SLOTS, ids, value_regions};
use crate::log::event::Event;
use crate::log::learner::majority_decision;
use crate::proposal::ProposerId;
use crate::word::AcceptorState;
use velos_rdma::{Op, Reply};

/// The run whose values a bulk catch-up reads, once its words are loaded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Run {
    /// The holder read from, and the proposer whose buffers hold the values.
    source: u16,
    proposer: ProposerId,
    /// Each slot's chosen epoch and state, from the bulk's first slot on.
    slots: Vec<(u32, AcceptorState)>,
    /// The buffers as the rounds fill them (each: begin stamp, content, end stamp).
    image: Vec<u64>,
    /// The value round out: 0 end stamps, 1 contents, 2 begin stamps.
    round: u8,
    /// The value region its rounds land in ([`value_regions`]).
    region: u32,
}

/// A bulk catch-up under way.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Bulk {
    /// Its first slot: my next slot when it started.
    from: u64,
    /// Slots read (at most [`BULK_SLOTS`], within one lap of the ring).
    count: u32,
    /// Acceptors asked (bit a).
    asked: u64,
    /// Per acceptor: its words, epoch-major (`e * BULK_SLOTS + i` for slot `from + i`).
    words: Vec<Option<Vec<u64>>>,
    /// `None` while the word reads are out; then the run whose values are read.
    values: Option<Run>,
    /// When it started or its last stage completed (the local clock).
    progressed: u64,
}

/// The bulk catch-up's bookkeeping besides the one under way.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct BulkState {
    pub(super) under_way: Option<Box<Bulk>>,
    /// Acceptors whose abandoned word reads may still land (bit a).
    pub(super) pending_words: u64,
    /// Abandoned value rounds that may still land: (value region, source read). Rule (a
    /// region per silent source): each source holds one region at most, and no bulk reads
    /// from a source that holds one.
    pub(super) pending_values: Vec<(u32, u16)>,
    /// The slot at which a bulk found nothing chosen: not tried again there.
    pub(super) refused_at: Option<u64>,
    /// Rule (term catch-up): Ω chose me and this was my next slot when my latest bulk
    /// started ([`Replica::ready_to_lead`]).
    pub(super) term_from: Option<u64>,
    /// Slots of the latest bulk that found nothing chosen at its first slot in which a
    /// live peer accepted a pair of this lap that my own words lack: how far the others
    /// are ahead of me, as far as one read shows (rule (up-to-date leader)).
    pub(super) ahead: u32,
    /// Slots the next bulk reads: [`FIRST_BULK`] after a short run, doubled (up to
    /// `BULK_SLOTS`) after a run that applied every slot read — a replica a few slots
    /// behind reads a few, one far behind soon reads the most.
    pub(super) next_count: u32,
}

/// Slots the first bulk of a streak reads.
const FIRST_BULK: u32 = 8;

impl BulkState {
    /// A test of acceptor `a`'s abandoned word reads replied: complete (or failed), its
    /// region is free.
    pub(super) fn words_complete(&mut self, a: u16, reply: &Reply) {
        if !matches!(reply, Reply::Value(0)) {
            self.pending_words &= !(1 << a);
        }
    }

    /// Reads into the word regions of `acceptors` (bit a) that someone else posted and
    /// gave up (a leader's reads ahead, `replica/ahead.rs`) may still land: those regions
    /// wait for them as for this catch-up's own abandoned reads.
    pub(super) fn landing(&mut self, acceptors: u64) {
        self.pending_words |= acceptors;
    }

    /// Whether acceptor `a`'s word region may take a read now: no read abandoned there
    /// may still land, and no bulk catch-up is under way (a leader runs none).
    pub(super) fn region_free(&self, a: u16) -> bool {
        self.pending_words & (1 << a) == 0 && self.under_way.is_none()
    }

    /// A test of the abandoned value round in `region` replied.
    pub(super) fn values_complete(&mut self, region: u32, reply: &Reply) {
        if !matches!(reply, Reply::Value(0)) {
            self.pending_values.retain(|&(r, _)| r != region);
        }
    }

    /// A value region no abandoned round may land in, of `regions`.
    pub(super) fn free_value_region(&self, regions: u32) -> Option<u32> {
        (0..regions).find(|&r| self.pending_values.iter().all(|&(p, _)| p != r))
    }

    /// The value rounds under way: their source and region, if a bulk reads values now.
    fn reading(&self) -> Option<(u16, u32)> {
        let run = self.under_way.as_ref()?.values.as_ref()?;
        Some((run.source, run.region))
    }

    /// Whether an abandoned value round from acceptor `a` may still land.
    fn values_pending_from(&self, a: u16) -> bool {
        self.pending_values.iter().any(|&(_, s)| s == a)
    }

    /// Gives up the bulk under way (I lead now, copy a snapshot, or its acceptors'
    /// memory was replaced): what it posted may still land, so its regions wait.
    pub(super) fn abandon(&mut self) {
        let Some(b) = self.under_way.take() else {
            return;
        };
        match b.values {
            None => self.pending_words |= b.asked & b.unloaded(),
            Some(run) => {
                assert!(
                    !self.values_pending_from(run.source),
                    "rule (a region per silent source): one region per source"
                );
                self.pending_values.push((run.region, run.source));
            }
        }
    }
}

impl Bulk {
    /// The acceptors whose words are not loaded (bit a).
    fn unloaded(&self) -> u64 {
        (0..self.words.len())
            .filter(|&a| self.words[a].is_none())
            .fold(0, |m, a| m | 1 << a)
    }
}

impl Replica {
    /// Words per buffer image (begin stamp, content, end stamp).
    fn buffer_words(&self) -> u32 {
        self.config.value_words() + 2
    }

    /// Whether the next catch-up of `k` is a bulk one: in a streak of catch-ups, and
    /// nothing abandoned earlier stands in the way (the value region, or my own words'
    /// region: my words are always read).
    pub(super) fn bulk_usable(&self, k: u64) -> bool {
        self.learn.streak && self.learn.bulk.refused_at != Some(k) && self.bulk_free()
    }

    /// Whether nothing stands in the way of a bulk (see [`Replica::bulk_usable`]).
    pub(super) fn bulk_free(&self) -> bool {
        let b = &self.learn.bulk;
        b.under_way.is_none()
            && b.free_value_region(value_regions(self.config.replicas))
                .is_some()
            && b.pending_words & (1 << self.me) == 0
            && matches!(self.role, Role::Follower)
    }

    /// Starts a bulk catch-up from my next slot `k`: every epoch's words of up to
    /// [`BULK_SLOTS`] slots at every live replica, myself included (loopback).
    pub(super) fn start_bulk(&mut self, k: u64) {
        assert_eq!(k, self.next_apply, "a bulk starts at my next slot");
        assert!(self.bulk_free(), "rule (bulk): nothing in the way");
        let slots = self.config.slots;
        let position = self.ring.position(k);
        let ask = self.learn.bulk.next_count.clamp(FIRST_BULK, BULK_SLOTS);
        let mut count = ask.min(slots - position);
        if !self.ring.recycles() {
            count = count.min(u32::try_from(u64::from(slots) - k).expect("below the slots"));
        }
        let pending = self.learn.bulk.pending_words;
        let asked = (0..self.config.replicas)
            .filter(|&a| a == self.me || !self.omega.suspects(a))
            .filter(|&a| pending & (1 << a) == 0)
            .fold(0u64, |m, a| m | 1 << a);
        for a in (0..self.config.replicas).filter(|&a| asked & (1 << a) != 0) {
            for e in 0..self.config.epochs {
                let gets = Op::GetWords {
                    local: self.scratch.bulk_words(a, e),
                    remote: self.shape.epoch_word(a, position, e),
                    count,
                    work_id: ids::bulk_words(a),
                };
                self.op(gets, Then::Ignore);
            }
        }
        self.learn.bulk.under_way = Some(Box::new(Bulk {
            from: k,
            count,
            asked,
            words: vec![None; usize::from(self.config.replicas)],
            values: None,
            progressed: self.now,
        }));
        self.moved = true;
        assert!(
            count >= 1 && asked & (1 << self.me) != 0,
            "my own words are read"
        );
    }

    /// Slots of `b` in which a live peer's words show a pair of this lap accepted and
    /// mine show none (rule (up-to-date leader)).
    fn ahead_of_me(&self, b: &Bulk) -> u32 {
        let (layout, ring) = (self.config.layout, self.ring);
        let epochs = self.config.epochs as usize;
        let accepted = |a: usize, i: u32| {
            let words = b.words[a].as_deref().unwrap_or_default();
            (0..epochs).any(|e| {
                let w = words.get(e * BULK_SLOTS as usize + i as usize).copied();
                w.and_then(|w| ring.state(layout, b.from + u64::from(i), w))
                    .is_some_and(|s| s.has_accepted())
            })
        };
        let me = usize::from(self.me);
        let ahead = (0..b.count)
            .filter(|&i| !accepted(me, i) && (0..b.words.len()).any(|a| a != me && accepted(a, i)))
            .count() as u32;
        assert!(ahead <= b.count, "slots of the bulk");
        ahead
    }

    /// Replica `r`'s process was replaced ([`Replica::peer_replaced`]): a bulk whose value
    /// rounds read `r`'s buffers is given up. Its later rounds would read the new, blank
    /// memory, and a blank begin stamp passes for one never written — zeros for whole
    /// values, applied (agreement broken, `velos vopr --overflow` seed 3518: round 0 read
    /// the old buffers, rounds 1 and 2 the new process's zeros). The bulk twin of the single
    /// read given up at a replacement (seed 6270).
    pub(super) fn bulk_source_replaced(&mut self, r: u16) {
        if self
            .learn
            .bulk
            .reading()
            .is_some_and(|(source, _)| source == r)
        {
            self.learn.bulk.abandon();
            self.event(|| Event::BulkAbandoned { source: r });
            self.moved = true;
        }
        assert!(
            self.learn
                .bulk
                .reading()
                .is_none_or(|(source, _)| source != r),
            "no bulk reads a replaced process's buffers"
        );
    }

    /// The turn's part: test what is out, give up on silent acceptors, free what
    /// abandoned reads held once they complete.
    pub(super) fn test_bulk(&mut self) {
        let pending = self.learn.bulk.pending_words;
        for a in (0..self.config.replicas).filter(|&a| pending & (1 << a) != 0) {
            let work_id = ids::bulk_words(a);
            self.op(Op::Test { work_id }, Then::BulkPendingWords(a));
        }
        for i in 0..self.learn.bulk.pending_values.len() {
            let region = self.learn.bulk.pending_values[i].0;
            let work_id = ids::bulk_values(region);
            self.op(Op::Test { work_id }, Then::BulkPendingValues(region));
        }
        let Some(b) = &self.learn.bulk.under_way else {
            return;
        };
        let waiting = b.asked & b.unloaded();
        let reading = self.learn.bulk.reading();
        let quiet = self.now - b.progressed > self.config.failure_timeout_ns;
        let silent: u64 = (0..self.config.replicas)
            .filter(|&a| quiet && self.omega.suspects(a))
            .fold(0, |m, a| m | 1 << a);
        let silent = |a: u16| silent & (1 << a) != 0;
        match reading {
            None => {
                let mut dropped = false;
                for a in (0..self.config.replicas).filter(|&a| waiting & (1 << a) != 0) {
                    if silent(a) {
                        // Its gets may land later: not asked again until they complete.
                        let b = self.learn.bulk.under_way.as_mut().expect("under way");
                        b.asked &= !(1 << a);
                        self.learn.bulk.pending_words |= 1 << a;
                        dropped = true;
                    } else {
                        let work_id = ids::bulk_words(a);
                        self.op(Op::Test { work_id }, Then::BulkWordsTest(a));
                    }
                }
                if dropped {
                    self.moved = true;
                    self.bulk_words_loaded();
                }
            }
            Some((source, _)) if silent(source) => {
                self.learn.bulk.abandon();
                self.event(|| Event::BulkAbandoned { source });
                self.moved = true;
            }
            Some((_, region)) => {
                let work_id = ids::bulk_values(region);
                self.op(Op::Test { work_id }, Then::BulkValuesTest);
            }
        }
    }

    /// The multi-word read of a value round: the run's buffers at its holder, from the
    /// bulk's first slot on.
    fn value_round(&self, from: u64, run: &Run) -> Op {
        Op::GetWords {
            local: self.scratch.bulk_values(run.region, 0),
            remote: self
                .shape
                .value_stamp(run.source, run.proposer, self.ring.position(from)),
            count: run.image.len() as u32,
            work_id: ids::bulk_values(run.region),
        }
    }

    /// A test of acceptor `a`'s word reads replied.
    pub(super) fn bulk_words_tested(&mut self, a: u16, reply: Reply) {
        let epochs = self.config.epochs;
        let Some(b) = &mut self.learn.bulk.under_way else {
            return;
        };
        match reply {
            Reply::Value(1) => {
                // Epoch-major, BULK_SLOTS apart: up to the last epoch's last slot read.
                let loads = Op::LoadWords {
                    loc: self.scratch.bulk_words(a, 0),
                    count: (epochs - 1) * BULK_SLOTS + b.count,
                };
                self.op_first(loads, Then::BulkWords(a));
            }
            Reply::Failed(_) => {
                b.asked &= !(1 << a); // complete, if failed: nothing more lands
                self.bulk_words_loaded();
            }
            _ => {}
        }
    }

    /// Acceptor `a`'s words were loaded.
    pub(super) fn bulk_words(&mut self, a: u16, reply: Reply) {
        let Reply::Words(words) = reply else {
            panic!("a load of words replies words: {reply:?}");
        };
        if let Some(b) = &mut self.learn.bulk.under_way {
            b.words[usize::from(a)] = Some(words.as_slice().to_vec());
        }
        self.bulk_words_loaded();
    }

    /// Slot `from + i`'s chosen epoch, state and holders as the words read show under the
    /// configuration I know for it now.
    fn bulk_decision(&self, b: &Bulk, i: u32) -> Option<(u32, AcceptorState, Vec<u16>)> {
        let slot = b.from + u64::from(i);
        let members = (self.membership.at(slot), self.membership.voters(slot));
        (0..self.config.epochs).find_map(|e| {
            let replies: Vec<Option<u64>> = b
                .words
                .iter()
                .map(|w| w.as_ref().map(|w| w[(e * BULK_SLOTS + i) as usize]))
                .collect();
            let chosen =
                majority_decision((self.config.layout, self.ring), slot, members, &replies);
            chosen.map(|(holders, state)| (e, state, holders))
        })
    }

    /// Once every acceptor asked answered: the run to read, or nothing chosen at the
    /// first slot (the single catch-up takes over).
    fn bulk_words_loaded(&mut self) {
        let ready = |b: &Bulk| b.values.is_none() && b.asked & b.unloaded() == 0;
        if !self.learn.bulk.under_way.as_deref().is_some_and(ready) {
            return;
        }
        let mut b = self.learn.bulk.under_way.take().expect("under way");
        let Some((epoch, state, holders)) = self.bulk_decision(&b, 0) else {
            self.learn.bulk.ahead = self.ahead_of_me(&b);
            self.learn.bulk.refused_at = Some(b.from);
            self.moved = true;
            return;
        };
        self.learn.bulk.ahead = 0; // something chosen: the others are not ahead here
        let proposer = ProposerId::from_value_tag(state.accepted_value).expect("accepted");
        // Rule (a region per silent source): not from a holder whose abandoned round may
        // still land (a crashed peer's never does until it is replaced); if every holder
        // has one, the single catch-up takes this slot.
        let free: Vec<u16> = (holders.iter().copied())
            .filter(|&a| !self.learn.bulk.values_pending_from(a))
            .collect();
        if free.is_empty() {
            self.learn.bulk.refused_at = Some(b.from);
            self.moved = true;
            return;
        }
        let source = self.holder_to_read(&free);
        let regions = value_regions(self.config.replicas);
        let region = (self.learn.bulk.free_value_region(regions))
            .expect("rule (a region per silent source): a bulk starts with a free region");
        let mut slots = vec![(epoch, state)];
        for i in 1..b.count {
            match self.bulk_decision(&b, i) {
                Some((e, s, h))
                    if h.contains(&source)
                        && ProposerId::from_value_tag(s.accepted_value) == Some(proposer) =>
                {
                    slots.push((e, s));
                }
                _ => break,
            }
        }
        let words = slots.len() * self.buffer_words() as usize;
        let run = Run {
            source,
            proposer,
            slots,
            image: vec![0; words],
            round: 0,
            region,
        };
        self.op(self.value_round(b.from, &run), Then::Ignore);
        b.values = Some(run);
        b.progressed = self.now;
        self.learn.bulk.under_way = Some(b);
        self.moved = true;
    }

    /// A test of the value round's read replied.
    pub(super) fn bulk_values_tested(&mut self, reply: Reply) {
        let per = self.buffer_words();
        let Some(b) = &mut self.learn.bulk.under_way else {
            return;
        };
        let run = b.values.as_ref().expect("a value round is out");
        match reply {
            Reply::Value(1) => {
                let loads = Op::LoadWords {
                    loc: self.scratch.bulk_values(run.region, 0),
                    count: run.slots.len() as u32 * per,
                };
                self.op_first(loads, Then::BulkValues);
            }
            Reply::Failed(_) => {
                self.learn.bulk.under_way = None; // complete, if failed: nothing lands
                self.moved = true;
            }
            _ => {}
        }
    }

    /// The value round's words were loaded: keep this round's part of each buffer (end
    /// stamps, contents, begin stamps), post the next round, or apply.
    pub(super) fn bulk_values(&mut self, reply: Reply) {
        let Reply::Words(words) = reply else {
            panic!("a load of words replies words: {reply:?}");
        };
        let per = self.buffer_words() as usize;
        let Some(b) = &mut self.learn.bulk.under_way else {
            return;
        };
        let run = b
            .values
            .as_mut()
            .expect("values are loaded in a value round");
        let words = words.as_slice();
        assert_eq!(words.len(), run.image.len(), "the run's buffers");
        for (image, read) in run.image.chunks_mut(per).zip(words.chunks(per)) {
            match run.round {
                0 => image[per - 1] = read[per - 1],
                1 => image[1..per - 1].copy_from_slice(&read[1..per - 1]),
                _ => image[0] = read[0],
            }
        }
        b.progressed = self.now;
        self.moved = true;
        if run.round < 2 {
            run.round += 1;
            let b = self.learn.bulk.under_way.as_deref().expect("under way");
            let run = b.values.as_ref().expect("a run");
            self.op(self.value_round(b.from, run), Then::Ignore);
            return;
        }
        let b = self.learn.bulk.under_way.take().expect("under way");
        self.apply_bulk(&b);
    }

    /// Rule (bulk checked at apply): applies the run's slots in order while each is still
    /// chosen under the configuration known when it is applied, with the state the run
    /// read, and its buffer is a whole value of it.
    fn apply_bulk(&mut self, b: &Bulk) {
        let per = self.buffer_words() as usize;
        let before = self.next_apply;
        let run = b.values.as_ref().expect("the values were read");
        for (i, (&(epoch, state), image)) in run.slots.iter().zip(run.image.chunks(per)).enumerate()
        {
            let slot = b.from + i as u64;
            if slot != self.next_apply || !matches!(self.role, Role::Follower) {
                break;
            }
            let same = |(e, s, _): (u32, AcceptorState, Vec<u16>)| (e, s) == (epoch, state);
            if !self.bulk_decision(b, i as u32).is_some_and(same) {
                break; // the configuration changed under the run
            }
            // Rule (overtaken buffer), as for a single read: the slot is retired.
            if self.overtaken(slot, image) {
                self.snap.behind = true;
                break;
            }
            let value = self.buffer_value(slot, (epoch, state.accepted_proposal), image);
            let Some((value, _)) = value else {
                break;
            };
            self.learn.streak = true;
            self.apply(slot, value);
        }
        let applied = self.next_apply - before;
        self.learn.bulk.next_count = match applied == u64::from(b.count) {
            true => (b.count * 2).min(BULK_SLOTS),
            false => FIRST_BULK,
        };
        assert!(self.next_apply >= before, "rule (no holes): in order only");
    }
}
