//! The follower's turn: learn the next slot from the local words, or catch up by reading
//! its words of every epoch at every live replica (see [`crate::log::learner`]): a pair
//! accepted by a majority in any epoch is chosen (epochs carry what earlier ones chose, see
//! [`crate::freeze`]).
//!
//! A slot can stay unlearnable that way: decided by a majority one of whose members has
//! crashed, and not accepted by enough live acceptors (a leader that crashed before its
//! accept reached them, or an acceptor that had promised a higher proposal to a proposer
//! that vanished). The leader has moved past it and will not propose in it again. So a
//! follower whose catch-ups of the next slot keep finding a value accepted but no majority
//! repairs the slot itself: it runs the slot's consensus as a proposer (a one-slot
//! [`crate::log::leader`] window), adopting what a majority shows, else deciding a no-op.
//! That is Paxos, safe against any other proposer. A leader may still be working on the
//! slot, so the repair waits until the catch-ups have found the slot that way for a failure
//! timeout, and a repair that aborts gives up instead of outbidding (it may start again
//! after another timeout): a leader and a repairer never duel.

use super::{CatchUp, Purpose, Replica, Stage, Then, ValueRead};
use crate::log::config::ids;
use crate::log::event::Event;
use crate::log::leader::Leader;
use crate::log::learner::{local_decision, majority_decision};
use crate::proposal::ProposerId;
use velos_rdma::Op;

impl Replica {
    /// The follower's turn: learn the next slot locally, or catch up by reading it.
    pub(super) fn follow(&mut self) {
        let k = self.next_apply;
        let end = !self.ring.recycles() && k >= u64::from(self.config.slots);
        if end || !self.learn.reads.is_empty() || self.learn.bulk.under_way.is_some() {
            return;
        }
        let waiting = self.snap.recovering; // rule (recovered behind)
        if self.snap.behind && !waiting && self.snap.transfer.is_none() && !self.snapshot_past(k) {
            // Rule (behind only with a source): nobody trusted holds a snapshot past k, so
            // k is not retired (a majority's snapshots would include one live peer's):
            // leading from k is safe — a later lap's word still stops a proposer (lemma
            // (overtaken)). Staying behind with nothing to copy kept the replica Ω chose
            // from leading for good, and the log stopped.
            self.snap.behind = false;
        }
        // Rule (behind copies): a replica behind the ring (overtaken while leading, and a
        // trusted peer holds a snapshot past k, checked above) copies before anything else.
        // Learning k locally instead can loop for ever: its own words may prove k decided
        // while the value buffer they name was rewritten for a later lap (seed 18960).
        let copy = self.snap.transfer.is_some() || self.snap.behind;
        if copy || self.retired_here(k) || self.stuck_behind_snapshot(k) {
            self.run_transfer(); // k was retired (or is out of reach): copy a snapshot
            return;
        }
        if self.learn.repair.is_some() {
            self.run_repair();
            if self.next_apply != k || !self.learn.reads.is_empty() {
                return;
            }
        }
        let layout = self.config.layout;
        let ring = self.ring;
        let local =
            self.learn.words.iter().enumerate().find_map(|(e, words)| {
                local_decision((layout, ring), words, k).map(|s| (e as u32, s))
            });
        #[cfg(feature = "mutations")]
        let local = local.or_else(|| self.learn_from_one(k));
        if let Some((epoch, state)) = local {
            self.learn.streak = false;
            self.learn(k, self.me, epoch, state);
            return;
        }
        match &self.learn.catch_up {
            Some(c) if c.slot == k => {
                let members = (self.membership.at(k), self.membership.voters(k));
                let chosen = c.replies.iter().enumerate().find_map(|(e, replies)| {
                    majority_decision((layout, ring), k, members, replies).map(|d| (e as u32, d))
                });
                if let Some((epoch, (holders, state))) = chosen {
                    self.learn.catch_up = None;
                    let from = self.holder_to_read(&holders);
                    self.learn.streak = true;
                    self.learn(k, from, epoch, state);
                } else if (0..self.config.replicas)
                    .all(|a| c.answered(a) || !c.asked[usize::from(a)] || self.omega.suspects(a))
                {
                    // Nothing chosen among those asked: try again later (asking whoever is
                    // trusted then: a peer suspected when this catch-up started and trusted
                    // again since was never asked, and waiting for its answer stalled the
                    // follower for good), or repair the slot if something accepted keeps
                    // showing.
                    let accepted = c
                        .replies
                        .iter()
                        .flatten()
                        .flatten()
                        .any(|&w| ring.state(layout, k, w).is_some_and(|s| s.has_accepted()));
                    let seen = std::mem::take(&mut self.learn.catch_up).map(|c| c.replies);
                    self.learn.last_progress = self.now;
                    let since = *self.learn.stuck_since.get_or_insert(self.now);
                    // Rule (decided past me): a trusted peer's snapshot past k proves k
                    // decided, whatever the words I can read show: decided under voters
                    // I cannot reach or a configuration I have not learned (a replica
                    // told late of a replacement, lagging at a slot whose other voter
                    // then crashed, found nothing accepted among those it asked and
                    // waited for a leader for good, while the replacement could not
                    // lead without its trust: `velos vopr --seeds 6270..6271`). It stays
                    // stuck, and copies that snapshot after a failure timeout.
                    let past = self.snapshot_past(k);
                    if !accepted && !past {
                        self.learn.stuck_since = None;
                    } else if accepted
                        && self.now - since >= self.config.failure_timeout_ns
                        && self.learn.repair.is_none()
                    {
                        self.term += 1;
                        let repair = Leader::repair(
                            self.me,
                            self.term,
                            k,
                            (self.ballot_floor.clone(), seen.expect("a catch-up ended")),
                            self.membership.clone(),
                        );
                        self.learn.repair = Some(Box::new(repair));
                        let term = self.term;
                        self.event(|| Event::Repairing { slot: k, term });
                        self.learn.streak = true;
                        self.run_repair();
                    }
                }
            }
            _ if self.now.saturating_sub(self.learn.last_progress)
                > self.config.catch_up_after_ns =>
            {
                if self.bulk_usable(k) {
                    self.learn.catch_up = None;
                    self.start_bulk(k);
                } else {
                    self.start_catch_up(k);
                }
            }
            _ => {}
        }
    }

