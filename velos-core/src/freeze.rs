//! The overflow fallback's first half: freezing one epoch of a slot, sans-IO.
//!
//! A slot's acceptor state lives in one word per *epoch*. When the next proposal number of
//! a slot would pass the overflow threshold ([`crate::slot::Outcome::Overflow`]), the
//! proposer freezes the slot's words of the current epoch: a CAS at every acceptor that
//! sets `min_proposal` to the field's maximum F and keeps the accepted fields. Every
//! proposal number is at most the threshold, below F, so a frozen word refuses every
//! prepare (n > F never holds) and every accept (n ≥ F never holds), and nobody CASes a
//! frozen word into anything else: it is final. The freeze is a prepare with proposal ∞.
//!
//! Once a majority F of words is confirmed frozen (by a CAS result, never by a
//! prediction), the slot moves to the next epoch carrying v*, the value of the highest
//! accepted proposal among them (or nothing, if none accepted).
//!
//! Lemma (carry): if a value v was, or will ever be, chosen in epoch e, v* = v. Proof: a
//! majority C accepted ⟨b, v⟩ before its words froze; C meets F in some acceptor, whose
//! frozen word shows an accepted proposal ≥ b, and every proposal ≥ b accepted in epoch e
//! carries v (Paxos within the epoch); after F froze, no majority can accept in epoch e
//! any more (every majority meets F). So the highest pair in F names v.
//!
//! Lemma (epochs): if epoch e + 1 proposes only v* (when its own prepare finds nothing
//! accepted in e + 1), then whatever is chosen in e + 1 is v* for some frozen majority,
//! which is the value chosen in e if there is one. Two proposers may compute different
//! v* only when nothing was chosen in e; Paxos within e + 1 then picks one.

use crate::proposal::ProposerId;
use crate::slot::SlotCommand;
use crate::word::{AcceptorState, Lap, WordLayout};

/// What the slot must carry into its next epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Carry {
    /// Nothing was accepted in the frozen majority: the next epoch is free.
    Nothing,
    /// Read this value buffer (stamp at least `proposal` of the frozen epoch) and carry it.
    Read {
        /// An acceptor whose frozen word holds the pair.
        acceptor: u16,
        /// Whose buffer.
        proposer: ProposerId,
        /// The accepted proposal.
        proposal: u64,
    },
}

/// Freezes a slot's words of one epoch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Freezer {
    layout: WordLayout,
    /// The instance tag of the slot, and whether it reuses its ring position
    /// (`crate::log::ring`): a previous lap's word is frozen as ⊥ of this instance.
    tag: u16,
    recycled: bool,
    /// Some word showed a later lap: the instance was retired, nothing more is posted.
    overtaken: bool,
    /// The acceptors that vote in the slot (bit a): only they are frozen and counted.
    members: u64,
    /// Members whose process is no more the incarnation the slot's configuration names:
    /// sent no freeze CAS, counted in no majority (rule (no amnesia)).
    absent: u64,
    /// Per acceptor: the freeze CAS in flight (`id`, expected word), if any.
    in_flight: Vec<Option<(u64, u64)>>,
    /// Per acceptor: the frozen state, once confirmed.
    frozen: Vec<Option<AcceptorState>>,
    /// Per acceptor: the expected word of its freeze CAS that was lost, if one was (and
    /// none is in flight or confirmed since).
    lost: Vec<Option<u64>>,
    next_id: u64,
}

impl Freezer {
    /// Whether `word` is frozen.
    pub fn is_frozen(layout: WordLayout, word: u64) -> bool {
        layout.decode(word).min_proposal == layout.max_proposal()
    }

    /// The frozen form of `word`: the same state with `min_proposal` at the maximum.
    pub fn frozen(layout: WordLayout, word: u64) -> u64 {
        let state = layout.decode(word);
        let frozen = layout
            .encode(AcceptorState {
                min_proposal: layout.max_proposal(),
                ..state
            })
            .expect("the maximum fits its own field");
        assert!(Freezer::is_frozen(layout, frozen), "Freeze: frozen form");
        frozen
    }

