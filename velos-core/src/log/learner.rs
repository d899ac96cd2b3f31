//! The follower's side of the log: learn slots in order, never skipping one.
//!
//! * Locally, for free (previous_decision): slot k is decided with the value this replica's
//!   acceptor holds when some later word s ≤ k + 7 here shows the same accepted proposal as
//!   k's word and a previous_decision count c with s − c ≥ k (see the lemma in
//!   [`super::leader`]).
//! * Otherwise, after a while, by reading k's word at every replica not suspected: a
//!   proposal accepted by a majority (the same ⟨accepted proposal, value⟩ pair) is chosen.
//!
//! Either way the value is then read from a buffer whose stamp is at least the accepted
//! proposal: a later attempt of the same proposer on a decided slot writes the same value
//! (it adopted it), so the content is the decided one.

use super::membership::Members;
use super::ring::Ring;
use crate::word::{AcceptorState, Lap, WordLayout};
use std::collections::BTreeMap;

/// How far ahead previous_decision can point.
pub(super) const LOOKAHEAD: u64 = 8;

/// The state of instance `s`'s word `w` if it is that instance's own (not a word of
/// another lap of the ring position, [`super::ring`]).
fn own(layout: WordLayout, ring: Ring, s: u64, w: u64) -> Option<AcceptorState> {
    match ring.classify(layout, s, w) {
        Lap::Current(state) => Some(state),
        Lap::Previous | Lap::Later => None,
    }
}

/// Slot `k`'s state at this replica, if the local words prove it decided (words keyed by
/// instance; a word of another lap proves nothing).
pub(super) fn local_decision(
    (layout, ring): (WordLayout, Ring),
    words: &BTreeMap<u64, u64>,
    k: u64,
) -> Option<AcceptorState> {
    let mine = own(layout, ring, k, *words.get(&k)?)?;
    if !mine.has_accepted() {
        return None;
    }
    let proven = (k + 1..k + LOOKAHEAD).any(|s| {
        words.get(&s).is_some_and(|&w| {
            let Some(later) = own(layout, ring, s, w) else {
                return false;
            };
            let c = u64::from(later.previous_decision);
            later.accepted_proposal == mine.accepted_proposal && c > 0 && s - c >= k
        })
    });
    proven.then_some(mine)
}

/// The state a majority of `members` agree on in `replies` (one per acceptor, `None` when
/// not answered) to a read of instance `k`, with the members that hold it: then that
/// proposal is chosen. Words of other laps count as not answered, those of non-members
/// and of members not among `voters` (rule (no amnesia): a process started blank in a
/// member's place) not at all.
pub(super) fn majority_decision(
    (layout, ring): (WordLayout, Ring),
    k: u64,
    (members, voters): (Members, Members),
    replies: &[Option<u64>],
) -> Option<(Vec<u16>, AcceptorState)> {
    let majority = members.majority();
    let states: Vec<(u16, AcceptorState)> = replies
        .iter()
        .enumerate()
        .filter(|&(a, _)| members.contains(a as u16) && voters.contains(a as u16))
        .filter_map(|(a, w)| {
            w.and_then(|w| own(layout, ring, k, w))
                .map(|s| (a as u16, s))
        })
        .filter(|(_, s)| s.has_accepted())
        .collect();
    let same = |s: &AcceptorState, o: &AcceptorState| {
        o.accepted_proposal == s.accepted_proposal && o.accepted_value == s.accepted_value
    };
    let (_, chosen) = states
        .iter()
        .copied()
        .find(|(_, s)| states.iter().filter(|(_, o)| same(s, o)).count() >= majority)?;
    let holders: Vec<u16> = states
        .iter()
        .filter(|(_, o)| same(&chosen, o))
        .map(|&(a, _)| a)
        .collect();
    assert!(
        holders.len() >= majority,
        "a majority holds the chosen pair"
    );
    Some((holders, chosen))
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: WordLayout = WordLayout::VELOS;
    const R: Ring = Ring {
        slots: 64,
        tag_bits: 8,
    };

    fn word(accepted: u64, value: u16, previous: u8) -> u64 {
        L.encode(AcceptorState {
            min_proposal: accepted,
            accepted_proposal: accepted,
            accepted_value: value,
            previous_decision: previous,
            ..AcceptorState::default()
        })
        .unwrap()
    }

    #[test]
    fn a_later_word_of_the_same_ballot_proves_a_slot_decided() {
        let mut words = BTreeMap::new();
        words.insert(5, word(4, 1, 0));
        assert_eq!(local_decision((L, R), &words, 5), None, "no evidence yet");
        words.insert(7, word(4, 1, 3)); // slots up to 7 - 3 = 4 decided: not 5
        assert_eq!(local_decision((L, R), &words, 5), None);
        words.insert(8, word(4, 1, 3)); // up to 5
        assert_eq!(
            local_decision((L, R), &words, 5).unwrap().accepted_proposal,
            4
        );
        words.insert(5, word(1, 2, 0)); // 5 holds another ballot's value here
        assert_eq!(local_decision((L, R), &words, 5), None);
    }

    #[test]
    fn a_majority_of_equal_pairs_is_chosen_and_a_minority_is_not() {
        let w = word(4, 1, 0);
        assert_eq!(
            majority_decision(
                (L, R),
                0,
                (Members::all(3), Members::all(3)),
                &[Some(w), None, Some(word(7, 2, 0))]
            ),
            None
        );
        assert_eq!(
            majority_decision(
                (L, R),
                0,
                (Members::all(3), Members::all(3)),
                &[Some(w), None, Some(w)]
            )
            .unwrap()
            .0,
            vec![0, 2]
        );
        assert_eq!(
            majority_decision(
                (L, R),
                0,
                (Members::all(3), Members::all(3)),
                &[Some(0), Some(0), Some(0)]
            ),
            None,
            "nothing accepted"
        );
    }
}