    /// The `learn-from-one` mutant: my own acceptor's accepted pair of `k`, in any epoch,
    /// taken for a decision.
    #[cfg(feature = "mutations")]
    fn learn_from_one(&self, k: u64) -> Option<(u32, crate::word::AcceptorState)> {
        if self.config.mutation != crate::slot::Mutation::LearnFromOne {
            return None;
        }
        let (layout, ring) = (self.config.layout, self.ring);
        self.learn.words.iter().enumerate().find_map(|(e, words)| {
            let state = ring.state(layout, k, *words.get(&k)?)?;
            state.has_accepted().then_some((e as u32, state))
        })
    }

    /// The holder of a chosen value to read it from: myself, else one I trust, else the
    /// first (a read that then stalls is given up).
    pub(super) fn holder_to_read(&self, holders: &[u16]) -> u16 {
        assert!(!holders.is_empty(), "a chosen value has holders");
        let mine = holders.iter().copied().find(|&a| a == self.me);
        mine.or_else(|| holders.iter().copied().find(|&a| !self.omega.suspects(a)))
            .unwrap_or(holders[0])
    }

    /// Whether a peer I trust holds a snapshot past `k`.
    pub(super) fn snapshot_past(&self, k: u64) -> bool {
        self.trusted_past(&self.beat.points, k)
    }

    /// Whether a trusted peer's heartbeat showed it applied past `k` (its snapshot point
    /// plus how far past it it applied): the log reached beyond `k` (rule (term catch-up)).
    pub(super) fn reached_past(&self, k: u64) -> bool {
        self.trusted_past(&self.beat.reached, k)
    }

