//! The acceptor word: a slot's whole acceptor state packed into the 64 bits one remote
//! compare-and-swap can update (the Velos paper, §4.3: "a state can fit within a single CAS").

use std::fmt;

/// Field widths of a packed acceptor word, most significant first:
/// `tag | min_proposal | accepted_proposal | accepted_value | previous_decision`.
/// The widths always add up to 64 bits; [`WordLayout::new`] checks it at compile time when
/// used in a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WordLayout {
    /// Instance tag of a recyclable slot (0 bits: no ring).
    pub tag_bits: u8,
    /// Width of `min_proposal` and of `accepted_proposal` each.
    pub proposal_bits: u8,
    /// Width of `accepted_value` (0 means ⊥; v > 0 names proposer v-1's value buffer).
    pub value_bits: u8,
    /// Width of `previous_decision`: how many slots before this one the word vouches for
    /// as decided and held by this acceptor (0 bits: no such field).
    pub previous_bits: u8,
}

/// A field does not fit its width in the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} = {value} does not fit in {bits} bits")]
pub struct FieldOverflow {
    /// The field's name.
    pub field: &'static str,
    /// The value that did not fit.
    pub value: u64,
    /// The field's width.
    pub bits: u8,
}

impl WordLayout {
    /// A layout; panics (at compile time in a `const`) unless the fields fill 64 bits, the
    /// proposal fields have at least 2 bits and the value field at least 1.
    pub const fn new(
        tag_bits: u8,
        proposal_bits: u8,
        value_bits: u8,
        previous_bits: u8,
    ) -> WordLayout {
        let total =
            tag_bits as u32 + 2 * proposal_bits as u32 + value_bits as u32 + previous_bits as u32;
        assert!(
            total == 64,
            "an acceptor word's fields fill exactly 64 bits"
        );
        assert!(
            proposal_bits >= 2 && proposal_bits <= 31,
            "proposal fields of 2..=31 bits"
        );
        assert!(
            value_bits >= 1 && value_bits <= 16,
            "a value field of 1..=16 bits"
        );
        assert!(
            tag_bits <= 16 && previous_bits <= 8,
            "tag of at most 16 bits, previous of at most 8"
        );
        WordLayout {
            tag_bits,
            proposal_bits,
            value_bits,
            previous_bits,
        }
    }

    /// The paper's layout: `min_proposal:31 | accepted_proposal:31 | accepted_value:2`; no
    /// tag, no previous decision. At most 3 proposers.
    pub const PAPER: WordLayout = WordLayout::new(0, 31, 2, 0);

    /// uKharon's layout: four 16-bit fields `tag | min | accepted | value`.
    pub const TAGGED: WordLayout = WordLayout::new(16, 16, 16, 0);

    /// Ours: `tag:8 | min:24 | accepted:24 | value:5 | previous:3`: a recyclable ring, up to
    /// 31 proposers, and a word that vouches for up to 7 decided slots before it.
    pub const VELOS: WordLayout = WordLayout::new(8, 24, 5, 3);

    const fn mask(bits: u8) -> u64 {
        if bits == 0 {
            0
        } else {
            u64::MAX >> (64 - bits as u32)
        }
    }

    /// The largest proposal number the layout holds.
    pub const fn max_proposal(self) -> u64 {
        WordLayout::mask(self.proposal_bits)
    }

    /// The largest tag.
    pub const fn max_tag(self) -> u64 {
        WordLayout::mask(self.tag_bits)
    }

    /// How many proposers the value field can name (0 is ⊥).
    pub const fn max_proposers(self) -> u64 {
        WordLayout::mask(self.value_bits)
    }

    /// The largest previous-decision count.
    pub const fn max_previous(self) -> u64 {
        WordLayout::mask(self.previous_bits)
    }