    /// Starts freezing: one CAS per acceptor, from the predicted word (posted behind every
    /// CAS of the slot still in flight on that queue pair).
    pub fn start(layout: WordLayout, predicted: &[u64], out: &mut Vec<SlotCommand>) -> Freezer {
        let all = crate::slot::SlotConfig::all(predicted.len() as u16);
        Freezer::start_at((layout, 0, false), (all, 0), predicted, out)
    }

    /// [`Freezer::start`] for the instance tagged `tag` of a ring position (`recycled`: it
    /// reuses the position), whose voting acceptors are `members` (bit a: acceptor a)
    /// except the `absent` ones (rule (no amnesia): a majority is of `members`).
    pub fn start_at(
        (layout, tag, recycled): (WordLayout, u16, bool),
        (members, absent): (u64, u64),
        predicted: &[u64],
        out: &mut Vec<SlotCommand>,
    ) -> Freezer {
        assert!(!predicted.is_empty(), "Freeze: some acceptor");
        assert!(members != 0, "Freeze: some member");
        let mut freezer = Freezer {
            layout,
            tag,
            recycled,
            overtaken: false,
            members,
            absent,
            in_flight: vec![None; predicted.len()],
            frozen: vec![None; predicted.len()],
            lost: vec![None; predicted.len()],
            next_id: 0,
        };
        for (a, &word) in predicted.iter().enumerate() {
            if (members & !absent) >> a & 1 == 1 {
                freezer.post(a, word, out);
            }
        }
        assert!(
            freezer.overtaken
                || (0..predicted.len())
                    .all(|a| (members & !absent) >> a & 1 == 0 || freezer.in_flight[a].is_some()),
            "Freeze: one CAS per member in flight"
        );
        freezer
    }

    /// The frozen form of `word` for this instance: `None` for a later lap's word.
    fn frozen_here(&self, word: u64) -> Option<u64> {
        let state = self.layout.state_at(self.tag, self.recycled, word)?;
        let word = self.layout.encode(state).expect("a decoded state encodes");
        Some(Freezer::frozen(self.layout, word))
    }

    fn post(&mut self, a: usize, expected: u64, out: &mut Vec<SlotCommand>) {
        let Some(desired) = self.frozen_here(expected) else {
            // Lemma (overtaken, `crate::log::ring`): no CAS on a later lap's word.
            self.overtaken = true;
            return;
        };
        self.next_id += 1;
        let id = self.next_id;
        self.lost[a] = None;
        self.in_flight[a] = Some((id, expected));
        out.push(SlotCommand::Cas {
            id,
            acceptor: a as u16,
            expected,
            desired,
        });
    }

    /// Some word showed a later lap of the ring position: the instance was retired.
    pub fn overtaken(&self) -> bool {
        self.overtaken
    }

    fn majority(&self) -> usize {
        self.members.count_ones() as usize / 2 + 1
    }

    /// The freeze CAS `id` on `acceptor` returned `actual`: confirmed frozen, or posted
    /// again from the word it found (a word changes only finitely often before it freezes:
    /// its proposal numbers grow up to the threshold).
    pub fn on_cas(&mut self, acceptor: u16, id: u64, actual: u64, out: &mut Vec<SlotCommand>) {
        let a = usize::from(acceptor);
        let Some((posted, expected)) = self.in_flight[a] else {
            panic!("Freeze: a completion for a posted CAS");
        };
        assert_eq!(posted, id, "Freeze: one CAS in flight per acceptor");
        self.in_flight[a] = None;
        let current = self.layout.lap(self.tag, self.recycled, actual);
        if actual == expected {
            // The CAS wrote the frozen form of `expected`.
            let frozen = self
                .frozen_here(actual)
                .expect("posted on this instance's word");
            self.frozen[a] = Some(self.layout.decode(frozen));
        } else if matches!(current, Lap::Current(_)) && Freezer::is_frozen(self.layout, actual) {
            self.frozen[a] = Some(self.layout.decode(actual));
        } else {
            self.post(a, actual, out);
        }
        assert!(
            self.overtaken || self.frozen[a].is_some() || self.in_flight[a].is_some(),
            "Freeze: confirmed or retried"
        );
    }

