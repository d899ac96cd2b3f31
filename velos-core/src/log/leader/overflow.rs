//! The leader's overflow fallback: a slot whose next proposal number would pass the
//! threshold freezes its words of the current epoch, reads the value the frozen majority
//! carries (if any) and continues in the next epoch, where proposal numbers start afresh
//! (see [`crate::freeze`] for the lemmas).

use super::{Leader, SlotAt, Value, emit};
use crate::freeze::{Carry, Freezer};
use crate::log::config::LogConfig;
use crate::log::event::Event;
use crate::slot::{Outcome, SlotCommand};

impl Leader {
    /// `slot` is in [`Outcome::Overflow`]: start freezing its epoch, or follow the freeze
    /// under way. Whether something moved.
    pub(super) fn overflow(
        &mut self,
        config: &LogConfig,
        slot: u64,
        out: &mut Vec<(SlotAt, SlotCommand)>,
        events: &mut Vec<Event>,
    ) -> bool {
        let run = self.window.get_mut(slot).expect("present");
        assert_eq!(
            run.proposer.outcome(),
            Outcome::Overflow,
            "Freeze: only an overflowed slot freezes"
        );
        let Some(freezer) = &mut run.freezer else {
            if run.epoch + 1 >= config.epochs {
                // Every epoch's numbers are used up: the log cannot decide this slot.
                self.exhausted = Some(self.exhausted.map_or(slot, |e| e.min(slot)));
                return false;
            }
            // From now on no accept of this term in this epoch vouches for earlier slots
            // (see the previous_decision lemma): this slot is decided in another epoch.
            self.overflowed[run.epoch as usize] = true;
            let predicted: Vec<u64> = (0..config.replicas)
                .map(|a| run.proposer.predicted_word(a))
                .collect();
            let mut cmds = Vec::new();
            let ring = config.ring();
            let at = (config.layout, ring.tag(slot), ring.recycled(slot));
            let members = self.membership.at(slot).0;
            let absent = members & !self.membership.voters(slot).0;
            run.freezer = Some(Freezer::start_at(
                at,
                (members, absent),
                &predicted,
                &mut cmds,
            ));
            events.push(Event::Frozen {
                slot,
                epoch: run.epoch,
            });
            emit(out, slot, run.epoch, true, &mut cmds);
            return true;
        };
        if freezer.overtaken() {
            self.overtaken = true; // lemma (overtaken): the instance was retired
            return false;
        }
        match freezer.outcome() {
            None => {
                let mut cmds = Vec::new();
                let retried = freezer.retry_lost(&mut cmds);
                emit(out, slot, run.epoch, true, &mut cmds);
                retried
            }
            Some(_) if run.carrying => false,
            Some(Carry::Nothing) => {
                self.advance(config, slot, None, out);
                true
            }
            Some(Carry::Read {
                acceptor,
                proposer,
                proposal,
            }) => {
                run.carrying = true;
                run.carried_from = acceptor;
                let cmd = SlotCommand::ReadValue {
                    acceptor,
                    proposer,
                    proposal,
                };
                emit(out, slot, run.epoch, true, &mut vec![cmd]);
                true
            }
        }
    }

    /// The value the frozen majority carries was read, and whether it is my own (lemma
    /// (own adoption)); `None`: the read failed, the holder's word is confirmed again, or
    /// another majority found.
    pub(super) fn on_carry_read(
        &mut self,
        config: &LogConfig,
        slot: u64,
        value: Option<(Value, bool)>,
        out: &mut Vec<(SlotAt, SlotCommand)>,
    ) {
        let run = self.window.get_mut(slot).expect("present");
        assert!(run.carrying, "Freeze: a carry read under way");
        run.carrying = false;
        match value {
            #[cfg(feature = "mutations")]
            Some(_) if config.mutation == crate::slot::Mutation::DropCarry => {
                self.advance(config, slot, None, out);
            }
            Some(v) => self.advance(config, slot, Some(v), out),
            None => {
                // The holder that was read (the freezer's choice may have moved meanwhile:
                // forgetting another one looped for ever, `--overflow` seed 4832).
                let acceptor = run.carried_from;
                let freezer = run.freezer.as_mut().expect("freezing");
                let mut cmds = Vec::new();
                freezer.forget(acceptor, &mut cmds);
                emit(out, slot, run.epoch, true, &mut cmds);
            }
        }
    }

    /// Moves `slot` to its next epoch, carrying `carry` (and whether it is my own value):
    /// a fresh proposer there, prepared at that epoch's ballot.
    fn advance(
        &mut self,
        config: &LogConfig,
        slot: u64,
        carry: Option<(Value, bool)>,
        out: &mut Vec<(SlotAt, SlotCommand)>,
    ) {
        let cfg = self.slot_config(config, slot);
        let from = self.window[slot].epoch;
        let mut proposer = self.proposer_at(cfg, (slot, from + 1), None);
        let run = self.window.get_mut(slot).expect("present");
        assert!(
            run.freezer.as_ref().is_some_and(|f| f.outcome().is_some()),
            "Freeze: a majority frozen before the next epoch"
        );
        run.epoch += 1;
        run.seeded = 0; // its next epoch is predicted afresh, not by my seed
        run.freezer = None;
        (run.carry, run.carry_mine) = carry.map_or((None, false), |(v, m)| (Some(v), m));
        run.adopted = None;
        run.adopted_mine = false;
        run.reading = false;
        let e = run.epoch as usize;
        let mut cmds = Vec::new();
        proposer.prepare_above(self.ballots[e].saturating_sub(1), &mut cmds);
        self.ballots[e] = self.ballots[e].max(proposer.proposal());
        run.proposer = proposer;
        Self::note_reads(run, &cmds);
        emit(out, slot, run.epoch, false, &mut cmds);
        assert_eq!(run.epoch, from + 1, "Freeze: one epoch up");
    }
}