    /// How `word` relates to the instance tagged `tag` of a ring position (see
    /// `crate::log::ring`): the instance's own state; an earlier lap's word (its tag up to
    /// half the tag space below, wrapping), which stands for the initial state when
    /// `recycled` (the instance reuses the position); or a later lap's word (up to half
    /// the tag space above): the instance was retired.
    pub fn lap(self, tag: u16, recycled: bool, word: u64) -> Lap {
        let state = self.decode(word);
        let ahead = laps_ahead(self.tag_bits, tag, state.tag);
        if ahead == 0 {
            Lap::Current(state)
        } else if recycled && self.tag_bits >= 2 && ahead >= (1u64 << self.tag_bits) / 2 {
            Lap::Previous
        } else {
            Lap::Later
        }
    }

    /// The state `word` stands for in the instance tagged `tag` (see [`WordLayout::lap`]):
    /// `None` if the instance was retired.
    pub fn state_at(self, tag: u16, recycled: bool, word: u64) -> Option<AcceptorState> {
        match self.lap(tag, recycled, word) {
            Lap::Current(s) => Some(s),
            Lap::Previous => Some(AcceptorState::initial(tag)),
            Lap::Later => None,
        }
    }

    const fn shifts(self) -> (u32, u32, u32, u32) {
        let previous = 0;
        let value = previous + self.previous_bits as u32;
        let accepted = value + self.value_bits as u32;
        let min = accepted + self.proposal_bits as u32;
        (min, accepted, value, previous)
    }

    /// Packs `state`; every field must fit its width.
    #[inline]
    pub fn encode(self, state: AcceptorState) -> Result<u64, FieldOverflow> {
        let check = |field: &'static str, value: u64, bits: u8| {
            if value > WordLayout::mask(bits) {
                Err(FieldOverflow { field, value, bits })
            } else {
                Ok(value)
            }
        };
        let tag = check("tag", u64::from(state.tag), self.tag_bits)?;
        let min = check("min_proposal", state.min_proposal, self.proposal_bits)?;
        let accepted = check(
            "accepted_proposal",
            state.accepted_proposal,
            self.proposal_bits,
        )?;
        let value = check(
            "accepted_value",
            u64::from(state.accepted_value),
            self.value_bits,
        )?;
        let previous = check(
            "previous_decision",
            u64::from(state.previous_decision),
            self.previous_bits,
        )?;
        let (s_min, s_acc, s_val, s_prev) = self.shifts();
        let tag_part = if self.tag_bits == 0 {
            0
        } else {
            tag << (s_min + self.proposal_bits as u32)
        };
        let word = tag_part
            | (min << s_min)
            | (accepted << s_acc)
            | (value << s_val)
            | (previous << s_prev);
        debug_assert_eq!(self.decode(word), state, "encode/decode round trip");
        Ok(word)
    }

    /// Unpacks a word (every 64-bit value decodes).
    pub fn decode(self, word: u64) -> AcceptorState {
        let (s_min, s_acc, s_val, s_prev) = self.shifts();
        let field = |shift: u32, bits: u8| {
            if bits == 0 {
                0
            } else {
                (word >> shift) & WordLayout::mask(bits)
            }
        };
        AcceptorState {
            tag: field(s_min + self.proposal_bits as u32, self.tag_bits) as u16,
            min_proposal: field(s_min, self.proposal_bits),
            accepted_proposal: field(s_acc, self.proposal_bits),
            accepted_value: field(s_val, self.value_bits) as u16,
            previous_decision: field(s_prev, self.previous_bits) as u8,
        }
    }
}

// Compile-time checks of the shipped layouts: evaluating them runs `new`'s asserts.
const _: WordLayout = WordLayout::PAPER;
const _: WordLayout = WordLayout::TAGGED;
const _: WordLayout = WordLayout::VELOS;
const _: () = assert!(WordLayout::PAPER.max_proposers() == 3);
const _: () = assert!(WordLayout::VELOS.max_previous() == 7);

/// How a word at a ring position relates to one instance of that position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lap {
    /// A word of this instance: its state.
    Current(AcceptorState),
    /// A word of an earlier lap: the instance's initial state, once it reuses the position.
    Previous,
    /// A word of a later lap (or, before the instance reuses the position, of an earlier
    /// one): not this instance's.
    Later,
}