    /// The freeze CAS `id` on `acceptor` will never answer (the acceptor is gone, or is
    /// suspected for now).
    pub fn on_cas_lost(&mut self, acceptor: u16, id: u64) {
        let a = usize::from(acceptor);
        let Some((posted, expected)) = self.in_flight[a] else {
            panic!("Freeze: a loss for the CAS in flight");
        };
        assert_eq!(posted, id, "Freeze: a loss for the CAS in flight");
        self.in_flight[a] = None;
        self.lost[a] = Some(expected);
    }

    /// Rule (hopeless freeze): if the acceptors confirmed frozen and those with a CAS in
    /// flight are fewer than a majority, posts the lost CASes again (from the word each
    /// expected; a wrong one fails and is posted again from the word found): an acceptor
    /// suspected for a while answers again once it is back. Whether it posted any.
    pub fn retry_lost(&mut self, out: &mut Vec<SlotCommand>) -> bool {
        let hopes = (0..self.frozen.len())
            .filter(|&a| self.frozen[a].is_some() || self.in_flight[a].is_some())
            .count();
        if self.overtaken || hopes >= self.majority() {
            return false;
        }
        let lost: Vec<(usize, u64)> = (0..self.lost.len())
            .filter_map(|a| self.lost[a].take().map(|w| (a, w)))
            .filter(|&(a, _)| self.absent >> a & 1 == 0)
            .collect();
        for &(a, expected) in &lost {
            self.post(a, expected, out);
        }
        assert!(
            self.lost.iter().all(Option::is_none) || self.overtaken,
            "rule (hopeless freeze): every lost CAS posted again"
        );
        !lost.is_empty()
    }

    /// The value read from `acceptor`'s frozen pair failed: confirm its word again (a
    /// frozen word never changes; if the acceptor is gone, the CAS is lost and the
    /// remaining acceptors must make the majority).
    pub fn forget(&mut self, acceptor: u16, out: &mut Vec<SlotCommand>) {
        let a = usize::from(acceptor);
        let state = self.frozen[a]
            .take()
            .expect("Freeze: forget a confirmed word");
        if self.in_flight[a].is_none() && self.absent >> a & 1 == 0 {
            let word = self.layout.encode(state).expect("a decoded word encodes");
            self.post(a, word, out);
        }
        assert!(self.frozen[a].is_none(), "Freeze: forgotten");
    }

    /// Acceptor `a`'s memory now belongs to a process started blank in its place (rule
    /// (no amnesia)): it is sent no freeze CAS again; what it confirmed counts still.
    pub fn acceptor_replaced(&mut self, a: u16) {
        self.absent |= 1 << a;
        self.lost[usize::from(a)] = None;
    }

    /// Whether freeze CAS `id` on `acceptor` is this freezer's one in flight.
    pub fn owns(&self, acceptor: u16, id: u64) -> bool {
        self.in_flight[usize::from(acceptor)].is_some_and(|(i, _)| i == id)
    }

    /// The words confirmed frozen so far (`None`: not yet).
    pub fn confirmed(&self) -> &[Option<AcceptorState>] {
        &self.frozen
    }