    /// Whether a peer I trust is past `k` by `positions` (one per replica, from its
    /// heartbeats).
    fn trusted_past(&self, positions: &[u64], k: u64) -> bool {
        // The position first: it is a load and a compare, and almost always false (a
        // leader asks at every turn, rule (up-to-date leader)); suspicion only where it is
        // past.
        (0..self.config.replicas)
            .any(|a| positions[usize::from(a)] > k && a != self.me && !self.omega.suspects(a))
    }

    /// Whether catch-ups of `k` have found no majority for a failure timeout while a live
    /// peer holds a snapshot past `k`: copy it rather than wait. A slot decided by a
    /// configuration that was replaced may have no live majority left to read it from
    /// (its members removed, then crashed) — no repair can decide it either, but a peer
    /// that applied it has it in its snapshot ([`crate::log::membership`]).
    fn stuck_behind_snapshot(&self, k: u64) -> bool {
        let stuck = self
            .learn
            .stuck_since
            .is_some_and(|s| self.now - s >= self.config.failure_timeout_ns);
        stuck && self.snapshot_past(k)
    }

    pub(super) fn learn(
        &mut self,
        slot: u64,
        acceptor: u16,
        epoch: u32,
        state: crate::word::AcceptorState,
    ) {
        let proposer = ProposerId::from_value_tag(state.accepted_value).expect("accepted");
        self.learn.reads.push_back(ValueRead {
            purpose: Purpose::Learn,
            slot,
            acceptor,
            proposer,
            epoch,
            proposal: state.accepted_proposal,
            stage: Stage::Queued,
            words: Vec::new(),
            bank: 0,
            started: 0,
        });
    }

    pub(super) fn start_catch_up(&mut self, k: u64) {
        let n = usize::from(self.config.replicas);
        let mut c = CatchUp {
            slot: k,
            replies: vec![vec![None; n]; self.config.epochs as usize],
            asked: vec![false; n],
        };
        // My own words too, by loopback gets: the local loads skip epochs above an
        // unfrozen word, but a slot moves up once a majority froze, maybe without me.
        let peers: Vec<u16> = (0..self.config.replicas)
            .filter(|&a| a == self.me || !self.omega.suspects(a))
            .collect();
        for a in peers {
            c.asked[usize::from(a)] = true;
            for e in 0..self.config.epochs {
                let get = Op::Get {
                    local: self.scratch.catch_up(a, e),
                    remote: self.shape.epoch_word(a, self.ring.position(k), e),
                    work_id: ids::catch_up(a),
                };
                self.op(get, Then::Ignore);
            }
        }
        self.learn.catch_up = Some(c);
    }

    /// One step of the repair of the next slot: open it, settle it, apply it if decided.
    fn run_repair(&mut self) {
        let Some(mut repair) = self.learn.repair.take() else {
            return;
        };
        let mut cmds = std::mem::take(&mut self.bufs.cmd_buf);
        let words = &self.learn.words[0];
        let room = self.room();
        repair.open_slots(&self.config, room, |s| words.get(&s).copied(), &mut cmds);
        let mut progress = crate::log::leader::Progress::default();
        repair.step(&self.config, &mut cmds, &mut progress, true); // a repair gives up
        self.report(&mut progress.events);
        assert!(
            progress.committed.is_empty(),
            "a repair proposes no client value"
        );
        for (floor, &b) in self.ballot_floor.iter_mut().zip(&repair.ballots) {
            *floor = (*floor).max(b);
        }
        let term = repair.term;
        if repair.gave_up {
            // Back to catch-ups; a repair may start again after another failure timeout.
            self.learn.stuck_since = Some(self.now);
            return; // its operations in flight answer to nobody now
        }
        self.learn.repair = Some(repair);
        self.moved |= progress.moved || !cmds.is_empty();
        self.issue(term, &mut cmds);
        self.bufs.cmd_buf = cmds;
        for (slot, value) in progress.apply {
            if slot == self.next_apply {
                self.apply(slot, value); // ends the repair
                // A slot that needed repair is seldom alone (the slots a crashed leader
                // decided last): the next one's catch-up starts at once (`streak`).
            }
        }
    }
}