/// The acceptor state of one slot (Algorithm 1's three variables, plus our two fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AcceptorState {
    /// Instance tag: which use of a recycled ring position this word belongs to.
    pub tag: u16,
    /// The highest proposal number promised.
    pub min_proposal: u64,
    /// The proposal number of the accepted value (0: none).
    pub accepted_proposal: u64,
    /// The accepted value: 0 is ⊥, v > 0 is proposer v-1's value buffer for this slot.
    pub accepted_value: u16,
    /// This acceptor holds the decided value of each of the `previous_decision` slots
    /// before this one.
    pub previous_decision: u8,
}

impl AcceptorState {
    /// The initial state of a slot with instance tag `tag`: ⟨0, 0, ⊥⟩.
    pub fn initial(tag: u16) -> AcceptorState {
        AcceptorState {
            tag,
            ..AcceptorState::default()
        }
    }

    /// Whether a value was accepted.
    pub fn has_accepted(self) -> bool {
        self.accepted_value != 0
    }
}

impl fmt::Display for AcceptorState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "⟨tag {}, min {}, accepted {}, value {}, previous {}⟩",
            self.tag,
            self.min_proposal,
            self.accepted_proposal,
            self.accepted_value,
            self.previous_decision
        )
    }
}

/// How many laps tag `tag` lies above `instance_tag` among tags of `tag_bits` bits,
/// wrapping (0: the same lap). Less than half the tag space above is a later lap; the rest,
/// wrapped, an earlier one — for acceptor words ([`WordLayout::lap`]) and value stamps
/// alike.
pub fn laps_ahead(tag_bits: u8, instance_tag: u16, tag: u16) -> u64 {
    let modulus = 1u64 << tag_bits;
    (u64::from(tag) + modulus - u64::from(instance_tag)) % modulus
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LAYOUTS: [WordLayout; 3] = [WordLayout::PAPER, WordLayout::TAGGED, WordLayout::VELOS];

    #[test]
    fn paper_layout_places_fields_as_the_paper_says() {
        let s = AcceptorState {
            min_proposal: 1,
            accepted_proposal: 1,
            accepted_value: 3,
            ..AcceptorState::default()
        };
        let w = WordLayout::PAPER.encode(s).unwrap();
        assert_eq!(w, (1 << 33) | (1 << 2) | 3);
    }

    #[test]
    fn overflowing_fields_are_errors() {
        let s = AcceptorState {
            min_proposal: 1 << 31,
            ..AcceptorState::default()
        };
        assert_eq!(
            WordLayout::PAPER.encode(s),
            Err(FieldOverflow {
                field: "min_proposal",
                value: 1 << 31,
                bits: 31
            })
        );
        let s = AcceptorState {
            accepted_value: 4,
            ..AcceptorState::default()
        };
        assert!(WordLayout::PAPER.encode(s).is_err());
        let s = AcceptorState {
            tag: 1,
            ..AcceptorState::default()
        };
        assert!(
            WordLayout::PAPER.encode(s).is_err(),
            "no tag field in the paper layout"
        );
    }

    proptest! {
        #[test]
        fn every_word_round_trips(word: u64, which in 0usize..3) {
            let layout = LAYOUTS[which];
            let state = layout.decode(word);
            prop_assert_eq!(layout.encode(state), Ok(word));
        }

        #[test]
        fn every_fitting_state_round_trips(
            which in 0usize..3, tag: u16, min: u64, accepted: u64, value: u16, previous: u8,
        ) {
            let layout = LAYOUTS[which];
            let state = AcceptorState {
                tag: (u64::from(tag) & layout.max_tag()) as u16,
                min_proposal: min & layout.max_proposal(),
                accepted_proposal: accepted & layout.max_proposal(),
                accepted_value: (u64::from(value) & layout.max_proposers()) as u16,
                previous_decision: (u64::from(previous) & layout.max_previous()) as u8,
            };
            let word = layout.encode(state).unwrap();
            prop_assert_eq!(layout.decode(word), state);
        }
    }
}