    /// Once a majority is confirmed frozen: what the next epoch must carry (the highest
    /// accepted pair among every word confirmed frozen, a superset of a majority).
    pub fn outcome(&self) -> Option<Carry> {
        let confirmed: Vec<(usize, AcceptorState)> = self
            .frozen
            .iter()
            .enumerate()
            .filter_map(|(a, s)| s.map(|s| (a, s)))
            .collect();
        if confirmed.len() < self.majority() {
            return None;
        }
        // Among the holders of the highest accepted pair, one still counted here: an
        // absent one's buffer was in the memory its process lost (rule (no amnesia)).
        let carry = confirmed
            .iter()
            .filter(|(_, s)| s.has_accepted())
            .max_by_key(|&&(a, s)| (s.accepted_proposal, self.absent >> a & 1 == 0))
            .map_or(Carry::Nothing, |&(a, s)| Carry::Read {
                acceptor: a as u16,
                proposer: ProposerId::from_value_tag(s.accepted_value)
                    .expect("an accepted value names a proposer"),
                proposal: s.accepted_proposal,
            });
        Some(carry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: WordLayout = WordLayout::VELOS;

    fn word(min: u64, accepted: u64, value: u16) -> u64 {
        L.encode(AcceptorState {
            min_proposal: min,
            accepted_proposal: accepted,
            accepted_value: value,
            ..AcceptorState::default()
        })
        .unwrap()
    }

    fn cas_of(cmd: &SlotCommand) -> (u64, u16, u64, u64) {
        match *cmd {
            SlotCommand::Cas {
                id,
                acceptor,
                expected,
                desired,
            } => (id, acceptor, expected, desired),
            ref other => panic!("a CAS, not {other:?}"),
        }
    }

    #[test]
    fn freeze_posts_one_cas_per_acceptor_keeping_the_accepted_fields() {
        let mut out = Vec::new();
        let predicted = [word(5, 4, 1), word(7, 0, 0), word(5, 4, 1)];
        let f = Freezer::start(L, &predicted, &mut out);
        assert_eq!(out.len(), 3);
        for (cmd, &w) in out.iter().zip(&predicted) {
            let (_, _, expected, desired) = cas_of(cmd);
            assert_eq!(expected, w);
            let (from, to) = (L.decode(w), L.decode(desired));
            assert_eq!(to.min_proposal, L.max_proposal());
            assert_eq!(
                (to.accepted_proposal, to.accepted_value),
                (from.accepted_proposal, from.accepted_value)
            );
        }
        assert_eq!(f.outcome(), None, "nothing confirmed yet");
    }

    #[test]
    fn a_failed_freeze_retries_from_the_word_found_and_a_frozen_one_counts() {
        let mut out = Vec::new();
        let mut f = Freezer::start(L, &[word(5, 0, 0); 3], &mut out);
        let ids: Vec<u64> = out.iter().map(|c| cas_of(c).0).collect();
        let mut more = Vec::new();
        // Acceptor 0 moved on: accepted 8 from proposer 1 meanwhile.
        f.on_cas(0, ids[0], word(8, 8, 2), &mut more);
        assert_eq!(more.len(), 1, "posted again");
        let (retry, a, expected, _) = cas_of(&more[0]);
        assert_eq!((a, expected), (0, word(8, 8, 2)));
        // Acceptor 1 was frozen by someone else, with 6 accepted from proposer 0.
        let other = Freezer::frozen(L, word(6, 6, 1));
        f.on_cas(1, ids[1], other, &mut more);
        assert_eq!(more.len(), 1, "a frozen word is final: no retry");
        assert_eq!(f.outcome(), None, "one confirmed of three");
        f.on_cas(0, retry, word(8, 8, 2), &mut more);
        assert_eq!(
            f.outcome(),
            Some(Carry::Read {
                acceptor: 0,
                proposer: ProposerId(1),
                proposal: 8
            }),
            "the highest accepted pair among the frozen majority"
        );
    }

    #[test]
    fn a_majority_frozen_with_nothing_accepted_carries_nothing() {
        let mut out = Vec::new();
        let mut f = Freezer::start(L, &[word(3, 0, 0); 3], &mut out);
        let ids: Vec<u64> = out.iter().map(|c| cas_of(c).0).collect();
        f.on_cas_lost(2, ids[2]);
        f.on_cas(0, ids[0], word(3, 0, 0), &mut out);
        assert_eq!(f.outcome(), None);
        f.on_cas(1, ids[1], word(3, 0, 0), &mut out);
        assert_eq!(f.outcome(), Some(Carry::Nothing));
    }
}
